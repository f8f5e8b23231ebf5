package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The seed's sentences on shell tasks (../shared/seeds/computers-api.md).
const (
	seedShellTaskHolds = "A shell task holds on to the conversation's computer while it runs and for a few minutes afterwards, " +
		"so that the turn that answers its result finds it."
	seedThreadFindsIt = "The only exception is a computer that a shell task keeps standing: the thread's turns find it for as " +
		"long as it stays standing."
)

// execTool offers builtin__computer_exec.
var execTool = []any{map[string]any{"type": "tool", "name": tools.ExecName}}

// commandsFromInput is a scripted upstream whose user message is a JSON
// array of builtin__computer_exec arguments: it calls the tool with each,
// one per round, then answers with the outputs it saw, joined by "\n---\n".
func commandsFromInput(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		msgs, _ := req["messages"].([]any)
		var calls []json.RawMessage
		var outputs []string
		for _, m := range msgs {
			msg, _ := m.(map[string]any)
			content, _ := msg["content"].(string)
			switch msg["role"] {
			case "user":
				calls, outputs = nil, nil
				if err := json.Unmarshal([]byte(content), &calls); err != nil {
					return 200, chatAnswer(map[string]any{"role": "assistant", "content": "not a list of calls: " + content})
				}
			case "tool":
				outputs = append(outputs, content)
			}
		}
		if len(outputs) < len(calls) {
			return 200, toolCallAnswer(tools.ExecName, string(calls[len(outputs)]))
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": strings.Join(outputs, "\n---\n")})
	})
}

// shellTaskEnv is a server whose gateway keeps a computer grace after its
// shell tasks, and a key with computers.
func shellTaskEnv(t *testing.T, grace time.Duration) (*env, *scripted, string) {
	e := newEnv(t, nil)
	up := commandsFromInput(t)
	e.withGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m", ShellTaskGrace: grace})
	_, key := e.newKey("", computerCaps)
	return e, up, key
}

// turn runs one response whose model makes the exec calls, continuing
// previous ("": a new conversation), and checks that it completed with one
// tool_call per call and the final message.
func (e *env) turn(key, previous string, calls ...map[string]any) responseObj {
	e.t.Helper()
	out, err := e.tryTurn(key, previous, calls...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// tryTurn is turn, answering its failure (for other goroutines than the test's).
func (e *env) tryTurn(key, previous string, calls ...map[string]any) (responseObj, error) {
	in, _ := json.Marshal(calls)
	body := map[string]any{"model": "m", "input": string(in), "tools": execTool}
	if previous != "" {
		body["previous_response_id"] = previous
	}
	b, _ := json.Marshal(body)
	var out responseObj
	r, err := e.rawDo(key, "POST", "/v1/responses", bytes.NewReader(b))
	if err == nil {
		err = json.Unmarshal(r.body, &out)
	}
	if err == nil && (r.code != http.StatusOK || out.Status != "completed" || len(out.Output) != len(calls)+1) {
		err = fmt.Errorf("response: %s", r)
	}
	return out, err
}

// destroyedReason is the reason of computer id's computer.destroyed event
// ("": none yet).
func (e *env) destroyedReason(id string) string {
	e.t.Helper()
	for _, ev := range eventsOf(e.audit(e.admin, "?type=computer.destroyed"), id, "computer.destroyed") {
		r, _ := ev.Data["reason"].(string)
		return r
	}
	return ""
}

// TestResponsesShellTaskKeepsComputer: a response that leaves a shell task
// running keeps its computer for its conversation while the task runs
// (longer than the grace), the next response of the conversation finds
// the computer, its task and its file; a response of another conversation
// gets a computer of its own; once the grace after the task and the last
// response passed, the computer is deleted, recorded with its reason and
// its usage; the conversation then goes on in a new computer and the
// model is told so.
func TestResponsesShellTaskKeepsComputer(t *testing.T) {
	t.Log(seedShellTaskHolds)
	t.Log(seedThreadFindsIt)
	grace := 4 * time.Second
	e, up, key := shellTaskEnv(t, grace)

	first := e.turn(key, "", map[string]any{"command": "sleep 12; echo done > /workspace/out", "background": true})
	started := first.Output[0]
	cmp := started.ContainerID
	if started.Type != "tool_call" || started.Status != "completed" ||
		!regexp.MustCompile(`^task_id: proc_1\npid: \d+\nstatus: running$`).MatchString(started.Output) {
		t.Fatalf("the started task: %+v", started)
	}
	// "while it runs": longer than the grace after the response, the task
	// still runs and the computer stands.
	time.Sleep(grace + 2*time.Second)
	if v := e.get(key, cmp); v.Status != "ready" {
		t.Fatalf("the computer a running shell task holds: %+v", v)
	}
	if p := e.do(key, "GET", "/v1/computers/"+cmp+"/processes/proc_1", nil); p.code != 200 || !strings.Contains(string(p.body), `"status":"running"`) {
		t.Fatalf("the task: %s", p)
	}

	// Another conversation never finds it.
	other := e.turn(key, "", map[string]any{"command": "cat /workspace/out; ls /workspace"})
	if other.Output[0].ContainerID == cmp || strings.Contains(other.Output[0].Output, "done") {
		t.Fatalf("another conversation ran in %s: %+v", cmp, other.Output[0])
	}

	// "the turn that answers its result finds it": the task, its end, its file.
	second := e.turn(key, first.ID, map[string]any{"command": nil, "task_id": "proc_1", "timeout_seconds": 20},
		map[string]any{"command": "cat /workspace/out"})
	for _, it := range second.Output[:2] {
		if it.ContainerID != cmp {
			t.Fatalf("the next response ran in %s, not the conversation's %s", it.ContainerID, cmp)
		}
	}
	if got := second.Output[0].Output; got != "task_id: proc_1\nstatus: exited\nexit_code: 0\nstdout:\n\nstderr:\n" {
		t.Fatalf("the task's end: %q", got)
	}
	if got := second.Output[1].Output; got != "exit_code: 0\nstdout:\ndone\n\nstderr:\n" {
		t.Fatalf("the task's file: %q", got)
	}
	// A response without a computer call in between keeps the conversation's computer.
	chat := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "[]", "previous_response_id": second.ID})
	var third responseObj
	chat.json(t, &third)
	if chat.code != 200 || third.Status != "completed" {
		t.Fatalf("a response without a computer: %s", chat)
	}
	fourth := e.turn(key, third.ID, map[string]any{"command": "cat /workspace/out"})
	if fourth.Output[0].ContainerID != cmp {
		t.Fatalf("after a response without a computer the conversation ran in %s, not %s", fourth.Output[0].ContainerID, cmp)
	}

	// "for a few minutes afterwards": the grace after the task and the last response, then it is gone.
	answered := time.Now()
	eventually(t, 20*time.Second, "the held computer ends after its grace", func() bool { return e.get(key, cmp).Status == "destroyed" })
	if waited := time.Since(answered); waited < grace-time.Second {
		t.Fatalf("the held computer ended %v after the last response, before its grace of %v", waited, grace)
	}
	if r := e.destroyedReason(cmp); r != "shell_tasks_ended" {
		t.Fatalf("stop reason %q, want shell_tasks_ended", r)
	}
	billed := false
	for _, u := range e.usage(key) {
		billed = billed || u.ComputerID == cmp && u.Kind == "sandbox_seconds" && u.Quantity >= 10
	}
	if !billed {
		t.Fatalf("no sandbox_seconds usage for the held computer %s: %+v", cmp, e.usage(key))
	}
	// The conversation goes on in a new computer, and the model is told.
	fifth := e.turn(key, fourth.ID, map[string]any{"command": "ls /workspace"})
	if fifth.Output[0].ContainerID == cmp || fifth.Output[0].ContainerID == "" {
		t.Fatalf("continued in the ended computer: %+v", fifth.Output[0])
	}
	up.mu.Lock()
	last, _ := json.Marshal(up.requests[len(up.requests)-1]["messages"])
	up.mu.Unlock()
	if !strings.Contains(string(last), responses.LostComputerNote) {
		t.Fatalf("the model was not told that the computer ended: %s", last)
	}
}

