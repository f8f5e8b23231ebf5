package httpapi_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/datastore"
)

// The seed's policy sentences (computers-api.md: "What a computer cannot
// do", "Rows delivered to the computer", "Regions"), each asserted by a
// test that quotes it when it fails.
const (
	seedMaskedKeyNoInternet = "Even with the switch you do not get such a computer if your policy names allowed regions or providers, restricts the hosts it may reach, or requires personal data to be redacted, or if your key redacts personal data."
	seedAllowedHostsOrg     = "An organisation that has configured allowed hosts is also refused."
	seedExceptionNoInternet = "A region exception does not change that; every computer call answers `Denied by policy.`."
	seedRowsUnredacted      = "A key that redacts personal data delivers the rows unredacted to the computer."
	seedPrintedRedacted     = "Whatever a command prints from them comes back to the model redacted, like any tool result."
	seedRegionOutside       = "If it lies outside, every computer call returns `Denied by policy.`, nothing is created and the refusal is in your audit trail."
	seedRegionException     = "Name `builtin:computer` as a region exception to allow computers anyway without opening up the whole region."
)

// piiText holds one datum of each kind internal/pii redacts; piiRedacted
// is the text as a model of a key that redacts personal data reads it.
const (
	piiText     = "jan@example.nl 06-12345678 NL91ABNA0417164300 4111 1111 1111 1111"
	piiRedacted = "[redacted email] [redacted phone] [redacted iban] [redacted card]"
)

// piiRaw are piiText's data: none may reach a model of such a key.
var piiRaw = []string{"jan@example.nl", "06-12345678", "NL91ABNA0417164300", "4111 1111 1111 1111", "4111111111111111"}

// wantNoPII fails when text holds one of piiRaw.
func wantNoPII(t *testing.T, what, text string) {
	t.Helper()
	for _, d := range piiRaw {
		if strings.Contains(text, d) {
			t.Fatalf("%s holds %q:\n%s", what, d, text)
		}
	}
}

// TestRedactPIIToolResults: with redact_pii in the organisation's policy
// every tool result of its keys is redacted where the computer's text
// enters it — a command's stdout and stderr, a file's text, Python's
// output and error, the structured cells too — while the REST API's own
// exec (no tool result: the client's program reads it) answers the bytes
// as they are. A key's own redact_pii does the same for that key alone.
func TestRedactPIIToolResults(t *testing.T) {
	e := newEnv(t, nil)
	org, key := e.newPolicyOrg("", false)
	c := e.create(key, nil)
	e.sh(key, c.ID, "printf '%s\\n' '"+piiText+"' > people.txt")
	exec := map[string]any{"command": "cat people.txt; cat people.txt >&2", "timeout_seconds": nil}
	if ans := e.tool(key, c.ID, "builtin__computer_exec", exec); ans.Output != "exit_code: 0\nstdout:\n"+piiText+"\n\nstderr:\n"+piiText+"\n" {
		t.Fatalf("without a policy the tool answers as it is: %q", ans.Output)
	}

	e.patchOrg(org, `{"policy":{"settings":{"redact_pii":true}}}`)
	if ans := e.tool(key, c.ID, "builtin__computer_exec", exec); ans.Output != "exit_code: 0\nstdout:\n"+piiRedacted+"\n\nstderr:\n"+piiRedacted+"\n" {
		t.Fatalf("exec: %q", ans.Output)
	}
	if ans := e.tool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "people.txt", "export": nil}); ans.Output != piiRedacted+"\n" {
		t.Fatalf("read_file: %q", ans.Output)
	}
	py := map[string]any{"cells": []any{map[string]any{"code": "print(open('people.txt').read().strip())\nraise ValueError('jan' + '@example.nl')", "title": nil}},
		"timeout": nil, "cwd": nil, "reset": nil}
	r := e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/python", map[string]any{"arguments": py})
	var ans toolAnswer
	r.json(t, &ans)
	raw := string(r.body)
	if !strings.Contains(ans.Output, piiRedacted) || !strings.Contains(ans.Output, "ValueError: [redacted email]") || !strings.Contains(raw, `"cells"`) {
		t.Fatalf("python: %s", raw)
	}
	wantNoPII(t, "python's answer with its cells", raw)
	// The computer keeps the data; the REST API's exec is no tool result.
	if out := e.sh(key, c.ID, "cat people.txt"); out != piiText+"\n" {
		t.Fatalf("REST exec: %q", out)
	}

	// A key's own redact_pii, in an organisation without it.
	e.patchOrg(org, `{"policy":{}}`)
	kid, masked := e.newKey(org, computerCaps)
	e.patchKey(kid, `{"policy":{"settings":{"redact_pii":true}}}`, http.StatusOK)
	if ans := e.tool(masked, c.ID, "builtin__computer_read_file", map[string]any{"path": "people.txt", "export": nil}); ans.Output != piiRedacted+"\n" {
		t.Fatalf("read_file by a key that redacts: %q", ans.Output)
	}
	if ans := e.tool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "people.txt", "export": nil}); ans.Output != piiText+"\n" {
		t.Fatalf("read_file by the organisation's other key: %q", ans.Output)
	}
}

