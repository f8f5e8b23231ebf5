package errhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// The one table: every kind's status and default code.
func TestTable(t *testing.T) {
	want := map[errdefs.Kind]struct {
		status int
		code   string
	}{
		errdefs.Unknown:             {500, "internal_error"},
		errdefs.Unauthenticated:     {401, "invalid_api_key"},
		errdefs.PermissionDenied:    {403, "forbidden"},
		errdefs.NotFound:            {404, "not_found"},
		errdefs.Conflict:            {409, "conflict"},
		errdefs.ResourceExhausted:   {429, "capacity_exceeded"},
		errdefs.TooLarge:            {413, "too_large"},
		errdefs.Timeout:             {408, "request_timeout"},
		errdefs.InvalidArgument:     {400, "invalid_request"},
		errdefs.Unavailable:         {503, "unavailable"},
		errdefs.InsufficientStorage: {507, "insufficient_storage"},
		errdefs.BadGateway:          {502, "upstream_error"},
		errdefs.FailedPrecondition:  {422, "failed_precondition"},
		errdefs.MethodNotAllowed:    {405, "method_not_allowed"},
	}
	for k, w := range want {
		if s, c := errhttp.Status(k); s != w.status || c != w.code {
			t.Errorf("%v: %d %s, want %d %s", k, s, c, w.status, w.code)
		}
	}
	if s, c := errhttp.Of(fmt.Errorf("x: %w", errdefs.New(errdefs.Conflict, "file_locked", "locked"))); s != 409 || c != "file_locked" {
		t.Errorf("own code: %d %s", s, c)
	}
}

func TestTypes(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "invalid_request_error", 429: "rate_limit_error", 503: "service_unavailable_error", 500: "server_error", 507: "server_error"} {
		if got := errhttp.Type(status); got != typ {
			t.Errorf("%d: %s, want %s", status, got, typ)
		}
	}
}

type param struct{ error }

func (param) ErrorParam() string { return "tools" }
func (p param) Unwrap() error    { return p.error }

func request(t *testing.T, f func(w http.ResponseWriter, r *http.Request)) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	log.HTTP(http.HandlerFunc(f)).ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	return w
}

func TestRenderers(t *testing.T) {
	bad := param{errdefs.New(errdefs.InvalidArgument, "", "bad tools")}
	w := request(t, func(w http.ResponseWriter, r *http.Request) { errhttp.WriteOpenAI(w, r, bad, "bad tools") })
	var body struct {
		Error errhttp.Body `json:"error"`
	}
	json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != 400 || body.Error.Type != "invalid_request_error" || body.Error.Code != "invalid_request" ||
		body.Error.Message != "bad tools" || body.Error.Param == nil || *body.Error.Param != "tools" ||
		body.Error.RequestID == "" || body.Error.RequestID != w.Header().Get("X-Request-Id") {
		t.Fatalf("OpenAI: %d %s %v", w.Code, w.Body, w.Header())
	}

	w = request(t, func(w http.ResponseWriter, r *http.Request) {
		errhttp.WriteOpenAI(w, r, errors.New("/data/x: EIO"), "/data/x: EIO")
	})
	if w.Code != 500 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error.Message != errhttp.InternalSentence {
		t.Fatalf("internal: %d %s", w.Code, w.Body)
	}
	w = request(t, func(w http.ResponseWriter, r *http.Request) {
		errhttp.WriteOpenAI(w, r, errdefs.New(errdefs.Unauthenticated, "", "who"), "who")
	})
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Bearer realm="cubicle"` {
		t.Fatalf("401: %d %v", w.Code, w.Header())
	}

	cases := []struct {
		err    error
		status int
		reason string
	}{
		{errdefs.New(errdefs.Unavailable, "computer_unavailable", "down"), 503, "unavailable"},
		{errdefs.New(errdefs.TooLarge, "", "big"), 400, "invalid_request"},
		{errdefs.New(errdefs.Conflict, "kernel_dead", "dead"), 409, "kernel_dead"},
		{errdefs.New(errdefs.Unauthenticated, "", "who"), 401, "invalid_api_key"},
	}
	for _, c := range cases {
		w := request(t, func(w http.ResponseWriter, r *http.Request) { errhttp.WriteJupyter(w, r, c.err) })
		var jb errhttp.JupyterBody
		json.Unmarshal(w.Body.Bytes(), &jb)
		if w.Code != c.status || jb.Reason != c.reason || jb.Message != c.err.Error() || jb.RequestID != w.Header().Get("X-Request-Id") {
			t.Errorf("Jupyter %v: %d %s", c.err, w.Code, w.Body)
		}
	}
	if _, b := errhttp.OpenAI(context.Background(), bad, "m"); b.RequestID != "" {
		t.Errorf("outside a request: request_id %q", b.RequestID)
	}
}
