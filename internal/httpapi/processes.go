package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Background processes: POST /v1/computers/{id}/processes (or exec with
// "background": true), list, get, output (JSON from an offset, or SSE
// following until exit), stdin, signal and kill. The computer holds them
// (computer.Manager.StartProcess and the rest); this is transport only.

// startProcess is POST /v1/computers/{id}/processes: the body of exec.
func (a *API) startProcess(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body execBody
	if err := decode(r, &body); err != nil {
		return err
	}
	body.Background = true
	if err := body.check(); err != nil {
		return err
	}
	return a.startBackground(w, r, p, &body)
}

func (a *API) startBackground(w http.ResponseWriter, r *http.Request, p governance.Principal, body *execBody) error {
	info, err := a.comp.StartProcess(r.Context(), p, r.PathValue("id"), body.processRequest())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, processViewOf(info))
	return nil
}

// listProcesses is a cursor page of the computer's processes (cursorPage:
// newest first unless order=asc; limit, after).
func (a *API) listProcesses(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	list, err := a.comp.ListProcesses(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := make([]processView, len(list))
	for i, info := range list {
		data[i] = processViewOf(info)
	}
	page, err := cursorPage(r, data, func(v processView) string { return v.ID })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getProcess(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	info, err := a.comp.GetProcess(r.Context(), p, r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, processViewOf(info))
	return nil
}

// killProcess is DELETE …/processes/{pid}: SIGKILL to its whole tree; the
// answer is the process once it exited (or after 5 s).
func (a *API) killProcess(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	info, err := a.comp.SignalProcess(r.Context(), p, r.PathValue("id"), r.PathValue("pid"), "SIGKILL")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, processViewOf(info))
	return nil
}

func (a *API) signalProcess(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body signalBody
	if err := decode(r, &body); err != nil {
		return err
	}
	info, err := a.comp.SignalProcess(r.Context(), p, r.PathValue("id"), r.PathValue("pid"), body.Signal)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, processViewOf(info))
	return nil
}

func (a *API) processStdin(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body stdinBody
	if err := decode(r, &body); err != nil {
		return err
	}
	data := []byte(body.Data)
	switch body.Encoding {
	case "", "utf-8":
	case "base64":
		b, err := base64.StdEncoding.DecodeString(body.Data)
		if err != nil {
			return withParam("data", fmt.Errorf("%w: data is not base64: %v", errBadRequest, err))
		}
		data = b
	default:
		return withParam("encoding", fmt.Errorf("%w: encoding must be utf-8 or base64", errBadRequest))
	}
	res, err := a.comp.WriteStdin(r.Context(), p, r.PathValue("id"),
		sandbox.StdinWrite{ID: r.PathValue("pid"), Data: data, Close: body.Close})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, stdinAnswer{Written: res.Written, Closed: res.Closed})
	return nil
}

// outputQuery is what GET …/output asks: ?offset= (else the SSE
// Last-Event-ID header, else 0), ?limit=, ?encoding=.
func outputQuery(r *http.Request) (req sandbox.OutputRequest, base64 bool, err error) {
	q := r.URL.Query()
	req.ID = r.PathValue("pid")
	off := q.Get("offset")
	param := "offset"
	if off == "" {
		off, param = r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	}
	if off != "" {
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil || n < 0 {
			return req, false, withParam(param, fmt.Errorf("%w: %s must be a byte offset (0 or more), got %q", errBadRequest, param, off))
		}
		req.Offset = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || n > sandbox.ProcessOutputRing {
			return req, false, withParam("limit", fmt.Errorf("%w: limit must be between 1 and %d bytes, got %q", errBadRequest, sandbox.ProcessOutputRing, s))
		}
		req.Limit = n
	}
	switch q.Get("encoding") {
	case "", "utf-8":
	case "base64":
		base64 = true
	default:
		return req, false, withParam("encoding", fmt.Errorf("%w: encoding must be utf-8 or base64", errBadRequest))
	}
	return req, base64, nil
}

