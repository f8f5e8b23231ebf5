package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

func (b *execBody) check() error {
	switch b.Encoding {
	case "", "utf-8":
		b.Encoding = ""
	case "base64":
	default:
		return withParam("encoding", fmt.Errorf("%w: encoding must be utf-8 or base64", errBadRequest))
	}
	if b.CloseStdin && !b.Background {
		return withParam("close_stdin", fmt.Errorf("%w: close_stdin is for a background process (background: true); an exec's stdin is closed after stdin", errBadRequest))
	}
	t, err := callTimeout(b.TimeoutSeconds, b.Timeout)
	if err != nil {
		return err
	}
	b.timeout = t
	return checkExec(b.request())
}

// answer encodes res's streams as the request asked.
func (b *execBody) answer(res computer.ExecResult) execAnswer {
	if b.Encoding == "base64" {
		res.Stdout = base64.StdEncoding.EncodeToString([]byte(res.Stdout))
		res.Stderr = base64.StdEncoding.EncodeToString([]byte(res.Stderr))
	}
	return execAnswerOf(res, b.Encoding)
}

func (a *API) exec(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body execBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := body.check(); err != nil {
		return err
	}
	if body.Background {
		return a.startBackground(w, r, p, &body)
	}
	req, id := body.request(), r.PathValue("id")
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		res, err := a.comp.Exec(r.Context(), p, id, req, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, body.answer(res))
		return nil
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if err := a.comp.CheckRunning(r.Context(), p, id); err != nil {
		return err // a plain error status while nothing was sent yet
	}
	sse := newSSE(w)
	defer sse.close()
	sse.open()
	out := &streamOut{sse: sse, base64: body.Encoding == "base64"}
	res, err := a.comp.Exec(r.Context(), p, id, req, out.write)
	out.flush()
	if err != nil {
		sse.send("error", map[string]any{"error": streamError(r.Context(), err)})
		return nil
	}
	res.Stdout, res.Stderr = "", "" // already streamed
	sse.send("exit", execAnswerOf(res, body.Encoding))
	return nil
}

// streamOut sends a process's output as stdout/stderr events. As text, a
// UTF-8 sequence cut between two reads is held back (at most 3 bytes per
// stream) until the rest comes, so it is never replaced by U+FFFD; what is
// still incomplete at the end is sent then (and shows as U+FFFD).
type streamOut struct {
	sse    *sse
	base64 bool
	held   map[string][]byte
}

func (s *streamOut) write(kind string, data []byte) {
	if s.base64 {
		s.sse.send(kind, map[string]string{"data": base64.StdEncoding.EncodeToString(data)})
		return
	}
	if s.held == nil {
		s.held = map[string][]byte{}
	}
	buf := append(s.held[kind], data...)
	n := completeUTF8(buf)
	s.held[kind] = append([]byte(nil), buf[n:]...)
	if n > 0 {
		s.sse.send(kind, map[string]string{"data": string(buf[:n])})
	}
}

// flush sends what is held back, in a fixed order.
func (s *streamOut) flush() {
	for _, kind := range []string{"stdout", "stderr"} {
		if b := s.held[kind]; len(b) > 0 {
			s.sse.send(kind, map[string]string{"data": string(b)})
			delete(s.held, kind)
		}
	}
}

// completeUTF8 is the length of b without a trailing UTF-8 sequence that
// is valid so far but incomplete (at most utf8.UTFMax-1 bytes).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
