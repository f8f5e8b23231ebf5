package httpapi

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestErrorTable pins the status and code of every service error as REST
// answers it, through a %w chain as the layers return them.
func TestErrorTable(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{governance.ErrUnauthenticated, 401, "invalid_api_key"},
		{governance.ErrForbidden, 403, "forbidden"},
		{computer.ErrForbidden, 403, "forbidden"},
		{computer.ErrNotFound, 404, "not_found"},
		{store.ErrNotFound, 404, "not_found"},
		{errFilesOff, 404, "not_found"},
		{computer.ErrGone, 409, "computer_gone"},
		{computer.ErrCapacity, 429, "capacity_exceeded"},
		{computer.ErrTooLarge, 413, "too_large"},
		{files.ErrTooLarge, 413, "too_large"},
		{errTooLarge, 413, "too_large"},
		{errBodyTimeout, 408, "request_timeout"},
		{computer.ErrInvalid, 400, "invalid_request"},
		{governance.ErrInvalid, 400, "invalid_request"},
		{files.ErrInvalidFilename, 400, "invalid_request"},
		{errBadRequest, 400, "invalid_request"},
		{computer.ErrUnavailable, 503, "computer_unavailable"},
		{errNoGateway, 503, "gateway_not_configured"},
		{store.ErrFull, 507, "insufficient_storage"},
		{store.FullError(fmt.Errorf("write: no space")), 507, "insufficient_storage"},
		{errOutsideTurn, 422, "computer_tool_outside_turn"},
		{errToolNotConfigured, 422, "computer_not_configured"},
		{&responses.Error{Kind: errdefs.InvalidArgument, Code: "computer_not_configured", Message: "x"}, 400, "computer_not_configured"},
		{&responses.Error{Kind: errdefs.BadGateway, Code: "upstream_error", Message: "x"}, 502, "upstream_error"},
		{store.ErrConflict, 500, "internal_error"},
	}
	for _, c := range cases {
		for _, err := range []error{c.err, fmt.Errorf("context: %w", c.err), fmt.Errorf("%w: %w", c.err, sandbox.ErrNotFound)} {
			status, body := errorBody(httptest.NewRequest("GET", "/", nil), err)
			if status != c.status || body.Code != c.code || body.Type == "" {
				t.Errorf("%v: %d %s, want %d %s", err, status, body.Code, c.status, c.code)
			}
		}
	}
}
