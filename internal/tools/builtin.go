package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Tool names.
const (
	ExecName      = "builtin__computer_exec"
	WriteFileName = "builtin__computer_write_file"
	ReadFileName  = "builtin__computer_read_file"
	PythonName    = "python"
)

// Fixed sentences not built from a value.
const (
	ExportPendingSentence = "Export is not available on this deployment yet."
	ProcLimitSentence     = "The computer cannot start another process right now."
	DiskFullSentence      = "The computer's disk is full."
)

// Sentences built from a value.

// ExportTooLargeSentence is the answer for a file above artifact.MaxBytes.
var ExportTooLargeSentence = fmt.Sprintf("File is too large to export: the limit is %d bytes.", artifact.MaxBytes)

// outsideWorkspace is the answer for path p outside /workspace.
func outsideWorkspace(p string) string { return "Path is outside the workspace: " + p }

// fileTooLarge is the answer for a file above limit bytes.
func fileTooLarge(limit int64) Result {
	return failed("File is too large: the limit is %d bytes.", limit)
}

// ExecTool runs a shell command, or starts one as a shell task
// (background) or reads a shell task (task_id): see task.go.
func ExecTool() Tool {
	return Tool{Name: ExecName, Computer: true,
		Description: "Run a shell command (/bin/sh -c) in the computer, in /workspace. Returns the exit code, stdout and stderr. " +
			"With background true the command starts as a shell task and the call answers at once with its task_id: the task keeps running " +
			"after the call, and after the response (the conversation's next responses find the computer while it runs and for a few minutes after). " +
			"Call again with task_id (command null) for the task's status and newest output.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":["string","null"],"description":"The shell command; null with task_id."},` +
			`"timeout_seconds":{"type":["integer","null"],"description":"Time limit in seconds; null for the computer's limit. With background: the task's own limit (null: none). With task_id: how long to wait for the task to end (null: do not wait)."},` +
			`"background":{"type":["boolean","null"],"description":"true: start the command as a shell task and answer at once with its task_id."},` +
			`"task_id":{"type":["string","null"],"description":"A shell task's id (from a background call): answer its status and newest output instead of running a command."}},` +
			`"required":["command","timeout_seconds","background","task_id"],"additionalProperties":false}`),
		Run: runExec}
}

// capture keeps the first max bytes of a stream.
type capture struct {
	buf []byte
	max int64
	cut bool
}

func (c *capture) Write(p []byte) (int, error) {
	room := c.max - int64(len(c.buf))
	if int64(len(p)) > room {
		c.cut = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func runExec(ctx context.Context, env Env, raw json.RawMessage) (Result, error) {
	var a struct {
		Command        *string `json:"command"`
		TimeoutSeconds *int    `json:"timeout_seconds"`
		Background     *bool   `json:"background"`
		TaskID         *string `json:"task_id"`
	}
	if msg := DecodeArgs(raw, &a); msg != "" {
		return failed("%s", msg), nil
	}
	background := a.Background != nil && *a.Background
	switch {
	case a.TaskID != nil && a.Command != nil:
		return failed("%s", BothCommandAndTaskSentence), nil
	case a.TaskID != nil && background:
		return failed("%s", BackgroundWithTaskSentence), nil
	case a.TaskID == nil && a.Command == nil:
		return failed("Invalid arguments: command is required."), nil
	}
	lim := env.Limits.withDefaults()
	timeout := lim.ExecTimeout
	if a.TimeoutSeconds != nil {
		if *a.TimeoutSeconds < 1 {
			return failed("Invalid arguments: timeout_seconds must be at least 1."), nil
		}
		timeout = CapSeconds(timeout, *a.TimeoutSeconds)
	}
	if a.TaskID != nil {
		return readTask(ctx, env, *a.TaskID, a.TimeoutSeconds, lim)
	}
	if strings.TrimSpace(*a.Command) == "" {
		return failed("Invalid arguments: command must not be empty."), nil
	}
	if msg := CommandSentence(*a.Command); msg != "" {
		return failed("%s", msg), nil
	}
	if background {
		return startTask(ctx, env, *a.Command, a.TimeoutSeconds)
	}
	return RunProcess(ctx, env, sandbox.ExecRequest{Command: *a.Command, Timeout: timeout}, nil)
}

// RunProcess runs req (its Timeout already brought down to the
// computer's exec limit) with stdin and answers in the exec format: each
// stream read up to the deployment's limit, the answer cut at its size
// (FormatExec), the exit code for the audit. A process the computer
// cannot start is a tool error; the computer's failure is err.
func RunProcess(ctx context.Context, env Env, req sandbox.ExecRequest, stdin io.Reader) (Result, error) {
	lim := env.Limits.withDefaults()
	out, errb := &capture{max: lim.MaxStreamBytes}, &capture{max: lim.MaxStreamBytes}
	st, err := env.Sandbox.Exec(ctx, req, sandbox.ExecIO{Stdin: stdin, Stdout: out, Stderr: errb})
	if err != nil {
		switch {
		case errors.Is(err, sandbox.ErrProcLimit):
			return failed("%s", ProcLimitSentence), nil
		case errors.Is(err, sandbox.ErrInvalid):
			return failed("Invalid arguments: command is not valid."), nil
		}
		return Result{}, err
	}
	code := st.ExitCode
	return Result{Output: FormatExec(code, st.TimedOut, req.Timeout, env.untrusted(string(out.buf)), env.untrusted(string(errb.buf)),
		out.cut || errb.cut, lim.MaxAnswerBytes), ExitCode: &code}, nil
}

// fileError turns a sandbox file error into the model's sentence; an
// infrastructure failure stays a Go error.
func fileError(err error, p string, lim Limits) (Result, error) {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return failed("File not found: %s", p), nil
	case errors.Is(err, sandbox.ErrPathEscape):
		return failed("%s", outsideWorkspace(p)), nil
	case errors.Is(err, sandbox.ErrIsDir):
		return failed("Is a directory: %s", p), nil
	case errors.Is(err, sandbox.ErrNotDir):
		return failed("Not a directory: %s", p), nil
	case errors.Is(err, sandbox.ErrNotRegular):
		return failed("Not a regular file: %s", p), nil
	case errors.Is(err, sandbox.ErrPermission):
		return failed("Permission denied: %s", p), nil
	case errors.Is(err, sandbox.ErrNoSpace):
		return failed("%s", DiskFullSentence), nil
	case errors.Is(err, sandbox.ErrChanging):
		return failed("File is being written by a process in the computer; try again once it is complete: %s", p), nil
	case errors.Is(err, sandbox.ErrLocked):
		return failed("File is locked by a process in the computer (a lease); try again later: %s", p), nil
	case errors.Is(err, sandbox.ErrTooLarge):
		return fileTooLarge(lim.MaxFileBytes), nil
	case errors.Is(err, sandbox.ErrInvalid):
		return failed("Invalid arguments: path is not valid: %s", p), nil
	}
	return Result{}, err
}

// FileError is the sentence of a file call's sandbox error at path p (a
// tool's error), or err itself (the computer's failure).
func FileError(err error, p string) (Result, error) { return fileError(err, p, Limits{}) }

// WriteFileTool writes a text file.
func WriteFileTool() Tool {
	return Tool{Name: WriteFileName, Computer: true,
		Description: "Write a text file in the computer, replacing it if it exists; parent directories are created. Relative paths resolve under /workspace.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"Where to write; relative paths resolve under /workspace."},` +
			`"content":{"type":"string","description":"The whole content of the file."}},` +
			`"required":["path","content"],"additionalProperties":false}`),
		Run: runWriteFile}
}