// TestRedactPIIGateway: through the Responses gateway a key that redacts
// personal data gets every tool result redacted (code_interpreter, the
// computer tools, a datastore's rows), in what the model reads and in the
// items the client gets; delivered rows reach the computer unredacted.
// Quotes the seed: seedRowsUnredacted, seedPrintedRedacted.
func TestRedactPIIGateway(t *testing.T) {
	e := newEnv(t, nil)
	path := filepath.Join(t.TempDir(), "people.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, phone TEXT, card INTEGER, iban TEXT)`,
		`INSERT INTO people VALUES (1, 'Jan de Vries', 'jan@example.nl', '06-12345678', 4111111111111111, 'NL91ABNA0417164300')`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	// The model's own words hold no datum (whole-body checks below).
	up, seenBy := recorded(t, func(tm []string) any {
		switch len(tm) {
		case 0:
			return toolCallsAnswer("code_interpreter", `{"code":"print('jan' + '@example.nl')\nraise ValueError('06-' + '12345678')"}`)
		case 1:
			return toolCallsAnswer("shop__query", `{"sql":"SELECT email, phone, card, iban FROM people"}`)
		case 2:
			cmd := `cat /workspace/results/call_1.csv; grep -c 'jan[@]example[.]nl,06-1234' /workspace/results/call_1.csv`
			b, _ := json.Marshal(map[string]any{"command": cmd, "timeout_seconds": nil})
			return toolCallsAnswer("sql__people", `{}`, "builtin__computer_exec", string(b))
		}
		return chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{{Name: "shop", Path: path}},
		SQLTools: []datastore.SQLTool{{Name: "people", Datastore: "shop", Query: "SELECT id, name, email, phone, card, iban FROM people"}}})
	org, _ := e.newPolicyOrg("", false)
	kid, key := e.newKey(org, computerCaps)
	e.patchKey(kid, `{"policy":{"settings":{"redact_pii":true}}}`, http.StatusOK)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "people", "include": []string{"code_interpreter_call.outputs"},
		"tools": []any{ciTool[0], map[string]any{"type": "tool", "name": "builtin__computer_exec"},
			map[string]any{"type": "tool", "name": "shop__query"},
			map[string]any{"type": "tool", "name": "sql__people", "deliver": "computer"}}})
	if r.code != http.StatusOK {
		t.Fatalf("create: %s", r)
	}
	seen := seenBy()
	if len(seen) != 4 {
		t.Fatalf("the model saw %d tool results: %q", len(seen), seen)
	}
	if !strings.Contains(seen[0], "[redacted email]") || !strings.Contains(seen[0], "ValueError: [redacted phone]") {
		t.Errorf("code_interpreter: %q", seen[0])
	}
	if want := `{"columns":["email","phone","card","iban"],"rows":[["[redacted email]","[redacted phone]","[redacted card]","[redacted iban]"]],"row_count":1,"truncated":false}`; seen[1] != want {
		t.Errorf("rows answered:\n got %s\nwant %s", seen[1], want)
	}
	if want := `{"columns":["id","name","email","phone","card","iban"],"row_count":1,"truncated":false,"path":"/workspace/results/call_1.csv"}`; seen[2] != want {
		t.Errorf("rows delivered: %s", seen[2])
	}
	// seedRowsUnredacted: grep finds the raw row in the computer's file;
	// seedPrintedRedacted: what cat printed of it comes back redacted.
	if want := "exit_code: 0\nstdout:\nid,name,email,phone,card,iban\n1,Jan de Vries,[redacted email],[redacted phone],[redacted card],[redacted iban]\n1\n\nstderr:\n"; seen[3] != want {
		t.Errorf("%s\n%s\n got %q\nwant %q", seedRowsUnredacted, seedPrintedRedacted, seen[3], want)
	}
	for i, s := range seen {
		wantNoPII(t, "tool result "+string(rune('0'+i)), s)
	}
	wantNoPII(t, "the response", string(r.body))
}

