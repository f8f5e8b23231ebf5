package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// hostRecord is what the linux driver keeps of a computer on the host.
type hostRecord struct {
	dir      string
	AgentPid int               `json:"agent_pid"`
	Cgroups  map[string]string `json:"cgroups"`
}

func (e *env) hostRecord(id string) hostRecord {
	e.t.Helper()
	r := hostRecord{dir: filepath.Join(e.dir, "computers", id)}
	b, err := os.ReadFile(filepath.Join(r.dir, "computer.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.AgentPid <= 0 || len(r.Cgroups) == 0 {
		e.t.Fatalf("record of %s: %s (%v)", id, b, err)
	}
	return r
}

// gone reports whether the computer's directory and cgroups are removed.
func (r hostRecord) gone() bool {
	paths := []string{r.dir}
	for _, p := range r.Cgroups {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}

// failedView is the part of the computer object a failure shows in.
type failedView struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Failure string `json:"failure"`
}

func (e *env) listed(query, id string) (failedView, bool) {
	e.t.Helper()
	r := e.do(e.admin, "GET", "/v1/computers"+query, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("list: %s", r)
	}
	var l struct {
		Data []failedView `json:"data"`
	}
	r.json(e.t, &l)
	for _, v := range l.Data {
		if v.ID == id {
			return v, true
		}
	}
	return failedView{}, false
}

const sigkillReason = "killed by signal 9 (SIGKILL)"

// TestAgentKilledFromHostFailsComputer: SIGKILL of a computer's agent (its
// PID 1) from the host marks it failed at once, with the reason, in GET and
// list; its capacity is freed (a new create is admitted at capacity 1), its
// stop is recorded once, its resources are removed, and later calls get
// 409 computer_gone saying why. An exec running at the time gets the same
// 409, not 503.
func TestAgentKilledFromHostFailsComputer(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.MaxConcurrent = 1 })
	v := e.create(e.admin, nil)
	host := e.hostRecord(v.ID)
	running := make(chan resp, 1)
	go func() {
		running <- e.do(e.admin, "POST", "/v1/computers/"+v.ID+"/exec", map[string]any{"command": "echo started; sleep 60"})
	}()
	time.Sleep(300 * time.Millisecond) // the exec is running
	if err := syscall.Kill(host.AgentPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if msg := (<-running).wantError(t, http.StatusConflict, "computer_gone").Error.Message; !strings.Contains(msg, sigkillReason) {
		t.Fatalf("exec running when the agent died: %q lacks the reason", msg)
	}
	var got failedView
	eventually(t, 5*time.Second, "computer failed", func() bool {
		e.do(e.admin, "GET", "/v1/computers/"+v.ID, nil).json(t, &got)
		return got.Status == "failed"
	})
	if !strings.Contains(got.Failure, sigkillReason) {
		t.Fatalf("GET of the failed computer: %+v, want the reason %q", got, sigkillReason)
	}
	if l, ok := e.listed("?status=all", v.ID); !ok || l.Status != "failed" || l.Failure != got.Failure {
		t.Fatalf("list ?status=all: %+v %v", l, ok)
	}
	if _, ok := e.listed("", v.ID); ok {
		t.Fatal("the failed computer is listed as alive")
	}
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/exec", map[string]any{"command": "true"}}, {"GET", "/files/x", nil}, {"PUT", "/files/x", "data"},
		{"POST", "/python", map[string]any{"cells": []map[string]string{{"code": "1"}}}}, {"DELETE", "", nil},
	} {
		r := e.do(e.admin, call.method, "/v1/computers/"+v.ID+call.path, call.body)
		if msg := r.wantError(t, http.StatusConflict, "computer_gone").Error.Message; !strings.Contains(msg, sigkillReason) {
			t.Fatalf("%s %s after the death: %q lacks the reason", call.method, call.path, msg)
		}
	}
	eventually(t, 10*time.Second, "the dead computer's directory and cgroups removed", host.gone)
	w := e.create(e.admin, nil) // at max_concurrent 1: the dead one's slot is free
	if out := e.sh(e.admin, w.ID, "echo ok"); out != "ok\n" {
		t.Fatalf("new computer: %q", out)
	}
	if rows := usageOf(e.usage(e.admin), v.ID); len(rows) != 1 || rows[0].Kind != "sandbox_seconds" {
		t.Fatalf("usage of the failed computer: %+v", rows)
	}
	evs := eventsOf(e.audit(e.admin, "?type=computer.destroyed"), v.ID, "computer.destroyed")
	if len(evs) != 1 || evs[0].Data["reason"] != "failed" {
		t.Fatalf("computer.destroyed of the failed computer: %+v", evs)
	}
	if n := e.metric(`cubicle_computers{state="ready"}`); n != 1 {
		t.Fatalf("ready computers in /metrics: %v, want 1 (the new one)", n)
	}
}

// TestDeleteRacingAgentDeath: a DELETE racing with the agent's death
// records the computer's stop exactly once, whichever wins; the DELETE
// answers 204 (it won) or 409 (the death did), never 503 or 500.
func TestDeleteRacingAgentDeath(t *testing.T) {
	e := newEnv(t, nil)
	for i := 0; i < 6; i++ {
		v := e.create(e.admin, nil)
		host := e.hostRecord(v.ID)
		var wg sync.WaitGroup
		var del resp
		wg.Add(2)
		go func() { defer wg.Done(); del = e.do(e.admin, "DELETE", "/v1/computers/"+v.ID, nil) }()
		go func() { defer wg.Done(); syscall.Kill(host.AgentPid, syscall.SIGKILL) }()
		wg.Wait()
		if del.code != http.StatusNoContent && del.code != http.StatusConflict {
			t.Fatalf("round %d: DELETE racing the death: %s", i, del)
		}
		eventually(t, 10*time.Second, "the computer's resources removed", host.gone)
		if st := e.get(e.admin, v.ID).Status; st != "destroyed" && st != "failed" {
			t.Fatalf("round %d: status %q after the race", i, st)
		}
		if rows := usageOf(e.usage(e.admin), v.ID); len(rows) != 1 {
			t.Fatalf("round %d: usage rows %+v", i, rows)
		}
		if evs := eventsOf(e.audit(e.admin, "?type=computer.destroyed"), v.ID, "computer.destroyed"); len(evs) != 1 {
			t.Fatalf("round %d: computer.destroyed %+v", i, evs)
		}
	}
}

// TestDeadPoolComputerNotHandedOut: a warm-pool computer whose agent died
// while it waited is never handed out; the create gets a working one.
func TestDeadPoolComputerNotHandedOut(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.PoolSize = 1 })
	eventually(t, 30*time.Second, "the pool filled", func() bool { return e.metric("cubicle_pool_depth") == 1 })
	ents, err := os.ReadDir(filepath.Join(e.dir, "computers"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("computers on the host with one pooled: %v %v", ents, err)
	}
	pooled := e.hostRecord(ents[0].Name())
	if err := syscall.Kill(pooled.AgentPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the dead agent reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pooled.AgentPid))
		return errors.Is(err, os.ErrNotExist)
	})
	v := e.create(e.admin, nil)
	if v.ID == ents[0].Name() {
		t.Fatalf("the dead pool computer %s was handed out", v.ID)
	}
	if out := e.sh(e.admin, v.ID, "echo ok"); out != "ok\n" {
		t.Fatalf("the computer created instead: %q", out)
	}
	eventually(t, 10*time.Second, "the dead pool computer removed", pooled.gone)
}
