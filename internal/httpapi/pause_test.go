package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// treeSum lists every path of /workspace with owner, mode and size, then
// the checksum of every file: equal sums are the same tree.
const treeSum = `cd /workspace && find . -printf '%p %U %m %s\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum`

// TestPauseResumeCycles: 20 pause/resume cycles of one computer with writes
// between each (one file fsync'd just before the pause, one not, one
// rewritten in place); after every resume the same id serves the whole
// tree exactly as it was. While paused it holds no capacity (another
// computer starts on a deployment of one), calls answer 409
// computer_paused, and no sandbox_seconds are charged: one usage row per
// running period.
func TestPauseResumeCycles(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.MaxConcurrent = 1 })
	_, key := e.newKey("", computerCaps)
	c := e.create(key, nil)
	const cycles = 20
	for i := range cycles {
		e.sh(key, c.ID, fmt.Sprintf(`cd /workspace && mkdir -p d%d && echo %d > d%d/f && ln -sf d%d/f last &&
			head -c 65536 /dev/urandom > synced && sync synced &&
			head -c 4096 /dev/urandom > unsynced && dd if=/dev/urandom of=big bs=4k count=1 seek=%d conv=notrunc 2>/dev/null`, i, i, i, i, i))
		before := e.sh(key, c.ID, treeSum)
		var p view
		e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil).json(t, &p)
		if p.Status != "paused" || p.PausedAt == nil || p.Pauses != i+1 {
			t.Fatalf("cycle %d: pause answered %+v", i, p)
		}
		e.do(key, "POST", "/v1/computers/"+c.ID+"/exec", map[string]any{"command": "true"}).wantError(t, http.StatusConflict, "computer_paused")
		e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil).wantError(t, http.StatusConflict, "computer_paused")
		if i == 0 {
			// The paused computer holds no capacity: another one starts.
			other := e.create(key, nil)
			if r := e.do(key, "DELETE", "/v1/computers/"+other.ID, nil); r.code != http.StatusNoContent {
				t.Fatalf("delete the other computer: %s", r)
			}
		}
		var r view
		e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).json(t, &r)
		if r.ID != c.ID || r.Status != "ready" || r.PausedAt != nil || r.LastActiveAt == nil {
			t.Fatalf("cycle %d: resume answered %+v", i, r)
		}
		if after := e.sh(key, c.ID, treeSum); after != before {
			t.Fatalf("cycle %d: the workspace changed across pause and resume:\nbefore:\n%s\nafter:\n%s", i, before, after)
		}
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).wantError(t, http.StatusConflict, "computer_not_paused")
	if r := e.do(key, "DELETE", "/v1/computers/"+c.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	rows := usageOf(e.usage(key), c.ID)
	if len(rows) != cycles+1 {
		t.Fatalf("%d usage rows, want one per running period (%d): %+v", len(rows), cycles+1, rows)
	}
	if n := len(eventsOf(e.audit(key, "?type=computer.paused"), c.ID, "computer.paused")); n != cycles {
		t.Fatalf("%d computer.paused events, want %d", n, cycles)
	}
	if n := len(eventsOf(e.audit(key, "?type=computer.resumed"), c.ID, "computer.resumed")); n != cycles {
		t.Fatalf("%d computer.resumed events, want %d", n, cycles)
	}
}

// TestPausedDeleteAndAutoPause: on_expire "pause" pauses a computer when
// its idle time ends (reason idle) instead of deleting it; a paused
// computer can be deleted (its workspace discarded, no further charge);
// another organisation sees none of it; a bad on_expire is refused.
func TestPausedDeleteAndAutoPause(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	c := e.create(key, map[string]any{"idle_timeout_seconds": 1, "on_expire": "pause"})
	if c.Limits.OnExpire != "pause" {
		t.Fatalf("created %+v", c.Limits)
	}
	e.sh(key, c.ID, "echo kept > /workspace/f")
	eventually(t, 15*time.Second, "the idle computer is paused", func() bool { return e.get(key, c.ID).Status == "paused" })
	evs := eventsOf(e.audit(key, "?type=computer.paused"), c.ID, "computer.paused")
	if len(evs) != 1 || evs[0].Data["reason"] != "idle" {
		t.Fatalf("pause events: %+v", evs)
	}
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	e.do(other, "POST", "/v1/computers/"+c.ID+"/resume", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).json(t, new(view))
	if out := e.sh(key, c.ID, "cat /workspace/f"); out != "kept\n" {
		t.Fatalf("after the auto-pause: %q", out)
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil).json(t, new(view))
	if r := e.do(key, "DELETE", "/v1/computers/"+c.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete a paused computer: %s", r)
	}
	if g := e.get(key, c.ID); g.Status != "destroyed" {
		t.Fatalf("after delete: %+v", g)
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).wantError(t, http.StatusConflict, "computer_gone")
	if rows := usageOf(e.usage(key), c.ID); len(rows) != 2 {
		t.Fatalf("usage rows %+v, want two running periods", rows)
	}
	er := e.do(key, "POST", "/v1/computers", map[string]any{"on_expire": "sleep"}).wantError(t, http.StatusBadRequest, "invalid_request")
	if er.Error.Param == nil || *er.Error.Param != "on_expire" {
		t.Fatalf("bad on_expire: %+v", er.Error)
	}
}

