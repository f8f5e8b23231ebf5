package httpapi

import (
	"fmt"
	"math"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The one place the REST API's bodies (models.go) are converted from and
// to the service's types: durations become whole seconds or milliseconds
// here and nowhere else.

// durationOf is n seconds of a request; a value past time.Duration's range
// saturates (it is then larger than any limit, as n was).
func durationOf(n int) time.Duration {
	switch {
	case int64(n) > math.MaxInt64/int64(time.Second):
		return math.MaxInt64
	case int64(n) < math.MinInt64/int64(time.Second):
		return math.MinInt64
	}
	return time.Duration(n) * time.Second
}

// secondsOf is d in whole seconds.
func secondsOf(d time.Duration) int { return int(d / time.Second) }

// unixOf is t in Unix seconds; nil stays nil.
func unixOf(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.Unix()
	return &v
}

func computerViewOf(v computer.View) computerView {
	l := v.Limits
	return computerView{ID: v.ID, Object: "computer", Status: v.Status, CreatedAt: v.CreatedAt.Unix(),
		ReadyAt: unixOf(v.ReadyAt), ExpiresAt: v.ExpiresAt.Unix(), StoppedAt: unixOf(v.StoppedAt),
		Limits: computerLimits{MemoryMB: l.MemoryMB, CPUs: l.CPUs, Pids: l.Pids, DiskMB: l.DiskMB,
			LifetimeSeconds: secondsOf(l.Lifetime), ExecTimeoutSeconds: secondsOf(l.ExecTimeout),
			NetworkPolicy: networkPolicyOf(l.NetworkPolicy), IdleTimeoutSeconds: secondsOf(l.IdleTimeout), OnExpire: onExpireOf(l.OnExpire),
			Volumes: volumeMountsOf(l.Volumes)},
		Metadata: v.Metadata, Failure: v.Failure, Template: v.Template, LastActiveAt: unixOf(v.LastActiveAt), Name: v.Name,
		PausedAt: unixOf(v.PausedAt), Pauses: v.Pauses, Python: pythonVariablesOf(v.Python)}
}

func pythonVariablesOf(p *computer.PythonVariables) *pythonVariables {
	if p == nil {
		return nil
	}
	out := &pythonVariables{Kept: p.Kept, Lost: p.Lost, Error: p.Error}
	if out.Kept == nil {
		out.Kept = []string{}
	}
	if out.Lost == nil {
		out.Lost = map[string]string{}
	}
	return out
}

func volumeMountsOf(vs []computer.VolumeRequest) []volumeMount {
	var out []volumeMount
	for _, v := range vs {
		out = append(out, volumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

func volumeRequestsOf(vs []volumeMount) []computer.VolumeRequest {
	var out []computer.VolumeRequest
	for _, v := range vs {
		out = append(out, computer.VolumeRequest{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

func volumeViewOf(v computer.Volume) volumeView {
	return volumeView{ID: v.ID, Object: "volume", Name: v.Name, SizeMB: v.SizeMB, CreatedAt: v.CreatedAt.Unix(), Computers: v.Computers}
}

// onExpireOf shows on_expire only when it is not the default.
func onExpireOf(s string) string {
	if s == computer.OnExpireDelete {
		return ""
	}
	return s
}

func computerViewsOf(vs []computer.View) []computerView {
	out := make([]computerView, len(vs))
	for i, v := range vs {
		out[i] = computerViewOf(v)
	}
	return out
}

func (b createBody) request() (computer.CreateRequest, error) {
	idle := b.IdleTimeoutSeconds
	if e := b.ExpiresAfter; e != nil {
		if idle != 0 {
			return computer.CreateRequest{}, withParam("expires_after", fmt.Errorf("%w: give idle_timeout_seconds or expires_after, not both", errBadRequest))
		}
		var err error
		if idle, err = e.seconds(); err != nil {
			return computer.CreateRequest{}, err
		}
	}
	return computer.CreateRequest{MemoryMB: b.MemoryMB, Lifetime: durationOf(b.LifetimeSeconds),
		ExecTimeout: durationOf(b.ExecTimeoutSeconds), Metadata: b.Metadata,
		NetworkPolicy: b.NetworkPolicy.request(), Template: b.Template, IdleTimeout: durationOf(idle), Name: b.Name, OnExpire: b.OnExpire,
		Volumes: volumeRequestsOf(b.Volumes)}, nil
}

// networkPolicyOf is a computer's policy as answers show it: secrets by
// domain and name, never a value.
func networkPolicyOf(p *computer.NetworkPolicy) *networkPolicy {
	if p == nil {
		return nil
	}
	out := &networkPolicy{Type: p.Type, AllowedDomains: p.AllowedDomains, AllowedCIDRs: p.AllowedCIDRs}
	for _, s := range p.DomainSecrets {
		out.DomainSecrets = append(out.DomainSecrets, domainSecret{Domain: s.Domain, Name: s.Name})
	}
	return out
}

func (p *networkPolicy) request() *computer.NetworkPolicy {
	if p == nil {
		return nil
	}
	out := &computer.NetworkPolicy{Type: p.Type, AllowedDomains: p.AllowedDomains, AllowedCIDRs: p.AllowedCIDRs}
	for _, s := range p.DomainSecrets {
		out.DomainSecrets = append(out.DomainSecrets, computer.DomainSecret(s))
	}
	return out
}

// request is the exec the body asks for (its timeout checked by check).
func (b *execBody) request() computer.ExecRequest {
	return computer.ExecRequest{Command: b.Command, Argv: b.Argv, Cwd: b.Cwd, Env: b.Env, Stdin: b.Stdin,
		Timeout: durationOf(b.timeout)}
}

func execAnswerOf(res computer.ExecResult, encoding string) execAnswer {
	return execAnswer{ExitCode: res.ExitCode, Signal: res.Signal, Stdout: res.Stdout, Stderr: res.Stderr,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, DurationMS: res.Duration.Milliseconds(),
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, Encoding: encoding}
}

// processRequest is the background process the body asks for.
func (b *execBody) processRequest() computer.ProcessRequest {
	return computer.ProcessRequest{ExecRequest: b.request(), CloseStdin: b.CloseStdin}
}

func processViewOf(p sandbox.ProcessInfo) processView {
	v := processView{ID: p.ID, Object: "process", Pid: p.Pid, Command: p.Command, Argv: p.Argv, Cwd: p.Cwd,
		Status: "running", StartedAt: p.StartedAt.Unix(), StdinOpen: p.StdinOpen,
		OutputStart: p.OutputStart, OutputEnd: p.OutputEnd}
	if !p.Running {
		code, ended, ms := p.Exit.ExitCode, p.EndedAt.Unix(), p.EndedAt.Sub(p.StartedAt).Milliseconds()
		v.Status, v.ExitCode, v.Signal, v.EndedAt, v.DurationMS = "exited", &code, p.Exit.Signal, &ended, &ms
		v.TimedOut, v.OOMKilled = p.Exit.TimedOut, p.Exit.OOMKilled
	}
	return v
}

func listingView(l sandbox.WalkPage) fileListing {
	out := fileListing{Data: make([]fileEntry, len(l.Entries)), Object: "list", Truncated: l.Truncated, HasMore: l.More}
	for i, fi := range l.Entries {
		out.Data[i] = fileEntry(fi)
	}
	if n := len(l.Entries); n > 0 {
		out.FirstID, out.LastID = &l.Entries[0].Path, &l.Entries[n-1].Path
	}
	return out
}

func writtenView(w sandbox.Written) fileWritten {
	return fileWritten{Bytes: w.Bytes, Path: w.Path}
}

// request is the call the body asks for.
func (b *pythonBody) request() (computer.PythonRequest, error) {
	t, err := callTimeout(b.TimeoutSeconds, b.Timeout)
	req := computer.PythonRequest{Timeout: durationOf(t), Cwd: b.Cwd, Reset: b.Reset, Mode: b.Mode, SaveImages: b.SaveImages}
	if b.Cells != nil {
		req.Cells = make([]computer.PythonCell, len(b.Cells))
		for i, c := range b.Cells {
			req.Cells[i] = computer.PythonCell{Code: c.Code, Title: c.Title}
		}
	}
	return req, err
}

func pythonOutputOf(o kernel.Output) pythonOutput {
	return pythonOutput{Type: string(o.Type), Name: o.Name, Text: o.Text, MIME: o.MIME, JSON: o.JSON, PNG: o.PNG,
		Width: o.Width, Height: o.Height, ExecutionCount: o.ExecutionCount, EName: o.EName, EValue: o.EValue,
		Traceback: o.Traceback, Omitted: o.Omitted, DisplayID: o.DisplayID}
}

// pythonOutputsOf converts outputs; nil stays nil (null).
func pythonOutputsOf(outs []kernel.Output) []pythonOutput {
	if outs == nil {
		return nil
	}
	out := make([]pythonOutput, len(outs))
	for i, o := range outs {
		out[i] = pythonOutputOf(o)
	}
	return out
}

func pythonResultOf(res computer.PythonResult) pythonResult {
	out := pythonResult{Status: res.Status, FailedCell: res.FailedCell, Cancelled: res.Cancelled, TimedOut: res.TimedOut,
		Message: res.Message, KernelRestarted: res.KernelRestarted, DurationMS: res.Duration.Milliseconds()}
	if res.Cells != nil {
		out.Cells = make([]pythonCellView, len(res.Cells))
		for i, c := range res.Cells {
			out.Cells[i] = pythonCellView{Index: c.Index, Title: c.Title, Status: c.Status, ExecutionCount: c.ExecutionCount,
				InputRequested: c.InputRequested, Truncated: c.Truncated, Outputs: pythonOutputsOf(c.Outputs), Artifacts: c.Artifacts}
		}
	}
	return out
}

// PythonBody is the body POST /v1/computers/{id}/python answers for res;
// 'cubicle python --json' prints it too, so the two cannot differ.
func PythonBody(res computer.PythonResult) any { return pythonResultOf(res) }

func outputEvent(o sandbox.PythonOutput) pythonOutputEvent {
	return pythonOutputEvent{Cell: o.Cell, Output: pythonOutputOf(o.Output)}
}

func answer(res tools.Result) toolAnswer {
	out := toolAnswer{Output: res.Output, IsError: res.Failed, Images: []toolImage{},
		Artifacts: res.Artifacts, Outputs: res.Outputs}
	if out.Artifacts == nil {
		out.Artifacts = []artifact.Ref{}
	}
	if res.Cells != nil {
		out.Cells = make([]toolCell, len(res.Cells))
		for i, c := range res.Cells {
			out.Cells[i] = toolCell{Index: c.Index, Status: c.Status, Outputs: pythonOutputsOf(c.Outputs)}
		}
	}
	for _, im := range res.Images {
		out.Images = append(out.Images, toolImage{PNG: im.PNG, Width: im.Width, Height: im.Height})
	}
	return out
}

// seconds is the idle timeout OpenAI's expires_after asks for: anchored
// at the last activity, 1 to 10080 minutes (a week).
func (e *expiresAfter) seconds() (int, error) {
	switch {
	case e.Anchor != "last_active_at":
		return 0, withParam("expires_after.anchor", fmt.Errorf("%w: expires_after.anchor must be \"last_active_at\", got %q", errBadRequest, e.Anchor))
	case e.Minutes < 1 || e.Minutes > 10080:
		return 0, withParam("expires_after.minutes", fmt.Errorf("%w: expires_after.minutes must be between 1 and 10080, got %d", errBadRequest, e.Minutes))
	}
	return e.Minutes * 60, nil
}
