package e2b

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The code interpreter's POST /execute: the code runs as one cell in the
// computer's session kernel (computer.Manager.Python: its limits, its
// timeout, state kept between calls) and its outputs stream back as
// NDJSON lines the SDK parses (stdout, stderr, result, error,
// number_of_executions, end_of_execution).

type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// line is one NDJSON line of an execution's stream.
type line struct {
	Type           string          `json:"type"`
	Text           string          `json:"text,omitempty"`
	Timestamp      string          `json:"timestamp,omitempty"`
	Markdown       string          `json:"markdown,omitempty"`
	PNG            string          `json:"png,omitempty"`
	JSON           json.RawMessage `json:"json,omitempty"`
	IsMainResult   *bool           `json:"is_main_result,omitempty"`
	Name           string          `json:"name,omitempty"`
	Value          *string         `json:"value,omitempty"`
	Traceback      *string         `json:"traceback,omitempty"`
	ExecutionCount *int            `json:"execution_count,omitempty"`
}

func (r *executeRequest) check() error {
	switch {
	case r.Language != "" && r.Language != "python":
		return invalid("language %q is not supported: Cubicle runs python only", r.Language)
	case r.ContextID != "" && r.ContextID != "default":
		return invalid("code contexts are not supported: leave context out (the computer's one Python session)")
	case len(r.EnvVars) > 0:
		return invalid("envs of runCode are not supported by Cubicle; set os.environ in the code instead")
	}
	return nil
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, b *box) {
	var req executeRequest
	err := decodeBody(r, &req, sandbox.MaxPythonCellBytes+maxAPIBody)
	if err == nil {
		err = req.check()
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &ndjson{w: w, rc: http.NewResponseController(w)}
	res, err := s.mgr.Python(r.Context(), b.p, b.id, computer.PythonRequest{Cells: []computer.PythonCell{{Code: req.Code}}, Timeout: sandbox.MaxPythonTimeout},
		func(o sandbox.PythonOutput) { out.output(o.Output) })
	switch {
	case err != nil:
		_, msg := message(r.Context(), err)
		out.write(line{Type: "error", Name: "CubicleError", Value: &msg, Traceback: &msg})
	case res.TimedOut:
		out.write(line{Type: "error", Name: "TimeoutError", Value: &res.Message, Traceback: &res.Message})
	}
	if err == nil && len(res.Cells) > 0 {
		n := res.Cells[0].ExecutionCount
		out.write(line{Type: "number_of_executions", ExecutionCount: &n})
	}
	out.write(line{Type: "end_of_execution"})
}

// ndjson writes lines, each flushed.
type ndjson struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (n *ndjson) write(l line) {
	data, err := json.Marshal(l)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.w.Write(append(data, '\n'))
	n.rc.Flush()
}

// output writes a kernel output as the code interpreter does.
func (n *ndjson) output(o kernel.Output) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	switch o.Type {
	case kernel.OutStream:
		n.write(line{Type: o.Name, Text: o.Text, Timestamp: now})
	case kernel.OutDisplay, kernel.OutResult:
		main := o.Type == kernel.OutResult
		l := line{Type: "result", Text: o.Text, JSON: o.JSON, IsMainResult: &main}
		if o.MIME == "text/markdown" || o.MIME == "text/html" {
			l.Markdown = o.Text
		}
		if len(o.PNG) > 0 {
			l.PNG = base64.StdEncoding.EncodeToString(o.PNG)
		}
		n.write(l)
	case kernel.OutError:
		tb := strings.Join(o.Traceback, "\n")
		n.write(line{Type: "error", Name: o.EName, Value: &o.EValue, Traceback: &tb})
	case kernel.OutTruncated, kernel.OutInput:
		n.write(line{Type: "stderr", Text: "[cubicle] " + o.Text + "\n", Timestamp: now})
	}
}