func runWriteFile(ctx context.Context, env Env, raw json.RawMessage) (Result, error) {
	var a struct {
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if msg := DecodeArgs(raw, &a, "path", "content"); msg != "" {
		return failed("%s", msg), nil
	}
	lim := env.Limits.withDefaults()
	p, msg := ResolvePath(*a.Path)
	if msg != "" {
		return failed("%s", msg), nil
	}
	if int64(len(*a.Content)) > lim.MaxFileBytes {
		return fileTooLarge(lim.MaxFileBytes), nil
	}
	w, err := env.Sandbox.WriteFile(ctx, sandbox.FileWrite{Path: p, Parents: true}, strings.NewReader(*a.Content))
	if err != nil {
		return fileError(err, p, lim)
	}
	return Result{Output: fmt.Sprintf("Wrote %d bytes to %s.", w.Bytes, p)}, nil
}

// ReadFileTool reads a text file, or exports a file.
func ReadFileTool() Tool {
	return Tool{Name: ReadFileName, Computer: true,
		Description: "Read a text file from the computer. With export true, the file is kept as an artifact for the user instead. Relative paths resolve under /workspace.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file; relative paths resolve under /workspace."},` +
			`"export":{"type":["boolean","null"],"description":"true: keep the file as an artifact for the user."}},` +
			`"required":["path","export"],"additionalProperties":false}`),
		Run: runReadFile}
}

func runReadFile(ctx context.Context, env Env, raw json.RawMessage) (Result, error) {
	var a struct {
		Path   *string `json:"path"`
		Export *bool   `json:"export"`
	}
	if msg := DecodeArgs(raw, &a, "path"); msg != "" {
		return failed("%s", msg), nil
	}
	lim := env.Limits.withDefaults()
	p, msg := ResolvePath(*a.Path)
	if msg != "" {
		return failed("%s", msg), nil
	}
	if a.Export != nil && *a.Export {
		fi, err := env.Sandbox.Stat(ctx, p)
		if err != nil {
			return fileError(err, p, lim)
		}
		switch fi.Type {
		case "file":
		case "dir":
			return failed("Is a directory: %s", p), nil
		default:
			return failed("Not a regular file: %s", p), nil
		}
		if !env.Artifacts {
			return Result{Output: OmittedSentence(fi.Size)}, nil
		}
		if fi.Size > artifact.MaxBytes {
			return failed("%s", ExportTooLargeSentence), nil
		}
		if env.Export == nil {
			return failed("%s", ExportPendingSentence), nil
		}
		art, err := env.Export(ctx, p)
		if errors.Is(err, artifact.ErrTooLarge) {
			return failed("%s", ExportTooLargeSentence), nil
		}
		if err != nil {
			return fileError(err, p, lim)
		}
		return Result{Output: fmt.Sprintf("Exported %d bytes from %s.", art.Bytes, p), Artifacts: []artifact.Ref{art}}, nil
	}
	var buf bytes.Buffer
	end, err := env.Sandbox.ReadFile(ctx, sandbox.FileRead{Path: p, Limit: lim.MaxStreamBytes}, &buf)
	if err != nil {
		return fileError(err, p, lim)
	}
	if bytes.IndexByte(buf.Bytes(), 0) >= 0 {
		return Result{Output: BinarySentence(end.Size)}, nil
	}
	text := env.untrusted(strings.ToValidUTF8(buf.String(), "\uFFFD"))
	if end.Truncated && len(text) <= lim.MaxAnswerBytes-len(TruncatedMarker)-1 {
		// The file goes on beyond what was read: it is cut all the same.
		return Result{Output: line(text) + TruncatedMarker}, nil
	}
	return Result{Output: Truncate(text, lim.MaxAnswerBytes)}, nil
}

// PythonTool runs cells in the computer's Python kernel.
func PythonTool() Tool {
	return Tool{Name: PythonName, Computer: true,
		Description: "Run Python cells, in order, in the computer's Jupyter kernel; variables persist between calls. Returns printed output, results, errors, and images as notes.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"cells":{"type":"array","description":"The cells to run, in order.","items":{"type":"object","properties":{` +
			`"code":{"type":"string"},"title":{"type":["string","null"]}},"required":["code","title"],"additionalProperties":false}},` +
			fmt.Sprintf(`"timeout":{"type":["integer","null"],"description":"Seconds for the whole call, 1 to %d; null for %d."},`,
				maxPythonTimeout, defaultPythonTimeout) +
			`"cwd":{"type":["string","null"],"description":"Working directory; null for /workspace."},` +
			`"reset":{"type":["boolean","null"],"description":"true: restart the kernel first, losing its variables."}},` +
			`"required":["cells","timeout","cwd","reset"],"additionalProperties":false}`),
		Run: runPython}
}

