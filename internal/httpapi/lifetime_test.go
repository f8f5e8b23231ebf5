package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// TestLifetime: POST /v1/computers/{id}/lifetime moves a running
// computer's expiry to lifetime_seconds from now, clamped to the caps; a
// gone computer answers 409.
func TestLifetime(t *testing.T) {
	e := newEnv(t, nil) // lifetime cap 600 s
	_, key := e.newKey("", computerCaps)
	c := e.create(key, map[string]any{"lifetime_seconds": 60})
	if c.ExpiresAt-*c.ReadyAt != 60 {
		t.Fatalf("created to live %d s", c.ExpiresAt-*c.ReadyAt)
	}
	for _, x := range []struct{ ask, want int64 }{{300, 300}, {100000, 600}} {
		before := time.Now().Unix()
		var v view
		e.do(key, "POST", "/v1/computers/"+c.ID+"/lifetime", map[string]any{"lifetime_seconds": x.ask}).json(t, &v)
		if v.ExpiresAt < before+x.want || v.ExpiresAt > time.Now().Unix()+x.want {
			t.Fatalf("extended by %d: expires at %d, want %d from now (%d)", x.ask, v.ExpiresAt, x.want, before)
		}
		if g := e.get(key, c.ID); g.ExpiresAt != v.ExpiresAt || g.LastActiveAt == nil {
			t.Fatalf("GET after extending: %+v", g)
		}
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/lifetime", map[string]any{"lifetime_seconds": 0}).wantError(t, http.StatusBadRequest, "invalid_request")
	if r := e.do(key, "DELETE", "/v1/computers/"+c.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/lifetime", map[string]any{"lifetime_seconds": 60}).wantError(t, http.StatusConflict, "computer_gone")
}

// TestIdleTimeout: a computer with an idle timeout lives while calls keep
// coming and ends that long after the last one (reason "idle");
// OpenAI's expires_after {"anchor": "last_active_at"} is the same in
// minutes.
func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	c := e.create(key, map[string]any{"idle_timeout_seconds": 2})
	if c.Limits.IdleTimeoutSeconds != 2 || c.LastActiveAt == nil {
		t.Fatalf("created %+v", c)
	}
	for range 4 { // 4 s of calls a second apart: longer than the timeout
		time.Sleep(time.Second)
		e.sh(key, c.ID, "true")
	}
	if g := e.get(key, c.ID); g.Status != "ready" || *g.LastActiveAt < time.Now().Unix()-1 {
		t.Fatalf("while active: %+v", g)
	}
	// A call longer than the idle timeout is not cut: the computer is
	// never idle while a call runs.
	e.sh(key, c.ID, "sleep 3")
	eventually(t, 10*time.Second, "the idle computer ends", func() bool { return e.get(key, c.ID).Status == "destroyed" })
	evs := eventsOf(e.audit(key, "?type=computer.destroyed"), c.ID, "computer.destroyed")
	if len(evs) != 1 || evs[0].Data["reason"] != "idle" {
		t.Fatalf("stop events: %+v", evs)
	}

	o := e.create(key, map[string]any{"expires_after": map[string]any{"anchor": "last_active_at", "minutes": 20}})
	if o.Limits.IdleTimeoutSeconds != 1200 {
		t.Fatalf("expires_after: %+v", o.Limits)
	}
	for body, param := range map[string]string{
		`{"expires_after": {"anchor": "created_at", "minutes": 5}}`:                                "expires_after.anchor",
		`{"expires_after": {"anchor": "last_active_at", "minutes": 0}}`:                            "expires_after.minutes",
		`{"expires_after": {"anchor": "last_active_at", "minutes": 5}, "idle_timeout_seconds": 9}`: "expires_after",
		`{"idle_timeout_seconds": -1}`:                                                             "idle_timeout_seconds",
	} {
		er := e.do(key, "POST", "/v1/computers", body).wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("%s: param %v, want %s (%s)", body, er.Error.Param, param, er.Error.Message)
		}
	}
}
