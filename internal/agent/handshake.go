package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Conn is a control channel with deadlines: the host's end of a
// socketpair (*os.File) or a TLS connection to a pod's agent.
type Conn interface {
	io.ReadWriter
	SetDeadline(t time.Time) error
}

// Handshake sends Init on a new control channel and waits for the agent's
// Ready (at most 30 s, or ctx's deadline), the host side of a computer's
// start. An agent that fails its setup answers an error, returned with its
// message.
func Handshake(ctx context.Context, conn Conn, init protocol.Init) error {
	payload, err := json.Marshal(init)
	if err != nil {
		return err
	}
	buf, err := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindInit, Payload: payload})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(buf); err != nil {
		return fmt.Errorf("start computer: send init: %w", err)
	}
	f, err := protocol.ReadFrame(conn)
	if err != nil {
		return fmt.Errorf("start computer: the agent did not answer: %w", err)
	}
	switch f.Kind {
	case protocol.KindReady:
		return nil
	case protocol.KindError:
		var w protocol.WireError
		json.Unmarshal(f.Payload, &w)
		msg := w.Message
		if len(msg) > 2048 {
			msg = msg[:2048] + "…"
		}
		return fmt.Errorf("start computer: %s", msg)
	}
	return fmt.Errorf("start computer: unexpected first frame kind %d", f.Kind)
}

// ReportSetupError is the agent's answer to Init when it could not set
// the computer up: one error frame, read by Handshake.
func ReportSetupError(w io.Writer, err error) {
	b, _ := json.Marshal(protocol.WireError{Code: "internal", Message: "computer setup failed: " + err.Error()})
	buf, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindError, Payload: b})
	w.Write(buf)
}

// SetRlimits sets the agent's resource limits, which every user process
// inherits: no core dumps, 4096 descriptors, files of at most
// init.MaxFile bytes (the disk's size).
func SetRlimits(init protocol.Init) error {
	for _, l := range []struct {
		res int
		val uint64
	}{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_NOFILE, 4096}, {unix.RLIMIT_FSIZE, uint64(init.MaxFile)}} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return fmt.Errorf("set rlimit %d: %w", l.res, err)
		}
	}
	return nil
}
