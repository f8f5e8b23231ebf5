package fleet

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignVerify: a signature holds for its request, secret and time
// only: another secret, another URI, another caller's credentials, a
// stale time or no secret at all are refused, each saying why.
func TestSignVerify(t *testing.T) {
	secret := []byte(strings.Repeat("s", MinSecret))
	now := time.Now()
	req := func() *http.Request {
		r, _ := http.NewRequest("POST", "http://10.0.0.1:8080/v1/computers/cmp_1/exec?x=1", nil)
		r.Header.Set("Authorization", "Bearer cub_a")
		return r
	}
	r := req()
	sign(r, secret, "srv_a", now)
	if err := verify(r, secret, now.Add(time.Second)); err != nil {
		t.Fatalf("its own signature: %v", err)
	}
	cases := map[string]struct {
		edit   func(r *http.Request)
		secret []byte
		at     time.Time
		want   string
	}{
		"other secret": {func(*http.Request) {}, []byte(strings.Repeat("t", MinSecret)), now, "does not match"},
		"other uri":    {func(r *http.Request) { r.URL.RawQuery = "x=2" }, secret, now, "does not match"},
		"other key":    {func(r *http.Request) { r.Header.Set("Authorization", "Bearer cub_b") }, secret, now, "does not match"},
		"e2b api key":  {func(r *http.Request) { r.Header.Set("X-API-Key", "cub_b") }, secret, now, "does not match"},
		"e2b token":    {func(r *http.Request) { r.Header.Set("X-Access-Token", "cub_b") }, secret, now, "does not match"},
		"stale":        {func(*http.Request) {}, secret, now.Add(MaxSkew + time.Second), "off this server's clock"},
		"no secret":    {func(*http.Request) {}, nil, now, "cluster.secret is not set"},
		"malformed":    {func(r *http.Request) { r.Header.Set(Header, "srv_a;x") }, secret, now, "malformed"},
	}
	for name, c := range cases {
		r := req()
		sign(r, secret, "srv_a", now)
		c.edit(r)
		if err := verify(r, c.secret, c.at); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if got := ComputerID("/v1/computers/cmp_1/files/a/b"); got != "cmp_1" {
		t.Errorf("computer of a files path: %q", got)
	}
	if got := ComputerID("/v1/computers"); got != "" {
		t.Errorf("computer of the list: %q", got)
	}
}
