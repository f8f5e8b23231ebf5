package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The OpenAPI 3.1 document of the REST API, served at GET /openapi.json
// without a key (it says nothing a deployment's docs do not). Paths and
// operations are the table below, one entry per route registered in
// routes() (server.go), keyed by the same pattern; bodies are the Go
// types the handlers decode and write, their schemas derived by
// reflection (openapi_schema.go). TestOpenAPI* fail when a route or a
// field is in the code and not in the document, or the reverse.
//
// Not described: the Jupyter Kernel Gateway API (/api/kernels…,
// /api/kernelspecs…, /kernelspecs/…), a Mount served by internal/jupyter:
// jupyter_server's protocol, with its own form of authentication
// ("Authorization: token <key>") and error shape, for Jupyter's own
// clients (docs/jupyter.md); and the catch-all "/" (the 404 and 405
// answers of paths no route takes).

// openAPIDocument is the document, built once.
var openAPIDocument = sync.OnceValue(func() []byte {
	b, err := json.Marshal(buildOpenAPI().doc)
	if err != nil {
		panic(err)
	}
	return b
})

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument())
}

// Who may call an operation.
const (
	authKey   = iota // any key (its capabilities decide the rest)
	authAdmin        // an admin key
	authNone         // no key
)

// apiOp is one operation.
type apiOp struct {
	route   string // the pattern as registered in routes()
	method  string // the method described of a route registered without one (/mcp)
	id      string // operationId
	tag     string
	summary string
	desc    string
	auth    int
	params  []schema // query and header parameters (path parameters come from route)
	body    schema   // the request body object; nil: none
	answers []opAnswer
	errs    []int // error statuses besides those every operation of its kind has
}

// opAnswer is one success response.
type opAnswer struct {
	status  int
	desc    string
	content schema // media type → media type object; nil: no body
}

// builtOpenAPI is the document and what the tests check it against.
type builtOpenAPI struct {
	doc     schema
	ops     []apiOp
	schemas *schemaGen
}

// oaErrorText describes each error status (docs/api.md has the codes).
var oaErrorText = map[int]string{
	400: "`invalid_request`: malformed JSON, an unknown field, a field name in another case, a key given twice or a bad value (`param` names it)",
	401: "`invalid_api_key`: a missing, unknown or revoked key",
	403: "`forbidden`: the key lacks the capability, the organisation does not allow it, or an admin endpoint without the admin key; or `denied_by_policy` (`Denied by policy.`)",
	404: "`not_found`: no such object in the key's organisation",
	408: "`request_timeout`: the request body sent no byte for `server.body_timeout_seconds`",
	409: "a conflict; `code` says which (`computer_gone`, `computer_paused`, `computer_not_paused`, `file_locked`, `stdin_closed`, `template_exists`, `template_in_use`, `volume_exists`, `volume_in_use`)",
	413: "`too_large`: a body, file or command line over its limit, or a computer's full disk",
	422: "a computer tool called outside a turn (`reason_code` says why)",
	429: "`capacity_exceeded` (`computers.max_concurrent` or `memory_budget`), `too_many_processes`, or too many volumes",
	503: "unavailable: `computer_unavailable`, `gateway_not_configured` or `secrets_key_unavailable`",
	502: "`port_refused` (nothing listens on the port in the computer) or `port_failed` (the app broke the connection)",
	507: "`insufficient_storage`: the server's own disk is full",
}

// oaErrorNames are the response components of the error statuses.
var oaErrorNames = map[int]string{400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
	408: "RequestTimeout", 409: "Conflict", 413: "TooLarge", 429: "TooManyRequests", 502: "BadGateway", 503: "Unavailable",
	507: "InsufficientStorage"}

// errorResponses are the response components of the errors: the one
// error shape, described by status.
func errorResponses() schema {
	out := schema{}
	for status, name := range oaErrorNames {
		out[name] = schema{"description": oaErrorText[status],
			"content": schema{"application/json": schema{"schema": oaRef("Error")}}}
	}
	return out
}

// oaWildcard matches a ServeMux wildcard of a pattern: {name} or {name...}.
var oaWildcard = regexp.MustCompile(`\{([a-z_]+)(\.\.\.)?\}`)

// splitRoute is a registered pattern's method (lower case; op.method for
// a pattern without one) and OpenAPI path.
func (op apiOp) splitRoute() (method, path string) {
	method, path, ok := strings.Cut(op.route, " ")
	if !ok {
		method, path = op.method, op.route
	}
	return strings.ToLower(method), oaWildcard.ReplaceAllString(path, "{$1}")
}

func buildOpenAPI() builtOpenAPI {
	g := newSchemaGen()
	ops := apiOps(g)
	paths := schema{}
	for _, op := range ops {
		method, path := op.splitRoute()
		item, _ := paths[path].(schema)
		if item == nil {
			item = schema{}
			paths[path] = item
		}
		item[method] = op.operation()
	}
	g.schemas["StreamData"] = oaStreamData
	g.schemas["Error"] = schema{"type": "object", "required": []string{"error"}, "additionalProperties": false,
		"properties": schema{"error": g.of(errhttp.Body{})}}
	doc := schema{
		"openapi": "3.1.0",
		"info": schema{
			"title":   "Cubicle",
			"version": "1",
			"summary": "A self-hosted sandbox for AI agents: computers, their files, processes and Python, OpenAI's Responses and Containers APIs, MCP.",
			"description": "Every `/v1` call takes `Authorization: Bearer <key>`. Errors are OpenAI's shape, `{\"error\":{\"type\",\"code\",\"message\",\"param\",\"request_id\"}}` (docs/api.md lists the codes). " +
				"Every path also answers 405 `method_not_allowed` (with `Allow`) for a method it does not serve, and any request may get 503 `too_many_connections` when `server.max_connections` are open. " +
				"Every response carries `X-Request-Id`. Not described here: the Jupyter Kernel Gateway API (`/api/kernels…`, `/api/kernelspecs…`, `/kernelspecs/…`: jupyter_server's protocol, authentication (`Authorization: token <key>`) and errors, docs/jupyter.md).",
		},
		"tags":     oaTags,
		"security": []any{schema{"bearer": []any{}}},
		"paths":    paths,
		"components": schema{
			"schemas": g.schemas,
			"securitySchemes": schema{"bearer": schema{"type": "http", "scheme": "bearer",
				"description": "A Cubicle key (`cub_…`); admin endpoints need an admin key."}},
			"responses": errorResponses(),
		},
	}
	return builtOpenAPI{doc: doc, ops: ops, schemas: g}
}