// TestResponsesShellTaskConcurrentTurns: two responses continuing the same
// response at once both run in the conversation's computer (decision: the
// thread's turns share it, as two terminals share a machine), and it
// stands while its task runs after both.
func TestResponsesShellTaskConcurrentTurns(t *testing.T) {
	t.Log(seedThreadFindsIt)
	e, _, key := shellTaskEnv(t, time.Second)
	first := e.turn(key, "", map[string]any{"command": "sleep 30", "background": true})
	cmp := first.Output[0].ContainerID
	var wg sync.WaitGroup
	outs, errs := make([]responseObj, 2), make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = e.tryTurn(key, first.ID, map[string]any{"command": fmt.Sprintf("sleep 1; echo %d >> /workspace/both", i)})
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if o.Output[0].ContainerID != cmp {
			t.Fatalf("concurrent response %d ran in %s, not the conversation's %s", i, o.Output[0].ContainerID, cmp)
		}
	}
	if both := e.sh(key, cmp, "sort /workspace/both | tr '\\n' ' '"); both != "0 1 " {
		t.Fatalf("the two responses' lines: %q", both)
	}
	time.Sleep(3 * time.Second)
	if v := e.get(key, cmp); v.Status != "ready" {
		t.Fatalf("the computer its task holds after both responses: %+v", v)
	}
}

// TestResponsesShellTaskNoConversation: a response that cannot be
// continued (store false) has no conversation to keep its computer for:
// the computer is deleted after the answer, its task with it (no leak).
func TestResponsesShellTaskNoConversation(t *testing.T) {
	e, _, key := shellTaskEnv(t, time.Minute)
	in, _ := json.Marshal([]any{map[string]any{"command": "sleep 300", "background": true}})
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": string(in), "tools": execTool, "store": false})
	var out responseObj
	r.json(t, &out)
	if r.code != 200 || out.Status != "completed" || !strings.HasPrefix(out.Output[0].Output, "task_id: proc_1\n") {
		t.Fatalf("response: %s", r)
	}
	cmp := out.Output[0].ContainerID
	eventually(t, 15*time.Second, "the computer of a response that is not stored ends", func() bool { return e.get(key, cmp).Status == "destroyed" })
	if r := e.destroyedReason(cmp); r != "deleted" {
		t.Fatalf("stop reason %q, want deleted", r)
	}
}

