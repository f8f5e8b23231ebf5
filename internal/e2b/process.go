package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// envd's process.Process service over Cubicle's background processes
// (computer.StartProcess and friends): a command is a background process
// whose output is followed for as long as the call lasts, so it keeps
// running when the client disconnects, as envd's do; its pid is the
// process's pid inside the computer.

func (s *Server) processRoutes(envd func(string, boxHandler)) {
	envd("POST /process.Process/Start", serverStream(s.start))
	envd("POST /process.Process/Connect", serverStream(s.connectProcess))
	envd("POST /process.Process/List", unary(s.listProcesses))
	envd("POST /process.Process/SendInput", unary(s.sendInput))
	envd("POST /process.Process/CloseStdin", unary(s.closeStdin))
	envd("POST /process.Process/SendSignal", unary(s.sendSignal))
	envd("POST /process.Process/", func(w http.ResponseWriter, r *http.Request, b *box) {
		writeBoxError(w, r, unimplemented("process.Process/"+r.URL.Path[len("/process.Process/"):]))
	})
}

// processConfig is envd's ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type startRequest struct {
	Process processConfig   `json:"process"`
	Pty     json.RawMessage `json:"pty"`
	Tag     *string         `json:"tag"`
	Stdin   *bool           `json:"stdin"`
}

// selector is envd's ProcessSelector.
type selector struct {
	Pid *uint32 `json:"pid"`
	Tag *string `json:"tag"`
}

type selectorRequest struct {
	Process selector `json:"process"`
}

// processEvent is envd's ProcessEvent in a StartResponse or
// ConnectResponse.
type processEvent struct {
	Event struct {
		Start     *startEvent `json:"start,omitempty"`
		Data      *dataEvent  `json:"data,omitempty"`
		End       *endEvent   `json:"end,omitempty"`
		Keepalive *struct{}   `json:"keepalive,omitempty"`
	} `json:"event"`
}

type startEvent struct {
	Pid int `json:"pid"`
}

// dataEvent carries bytes (base64 in JSON, as encoding/json does []byte).
type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
}

