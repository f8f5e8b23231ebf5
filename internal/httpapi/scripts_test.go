package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/scripts"
)

// scriptsSentence is the seed's (computers-api.md, "Computers via the API").
const scriptsSentence = "The same computer also runs your organisation's own programs, each offered as a single tool: see Scripts via the API. A script needs the `computer` capability, but not the three tools below."

// scriptOnlyCaps: the computer capability without the computer system
// tool, so none of the three computer tools.
const scriptOnlyCaps = `{"tooling":{"system_tools":[]},"computer":{}}`

// reportSource reads its arguments from stdin and prints them back with
// its name and working directory.
const reportSource = `import json, os, sys
a = json.load(sys.stdin)
print("rows for", a["region"], a.get("limit"), os.environ["CUBICLE_SCRIPT"], os.getcwd())
print("warn", file=sys.stderr)
`

// reportSchema is the report script's input schema.
var reportSchema = json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","enum":["north","south"]},"limit":{"type":"integer","minimum":1}},"required":["region"],"additionalProperties":false}`)

// reportScript is a registration body of the report script.
func reportScript() map[string]any {
	return map[string]any{"name": "report", "description": "Sales report of one region.", "input_schema": reportSchema,
		"interpreter": []string{"/usr/bin/python3"}, "source": reportSource}
}

// reportOutput is what the report script answers for {"region":"north","limit":3}.
const reportOutput = "exit_code: 0\nstdout:\nrows for north 3 report /workspace\n\nstderr:\nwarn\n"

// scriptObj is the script object.
type scriptObj struct {
	Object         string          `json:"object"`
	Name           string          `json:"name"`
	Tool           string          `json:"tool"`
	Description    string          `json:"description"`
	InputSchema    json.RawMessage `json:"input_schema"`
	Interpreter    []string        `json:"interpreter"`
	Source         *string         `json:"source"`
	TimeoutSeconds *int            `json:"timeout_seconds"`
	Version        int             `json:"version"`
}

// register creates a script with the admin key, failing the test otherwise.
func (e *env) register(key string, body map[string]any) scriptObj {
	e.t.Helper()
	r := e.do(key, "POST", "/v1/scripts", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("register: %s", r)
	}
	var s scriptObj
	r.json(e.t, &s)
	return s
}

// otherOrgAdmin makes an organisation allowing computers and an admin
// key in it.
func (e *env) otherOrgAdmin(name string) (org, secret string) {
	e.t.Helper()
	org = e.newOrg(name, true)
	_, secret, err := e.gov.CreateAdminKey(context.Background(), org, "admin-"+name)
	if err != nil {
		e.t.Fatal(err)
	}
	return org, secret
}