// Python limits (the computers API's, sandbox.MaxPythonTimeout, …) in the
// whole seconds the tool's timeout counts.
const (
	defaultPythonTimeout = int(sandbox.DefaultPythonTimeout / time.Second)
	maxPythonTimeout     = int(sandbox.MaxPythonTimeout / time.Second)
)

func runPython(ctx context.Context, env Env, raw json.RawMessage) (Result, error) {
	lim := env.Limits.withDefaults()
	req, msg := pythonRequest(raw, lim)
	if msg != "" {
		return failed("%s", msg), nil
	}
	cells := make([]PythonCell, len(req.Cells))
	outs := make([]*kernel.Accumulator, len(req.Cells))
	for i := range cells {
		cells[i] = PythonCell{Index: i}
		outs[i] = kernel.NewAccumulator(req.MaxOutput)
	}
	res, err := env.Sandbox.Python(ctx, req, func(o sandbox.PythonOutput) {
		if o.Cell >= 0 && o.Cell < len(cells) {
			outs[o.Cell].Add(o.Output)
		}
	})
	for i := range cells {
		cells[i].Outputs = env.untrustedOutputs(outs[i].Outputs())
	}
	if err != nil {
		switch {
		case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNotDir):
			return failed("Not a directory: %s", req.Cwd), nil
		case errors.Is(err, sandbox.ErrPathEscape):
			return failed("%s", outsideWorkspace(req.Cwd)), nil
		case errors.Is(err, sandbox.ErrProcLimit):
			return failed("%s", ProcLimitSentence), nil
		}
		return Result{}, err
	}
	for _, c := range res.Cells {
		if c.Index >= 0 && c.Index < len(cells) {
			cells[c.Index].Status = c.Status
		}
	}
	res.Message = env.untrusted(res.Message) // it may quote the error's value
	text, images := RenderPython(cells, res)
	logs, _ := renderPython(cells, res, false)
	return Result{Output: Truncate(text, lim.MaxAnswerBytes), Images: images, Cells: cells,
		Logs: Truncate(logs, lim.MaxAnswerBytes), Failed: res.Status != "ok"}, nil
}