type endEvent struct {
	ExitCode int     `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// maxCmdArgs bounds a command's argv.
const maxCmdArgs = 4096

func (req *startRequest) exec(timeout time.Duration) (computer.ProcessRequest, error) {
	switch {
	case isSet(req.Pty):
		return computer.ProcessRequest{}, unimplemented("a PTY (sandbox.pty)")
	case req.Tag != nil:
		return computer.ProcessRequest{}, unimplemented("tagged processes")
	case req.Process.Cmd == "":
		return computer.ProcessRequest{}, rpcInvalid("process.cmd is required")
	case len(req.Process.Args) > maxCmdArgs:
		return computer.ProcessRequest{}, rpcInvalid("process.args holds at most %d arguments", maxCmdArgs)
	}
	ex := computer.ExecRequest{Argv: append([]string{req.Process.Cmd}, req.Process.Args...), Env: req.Process.Envs, Timeout: timeout}
	if req.Process.Cwd != nil {
		ex.Cwd = *req.Process.Cwd
	}
	return computer.ProcessRequest{ExecRequest: ex, CloseStdin: req.Stdin == nil || !*req.Stdin}, nil
}

// callTimeout is the call's Connect-Timeout-Ms (the SDK's timeoutMs, the
// command's timeout) in whole seconds rounded up; 0: none.
func callTimeout(r *http.Request) time.Duration {
	ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration((min(ms, 1<<40)+999)/1000) * time.Second
}

// start starts a command and follows its output until it exits.
func (s *Server) start(r *http.Request, b *box, req *startRequest, out *stream) error {
	preq, err := req.exec(callTimeout(r))
	if err != nil {
		return err
	}
	info, err := s.mgr.StartProcess(r.Context(), b.p, b.id, preq)
	if err != nil {
		return err
	}
	return s.follow(r, b, info, 0, out)
}

// connectProcess follows a running command's output from now on.
func (s *Server) connectProcess(r *http.Request, b *box, req *selectorRequest, out *stream) error {
	info, err := s.find(r.Context(), b, req.Process)
	if err != nil {
		return err
	}
	return s.follow(r, b, info, info.OutputEnd, out)
}

// follow sends the start event, the process's output from offset, and
// its end once it exited; keepalives go out meanwhile. A client that goes
// away leaves the process running.
func (s *Server) follow(r *http.Request, b *box, info sandbox.ProcessInfo, offset int64, out *stream) error {
	ctx := r.Context()
	var ev processEvent
	ev.Event.Start = &startEvent{Pid: info.Pid}
	if err := out.send(ev); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ka processEvent
		ka.Event.Keepalive = &struct{}{}
		out.keepalive(keepaliveInterval(r), ka, stop)
	}()
	end, err := s.mgr.ProcessOutput(ctx, b.p, b.id, sandbox.OutputRequest{ID: info.ID, Offset: offset, Follow: true},
		func(kind string, data []byte) {
			var ev processEvent
			if kind == "stderr" {
				ev.Event.Data = &dataEvent{Stderr: data}
			} else {
				ev.Event.Data = &dataEvent{Stdout: data}
			}
			out.send(ev)
		}, nil)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	ev = processEvent{}
	ev.Event.End = endOf(end.Process.Exit)
	return out.send(ev)
}

// endOf is envd's EndEvent of an exit status.
func endOf(st sandbox.ExitStatus) *endEvent {
	e := &endEvent{ExitCode: st.ExitCode, Exited: true, Status: fmt.Sprintf("exit status %d", st.ExitCode)}
	var why string
	switch {
	case st.TimedOut:
		why = "the command reached its timeout and was killed"
	case st.OOMKilled:
		why = "the sandbox's memory limit was reached and the command was killed"
	case st.Signal != 0:
		why = fmt.Sprintf("signal: %d", st.Signal)
	}
	if st.Signal != 0 {
		e.Status = fmt.Sprintf("signal: %d", st.Signal)
	}
	if why != "" {
		e.Error = &why
	}
	return e
}

// find is the running process a selector names.
func (s *Server) find(ctx context.Context, b *box, sel selector) (sandbox.ProcessInfo, error) {
	if sel.Tag != nil {
		return sandbox.ProcessInfo{}, unimplemented("tagged processes")
	}
	if sel.Pid == nil {
		return sandbox.ProcessInfo{}, rpcInvalid("process.pid is required")
	}
	list, err := s.mgr.ListProcesses(ctx, b.p, b.id)
	if err != nil {
		return sandbox.ProcessInfo{}, err
	}
	for _, info := range list {
		if info.Running && info.Pid == int(*sel.Pid) {
			return info, nil
		}
	}
	return sandbox.ProcessInfo{}, &rpcError{Code: "not_found", Message: fmt.Sprintf("no running process with pid %d", *sel.Pid)}
}

type processInfo struct {
	Config processConfig `json:"config"`
	Pid    int           `json:"pid"`
}

type listResponse struct {
	Processes []processInfo `json:"processes"`
}

func (s *Server) listProcesses(ctx context.Context, b *box, _ *struct{}) (*listResponse, error) {
	list, err := s.mgr.ListProcesses(ctx, b.p, b.id)
	if err != nil {
		return nil, err
	}
	res := &listResponse{Processes: []processInfo{}}
	for _, info := range list {
		if !info.Running {
			continue
		}
		cfg := processConfig{Envs: map[string]string{}}
		if info.Command != "" {
			cfg.Cmd, cfg.Args = "/bin/sh", []string{"-c", info.Command}
		} else if len(info.Argv) > 0 {
			cfg.Cmd, cfg.Args = info.Argv[0], info.Argv[1:]
		}
		if info.Cwd != "" {
			cfg.Cwd = &info.Cwd
		}
		res.Processes = append(res.Processes, processInfo{Config: cfg, Pid: info.Pid})
	}
	return res, nil
}

type sendInputRequest struct {
	Process selector `json:"process"`
	Input   struct {
		Stdin []byte          `json:"stdin"`
		Pty   json.RawMessage `json:"pty"`
	} `json:"input"`
}

func (s *Server) sendInput(ctx context.Context, b *box, req *sendInputRequest) (*struct{}, error) {
	if isSet(req.Input.Pty) {
		return nil, unimplemented("PTY input")
	}
	info, err := s.find(ctx, b, req.Process)
	if err != nil {
		return nil, err
	}
	_, err = s.mgr.WriteStdin(ctx, b.p, b.id, sandbox.StdinWrite{ID: info.ID, Data: req.Input.Stdin})
	return &struct{}{}, err
}

func (s *Server) closeStdin(ctx context.Context, b *box, req *selectorRequest) (*struct{}, error) {
	info, err := s.find(ctx, b, req.Process)
	if err != nil {
		return nil, err
	}
	_, err = s.mgr.WriteStdin(ctx, b.p, b.id, sandbox.StdinWrite{ID: info.ID, Close: true})
	return &struct{}{}, err
}

// signal is envd's Signal enum: by name in JSON, or by number.
type signal string

func (sg *signal) UnmarshalJSON(data []byte) error {
	var n int
	if json.Unmarshal(data, &n) == nil {
		switch n {
		case 9:
			*sg = "SIGKILL"
		case 15:
			*sg = "SIGTERM"
		default:
			return fmt.Errorf("signal %d is not SIGKILL (9) or SIGTERM (15)", n)
		}
		return nil
	}
	var name string
	if err := json.Unmarshal(data, &name); err != nil {
		return err
	}
	switch name {
	case "SIGNAL_SIGKILL":
		*sg = "SIGKILL"
	case "SIGNAL_SIGTERM":
		*sg = "SIGTERM"
	default:
		return fmt.Errorf("signal %q is not SIGNAL_SIGKILL or SIGNAL_SIGTERM", name)
	}
	return nil
}

type signalRequest struct {
	Process selector `json:"process"`
	Signal  signal   `json:"signal"`
}

func (s *Server) sendSignal(ctx context.Context, b *box, req *signalRequest) (*struct{}, error) {
	if req.Signal == "" {
		return nil, rpcInvalid("signal is required")
	}
	info, err := s.find(ctx, b, req.Process)
	if err != nil {
		return nil, err
	}
	_, err = s.mgr.SignalProcess(ctx, b.p, b.id, info.ID, string(req.Signal))
	return &struct{}{}, err
}
