package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// python runs cells; with Accept: text/event-stream every output is an
// "output" event {cell, output} and the answer ends as a "result" event.
func (a *API) python(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body pythonBody
	if err := decode(r, &body); err != nil {
		return err
	}
	req, err := body.request()
	if err != nil {
		return err
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		res, err := a.comp.Python(r.Context(), p, r.PathValue("id"), req, nil)
		if err != nil {
			return body.fieldError(err)
		}
		writeJSON(w, http.StatusOK, pythonResultOf(res))
		return nil
	}
	sse := newSSE(w)
	defer sse.close()
	if err := req.Validate(); err != nil {
		return body.fieldError(err)
	}
	if err := a.comp.CheckRunning(r.Context(), p, r.PathValue("id")); err != nil {
		return err // a plain error status while nothing was sent yet
	}
	sse.open()
	res, err := a.comp.Python(r.Context(), p, r.PathValue("id"), req, func(o sandbox.PythonOutput) {
		sse.send("output", outputEvent(o))
	})
	if err != nil {
		if !sse.started || errors.Is(err, context.Canceled) {
			return err
		}
		sse.send("error", map[string]any{"error": streamError(r.Context(), err)})
		return nil
	}
	for i := range res.Cells { // already streamed
		res.Cells[i].Outputs = nil
	}
	sse.send("result", pythonResultOf(res))
	return nil
}

// fieldError is err naming the timeout field the client sent.
func (b *pythonBody) fieldError(err error) error {
	var fe *computer.FieldError
	if b.TimeoutSeconds != nil && errors.As(err, &fe) && fe.Field == "timeout" {
		fe.Field = "timeout_seconds"
	}
	return err
}

func (a *API) pythonControl(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
		if r.ContentLength > 0 {
			var body struct{}
			if err := decode(r, &body); err != nil {
				return err
			}
		}
		if err := a.comp.PythonControl(r.Context(), p, r.PathValue("id"), action); err != nil {
			return fmt.Errorf("python %s: %w", action, err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