// pythonRequest decodes the python tool's arguments into a request within
// lim; a non-empty msg is the sentence for arguments that are invalid.
func pythonRequest(raw json.RawMessage, lim Limits) (req sandbox.PythonRequest, msg string) {
	var a struct {
		Cells []struct {
			Code  *string `json:"code"`
			Title *string `json:"title"`
		} `json:"cells"`
		Timeout *int    `json:"timeout"`
		Cwd     *string `json:"cwd"`
		Reset   *bool   `json:"reset"`
	}
	if msg := DecodeArgs(raw, &a, "cells"); msg != "" {
		return req, msg
	}
	if len(a.Cells) == 0 || len(a.Cells) > sandbox.MaxPythonCells {
		return req, fmt.Sprintf("Invalid arguments: cells must hold 1 to %d cells.", sandbox.MaxPythonCells)
	}
	req = sandbox.PythonRequest{Prelude: lim.Prelude, MaxOutput: lim.MaxStreamBytes}
	for i, c := range a.Cells {
		if c.Code == nil {
			return req, fmt.Sprintf("Invalid arguments: cells[%d].code is required.", i)
		}
		if len(*c.Code) > sandbox.MaxPythonCellBytes {
			return req, fmt.Sprintf("Invalid arguments: cell %d is larger than %d bytes.", i, sandbox.MaxPythonCellBytes)
		}
		cell := sandbox.PythonCell{Code: *c.Code}
		if c.Title != nil {
			cell.Title = *c.Title
		}
		req.Cells = append(req.Cells, cell)
	}
	timeout := defaultPythonTimeout
	if a.Timeout != nil {
		if *a.Timeout < 1 || *a.Timeout > maxPythonTimeout {
			return req, fmt.Sprintf("Invalid arguments: timeout must be 1 to %d seconds.", maxPythonTimeout)
		}
		timeout = *a.Timeout
	}
	req.Timeout = CapSeconds(lim.ExecTimeout, timeout)
	if a.Cwd != nil {
		cwd, msg := ResolvePath(*a.Cwd)
		if msg != "" {
			return req, msg
		}
		req.Cwd = cwd
	}
	req.Reset = a.Reset != nil && *a.Reset
	return req, ""
}

