package jupyter

import (
	"errors"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Errors of the gateway itself.
var (
	errNoKernel   = errdefs.New(errdefs.NotFound, "", "no such kernel")
	errNoSpec     = errdefs.New(errdefs.NotFound, "", "no such kernel spec")
	errBadRequest = errdefs.New(errdefs.InvalidArgument, "", "bad request")
	errClosed     = errdefs.New(errdefs.Unavailable, "", errhttp.ShuttingDownSentence)
	errDead       = errdefs.New(errdefs.Conflict, "kernel_dead", "the kernel is dead; restart it")
	errTooMany    = errdefs.New(errdefs.ResourceExhausted, "", "too many connections")
)

// reasonComputerGone is why a kernel whose computer is gone is removed.
const reasonComputerGone = "the kernel's computer is gone"

// classify reads the errors of the layers below as the Kernel Gateway API
// does: a kernel whose computer is gone is a missing kernel, and a kernel
// that dies as it starts (usually of what env asked for) a bad request.
func classify(err error) error {
	switch {
	case errors.Is(err, computer.ErrGone):
		return errdefs.Wrap(errdefs.NotFound, "", err)
	case errors.Is(err, sandbox.ErrKernelDead) && !errors.Is(err, errDead):
		return errdefs.Wrap(errdefs.InvalidArgument, "kernel_start_failed", err)
	}
	return err
}

// writeError answers in jupyter_server's error shape (errhttp.WriteJupyter).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	errhttp.WriteJupyter(w, r, classify(err))
}

func writeJSON(w http.ResponseWriter, code int, v any) { errhttp.WriteJSON(w, code, v) }
