package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

// fakeDriver makes computers (sandboxtest's) whose only ability is a fake
// kernel relay: the transport's unit tests. The end-to-end tests use real
// computers.
type fakeDriver struct {
	sandboxtest.Driver
	mu  sync.Mutex
	all []*fakeSB
}

func newFakeDriver() *fakeDriver {
	d := &fakeDriver{}
	d.New = func(context.Context, sandbox.Spec) (*sandboxtest.Sandbox, error) {
		sb := &fakeSB{}
		sb.Sandbox = &sandboxtest.Sandbox{OpenKernelFunc: sb.openKernel, KillFunc: sb.end, DestroyFunc: sb.end}
		d.mu.Lock()
		d.all = append(d.all, sb)
		d.mu.Unlock()
		return sb.Sandbox, nil
	}
	return d
}

func (d *fakeDriver) last() *fakeSB {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.all[len(d.all)-1]
}

// fakeSB is a computer with the relay's state; calls the gateway never
// makes fail with sandboxtest.ErrNotScripted.
type fakeSB struct {
	*sandboxtest.Sandbox
	mu        sync.Mutex
	starts    []sandbox.KernelStart
	kernel    *fakeKernel
	destroyed atomic.Bool
}

func (s *fakeSB) openKernel(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed.Load() {
		return nil, sandbox.ErrGone
	}
	s.starts = append(s.starts, start)
	s.kernel = newFakeKernel()
	return s.kernel, nil
}

// end (Kill or Destroy) ends the relay as a dying agent does.
func (s *fakeSB) end(ctx context.Context) error {
	s.destroyed.Store(true)
	s.mu.Lock()
	k := s.kernel
	s.mu.Unlock()
	if k != nil {
		k.end(sandbox.ErrGone)
	}
	return nil
}

func (s *fakeSB) lastStart() sandbox.KernelStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts[len(s.starts)-1]
}

// fakeKernel answers like ipykernel, enough for the transport: execute
// (with "input:" for a stdin round trip, "buffers" for a binary display,
// "flood N SIZE" for N iopub messages of SIZE bytes), kernel_info, comm_msg
// (echoes its buffers back on iopub).
type fakeKernel struct {
	msgs       chan sandbox.KernelMessage
	mu         sync.Mutex
	ended      bool
	err        error
	inputs     chan string
	interrupts atomic.Int32
	restarts   atomic.Int32
	count      int
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{msgs: make(chan sandbox.KernelMessage, 64), inputs: make(chan string, 1)}
}

func (k *fakeKernel) Messages() <-chan sandbox.KernelMessage { return k.msgs }

func (k *fakeKernel) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *fakeKernel) end(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ended {
		k.ended, k.err = true, err
		close(k.msgs)
	}
}

func (k *fakeKernel) emit(channel, msgType string, parent json.RawMessage, content any, buffers ...[]byte) {
	c, _ := json.Marshal(content)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	k.count++
	h := fmt.Sprintf(`{"msg_id":"k-%d","msg_type":%q,"session":"fake","username":"k","date":"2026-01-01T00:00:00.000000Z","version":"5.3"}`, k.count, msgType)
	k.msgs <- sandbox.KernelMessage{Channel: channel, Header: json.RawMessage(h), ParentHeader: parent,
		Metadata: json.RawMessage("{}"), Content: c, Buffers: buffers}
}

func (k *fakeKernel) Send(ctx context.Context, m sandbox.KernelMessage) error {
	var h struct {
		MsgType string `json:"msg_type"`
	}
	json.Unmarshal(m.Header, &h)
	switch {
	case m.Channel == "stdin" && h.MsgType == "input_reply":
		var c struct{ Value string }
		json.Unmarshal(m.Content, &c)
		k.inputs <- c.Value
	case m.Channel == "shell" && h.MsgType == "kernel_info_request":
		go k.emit("shell", "kernel_info_reply", m.Header, map[string]any{"status": "ok", "implementation": "fake"})
	case m.Channel == "shell" && h.MsgType == "comm_msg":
		go k.emit("iopub", "comm_msg", m.Header, map[string]any{"echo": len(m.Buffers)}, m.Buffers...)
	case m.Channel == "shell" && h.MsgType == "execute_request":
		var c struct{ Code string }
		json.Unmarshal(m.Content, &c)
		go k.execute(m.Header, c.Code)
	}
	return nil
}

func (k *fakeKernel) execute(parent json.RawMessage, code string) {
	k.emit("iopub", "status", parent, map[string]string{"execution_state": "busy"})
	switch {
	case strings.HasPrefix(code, "input:"):
		k.emit("stdin", "input_request", parent, map[string]any{"prompt": strings.TrimPrefix(code, "input:"), "password": false})
		select {
		case v := <-k.inputs:
			k.emit("iopub", "stream", parent, map[string]string{"name": "stdout", "text": "got " + v})
		case <-time.After(10 * time.Second):
		}
	case code == "buffers":
		k.emit("iopub", "display_data", parent, map[string]any{"data": map[string]string{"text/plain": "b"}}, []byte{0, 1, 2}, []byte("xyz"))
	case strings.HasPrefix(code, "flood "):
		var n, size int
		fmt.Sscanf(code, "flood %d %d", &n, &size)
		for i := range n {
			k.emit("iopub", "stream", parent, map[string]string{"name": "stdout", "text": strings.Repeat("x", size)})
			if i%2 == 1 {
				time.Sleep(time.Millisecond) // a reading client keeps up; a stalled one does not
			}
		}
	case code == "sleep":
		time.Sleep(300 * time.Millisecond)
	default:
		k.emit("iopub", "execute_result", parent, map[string]any{"data": map[string]string{"text/plain": "2"}, "execution_count": 1})
	}
	k.emit("shell", "execute_reply", parent, map[string]any{"status": "ok", "execution_count": 1})
	k.emit("iopub", "status", parent, map[string]string{"execution_state": "idle"})
}

func (k *fakeKernel) Interrupt(ctx context.Context) error {
	k.interrupts.Add(1)
	return nil
}

func (k *fakeKernel) Restart(ctx context.Context) error {
	k.restarts.Add(1)
	k.emit("iopub", "status", json.RawMessage("{}"), map[string]string{"execution_state": "restarting"})
	return nil
}

func (k *fakeKernel) Close(ctx context.Context) error {
	k.end(nil)
	return nil
}

var errFake = errors.New("fake kernel died")