// TestRedactPIIShellTasks: a shell task's output comes back redacted too,
// and the window of its newest output never shows a datum cut in two: a
// window that begins inside a line starts at the next one, and a running
// task's line that is not complete yet waits for its end.
func TestRedactPIIShellTasks(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newPolicyOrg(`{"settings":{"redact_pii":true}}`, false)
	id := e.create(key, nil).ID
	exec := func(args map[string]any) string {
		t.Helper()
		return e.tool(key, id, "builtin__computer_exec", args).Output
	}
	exec(map[string]any{"command": "printf 'mail jan@example.nl\\n'; printf 'NL91 ABNA'; sleep 60", "background": true})
	var out string
	eventually(t, 10*time.Second, "the task's first line", func() bool {
		out = exec(map[string]any{"task_id": "proc_1"})
		return strings.Contains(out, "mail [redacted email]\n")
	})
	if out != "task_id: proc_1\nstatus: running\nstdout:\nmail [redacted email]\n\nstderr:\n" {
		t.Fatalf("a running task's complete line only: %q", out)
	}
	// 4,000 lines of 27 bytes: the answer's window begins inside one.
	exec(map[string]any{"command": "yes 'jan@example.nl 06-12345678' | head -n 4000", "background": true})
	out = exec(map[string]any{"task_id": "proc_2", "timeout_seconds": 20})
	i, j := strings.Index(out, "\nstdout:\n"), strings.LastIndex(out, "\nstderr:\n")
	if i < 0 || j < i {
		t.Fatalf("a long task: %q", out)
	}
	body := out[i+len("\nstdout:\n") : j]
	if !strings.Contains(out, "status: exited") || !strings.Contains(out, "[earlier output not shown: ") || len(body) < 30000 ||
		strings.Trim(strings.ReplaceAll(body, "[redacted email] [redacted phone]\n", ""), "\n") != "" || len(out) > 32<<10 {
		t.Fatalf("a long task's window holds more than whole redacted lines (%d bytes):\n%.400q … %q", len(out), out, out[max(0, len(out)-100):])
	}
}

// TestRedactPIIScripts: an organisation's script is a tool like the
// others ("its answer uses the exec format"): what it prints comes back
// to the model of a key that redacts personal data redacted.
func TestRedactPIIScripts(t *testing.T) {
	e := newEnv(t, nil)
	script := reportScript()
	script["source"] = "print('contact: jan' + '@example.nl, 06-' + '12345678')\n"
	e.register(e.admin, script)
	kid, key := e.newKey("", scriptOnlyCaps)
	e.patchKey(kid, `{"policy":{"settings":{"redact_pii":true}}}`, http.StatusOK)
	_, seen := e.scriptTurn(`{"region":"north"}`)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "contacts", "tools": []any{map[string]any{"type": "tool", "name": "script__report"}}})
	if want := "exit_code: 0\nstdout:\ncontact: [redacted email], [redacted phone]\n\nstderr:\n"; r.code != 200 || len(seen()) != 1 || seen()[0] != want {
		t.Fatalf("the model read %q, want %q: %s", seen(), want, r)
	}
	wantNoPII(t, "the response", string(r.body))
}