// shortTraceback is how many traceback lines the model sees.
const shortTraceback = 8

// RenderPython is the compact text of a python call for the model:
//
//	[cell <i>: <status>]
//	<stream text, result text, [image: <w>x<h> PNG], ename: evalue + traceback tail>
//	...
//	<the call's message, when it failed>
func RenderPython(cells []PythonCell, res sandbox.PythonResult) (string, []Image) {
	return renderPython(cells, res, true)
}

// renderPython is RenderPython, with the image placeholders only when
// imageNotes is set.
func renderPython(cells []PythonCell, res sandbox.PythonResult, imageNotes bool) (string, []Image) {
	var b strings.Builder
	var images []Image
	for _, c := range cells {
		status := c.Status
		if status == "" {
			status = sandbox.CellSkipped
		}
		fmt.Fprintf(&b, "[cell %d: %s]\n", c.Index, status)
		for _, o := range c.Outputs {
			switch o.Type {
			case kernel.OutStream:
				b.WriteString(line(o.Text))
			case kernel.OutResult, kernel.OutDisplay:
				switch {
				case len(o.PNG) > 0:
					note := fmt.Sprintf("[image: %dx%d PNG]", o.Width, o.Height)
					images = append(images, Image{PNG: o.PNG, Width: o.Width, Height: o.Height, Note: note})
					if imageNotes {
						b.WriteString(note + "\n")
					}
				case o.Text != "":
					b.WriteString(line(o.Text))
				case len(o.JSON) > 0:
					b.WriteString(line(string(o.JSON)))
				}
			case kernel.OutError:
				head := o.EName + ": " + o.EValue
				b.WriteString(line(head))
				tb := strings.Split(strings.TrimRight(strings.Join(o.Traceback, "\n"), "\n"), "\n")
				if n := len(tb); n > 0 && strings.TrimSpace(tb[n-1]) == strings.TrimSpace(head) {
					tb = tb[:n-1]
				}
				if len(tb) > shortTraceback {
					tb = tb[len(tb)-shortTraceback:]
				}
				if t := strings.TrimSpace(strings.Join(tb, "\n")); t != "" {
					b.WriteString(line(strings.Join(tb, "\n")))
				}
			case kernel.OutClear, kernel.OutInput, kernel.OutTruncated:
				if t := strings.TrimSpace(o.Text); t != "" {
					if !strings.HasPrefix(t, "[") || !strings.HasSuffix(t, "]") {
						t = "[" + t + "]" // notes that are not bracketed already
					}
					b.WriteString(t + "\n")
				}
			}
		}
	}
	if res.KernelRestarted {
		b.WriteString("[the Python kernel was restarted; earlier variables are gone]\n")
	}
	if res.Status != "ok" && res.Message != "" {
		b.WriteString(line(res.Message))
	}
	return strings.TrimRight(b.String(), "\n"), images
}