// TestScriptsRegister: an admin key registers, lists (paged, without
// source), gets, replaces (the version counts) and deletes its
// organisation's scripts; another key may not; another organisation's
// admin sees none of them (404) and may use the same name.
func TestScriptsRegister(t *testing.T) {
	e := newEnv(t, nil)
	s := e.register(e.admin, reportScript())
	if s.Object != "script" || s.Tool != "script__report" || s.Version != 1 || s.Source == nil || *s.Source != reportSource ||
		string(s.InputSchema) != string(reportSchema) || !slices.Equal(s.Interpreter, []string{"/usr/bin/python3"}) || s.TimeoutSeconds != nil {
		t.Fatalf("created: %+v", s)
	}
	if r := e.do(e.admin, "POST", "/v1/scripts", reportScript()); r.wantError(t, 409, "script_exists").Error.Param == nil {
		t.Fatalf("a second report: %s", r)
	}
	second := map[string]any{"name": "a-first", "description": "d", "input_schema": json.RawMessage(`{"type":"object"}`), "source": "echo hi\n"}
	if s := e.register(e.admin, second); !slices.Equal(s.Interpreter, []string{"/bin/sh"}) {
		t.Fatalf("the default interpreter: %+v", s)
	}
	r := e.do(e.admin, "GET", "/v1/scripts?limit=1", nil)
	var page struct {
		Data    []scriptObj `json:"data"`
		HasMore bool        `json:"has_more"`
		LastID  string      `json:"last_id"`
	}
	r.json(t, &page)
	if r.code != 200 || len(page.Data) != 1 || page.Data[0].Name != "a-first" || !page.HasMore || page.Data[0].Source != nil {
		t.Fatalf("first page: %s", r)
	}
	r = e.do(e.admin, "GET", "/v1/scripts?after="+page.LastID, nil)
	r.json(t, &page)
	if len(page.Data) != 1 || page.Data[0].Name != "report" || page.HasMore {
		t.Fatalf("second page: %s", r)
	}
	up := reportScript()
	up["description"], up["timeout_seconds"] = "Sales report, v2.", 5
	r = e.do(e.admin, "PUT", "/v1/scripts/report", up)
	r.json(t, &s)
	if r.code != 200 || s.Version != 2 || s.Description != "Sales report, v2." || s.TimeoutSeconds == nil || *s.TimeoutSeconds != 5 {
		t.Fatalf("replace: %s", r)
	}
	if r := e.do(e.admin, "GET", "/v1/scripts/report", nil); r.code != 200 || !strings.Contains(r.String(), `"version":2`) {
		t.Fatalf("get: %s", r)
	}
	_, user := e.newKey("", computerCaps)
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		path := "/v1/scripts"
		if m != "POST" {
			path += "/report"
		}
		e.do(user, m, path, reportScript()).wantError(t, 403, "")
	}
	_, other := e.otherOrgAdmin("other")
	e.do(other, "GET", "/v1/scripts/report", nil).wantError(t, 404, "")
	e.do(other, "PUT", "/v1/scripts/report", up).wantError(t, 404, "")
	e.do(other, "DELETE", "/v1/scripts/report", nil).wantError(t, 404, "")
	if r := e.do(other, "GET", "/v1/scripts", nil); r.code != 200 || !strings.Contains(r.String(), `"data":[]`) {
		t.Fatalf("the other organisation's list: %s", r)
	}
	e.register(other, reportScript())
	if r := e.do(e.admin, "DELETE", "/v1/scripts/report", nil); r.code != 204 {
		t.Fatalf("delete: %s", r)
	}
	e.do(e.admin, "GET", "/v1/scripts/report", nil).wantError(t, 404, "")
	e.do(e.admin, "DELETE", "/v1/scripts/report", nil).wantError(t, 404, "")
	if r := e.do(other, "GET", "/v1/scripts/report", nil); r.code != 200 {
		t.Fatalf("the other organisation's report after the delete: %s", r)
	}
	evs := e.audit(e.admin, "?type=script.replaced")
	if len(evs) != 1 || evs[0].Data["name"] != "report" || evs[0].Data["version"] != float64(2) {
		t.Fatalf("audit: %+v", evs)
	}
}

