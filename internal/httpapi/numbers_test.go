package httpapi_test

import (
	"net/http"
	"testing"
)

// TestHugeNumbersRefused: numbers past what the server can represent are
// refused naming the field; they wrapped: a preview link of 2^62 seconds
// was created already expired, a usage window since 2^62 seconds listed
// every row.
func TestHugeNumbersRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	for _, n := range []int64{1 << 62, 1<<63 - 1, 86401} {
		er := e.do(e.admin, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 80, "expires_in_seconds": n}).
			wantError(t, http.StatusBadRequest, "")
		if er.Error.Param == nil || *er.Error.Param != "expires_in_seconds" {
			t.Errorf("expires_in_seconds %d: param %v", n, er.Error.Param)
		}
	}
	for _, q := range []string{"since=4611686018427387904", "until=9223372036854775807", "since=253402300800"} {
		for _, route := range []string{"/v1/usage", "/v1/audit"} {
			er := e.do(e.admin, "GET", route+"?"+q, nil).wantError(t, http.StatusBadRequest, "")
			if er.Error.Param == nil || (*er.Error.Param != "since" && *er.Error.Param != "until") {
				t.Errorf("%s?%s: param %v", route, q, er.Error.Param)
			}
		}
	}
	if r := e.do(e.admin, "GET", "/v1/usage?since=253402300799", nil); r.code != http.StatusOK {
		t.Errorf("since the end of 9999: %s", r)
	}
}