// processOutput is GET …/processes/{pid}/output: the bytes from an offset
// as JSON, or with Accept: text/event-stream every byte from the offset
// on, following the process until it exits.
func (a *API) processOutput(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	req, b64, err := outputQuery(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return a.followOutput(w, r, p, req, b64)
	}
	var out, errb []byte
	from, dropped := req.Offset, int64(0)
	end, err := a.comp.ProcessOutput(r.Context(), p, id, req, func(kind string, data []byte) {
		if kind == "stdout" {
			out = append(out, data...)
		} else {
			errb = append(errb, data...)
		}
	}, func(offset, lost int64) {
		// The first mark says where the bytes start; a later one (bytes
		// lost while they were read) restarts them there, so the answer
		// is one contiguous range.
		if lost > 0 || offset != from {
			out, errb = out[:0], errb[:0]
			from, dropped = offset, offset-req.Offset
		}
	})
	if err != nil {
		return err
	}
	ans := processOutput{Object: "process.output", Offset: from, Dropped: dropped, NextOffset: end.Next,
		Stdout: string(out), Stderr: string(errb), Process: processViewOf(end.Process)}
	if b64 {
		ans.Stdout, ans.Stderr = base64.StdEncoding.EncodeToString(out), base64.StdEncoding.EncodeToString(errb)
		ans.Encoding = "base64"
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// followOutput streams a process's output as exec does (stdout and
// stderr events, {"data"}), each with an SSE id from which re-attaching
// loses nothing (the offset after its bytes, or earlier while part of a
// UTF-8 character is held back); a dropped event says where bytes were
// lost; exit ends it with the process.
func (a *API) followOutput(w http.ResponseWriter, r *http.Request, p governance.Principal, req sandbox.OutputRequest, b64 bool) error {
	id := r.PathValue("id")
	if _, err := a.comp.GetProcess(r.Context(), p, id, req.ID); err != nil {
		return err // a plain error status while nothing was sent yet
	}
	req.Follow = true
	sse := newSSE(w)
	defer sse.close()
	sse.open()
	out := &outputEvents{sse: sse, base64: b64, held: map[string][]byte{}, heldAt: map[string]int64{}}
	end, err := a.comp.ProcessOutput(r.Context(), p, id, req, out.write, out.mark)
	out.flush()
	if err != nil {
		sse.send("error", map[string]any{"error": streamError(r.Context(), err)})
		return nil
	}
	sse.sendID("exit", strconv.FormatInt(end.Next, 10), processViewOf(end.Process))
	return nil
}

// outputEvents sends a process's output as SSE events. As text, a UTF-8
// sequence cut between two reads is held back (as exec's streamOut does)
// until the rest of it comes.
type outputEvents struct {
	sse    *sse
	base64 bool
	pos    int64 // the offset after the last byte received
	held   map[string][]byte
	heldAt map[string]int64 // the offset of held's bytes
}

func (o *outputEvents) mark(offset, dropped int64) {
	if dropped > 0 {
		o.flush() // what was held is followed by a gap: it will never be completed
		o.sse.sendID("dropped", strconv.FormatInt(offset, 10), droppedEvent{Offset: offset, Dropped: dropped})
	}
	o.pos = offset
}

func (o *outputEvents) write(kind string, data []byte) {
	start := o.pos
	o.pos += int64(len(data))
	if o.base64 {
		o.sse.sendData(kind, o.resume(), data, true)
		return
	}
	buf := data
	if h := o.held[kind]; len(h) > 0 {
		buf, start = append(h, data...), o.heldAt[kind]
	}
	n := completeUTF8(buf)
	if n < len(buf) {
		o.held[kind], o.heldAt[kind] = append([]byte(nil), buf[n:]...), start+int64(n)
	} else {
		delete(o.held, kind)
	}
	if n > 0 {
		o.sse.sendData(kind, o.resume(), buf[:n], false)
	}
}

// resume is the offset from which re-attaching loses nothing: after what
// was received, but not past a byte still held back.
func (o *outputEvents) resume() string {
	at := o.pos
	for k := range o.held {
		at = min(at, o.heldAt[k])
	}
	return strconv.FormatInt(at, 10)
}

// flush sends what is held back, in a fixed order.
func (o *outputEvents) flush() {
	for _, kind := range []string{"stdout", "stderr"} {
		if b := o.held[kind]; len(b) > 0 {
			delete(o.held, kind)
			o.sse.sendData(kind, o.resume(), b, false)
		}
	}
}