// TestScriptsRegisterRefused: a bad name, description, schema,
// interpreter, source or timeout is a 400 naming its field; nothing is
// stored.
func TestScriptsRegisterRefused(t *testing.T) {
	e := newEnv(t, nil)
	with := func(k string, v any) map[string]any {
		b := reportScript()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	cyclic := json.RawMessage(`{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`)
	for _, c := range []struct {
		body  map[string]any
		param string
		says  string
	}{
		{with("name", nil), "name", "name is required"},
		{with("name", "Report"), "name", "lowercase"},
		{with("name", "a/b"), "name", "lowercase"},
		{with("name", strings.Repeat("a", scripts.MaxNameLen+1)), "name", "the limit is 56"},
		{with("description", nil), "description", "description is required"},
		{with("description", strings.Repeat("d", scripts.MaxDescription+1)), "description", "the limit is 4096"},
		{with("input_schema", nil), "input_schema", "input_schema is required"},
		{with("input_schema", json.RawMessage(`{"type":"string"}`)), "input_schema", `"type" is "object"`},
		{with("input_schema", json.RawMessage(`{"type":"object","properties":{"x":{"type":"nope"}}}`)), "input_schema", "not a valid JSON Schema"},
		{with("input_schema", json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`)), "input_schema", "only local JSON pointers"},
		{with("input_schema", json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#"}}}`)), "input_schema", "recursive schemas"},
		{with("input_schema", cyclic), "input_schema", "recursive schemas"},
		{with("input_schema", json.RawMessage(`{"type":"object","$schema":"http://json-schema.org/draft-04/schema#"}`)), "input_schema", "2020-12 or draft-07"},
		{with("input_schema", json.RawMessage(`{"type":"object","description":"`+strings.Repeat("x", scripts.MaxSchemaBytes)+`"}`)), "input_schema", "the limit is 16384"},
		{with("interpreter", []string{}), "interpreter", "1 to 16 words"},
		{with("interpreter", []string{"python3"}), "interpreter[0]", "absolute path"},
		{with("interpreter", []string{"/usr/bin/python3", ""}), "interpreter[1]", "must not be empty"},
		{with("source", nil), "source", "source is required"},
		{with("source", strings.Repeat("#", scripts.MaxSourceBytes+1)), "source", "the limit is 262144"},
		{with("source", "a\x00b"), "source", "NUL"},
		{with("timeout_seconds", scripts.MaxTimeoutSeconds+1), "timeout_seconds", "1 to 3600"},
	} {
		r := e.do(e.admin, "POST", "/v1/scripts", c.body)
		got := r.wantError(t, 400, "")
		if got.Error.Param == nil || *got.Error.Param != c.param || !strings.Contains(got.Error.Message, c.says) {
			t.Errorf("param %q saying %q: %s", c.param, c.says, r)
		}
	}
	if r := e.do(e.admin, "GET", "/v1/scripts", nil); !strings.Contains(r.String(), `"data":[]`) {
		t.Fatalf("stored: %s", r)
	}
	e.register(e.admin, reportScript())
	e.do(e.admin, "PUT", "/v1/scripts/report", with("name", "other")).wantError(t, 400, "")
	e.do(e.admin, "PUT", "/v1/scripts/report", with("source", "")).wantError(t, 400, "")
	if r := e.do(e.admin, "GET", "/v1/scripts/report", nil); !strings.Contains(r.String(), `"version":1`) {
		t.Fatalf("a refused replace changed it: %s", r)
	}
}

