package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

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
	binary := wantsBinary(r)
	if !binary && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
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
	sse, enc := newSSE(w), body.Encoding
	if binary {
		sse, enc = newBinaryStream(w), "" // raw bytes: the exit says no encoding
	}
	defer sse.close()
	sse.open()
	out := &streamOut{sse: sse, base64: enc == "base64"}
	res, err := a.comp.Exec(r.Context(), p, id, req, out.write)
	out.flush()
	if err != nil {
		sse.send("error", map[string]any{"error": streamError(r.Context(), err)})
		return nil
	}
	res.Stdout, res.Stderr = "", "" // already streamed
	sse.send("exit", execAnswerOf(res, enc))
	return nil
}
