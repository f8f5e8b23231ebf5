package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// codeFromInput is a scripted upstream that runs the last user message as
// code_interpreter code, then answers with what the tool printed.
func codeFromInput(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		if last["role"] == "tool" {
			s, _ := last["content"].(string)
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "printed: " + s})
		}
		code, _ := last["content"].(string)
		args, _ := json.Marshal(map[string]string{"code": code})
		return 200, toolCallAnswer("code_interpreter", string(args))
	})
}

// TestResponsesReuseComputer (gateway.reuse_computers): a response
// continuing another (previous_response_id) runs in the same computer,
// with its Python state, while it lives; the kept computer ends after its
// idle time. An explicit container id runs the code in that computer,
// which is not deleted after the answer.
func TestResponsesReuseComputer(t *testing.T) {
	e := newEnv(t, nil)
	e.withGatewayConfig(responses.Config{UpstreamURL: codeFromInput(t).srv.URL + "/v1", Model: "m",
		ReuseComputers: true, ComputerIdle: 3 * time.Second})
	_, key := e.newKey("", computerCaps)
	ask := func(input string, extra map[string]any) responseObj {
		t.Helper()
		body := map[string]any{"model": "m", "input": input, "tools": ciTool}
		for k, v := range extra {
			body[k] = v
		}
		r := e.do(key, "POST", "/v1/responses", body)
		var out responseObj
		r.json(t, &out)
		if r.code != http.StatusOK || out.Status != "completed" || len(out.Output) != 2 {
			t.Fatalf("response: %s", r)
		}
		return out
	}
	first := ask("x = 41", nil)
	second := ask("print(x + 1)", map[string]any{"previous_response_id": first.ID})
	if id := first.Output[0].ContainerID; second.Output[0].ContainerID != id || !strings.Contains(second.Output[1].Content[0].Text, "42") {
		t.Fatalf("continued in %s (first %s): %+v", second.Output[0].ContainerID, id, second.Output[1])
	}
	kept := first.Output[0].ContainerID
	if v := e.get(key, kept); v.Status != "ready" || v.Limits.IdleTimeoutSeconds != 3 {
		t.Fatalf("the kept computer: %+v", v)
	}
	// An explicit container: the code runs there, and it stays.
	explicit := e.create(key, nil)
	e.sh(key, explicit.ID, "echo 7 > /workspace/seven")
	tool := []map[string]any{{"type": "code_interpreter", "container": explicit.ID}}
	third := ask("print(open('/workspace/seven').read().strip())", map[string]any{"tools": tool})
	if third.Output[0].ContainerID != explicit.ID || e.get(key, explicit.ID).Status != "ready" {
		t.Fatalf("explicit container: %+v", third.Output[0])
	}
	// Idle, the kept computer ends; the chain goes on in a new one.
	eventually(t, 15*time.Second, "the kept computer ends when idle", func() bool { return e.get(key, kept).Status == "destroyed" })
	fourth := ask("print('x' in dir())", map[string]any{"previous_response_id": second.ID})
	if fourth.Output[0].ContainerID == kept {
		t.Fatalf("continued in the ended computer %s", kept)
	}
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "1",
		"tools": []map[string]any{{"type": "code_interpreter", "container": "cmp_000000000000000000000000"}}})
	if r.code == http.StatusOK {
		var out responseObj
		r.json(t, &out)
		if out.Status == "completed" {
			t.Fatalf("a container that does not exist: %s", r)
		}
	}
}