// TestExecShellTasks: builtin__computer_exec with background true starts a
// shell task (a background process) and answers at once; with task_id it
// answers the task's status and newest output, waiting up to
// timeout_seconds for its end; bad arguments are sentences (docs/tools.md).
func TestExecShellTasks(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	id := e.create(key, nil).ID
	call := func(args map[string]any) (string, bool) {
		t.Helper()
		r := e.do(key, "POST", "/v1/computers/"+id+"/tools/"+tools.ExecName, map[string]any{"arguments": args})
		var out struct {
			Output  string `json:"output"`
			IsError bool   `json:"is_error"`
		}
		r.json(t, &out)
		if r.code != 200 {
			t.Fatalf("tool call %v: %s", args, r)
		}
		return out.Output, out.IsError
	}
	begun := time.Now()
	out, failed := call(map[string]any{"command": "echo line1; echo line2; echo err >&2; sleep 2; exit 3", "background": true, "timeout_seconds": nil, "task_id": nil})
	if failed || !regexp.MustCompile(`^task_id: proc_1\npid: \d+\nstatus: running$`).MatchString(out) || time.Since(begun) > 1500*time.Millisecond {
		t.Fatalf("start (after %v): %q", time.Since(begun), out)
	}
	if out, _ := call(map[string]any{"task_id": "proc_1"}); !strings.HasPrefix(out, "task_id: proc_1\nstatus: running\nstdout:\n") {
		t.Fatalf("a running task: %q", out)
	}
	if out, _ := call(map[string]any{"task_id": "proc_1", "timeout_seconds": 20, "command": nil, "background": false}); out !=
		"task_id: proc_1\nstatus: exited\nexit_code: 3\nstdout:\nline1\nline2\n\nstderr:\nerr\n" {
		t.Fatalf("the task after waiting for its end: %q", out)
	}
	// A task with its own time limit.
	call(map[string]any{"command": "sleep 60", "background": true, "timeout_seconds": 1})
	if out, _ := call(map[string]any{"task_id": "proc_2", "timeout_seconds": 20}); out != "task_id: proc_2\nstatus: exited\ntimed out after 1 seconds\nstdout:\n\nstderr:\n" {
		t.Fatalf("a task past its limit: %q", out)
	}
	// The newest output, within the answer's 32 KiB.
	call(map[string]any{"command": "seq 1 100000", "background": true})
	out, _ = call(map[string]any{"task_id": "proc_3", "timeout_seconds": 20})
	m := regexp.MustCompile(`^task_id: proc_3\nstatus: exited\nexit_code: 0\n\[earlier output not shown: (\d+) bytes\]\nstdout:\n`).FindStringSubmatch(out)
	if m == nil || !strings.HasSuffix(out, "\n99999\n100000\n\nstderr:\n") || len(out) > tools.DefaultMaxAnswerBytes {
		t.Fatalf("a long output (%d bytes): %.300q … %q", len(out), out, out[max(0, len(out)-40):])
	}
	stdout := out[strings.Index(out, "\nstdout:\n")+len("\nstdout:\n") : strings.LastIndex(out, "\nstderr:\n")]
	if n, _ := strconv.Atoi(m[1]); n+len(stdout) != len(e.sh(key, id, "seq 1 100000")) {
		t.Fatalf("earlier output not shown: %s bytes, and %d shown", m[1], len(stdout))
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"task_id": "proc_99"}, "No such task in this computer: proc_99"},
		{map[string]any{"task_id": ""}, "Invalid arguments: task_id must not be empty."},
		{map[string]any{"task_id": strings.Repeat("x", 65)}, "Invalid arguments: task_id is not the id of a task."},
		{map[string]any{"task_id": "proc_1", "command": "ls"}, tools.BothCommandAndTaskSentence},
		{map[string]any{"task_id": "proc_1", "background": true}, tools.BackgroundWithTaskSentence},
		{map[string]any{"background": true}, "Invalid arguments: command is required."},
		{map[string]any{"command": " ", "background": true}, "Invalid arguments: command must not be empty."},
		{map[string]any{"task_id": "proc_1", "timeout_seconds": 0}, "Invalid arguments: timeout_seconds must be at least 1."},
		{map[string]any{"task_id": 7}, "Invalid arguments: task_id must be a string."},
	} {
		if out, failed := call(c.args); !failed || out != c.want {
			t.Errorf("%v: %q (failed %v), want %q", c.args, out, failed, c.want)
		}
	}
	var started []string
	for _, ev := range eventsOf(e.audit(key, "?type=computer.process_started"), id, "computer.process_started") {
		started = append(started, fmt.Sprint(ev.Data["process_id"]))
	}
	if slices.Sort(started); !slices.Equal(started, []string{"proc_1", "proc_2", "proc_3"}) {
		t.Fatalf("computer.process_started of the three tasks: %v", started)
	}
}
