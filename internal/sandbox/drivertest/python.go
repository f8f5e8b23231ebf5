package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

func testPython(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var outs []sandbox.PythonOutput
	res, err := sb.Python(ctx, sandbox.PythonRequest{Cells: []sandbox.PythonCell{
		{Code: "x = 6 * 7\nprint(x)"},
		{Code: "from IPython.display import Markdown\nMarkdown('**bold** %d' % x)"},
		{Code: "1 / 0"},
	}}, func(o sandbox.PythonOutput) { outs = append(outs, o) })
	if err != nil {
		t.Fatalf("Python: %v", err)
	}
	if res.Status != sandbox.CellError || res.FailedCell != 2 || len(res.Cells) != 3 || res.Cells[0].Status != sandbox.CellOK {
		t.Errorf("result %+v, want cells 0 and 1 ok, cell 2 failed", res)
	}
	var stream, md, ename string
	for _, o := range outs {
		switch {
		case o.Cell == 0 && o.Output.Type == kernel.OutStream:
			stream += o.Output.Text
		case o.Cell == 1 && o.Output.Type == kernel.OutResult:
			md = o.Output.MIME + " " + o.Output.Text
		case o.Cell == 2 && o.Output.Type == kernel.OutError:
			ename = o.Output.EName
		}
	}
	if stream != "42\n" || md != "text/markdown **bold** 42" || ename != "ZeroDivisionError" {
		t.Errorf("outputs: stream %q, markdown %q, error %q", stream, md, ename)
	}
}

// testKernel drives a relayed kernel as a Jupyter client: an
// execute_request on shell, its stream and reply back.
func testKernel(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := sb.OpenKernel(ctx, sandbox.KernelStart{})
	if err != nil {
		t.Fatalf("OpenKernel: %v", err)
	}
	defer k.Close(context.Background())
	header, _ := json.Marshal(map[string]string{"msg_id": "contract-1", "msg_type": "execute_request",
		"session": "contract", "username": "test", "version": "5.3", "date": time.Now().UTC().Format(time.RFC3339Nano)})
	content, _ := json.Marshal(map[string]any{"code": "print(6 * 7)", "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": false})
	if err := k.Send(ctx, sandbox.KernelMessage{Channel: "shell", Header: header, ParentHeader: json.RawMessage("{}"),
		Metadata: json.RawMessage("{}"), Content: content}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	var stream string
	for {
		select {
		case m, ok := <-k.Messages():
			if !ok {
				t.Fatalf("the relay ended: %v", k.Err())
			}
			var h struct {
				MsgType string `json:"msg_type"`
			}
			var parent struct {
				MsgID string `json:"msg_id"`
			}
			json.Unmarshal(m.Header, &h)
			json.Unmarshal(m.ParentHeader, &parent)
			if parent.MsgID != "contract-1" {
				continue
			}
			switch h.MsgType {
			case "stream":
				var c struct{ Text string }
				json.Unmarshal(m.Content, &c)
				stream += c.Text
			case "execute_reply":
				if !strings.Contains(string(m.Content), `"ok"`) || stream != "42\n" {
					t.Errorf("execute_reply %s after stream %q", m.Content, stream)
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("no execute_reply: %v (stream so far %q)", ctx.Err(), stream)
		}
	}
}

// testMemory allocates past a 128 MiB limit in a fresh computer.
func testMemory(t *testing.T, d sandbox.Driver, opts Options) {
	const limit = 128 << 20
	sb := start(t, d, opts, func(s *sandbox.Spec) { s.MemoryBytes = limit })
	bomb := fmt.Sprintf("a=[]\nfor i in range(%d):\n  a.append(bytearray(16<<20))\nprint('escaped')", 2*limit>>24)
	r := run(t, sb, sandbox.ExecRequest{Argv: []string{sandbox.DefaultPython, "-c", bomb}}, "")
	if !r.OOMKilled || strings.Contains(r.Stdout, "escaped") {
		t.Errorf("%d MiB allocated under a %d MiB limit: %+v stdout %q stderr %q", 2*limit>>20, limit>>20, r.ExitStatus, r.Stdout, r.Stderr)
	}
	if r := run(t, sb, sandbox.ExecRequest{Command: "echo after"}, ""); r.Stdout != "after\n" {
		t.Errorf("the computer after the OOM kill: %+v %q", r.ExitStatus, r.Stdout)
	}
}