// operation is op's Operation Object.
func (op apiOp) operation() schema {
	o := schema{"operationId": op.id, "summary": op.summary, "tags": []any{op.tag}}
	if op.desc != "" {
		o["description"] = op.desc
	}
	params := []any{}
	for _, m := range oaWildcard.FindAllStringSubmatch(op.route, -1) {
		p := schema{"name": m[1], "in": "path", "required": true, "schema": schema{"type": "string"}}
		if m[2] != "" {
			p["description"] = "A path inside the computer, relative to /workspace or absolute; it may hold slashes."
		}
		params = append(params, p)
	}
	for _, p := range op.params {
		params = append(params, p)
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	errs := map[int]bool{}
	switch op.auth {
	case authNone:
		o["security"] = []any{}
	case authAdmin:
		errs[401], errs[403] = true, true
		o["description"] = strings.TrimSpace("Admin key only. " + op.desc)
	default:
		errs[401] = true
	}
	if op.body != nil {
		o["requestBody"] = op.body
		errs[408] = true
		if _, ok := op.body["content"].(schema)["application/json"]; ok {
			errs[400] = true
		}
	}
	for _, s := range op.errs {
		errs[s] = true
	}
	resps := schema{}
	for _, a := range op.answers {
		r := schema{"description": a.desc}
		if a.content != nil {
			r["content"] = a.content
		}
		resps[strconv.Itoa(a.status)] = r
	}
	for s := range errs {
		resps[strconv.Itoa(s)] = schema{"$ref": "#/components/responses/" + oaErrorNames[s]}
	}
	o["responses"] = resps
	return o
}

var oaTags = []any{
	schema{"name": "Meta", "description": "Health, readiness, metrics and this document."},
	schema{"name": "Computers", "description": "Computers: create, list, get, delete, lifetime, pause and resume."},
	schema{"name": "Exec", "description": "Run a command and wait for it."},
	schema{"name": "Processes", "description": "Background processes, their output, stdin and signals."},
	schema{"name": "Python", "description": "Cells in the computer's Jupyter kernel."},
	schema{"name": "Computer files", "description": "A computer's files under /workspace."},
	schema{"name": "Tools", "description": "The LLM tools (OpenAI function format) and their calls."},
	schema{"name": "Egress", "description": "Records of internet computers' connections."},
	schema{"name": "Containers", "description": "OpenAI's Containers API over computers."},
	schema{"name": "Scripts", "description": "The organisation's own programs, each offered as the tool script__<name> (admin key)."},
	schema{"name": "Templates", "description": "What computers are made from."},
	schema{"name": "Volumes", "description": "Named disks of the organisation that outlive computers."},
	schema{"name": "Ports", "description": "The computers' servers: what listens, a proxy to it, preview links."},
	schema{"name": "Files and artifacts", "description": "Uploaded files and the artifacts computers exported."},
	schema{"name": "Responses", "description": "OpenAI's Responses API, with tools run in computers."},
	schema{"name": "Usage and audit"},
	schema{"name": "MCP", "description": "The computers as MCP tools (docs/mcp.md)."},
	schema{"name": "Admin", "description": "Organisations, keys and domain secrets (admin key only)."},
}

// oaRef is a $ref to a component schema.
func oaRef(name string) schema { return schema{"$ref": "#/components/schemas/" + name} }

// oaQuery is a query parameter.
func oaQuery(name, typ, desc string) schema {
	return schema{"name": name, "in": "query", "description": desc, "schema": schema{"type": typ}}
}

// oaJSON is a required JSON request body.
func oaJSON(s schema) schema {
	return schema{"required": true, "content": schema{"application/json": schema{"schema": s}}}
}

// oaOptionalJSON is a JSON request body that may be left out.
func oaOptionalJSON(s schema, desc string) schema {
	return schema{"required": false, "description": desc, "content": schema{"application/json": schema{"schema": s}}}
}

// oaOctets is raw bytes.
var oaOctets = schema{"schema": schema{"type": "string", "contentMediaType": "application/octet-stream"}}

func oaAnswer(status int, desc string, s schema) opAnswer {
	return opAnswer{status, desc, schema{"application/json": schema{"schema": s}}}
}

func oaNoContent(desc string) opAnswer { return opAnswer{http.StatusNoContent, desc, nil} }

func oaRaw(desc string) opAnswer {
	return opAnswer{http.StatusOK, desc, schema{"application/octet-stream": oaOctets}}
}

// oaSSE adds the Server-Sent Events form of a (asked with Accept:
// text/event-stream): each event's data is JSON of its schema
// (x-events, by event name).
func oaSSE(a opAnswer, desc string, events schema) opAnswer {
	c := schema{}
	for k, v := range a.content {
		c[k] = v
	}
	events["error"] = oaRef("Error")
	c["text/event-stream"] = schema{"schema": schema{"type": "string", "description": desc}, "x-events": events}
	a.content = c
	return a
}

// oaBinary adds exec's binary stream to a (asked with its media type):
// frames of type(1) length(4, big-endian) payload.
func oaBinary(a opAnswer) opAnswer {
	a.content[binaryStream] = schema{"schema": schema{"type": "string", "format": "binary", "description": "Frames: type (1 byte: " +
		"0 keep-alive, 1 stdout, 2 stderr, 3 exit, 4 error), length (4 bytes, big-endian, at most 1 MiB), payload " +
		"(the output's bytes; exit and error: JSON as the SSE events')."}}
	return a
}

// oaList is {"object": "list", "data": [item…]}.
func oaList(item schema) schema {
	return schema{"type": "object", "required": []string{"data", "object"}, "additionalProperties": false,
		"properties": schema{"object": schema{"const": "list"}, "data": schema{"type": "array", "items": item}}}
}

// oaPage is a cursor page, OpenAI's shape (first_id and last_id are null,
// or absent, when it is empty).
func oaPage(item schema) schema {
	s := oaList(item)
	props := s["properties"].(schema)
	props["has_more"] = schema{"type": "boolean"}
	props["first_id"] = schema{"type": []any{"string", "null"}}
	props["last_id"] = schema{"type": []any{"string", "null"}}
	s["required"] = []string{"data", "has_more", "object"}
	return s
}

// oaRowPage is a page of numbered rows (usage, audit): first_id and
// last_id are row ids.
func oaRowPage(item schema) schema {
	s := oaPage(item)
	props := s["properties"].(schema)
	props["first_id"] = schema{"type": []any{"integer", "null"}}
	props["last_id"] = schema{"type": []any{"integer", "null"}}
	return s
}

// oaDeleted is {"id", "object": object, "deleted": true}.
func oaDeleted(object string) schema {
	return schema{"type": "object", "required": []string{"deleted", "id", "object"}, "additionalProperties": false,
		"properties": schema{"id": schema{"type": "string"}, "object": schema{"const": object}, "deleted": schema{"const": true}}}
}

// oaStatus is {"status": text}.
var oaStatus = schema{"type": "object", "required": []string{"status"}, "additionalProperties": false,
	"properties": schema{"status": schema{"type": "string"}}}

// oaStreamData is the data of a stdout or stderr event.
var oaStreamData = schema{"type": "object", "required": []string{"data"}, "additionalProperties": false,
	"properties": schema{"data": schema{"type": "string", "description": "Text, or base64 with encoding=base64."}}}

var (
	oaPagination = []schema{
		oaQuery("after", "string", "The last id of the previous page."),
		oaQuery("limit", "integer", "1 to 100, default 20."),
		oaQuery("order", "string", "`desc` (default: newest first) or `asc`."),
	}
	// oaListPagination are the page parameters of Cubicle's own lists.
	oaListPagination = []schema{
		oaQuery("after", "string", "The last id of the previous page."),
		oaQuery("limit", "integer", "1 to 1000, default 1000."),
		oaQuery("order", "string", "`asc` or `desc` (the list's default order is in its summary)."),
	}
	// oaRowPagination are the page parameters of numbered rows.
	oaRowPagination = []schema{
		oaQuery("after", "integer", "The last id of the previous page: rows with a larger id."),
		oaQuery("limit", "integer", "1 to 1000, default 1000."),
	}
	oaSSEAccept = "With `Accept: text/event-stream` the answer is Server-Sent Events."
)

func apiOps(g *schemaGen) []apiOp {
	computer, process := g.of(computerView{}), g.of(processView{})
	execEvents := func() schema {
		return schema{"stdout": oaRef("StreamData"), "stderr": oaRef("StreamData"), "exit": g.of(execAnswer{})}
	}
	secretRef := schema{"type": "object", "required": []string{"domain", "name"}, "additionalProperties": false,
		"properties": schema{"domain": schema{"type": "string"}, "name": schema{"type": "string"}}}
	return []apiOp{
		{route: "GET /openapi.json", id: "getOpenAPI", tag: "Meta", summary: "This OpenAPI 3.1 document", auth: authNone,
			answers: []opAnswer{oaAnswer(200, "The document.", schema{"type": "object"})}},
		{route: "GET /healthz", id: "health", tag: "Meta", summary: "Health: the process runs", auth: authNone,
			answers: []opAnswer{oaAnswer(200, "`{\"status\":\"ok\"}`", oaStatus)}},
		{route: "GET /readyz", id: "ready", tag: "Meta", summary: "Readiness: the isolation probe passed", auth: authNone,
			answers: []opAnswer{oaAnswer(200, "`{\"status\":\"ready\"}`", oaStatus), oaAnswer(503, "Starting: the probe has not passed yet.", oaStatus)}},
		{route: "GET /metrics", id: "metrics", tag: "Meta", summary: "Prometheus metrics", auth: authNone,
			answers: []opAnswer{{200, "Prometheus text exposition.", schema{"text/plain": schema{"schema": schema{"type": "string"}}}}}},

		{route: "POST /v1/computers", id: "createComputer", tag: "Computers", summary: "Create a computer",
			desc: "Limits are clamped to the key's and the deployment's caps, never refused; the answer's `limits` show what applies.",
			body: oaJSON(g.of(createBody{})), answers: []opAnswer{oaAnswer(201, "The computer.", computer)},
			errs: []int{403, 409, 429, 503, 507}},
		{route: "GET /v1/computers", id: "listComputers", tag: "Computers", summary: "List computers, oldest first",
			params: append([]schema{oaQuery("status", "string", "`all`: also stopped ones (default: alive only)."),
				oaQuery("response_id", "string", "Only the computer of this response.")}, oaListPagination...),
			answers: []opAnswer{oaAnswer(200, "A page of computers.", oaPage(computer))}, errs: []int{400, 403}},
		{route: "GET /v1/computers/{id}", id: "getComputer", tag: "Computers", summary: "Get a computer",
			answers: []opAnswer{oaAnswer(200, "The computer.", computer)}, errs: []int{403, 404}},
		{route: "DELETE /v1/computers/{id}", id: "deleteComputer", tag: "Computers", summary: "Delete a computer",
			desc:    "Answers once every process is killed and the stop recorded; the rest is freed in the background.",
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{404, 409, 503}},
		{route: "POST /v1/computers/{id}/lifetime", id: "extendComputer", tag: "Computers", summary: "Set a computer's lifetime from now",
			body: oaJSON(g.of(lifetimeBody{})), answers: []opAnswer{oaAnswer(200, "The computer.", computer)}, errs: []int{403, 404, 409}},
		{route: "POST /v1/computers/{id}/pause", id: "pauseComputer", tag: "Computers", summary: "Pause a computer, keeping its workspace",
			answers: []opAnswer{oaAnswer(200, "The computer, paused (with `python` when its kernel ran cells).", computer)},
			errs:    []int{403, 404, 409, 503, 507}},
		{route: "POST /v1/computers/{id}/resume", id: "resumeComputer", tag: "Computers", summary: "Resume a paused computer",
			answers: []opAnswer{oaAnswer(200, "The computer, ready again.", computer)}, errs: []int{403, 404, 409, 429, 503}},

		{route: "POST /v1/computers/{id}/exec", id: "exec", tag: "Exec", summary: "Run a command",
			desc: oaSSEAccept + " With `Accept: " + binaryStream + "`: the binary stream (frames of the exact bytes, docs/api.md)." +
				" With `background: true`: a background process, answered at once (201).",
			body: oaJSON(g.of(execBody{})),
			answers: []opAnswer{
				oaBinary(oaSSE(oaAnswer(200, "The result.", g.of(execAnswer{})), "stdout and stderr events, then exit (the result without the streamed text).", execEvents())),
				oaAnswer(201, "With `background: true`: the process.", process)},
			errs: []int{403, 404, 409, 413, 429, 503}},
		{route: "POST /v1/computers/{id}/processes", id: "startProcess", tag: "Processes", summary: "Start a background process",
			body: oaJSON(g.of(execBody{})), answers: []opAnswer{oaAnswer(201, "The process, running.", process)},
			errs: []int{403, 404, 409, 413, 429, 503}},
		{route: "GET /v1/computers/{id}/processes", id: "listProcesses", tag: "Processes", summary: "List background processes",
			params: oaPagination, answers: []opAnswer{oaAnswer(200, "A cursor page of processes.", oaPage(process))}, errs: []int{400, 403, 404, 409}},
		{route: "GET /v1/computers/{id}/processes/{pid}", id: "getProcess", tag: "Processes", summary: "Get a background process",
			answers: []opAnswer{oaAnswer(200, "The process.", process)}, errs: []int{403, 404, 409}},
		{route: "DELETE /v1/computers/{id}/processes/{pid}", id: "killProcess", tag: "Processes", summary: "Kill a background process's tree",
			answers: []opAnswer{oaAnswer(200, "The process, once it exited.", process)}, errs: []int{403, 404, 409}},
		{route: "GET /v1/computers/{id}/processes/{pid}/output", id: "processOutput", tag: "Processes", summary: "Read or follow a process's output",
			desc: oaSSEAccept + " Every byte from the offset on, following until the process exits; each event's `id` is an offset to re-attach from.",
			params: []schema{oaQuery("offset", "integer", "The first byte (default 0)."), oaQuery("limit", "integer", "1 to 1048576 bytes (default: all held)."),
				oaQuery("encoding", "string", "`utf-8` (default) or `base64`."),
				{"name": "Last-Event-ID", "in": "header", "description": "The offset to resume from, when `offset` is not given.", "schema": schema{"type": "integer"}}},
			answers: []opAnswer{oaSSE(oaAnswer(200, "The output.", g.of(processOutput{})), "stdout, stderr and dropped events, then exit (the process).",
				schema{"stdout": oaRef("StreamData"), "stderr": oaRef("StreamData"), "dropped": g.of(droppedEvent{}), "exit": process})},
			errs: []int{400, 403, 404, 409}},
		{route: "POST /v1/computers/{id}/processes/{pid}/stdin", id: "processStdin", tag: "Processes", summary: "Write to a process's stdin",
			body: oaJSON(g.of(stdinBody{})), answers: []opAnswer{oaAnswer(200, "What it took.", g.of(stdinAnswer{}))}, errs: []int{403, 404, 409, 413}},
		{route: "POST /v1/computers/{id}/processes/{pid}/signal", id: "signalProcess", tag: "Processes", summary: "Signal a process's group",
			body: oaJSON(g.of(signalBody{})), answers: []opAnswer{oaAnswer(200, "The process, after up to 2 s waiting for its exit.", process)},
			errs: []int{403, 404, 409}},

		{route: "POST /v1/computers/{id}/python", id: "python", tag: "Python", summary: "Run Python cells", desc: oaSSEAccept,
			body: oaJSON(g.of(pythonBody{})),
			answers: []opAnswer{oaSSE(oaAnswer(200, "The result.", g.of(pythonResult{})), "output events as they happen, then result (outputs null: already sent).",
				schema{"output": g.of(pythonOutputEvent{}), "result": g.of(pythonResult{})})},
			errs: []int{403, 404, 409, 503}},
		{route: "POST /v1/computers/{id}/python/interrupt", id: "pythonInterrupt", tag: "Python", summary: "Interrupt the session kernel (SIGINT)",
			body: oaOptionalJSON(schema{"type": "object", "additionalProperties": false}, "Empty, or `{}`."), answers: []opAnswer{oaNoContent("Interrupted.")},
			errs: []int{403, 404, 409}},
		{route: "POST /v1/computers/{id}/python/restart", id: "pythonRestart", tag: "Python", summary: "Restart the session kernel",
			body: oaOptionalJSON(schema{"type": "object", "additionalProperties": false}, "Empty, or `{}`."), answers: []opAnswer{oaNoContent("Restarted.")},
			errs: []int{403, 404, 409}},

		{route: "GET /v1/computers/{id}/files", id: "listComputerFiles", tag: "Computer files", summary: "List a directory (a page; recursive or not)",
			desc: "Entries sorted by name, each directory followed by its own with `recursive=true`; no symlink followed, no mount crossed.",
			params: []schema{oaQuery("dir", "string", "The directory (default /workspace)."),
				oaQuery("recursive", "boolean", "`true`: every directory below it too (at most 32 levels)."),
				oaQuery("limit", "integer", "1 to 1000 entries (default 1000)."), oaQuery("after", "string", "The `last_id` (a path) of the previous page.")},
			answers: []opAnswer{oaAnswer(200, "A page of the listing.", g.of(fileListing{}))}, errs: []int{400, 403, 404, 409, 413}},
		{route: "GET /v1/computers/{id}/watch", id: "watchComputerFiles", tag: "Computer files", summary: "Watch a directory's changes (server-sent events)",
			params: []schema{oaQuery("dir", "string", "The directory (default /workspace)."),
				oaQuery("recursive", "boolean", "`true`: every directory below it too, those made later included.")},
			answers: []opAnswer{oaSSE(opAnswer{200, "The changes, as they happen.", schema{}}, "watching first, then an event per change (create, modify, delete, move), overflow when events were dropped, end when the directory went.",
				schema{"watching": g.of(watchingEvent{}), "create": g.of(fileEvent{}), "modify": g.of(fileEvent{}), "delete": g.of(fileEvent{}),
					"move": g.of(fileEvent{}), "overflow": g.of(fileEvent{}), "end": g.of(watchEnd{})})},
			errs: []int{400, 403, 404, 409, 429}},
		{route: "PUT /v1/computers/{id}/files/{path...}", id: "putComputerFile", tag: "Computer files", summary: "Write a file",
			desc:    "Parents are created; the file is replaced atomically.",
			body:    schema{"required": true, "content": schema{"application/octet-stream": oaOctets}},
			answers: []opAnswer{oaAnswer(201, "Written.", g.of(fileWritten{}))}, errs: []int{400, 403, 404, 409, 413}},
		{route: "GET /v1/computers/{id}/files/{path...}", id: "getComputerFile", tag: "Computer files", summary: "Read a file, a directory as tar, or an entry's stat",
			params: []schema{oaQuery("format", "string", "`tar`: the directory at path as a tar archive (application/x-tar)."),
				oaQuery("stat", "boolean", "`true`: the entry itself (a symlink, not its target) as JSON.")},
			answers: []opAnswer{oaRaw("Its bytes; a tar archive with format=tar; the entry with stat=true.")}, errs: []int{400, 403, 404, 409, 413}},
		{route: "POST /v1/computers/{id}/files/move", id: "moveComputerFile", tag: "Computer files", summary: "Move or rename a file or directory",
			body: oaJSON(g.of(moveBody{})), answers: []opAnswer{oaAnswer(200, "The entry at its new path.", g.of(fileEntry{}))},
			errs: []int{400, 403, 404, 409}},
		{route: "POST /v1/computers/{id}/files/mkdir", id: "mkdirComputerFile", tag: "Computer files", summary: "Make a directory",
			body: oaJSON(g.of(mkdirBody{})), answers: []opAnswer{oaAnswer(201, "The directory.", g.of(fileEntry{}))},
			errs: []int{400, 403, 404, 409}},
		{route: "GET /v1/computers/{id}/ports", id: "listPorts", tag: "Ports", summary: "The TCP sockets listening in the computer",
			answers: []opAnswer{oaAnswer(200, "The listeners.", g.of(portsAnswer{}))}, errs: []int{403, 404, 409}},
		{route: "/v1/computers/{id}/ports/{port}", method: http.MethodGet, id: "portRoot", tag: "Ports", summary: "Redirect to the port's directory",
			desc: "Any method: a 308 to `…/ports/{port}/`.", auth: authNone,
			answers: []opAnswer{{http.StatusPermanentRedirect, "To the same path with a final slash.", nil}}},
		{route: "/v1/computers/{id}/ports/{port}/{path...}", method: http.MethodGet, id: "proxyPort", tag: "Ports", summary: "Proxy to a port of the computer",
			desc: "Any method, WebSocket upgrades too, to `http://127.0.0.1:{port}/{path}` inside the computer; authenticated with the key or a preview link's token.",
			auth: authNone, params: []schema{oaQuery("cubicle_token", "string", "A preview link's token (once; then its cookie).")},
			answers: []opAnswer{oaRaw("The app's answer.")}, errs: []int{400, 401, 404, 429, 502}},
		{route: "POST /v1/computers/{id}/links", id: "createLink", tag: "Ports", summary: "Make a preview link to a port",
			body: oaJSON(g.of(linkBody{})), answers: []opAnswer{oaAnswer(201, "The link, with its token (shown once).", g.of(linkAnswer{}))},
			errs: []int{400, 403, 404, 409, 429}},
		{route: "GET /v1/computers/{id}/links", id: "listLinks", tag: "Ports", summary: "The computer's preview links, oldest first",
			params:  oaListPagination,
			answers: []opAnswer{oaAnswer(200, "A page of the links, without tokens.", oaPage(g.of(portLink{})))}, errs: []int{400, 403, 404, 409}},
		{route: "DELETE /v1/computers/{id}/links/{link}", id: "deleteLink", tag: "Ports", summary: "Delete a preview link",
			answers: []opAnswer{oaAnswer(200, "Deleted.", oaDeleted("computer.link.deleted"))}, errs: []int{403, 404, 409}},
		{route: "GET /v1/computers/{id}/pty", id: "terminal", tag: "Exec", summary: "A terminal over a WebSocket",
			desc: "Upgrade to a WebSocket: binary messages are the terminal's bytes both ways, text messages JSON control (`resize` in, `exit` out).",
			params: []schema{oaQuery("command", "string", "A shell command (default: `/bin/bash -l`)."), oaQuery("argv", "string", "The program and its arguments, repeated."),
				oaQuery("cwd", "string", "The directory (default /workspace)."), oaQuery("env", "string", "NAME=value, repeated."),
				oaQuery("cols", "integer", "Columns, default 80."), oaQuery("rows", "integer", "Rows, default 24."),
				oaQuery("token", "string", "The key, for clients that cannot set a header on a WebSocket upgrade."),
				oaQuery("attach", "string", "A terminal's id (term_…): attach to it (its scrollback, then its output) instead of starting one.")},
			answers: []opAnswer{{http.StatusSwitchingProtocols, "Switched to a WebSocket.", nil}}, errs: []int{400, 403, 404, 409, 429}},
		{route: "GET /v1/computers/{id}/terminals", id: "listTerminals", tag: "Exec", summary: "The computer's terminals, oldest first",
			desc:   "Running, or ended or hung up within their grace period.",
			params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of terminals.", oaPage(g.of(terminalView{})))}, errs: []int{400, 403, 404, 409}},
		{route: "DELETE /v1/computers/{id}/terminals/{tid}", id: "deleteTerminal", tag: "Exec", summary: "Hang a terminal up",
			answers: []opAnswer{oaAnswer(200, "The terminal, once it ended (at most 5 s).", g.of(terminalView{}))}, errs: []int{403, 404, 409}},
		{route: "DELETE /v1/computers/{id}/files/{path...}", id: "deleteComputerFile", tag: "Computer files", summary: "Delete a file or directory (recursively)",
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{400, 403, 404, 409}},

		{route: "POST /v1/computers/{id}/tools/{name}", id: "callComputerTool", tag: "Tools", summary: "Call a tool in a computer",
			desc: "The answer is the fixed text the model sees; a refused call (`Denied by policy.`) is `is_error: true`.",
			body: oaJSON(g.of(toolCall{})), answers: []opAnswer{oaAnswer(200, "The tool's result.", g.of(toolAnswer{}))}, errs: []int{404, 409}},
		{route: "GET /v1/tools", id: "listTools", tag: "Tools", summary: "The tool definitions the key may use",
			desc:    "The built-in tools, then the organisation's scripts (`script__<name>`) for a key with the `computer` capability.",
			answers: []opAnswer{oaAnswer(200, "OpenAI function definitions.", oaList(g.of(tools.Definition{})))}},
		{route: "POST /v1/tools/{name}/call", id: "callTool", tag: "Tools", summary: "Call a tool outside a computer",
			desc: "Computer tools answer 422 (`reason_code`): they run only in a turn or on a computer.",
			body: oaJSON(g.of(toolCall{})), answers: []opAnswer{oaAnswer(200, "The tool's result.", g.of(toolAnswer{})),
				oaAnswer(422, oaErrorText[422], schema{"type": "object", "required": []string{"error", "reason_code"}, "additionalProperties": false,
					"properties": schema{"error": g.of(errhttp.Body{}), "reason_code": schema{"type": "string"}}})},
			errs: []int{404}},

		{route: "GET /v1/computers/{id}/egress", id: "listComputerEgress", tag: "Egress", summary: "A computer's egress records, oldest first",
			params: oaEgressParams(), answers: []opAnswer{oaAnswer(200, "A page of records.", oaPage(g.of(egressRecord{})))}, errs: []int{400, 403, 404}},
		{route: "GET /v1/computer-egress", id: "listEgress", tag: "Egress", summary: "The organisation's egress records, oldest first",
			params: oaEgressParams(), answers: []opAnswer{oaAnswer(200, "A page of records.", oaPage(g.of(egressRecord{})))}, errs: []int{400, 403}},

		{route: "POST /v1/containers", id: "createContainer", tag: "Containers", summary: "Create a container (a computer)",
			body: oaJSON(g.of(containerBody{})), answers: []opAnswer{oaAnswer(200, "The container.", g.of(containerView{}))},
			errs: []int{403, 429, 503, 507}},
		{route: "GET /v1/containers", id: "listContainers", tag: "Containers", summary: "List containers",
			params:  append([]schema{oaQuery("name", "string", "Only containers of this name.")}, oaPagination...),
			answers: []opAnswer{oaAnswer(200, "A cursor page of containers.", oaPage(g.of(containerView{})))}, errs: []int{400, 403}},
		{route: "GET /v1/containers/{id}", id: "getContainer", tag: "Containers", summary: "Get a container",
			answers: []opAnswer{oaAnswer(200, "The container.", g.of(containerView{}))}, errs: []int{403, 404}},
		{route: "DELETE /v1/containers/{id}", id: "deleteContainer", tag: "Containers", summary: "Delete a container",
			answers: []opAnswer{oaAnswer(200, "Deleted (also when it was already gone).", oaDeleted("container.deleted"))}, errs: []int{404, 503}},
		{route: "POST /v1/containers/{id}/files", id: "createContainerFile", tag: "Containers", summary: "Add a file to a container",
			desc: "Written to /workspace/<filename>, replacing a file of that name.",
			body: schema{"required": true, "content": schema{
				"multipart/form-data": schema{"schema": schema{"type": "object", "properties": schema{
					"file":    schema{"type": "string", "contentMediaType": "application/octet-stream", "description": "The file (its filename names it)."},
					"file_id": schema{"type": "string", "description": "One of the caller's uploaded files."}}}},
				"application/json": schema{"schema": g.of(containerFileBody{})}}},
			answers: []opAnswer{oaAnswer(200, "The container file.", g.of(containerFileView{}))}, errs: []int{403, 404, 409, 413}},
		{route: "GET /v1/containers/{id}/files", id: "listContainerFiles", tag: "Containers", summary: "List a container's files",
			params: oaPagination, answers: []opAnswer{oaAnswer(200, "A cursor page of files, by path.", oaPage(g.of(containerFileView{})))},
			errs: []int{400, 403, 404, 409}},
		{route: "GET /v1/containers/{id}/files/{file}", id: "getContainerFile", tag: "Containers", summary: "Get a container file",
			answers: []opAnswer{oaAnswer(200, "The container file.", g.of(containerFileView{}))}, errs: []int{403, 404, 409}},
		{route: "GET /v1/containers/{id}/files/{file}/content", id: "getContainerFileContent", tag: "Containers", summary: "A container file's bytes",
			answers: []opAnswer{oaRaw("Its bytes.")}, errs: []int{403, 404, 409}},
		{route: "DELETE /v1/containers/{id}/files/{file}", id: "deleteContainerFile", tag: "Containers", summary: "Delete a container file",
			answers: []opAnswer{oaAnswer(200, "Deleted.", oaDeleted("container.file.deleted"))}, errs: []int{403, 404, 409}},

		{route: "GET /v1/templates", id: "listTemplates", tag: "Templates", summary: "List templates: `host` first, then the store's by name",
			params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of templates (ids are names).", oaPage(g.of(templateView{})))}, errs: []int{400}},
		{route: "GET /v1/templates/{name}", id: "getTemplate", tag: "Templates", summary: "Get a template",
			answers: []opAnswer{oaAnswer(200, "The template.", g.of(templateView{}))}, errs: []int{404}},
		{route: "POST /v1/templates", id: "createTemplate", tag: "Templates", summary: "Build or pull a template",
			desc: oaSSEAccept + " Give `spec` (a build spec) or `pull` (an image reference).", auth: authAdmin,
			body: oaJSON(g.of(templateBody{})),
			answers: []opAnswer{oaSSE(oaAnswer(201, "The template.", g.of(templateView{})), "progress events, then template (or error).",
				schema{"progress": g.of(template.Progress{}), "template": g.of(templateView{})})},
			errs: []int{409, 413, 507}},
		{route: "DELETE /v1/templates/{name}", id: "deleteTemplate", tag: "Templates", summary: "Delete a template", auth: authAdmin,
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{400, 404, 409}},

		{route: "POST /v1/scripts", id: "createScript", tag: "Scripts", summary: "Register a script (a program offered as the tool script__<name>)",
			auth: authAdmin, body: oaJSON(g.of(scriptBody{})), answers: []opAnswer{oaAnswer(201, "The script.", g.of(scriptView{}))},
			errs: []int{400, 409}},
		{route: "GET /v1/scripts", id: "listScripts", tag: "Scripts", summary: "List the organisation's scripts, by name (without source)",
			auth: authAdmin, params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of scripts (ids are names).", oaPage(g.of(scriptView{})))},
			errs: []int{400}},
		{route: "GET /v1/scripts/{name}", id: "getScript", tag: "Scripts", summary: "Get a script",
			auth: authAdmin, answers: []opAnswer{oaAnswer(200, "The script.", g.of(scriptView{}))}, errs: []int{404}},
		{route: "PUT /v1/scripts/{name}", id: "replaceScript", tag: "Scripts", summary: "Replace a script (its version counts up)",
			auth: authAdmin, body: oaJSON(g.of(scriptBody{})), answers: []opAnswer{oaAnswer(200, "The script.", g.of(scriptView{}))},
			errs: []int{400, 404}},
		{route: "DELETE /v1/scripts/{name}", id: "deleteScript", tag: "Scripts", summary: "Delete a script",
			auth: authAdmin, answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{404}},

		{route: "POST /v1/volumes", id: "createVolume", tag: "Volumes", summary: "Create a volume",
			body: oaJSON(g.of(createVolumeBody{})), answers: []opAnswer{oaAnswer(201, "The volume.", g.of(volumeView{}))},
			errs: []int{403, 409, 429, 507}},
		{route: "GET /v1/volumes", id: "listVolumes", tag: "Volumes", summary: "List volumes, by name",
			params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of volumes (ids are names).", oaPage(g.of(volumeView{})))}, errs: []int{400, 403}},
		{route: "GET /v1/volumes/{name}", id: "getVolume", tag: "Volumes", summary: "Get a volume",
			answers: []opAnswer{oaAnswer(200, "The volume.", g.of(volumeView{}))}, errs: []int{403, 404}},
		{route: "DELETE /v1/volumes/{name}", id: "deleteVolume", tag: "Volumes", summary: "Delete a volume and its data",
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{403, 404, 409}},

		{route: "POST /v1/files", id: "uploadFile", tag: "Files and artifacts", summary: "Upload a file",
			desc:   "Multipart (`purpose` before `file`, as OpenAI's SDKs send) or raw bytes with `?filename=`.",
			params: []schema{oaQuery("filename", "string", "The file's name, for a raw body."), oaQuery("purpose", "string", "Its purpose, for a raw body.")},
			body: schema{"required": true, "content": schema{
				"multipart/form-data": schema{"schema": schema{"type": "object", "required": []string{"file"}, "properties": schema{
					"purpose": schema{"type": "string"},
					"file":    schema{"type": "string", "contentMediaType": "application/octet-stream"}}}},
				"application/octet-stream": oaOctets}},
			answers: []opAnswer{oaAnswer(200, "The file.", g.of(fileObject{}))}, errs: []int{400, 403, 404, 413, 507}},
		{route: "GET /v1/files", id: "listFiles", tag: "Files and artifacts", summary: "List uploaded files, newest first",
			params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of files.", oaPage(g.of(fileObject{})))}, errs: []int{400, 403, 404}},
		{route: "GET /v1/files/{id}", id: "getFile", tag: "Files and artifacts", summary: "Get a file",
			answers: []opAnswer{oaAnswer(200, "The file.", g.of(fileObject{}))}, errs: []int{403, 404}},
		{route: "GET /v1/files/{id}/content", id: "getFileContent", tag: "Files and artifacts", summary: "A file's bytes",
			answers: []opAnswer{oaRaw("Its bytes (Content-Disposition: attachment).")}, errs: []int{403, 404}},
		{route: "DELETE /v1/files/{id}", id: "deleteFile", tag: "Files and artifacts", summary: "Delete a file",
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{403, 404}},
		{route: "GET /v1/artifacts", id: "listArtifacts", tag: "Files and artifacts", summary: "List artifacts, newest first",
			params:  append([]schema{oaQuery("response_id", "string", "Only this response's."), oaQuery("computer_id", "string", "Only this computer's.")}, oaListPagination...),
			answers: []opAnswer{oaAnswer(200, "A page of artifacts.", oaPage(g.of(artifactObject{})))}, errs: []int{400, 403, 404}},
		{route: "GET /v1/artifacts/{id}", id: "getArtifact", tag: "Files and artifacts", summary: "Get an artifact",
			answers: []opAnswer{oaAnswer(200, "The artifact.", g.of(artifactObject{}))}, errs: []int{403, 404}},
		{route: "GET /v1/artifacts/{id}/content", id: "getArtifactContent", tag: "Files and artifacts", summary: "An artifact's bytes",
			answers: []opAnswer{oaRaw("Its bytes (Content-Disposition: attachment).")}, errs: []int{403, 404}},

		{route: "POST /v1/responses", id: "createResponse", tag: "Responses", summary: "Create a response (OpenAI's Responses API)",
			desc: "With `stream: true` the answer is Server-Sent Events, OpenAI's (`response.created` … `response.completed`). Output items are OpenAI's (message, function_call, code_interpreter_call) and Cubicle's tool_call.",
			body: oaJSON(g.of(responses.Request{})),
			answers: []opAnswer{oaSSE(oaAnswer(200, "The response.", g.of(responses.Response{})), "OpenAI's response events; each event's data is an object with its `type` and `sequence_number`.",
				schema{"response.*": schema{"type": "object", "required": []string{"type"}, "properties": schema{"type": schema{"type": "string"}}}})},
			errs: []int{403, 404, 429, 503}},
		{route: "GET /v1/responses", id: "responsesSocket", tag: "Responses", summary: "The Responses API over a WebSocket, or the stored responses",
			desc: "With a WebSocket upgrade: send `response.create` frames (a request's fields), receive the streaming events. " +
				"Without one: a page of the organisation's stored responses, newest first.",
			params: oaPagination,
			answers: []opAnswer{{http.StatusSwitchingProtocols, "Switched to a WebSocket.", nil},
				oaAnswer(200, "Without an upgrade: a cursor page of stored responses.", oaPage(g.of(responses.Response{})))},
			errs: []int{400, 503}},
		{route: "GET /v1/responses/{id}", id: "getResponse", tag: "Responses", summary: "Get a stored response",
			desc: "A background response as it is now. With `stream=true`: the events of a background response created with `stream: true`, after `starting_after`.",
			params: []schema{oaQuery("stream", "boolean", "`true`: the background response's events (Server-Sent Events)."),
				oaQuery("starting_after", "integer", "With stream: the events after this sequence number.")},
			answers: []opAnswer{oaSSE(oaAnswer(200, "The response.", g.of(responses.Response{})), "OpenAI's response events of a background response.",
				schema{"response.*": schema{"type": "object", "required": []string{"type"}, "properties": schema{"type": schema{"type": "string"}}}})},
			errs: []int{400, 404, 503}},
		{route: "POST /v1/responses/{id}/cancel", id: "cancelResponse", tag: "Responses", summary: "Cancel a background response",
			desc:    "A running background response ends `cancelled`; one that ended is returned as it is. A response created without `background` is a 400.",
			answers: []opAnswer{oaAnswer(200, "The response.", g.of(responses.Response{}))}, errs: []int{400, 404, 503}},
		{route: "DELETE /v1/responses/{id}", id: "deleteResponse", tag: "Responses", summary: "Delete a stored response",
			answers: []opAnswer{oaAnswer(200, "Deleted.", oaDeleted("response"))}, errs: []int{404}},

		{route: "GET /v1/usage", id: "usage", tag: "Usage and audit", summary: "The organisation's usage rows",
			params:  append([]schema{oaQuery("since", "integer", "Unix seconds."), oaQuery("until", "integer", "Unix seconds.")}, oaRowPagination...),
			answers: []opAnswer{oaAnswer(200, "A page of usage rows, by id.", oaRowPage(g.of(store.UsageRow{})))}, errs: []int{400}},
		{route: "GET /v1/audit", id: "audit", tag: "Usage and audit", summary: "The organisation's audit events",
			params: append([]schema{oaQuery("type", "string", "Only events of this type."), oaQuery("since", "integer", "Unix seconds."),
				oaQuery("until", "integer", "Unix seconds.")}, oaRowPagination...),
			answers: []opAnswer{oaAnswer(200, "A page of audit events, by id.", oaRowPage(g.of(store.Event{})))}, errs: []int{400}},

		{route: "/mcp", method: http.MethodPost, id: "mcp", tag: "MCP", summary: "MCP over streamable HTTP (stateless)",
			desc: "JSON-RPC messages of the Model Context Protocol: the computers as MCP tools, with the same key, limits and audit as the REST API (docs/mcp.md).",
			body: schema{"required": true, "content": schema{"application/json": schema{"schema": schema{"description": "A JSON-RPC request, notification or batch."}}}},
			answers: []opAnswer{{200, "The JSON-RPC answer, as JSON or Server-Sent Events.", schema{
				"application/json":  schema{"schema": schema{}},
				"text/event-stream": schema{"schema": schema{"type": "string"}}}},
				{http.StatusAccepted, "A notification or response was accepted.", nil}}},

		{route: "POST /v1/admin/orgs", id: "createOrg", tag: "Admin", summary: "Create an organisation", auth: authAdmin,
			body: oaJSON(g.of(createOrgBody{})), answers: []opAnswer{oaAnswer(201, "The organisation.", g.of(store.Org{}))}, errs: []int{409, 507}},
		{route: "GET /v1/admin/orgs", id: "listOrgs", tag: "Admin", summary: "List organisations, oldest first", auth: authAdmin,
			params: oaListPagination, answers: []opAnswer{oaAnswer(200, "A page of organisations.", oaPage(g.of(store.Org{})))}, errs: []int{400}},
		{route: "PATCH /v1/admin/orgs/{id}", id: "updateOrg", tag: "Admin", summary: "Change an organisation's switches or policy", auth: authAdmin,
			desc: "What is given changes; a `policy` replaces the whole policy.",
			body: oaJSON(g.of(orgSwitches{})), answers: []opAnswer{oaAnswer(200, "The organisation.", g.of(store.Org{}))}, errs: []int{404}},
		{route: "POST /v1/admin/orgs/{id}/domain_secrets", id: "setOrgSecret", tag: "Admin", summary: "Create or replace a domain secret", auth: authAdmin,
			body: oaJSON(g.of(domainSecret{})), answers: []opAnswer{oaAnswer(200, "The secret, without its value.", secretRef)}, errs: []int{404, 503}},
		{route: "GET /v1/admin/orgs/{id}/domain_secrets", id: "listOrgSecrets", tag: "Admin", summary: "List domain secrets (never values)", auth: authAdmin,
			answers: []opAnswer{oaAnswer(200, "The secrets.", oaList(secretRef))}, errs: []int{404}},
		{route: "DELETE /v1/admin/orgs/{id}/domain_secrets", id: "deleteOrgSecret", tag: "Admin", summary: "Delete a domain secret", auth: authAdmin,
			params:  []schema{oaQuery("domain", "string", "The secret's domain."), oaQuery("name", "string", "The secret's header name.")},
			answers: []opAnswer{oaNoContent("Deleted.")}, errs: []int{400, 404}},
		{route: "POST /v1/admin/keys", id: "createKey", tag: "Admin", summary: "Create a key", auth: authAdmin,
			desc: "The secret is shown once.",
			body: oaJSON(g.of(createKeyBody{})),
			answers: []opAnswer{oaAnswer(201, "The key and its secret.", schema{"type": "object", "required": []string{"key", "secret"}, "additionalProperties": false,
				"properties": schema{"key": g.of(store.Key{}), "secret": schema{"type": "string"}}})},
			errs: []int{404, 507}},
		{route: "GET /v1/admin/keys", id: "listKeys", tag: "Admin", summary: "List keys, oldest first", auth: authAdmin,
			params:  append([]schema{oaQuery("org_id", "string", "Only this organisation's.")}, oaListPagination...),
			answers: []opAnswer{oaAnswer(200, "A page of keys.", oaPage(g.of(store.Key{})))}, errs: []int{400}},
		{route: "PATCH /v1/admin/keys/{id}", id: "updateKey", tag: "Admin", summary: "Replace a key's policy", auth: authAdmin,
			body: oaJSON(g.of(keyPolicyBody{})), answers: []opAnswer{oaAnswer(200, "The key.", g.of(store.Key{}))}, errs: []int{404}},
		{route: "DELETE /v1/admin/keys/{id}", id: "revokeKey", tag: "Admin", summary: "Revoke a key", auth: authAdmin,
			answers: []opAnswer{oaNoContent("Revoked.")}, errs: []int{404}},
	}
}

func oaEgressParams() []schema {
	return []schema{
		oaQuery("host", "string", "Only this host (a name or an address)."),
		oaQuery("opened_after", "integer", "Unix seconds."), oaQuery("opened_before", "integer", "Unix seconds."),
		oaQuery("limit", "integer", "1 to 1000, default 100."), oaQuery("after", "string", "The last id of the previous page."),
	}
}
