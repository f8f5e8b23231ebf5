package jupyter

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestErrorTable pins the status and reason of every error the Kernel
// Gateway API answers.
func TestErrorTable(t *testing.T) {
	cases := []struct {
		err    error
		status int
		reason string
	}{
		{governance.ErrUnauthenticated, 401, "invalid_api_key"},
		{governance.ErrForbidden, 403, "forbidden"},
		{computer.ErrForbidden, 403, "forbidden"},
		{errNoKernel, 404, "not_found"},
		{errNoSpec, 404, "not_found"},
		{computer.ErrNotFound, 404, "not_found"},
		{computer.ErrGone, 404, "not_found"},
		{errDead, 409, "kernel_dead"},
		{fmt.Errorf("%w: %w", errDead, sandbox.ErrKernelDead), 409, "kernel_dead"},
		{fmt.Errorf("start the kernel: %w", sandbox.ErrKernelDead), 400, "kernel_start_failed"},
		{computer.ErrCapacity, 429, "capacity_exceeded"},
		{errTooMany, 429, "capacity_exceeded"},
		{errBadRequest, 400, "invalid_request"},
		{computer.ErrInvalid, 400, "invalid_request"},
		{computer.ErrTooLarge, 400, "invalid_request"},
		{computer.ErrUnavailable, 503, "unavailable"},
		{errClosed, 503, "unavailable"},
		{fmt.Errorf("disk: EIO"), 500, "internal_error"},
	}
	for _, c := range cases {
		err := fmt.Errorf("context: %w", c.err)
		status, body := errhttp.Jupyter(httptest.NewRequest("GET", "/", nil), classify(err))
		if status != c.status || body.Reason != c.reason {
			t.Errorf("%v: %d %s, want %d %s", c.err, status, body.Reason, c.status, c.reason)
		}
		if status != 500 && body.Message != err.Error() {
			t.Errorf("%v: message %q", c.err, body.Message)
		}
	}
}