// scriptTurn is a gateway whose model calls script__report with args and
// then answers "done"; seen returns the last tool messages it read.
func (e *env) scriptTurn(args string) (*scripted, func() []string) {
	up, seen := recorded(e.t, func(tm []string) any {
		if len(tm) == 0 {
			return toolCallsAnswer("script__report", args)
		}
		return chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	g, err := responses.New(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m"},
		responses.Deps{Computers: e.mgr, Store: e.st.Responses(), Scripts: scripts.New(e.st, e.gov)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.setGateway(g)
	return up, seen
}

// TestScriptsOffered is the seed's sentence (scriptsSentence): a key with
// the computer capability but not the computer system tool is offered
// its organisation's script as one tool (GET /v1/tools and the
// gateway's upstream request, without the three computer tools); the
// call runs it in the response's computer with the arguments on stdin
// and answers in the exec format; the call is audited like an exec.
func TestScriptsOffered(t *testing.T) {
	if !strings.Contains(scriptsSentence, "A script needs the `computer` capability, but not the three tools") {
		t.Fatal("the seed's sentence")
	}
	e := newEnv(t, nil)
	e.register(e.admin, reportScript())
	_, key := e.newKey("", scriptOnlyCaps)
	r := e.do(key, "GET", "/v1/tools", nil)
	defs := toolDefs(t, r)
	if last := defs[len(defs)-1].Function; len(defs) != 1 || last.Name != "script__report" || last.Strict ||
		string(last.Parameters) != string(reportSchema) {
		t.Fatalf("GET /v1/tools: %s", r)
	}
	up, seen := e.scriptTurn(`{"region":"north","limit":3}`)
	r = e.do(key, "POST", "/v1/responses", map[string]any{"input": "report north",
		"tools": []any{map[string]any{"type": "tool", "name": "script__*"}}})
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	if got := seen(); len(got) != 1 || got[0] != reportOutput {
		t.Fatalf("the model read %q, want %q", got, reportOutput)
	}
	if got := upstreamTools(up.rawRequest(0)); !slices.Equal(got, []string{"script__report strict=false"}) {
		t.Fatalf("offered: %v", got)
	}
	var out responseObj
	r.json(t, &out)
	if len(out.Output) != 2 || out.Output[0].Type != "tool_call" || out.Output[0].Name != "script__report" ||
		out.Output[0].Output != reportOutput || out.Output[0].Status != "completed" || !strings.HasPrefix(out.Output[0].ContainerID, "cmp_") {
		t.Fatalf("items: %s", r)
	}
	evs := e.audit(e.admin, "?type=computer.executed")
	if len(evs) != 1 || evs[0].Data["kind"] != "script" || evs[0].Data["script"] != "report" || evs[0].Data["version"] != float64(1) ||
		evs[0].Data["exit_code"] != float64(0) || evs[0].Data["status"] != "ok" || evs[0].ComputerID != out.Output[0].ContainerID {
		t.Fatalf("audit: %+v", evs)
	}
	if strings.Contains(string(must(json.Marshal(evs))), "north") {
		t.Fatal("the audit holds the arguments")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// upstreamTools are the names (with strict) of the tools an upstream
// request offered.
func upstreamTools(req map[string]any) []string {
	var out []string
	tl, _ := req["tools"].([]any)
	for _, t := range tl {
		fn, _ := t.(map[string]any)["function"].(map[string]any)
		s, _ := fn["strict"].(bool)
		name, _ := fn["name"].(string)
		if s {
			out = append(out, name+" strict=true")
		} else {
			out = append(out, name+" strict=false")
		}
	}
	return out
}

// TestScriptsRefusedInTurn: a key without the computer capability is not
// offered the script (GET /v1/tools; a request naming it is the 400 of a
// computer tool on a deployment without them); another organisation's
// request does not know it; deliver on it is 422; arguments that do not
// match its schema are a tool error the model reads, and the program
// does not run.
func TestScriptsRefusedInTurn(t *testing.T) {
	e := newEnv(t, nil)
	e.register(e.admin, reportScript())
	up, seen := e.scriptTurn(`{"region":"west"}`)
	_, noComputer := e.newKey("", `{"tooling":{"system_tools":[]}}`)
	if r := e.do(noComputer, "GET", "/v1/tools", nil); strings.Contains(r.String(), "script__report") {
		t.Fatalf("offered without the computer capability: %s", r)
	}
	tool := []any{map[string]any{"type": "tool", "name": "script__report"}}
	r := e.do(noComputer, "POST", "/v1/responses", map[string]any{"input": "x", "tools": tool})
	if got := r.wantError(t, 400, "computer_not_configured"); got.Error.Message != responses.NotConfiguredSentence {
		t.Fatalf("no computer capability: %s", r)
	}
	otherOrg, _ := e.otherOrgAdmin("other")
	_, otherKey := e.newKey(otherOrg, scriptOnlyCaps)
	if r := e.do(otherKey, "GET", "/v1/tools", nil); strings.Contains(r.String(), "script__report") {
		t.Fatalf("offered to another organisation: %s", r)
	}
	r = e.do(otherKey, "POST", "/v1/responses", map[string]any{"input": "x", "tools": tool})
	if got := r.wantError(t, 400, ""); got.Error.Param == nil || *got.Error.Param != "tools[0].name" {
		t.Fatalf("another organisation: %s", r)
	}
	_, key := e.newKey("", scriptOnlyCaps)
	r = e.do(key, "POST", "/v1/responses", map[string]any{"input": "x",
		"tools": []any{map[string]any{"type": "tool", "name": "script__report", "deliver": "computer"}}})
	if got := r.wantError(t, 422, "deliver_not_allowed"); *got.Error.Param != "tools[0].deliver" {
		t.Fatalf("deliver: %s", r)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"input": "x", "tools": []any{tool[0],
		map[string]any{"type": "function", "name": "script__report", "parameters": map[string]any{"type": "object"}}}})
	if got := r.wantError(t, 400, ""); *got.Error.Param != "tools" || !strings.Contains(got.Error.Message, "collides") {
		t.Fatalf("a client function of the script's name: %s", r)
	}
	if up.count() != 0 {
		t.Fatalf("%d upstream calls for refused requests", up.count())
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"input": "x", "tools": tool})
	got := seen()
	if r.code != 200 || len(got) != 1 || !strings.HasPrefix(got[0], "Invalid arguments: they do not match the script's input schema: ") ||
		!strings.Contains(got[0], "west") {
		t.Fatalf("bad arguments: %q %s", got, r)
	}
	var out responseObj
	r.json(t, &out)
	if out.Output[0].Status != "failed" {
		t.Fatalf("items: %s", r)
	}
}

// TestScriptsOnComputer: a script runs on a held computer through POST
// /v1/computers/{id}/tools/{name} (its own timeout_seconds, brought
// down to the computer's exec limit; an interpreter that is missing is
// a tool error), and POST /v1/tools/{name}/call refuses it as a computer
// tool (422).
func TestScriptsOnComputer(t *testing.T) {
	e := newEnv(t, nil)
	e.register(e.admin, reportScript())
	slow := map[string]any{"name": "slow", "description": "Sleeps.", "input_schema": json.RawMessage(`{"type":"object"}`),
		"source": "echo started; sleep 30\n", "timeout_seconds": 1}
	e.register(e.admin, slow)
	gone := map[string]any{"name": "gone", "description": "No interpreter.", "input_schema": json.RawMessage(`{"type":"object"}`),
		"interpreter": []string{"/usr/bin/no-such-interpreter"}, "source": "x\n"}
	e.register(e.admin, gone)
	_, key := e.newKey("", computerCaps)
	c := e.create(key, nil)
	call := func(name, args string) (string, bool) {
		t.Helper()
		a := e.tool(key, c.ID, name, args)
		return a.Output, a.IsError
	}
	if out, isErr := call("script__report", `{"region":"north","limit":3}`); out != reportOutput || isErr {
		t.Fatalf("report: %q", out)
	}
	if out, _ := call("script__slow", `{}`); out != "timed out after 1 seconds\nstdout:\nstarted\n\nstderr:\n" {
		t.Fatalf("slow: %q", out)
	}
	if out, isErr := call("script__gone", `{}`); out != "The script's interpreter was not found in the computer: /usr/bin/no-such-interpreter" || !isErr {
		t.Fatalf("gone: %q", out)
	}
	if out, isErr := call("script__report", `[1]`); out != "Invalid arguments: expected a JSON object." || !isErr {
		t.Fatalf("an array: %q", out)
	}
	e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/script__absent", map[string]any{}).wantError(t, 404, "")
	r := e.do(key, "POST", "/v1/tools/script__report/call", map[string]any{"arguments": `{"region":"north"}`})
	if r.code != 422 || !strings.Contains(r.String(), `"reason_code":"computer_tool_outside_turn"`) {
		t.Fatalf("outside a turn: %s", r)
	}
}