// TestPausedSurvivesRestart: a paused computer is not charged or ended by
// the next server's recovery, and resumes there with its files.
func TestPausedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, nil)
	_, key := e.newKey("", computerCaps)
	c := e.create(key, nil)
	e.sh(key, c.ID, "echo before restart > /workspace/f")
	e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil).json(t, new(view))
	e.mgr.Close(context.Background())

	e2 := newEnvIn(t, dir, nil)
	if g := e2.get(key, c.ID); g.Status != "paused" {
		t.Fatalf("after a restart: %+v", g)
	}
	e2.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).json(t, new(view))
	if out := e2.sh(key, c.ID, "cat /workspace/f"); out != "before restart\n" {
		t.Fatalf("resumed after a restart: %q", out)
	}
	if rows := usageOf(e2.usage(key), c.ID); len(rows) != 1 {
		t.Fatalf("usage rows %+v, want only the first running period", rows)
	}
}

// TestPausePythonVariables: what of the session kernel's variables can be
// kept is restored on resume (values, imported modules, functions and
// classes defined in the session, instances of them); what cannot is
// named with why, in the pause's and the resume's answers.
func TestPausePythonVariables(t *testing.T) {
	e := newEnv(t, nil)
	key := e.admin
	c := e.create(key, nil)
	e.python(key, c.ID, map[string]any{"cells": []map[string]any{{"code": `
import math as m2
x = 41
def f(a):
    return a + 1
class K:
    def __init__(self): self.v = 7
k = K()
data = {"rows": [1, 2, 3]}
gen = (i for i in range(3))`}}})
	type pyVars struct {
		Python struct {
			Kept  []string          `json:"kept"`
			Lost  map[string]string `json:"lost"`
			Error string            `json:"error"`
		} `json:"python"`
	}
	var p pyVars
	e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil).json(t, &p)
	want := "K data f k m2 x"
	if got := strings.Join(p.Python.Kept, " "); got != want || p.Python.Lost["gen"] == "" || p.Python.Error != "" {
		t.Fatalf("pause kept %q (want %q), lost %v, error %q", got, want, p.Python.Lost, p.Python.Error)
	}
	var r pyVars
	e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil).json(t, &r)
	if got := strings.Join(r.Python.Kept, " "); got != want || r.Python.Lost["gen"] == "" {
		t.Fatalf("resume restored %q (want %q), lost %v, error %q", got, want, r.Python.Lost, r.Python.Error)
	}
	if v := e.pyValue(c.ID, "(f(x), round(m2.pi, 2), k.v, type(k).__name__, data['rows'][2])"); v != "(42, 3.14, 7, 'K', 3)" {
		t.Fatalf("after resume: %s", v)
	}
	if ls := e.sh(key, c.ID, "ls -A /workspace"); ls != "" {
		t.Fatalf("the kept state stays in the workspace after the resume: %q", ls)
	}
}

// TestPauseRefusedWithHostMounts: a computer with host directories
// mounted (as the Kernel Gateway makes them) is not paused: its resume
// could not give them back.
func TestPauseRefusedWithHostMounts(t *testing.T) {
	e := newEnv(t, nil)
	p, err := e.gov.Authenticate(t.Context(), e.admin)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.mgr.Create(t.Context(), p, computer.CreateRequest{Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/mnt/host"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.do(e.admin, "POST", "/v1/computers/"+v.ID+"/pause", nil).wantError(t, http.StatusConflict, "computer_not_pausable")
	if g := e.get(e.admin, v.ID); g.Status != "ready" {
		t.Fatalf("after the refused pause: %+v", g)
	}
}

// TestResumeTellsNothingOfOthers: resuming another organisation's
// computer is 404 like an id that does not exist (it was 409 "is being
// resumed or deleted", which told that the computer exists), and resuming
// one's own running computer says it is running.
func TestResumeTellsNothingOfOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, mine := e.newKey("", computerCaps)
	_, theirs := e.newKey(e.newOrg("other", true), computerCaps)
	c := e.create(mine, nil)
	for _, id := range []string{c.ID, "cmp_000000000000000000000000"} {
		e.do(theirs, "POST", "/v1/computers/"+id+"/resume", nil).wantError(t, http.StatusNotFound, "")
	}
	er := e.do(mine, "POST", "/v1/computers/"+c.ID+"/resume", nil).wantError(t, http.StatusConflict, "computer_not_paused")
	if !strings.Contains(er.Error.Message, "ready") {
		t.Errorf("resume of a running computer: %q, want it said to be ready", er.Error.Message)
	}
}
