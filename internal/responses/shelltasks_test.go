package responses

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// TestShellTaskHoldRules: which responses keep their computer for the
// conversation's shell tasks (the seed: "A shell task holds on to the
// conversation's computer while it runs and for a few minutes afterwards,
// so that the turn that answers its result finds it."): one that started a
// task and can be continued, and every later one of the conversation while
// the computer stands; not one that is not stored, nor one without a task.
// A conversation whose computer ended goes on in a new one, and the model
// is told.
func TestShellTaskHoldRules(t *testing.T) {
	// The user message is the exec arguments the model calls with once.
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		msgs := req["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		if last["role"] == "user" {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.ExecName, Args: last["content"].(string)})
		}
		return 200, upstreamtest.TextAnswer("done")
	}, func(c *Config) { c.ShellTaskGrace = time.Minute })
	h.comp.run = func(_ context.Context, _ string, args json.RawMessage) (tools.Result, error) {
		if strings.Contains(string(args), `"background":true`) {
			return tools.Result{Output: "task_id: proc_1\npid: 7\nstatus: running", TaskID: "proc_1"}, nil
		}
		return tools.Result{Output: "ran"}, nil
	}
	ask := func(extra string) *Response {
		t.Helper()
		r, err := h.create(`{"tools":[{"type":"tool","name":"builtin__computer_exec"}]` + extra + `}`)
		if err != nil || r.Status != "completed" {
			t.Fatalf("%s: %v %+v", extra, err, r)
		}
		return r
	}
	deleted := func(id string) bool {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, _, del := h.comp.snapshot(); slices.Contains(del, id) {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	task := `,"input":"{\"command\":\"sleep 9\",\"background\":true}"`
	plain := `,"input":"{\"command\":\"ls\"}"`

	first := ask(task)
	second := ask(plain + `,"previous_response_id":"` + first.ID + `"`)
	created, ran, _ := h.comp.snapshot()
	if len(created) != 1 || !strings.HasPrefix(ran[1], "cmp_1 ") || !slices.Equal(h.comp.snapshotHeld(), []string{"cmp_1", "cmp_1"}) {
		t.Fatalf("created %d, ran %q, held %q", len(created), ran, h.comp.snapshotHeld())
	}
	// Not stored: nothing can continue it, so nothing is kept.
	ask(task + `,"store":false`)
	if !deleted("cmp_2") || slices.Contains(h.comp.snapshotHeld(), "cmp_2") {
		t.Fatalf("a response that is not stored kept its computer: held %q", h.comp.snapshotHeld())
	}
	// No task, no conversation's computer: deleted as always.
	ask(plain)
	if !deleted("cmp_3") || slices.Contains(h.comp.snapshotHeld(), "cmp_3") {
		t.Fatalf("a response without a task kept its computer: held %q", h.comp.snapshotHeld())
	}
	// A background run that starts a task keeps its computer too.
	bg, err := h.start(h.p, `{"background":true,"tools":[{"type":"tool","name":"builtin__computer_exec"}]`+task+`}`)
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(bg["id"].(string), "completed")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(h.comp.snapshotHeld(), "cmp_4") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Contains(h.comp.snapshotHeld(), "cmp_4") {
		t.Fatalf("a background run's task did not hold its computer: held %q", h.comp.snapshotHeld())
	}
	// The conversation's computer ended: a new one, and the model is told.
	h.comp.Delete(context.Background(), h.p, "cmp_1")
	ask(plain + `,"previous_response_id":"` + second.ID + `"`)
	if created, _, _ := h.comp.snapshot(); len(created) != 5 {
		t.Fatalf("computers made: %d, want a new one for the conversation", len(created))
	}
	if got := messages(h.up.Request(h.up.Calls() - 1)); !slices.Contains(got, "system:"+LostComputerNote) {
		t.Fatalf("the model was not told its computer ended: %q", got)
	}
}
