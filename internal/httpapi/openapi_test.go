package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// openAPIDoc is the served document, decoded as a client reads it.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// docOperations are the document's "METHOD /path" operations.
func docOperations(doc map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			out[strings.ToUpper(method)+" "+path] = op.(map[string]any)
		}
	}
	return out
}

// TestOpenAPIRoutes: every route registered in routes() is an operation of
// the document and every operation a registered route (the catch-all "/"
// aside: it answers the 404 and 405 of paths no route takes), each with
// the path parameters of its pattern.
func TestOpenAPIRoutes(t *testing.T) {
	a := New(Options{})
	registered := map[string]bool{}
	for _, p := range a.patterns {
		if p != "/" {
			registered[p] = true
		}
	}
	described := map[string]bool{}
	for _, op := range buildOpenAPI().ops {
		if described[op.route] {
			t.Errorf("%s is described twice", op.route)
		}
		described[op.route] = true
		if !strings.Contains(op.route, " ") && op.method == "" {
			t.Errorf("%s is registered without a method: say which the document describes", op.route)
		}
	}
	compareSets(t, registered, described, "route %q is served but not in the OpenAPI document (openapi.go)",
		"the OpenAPI document describes %q, which is not served (server.go)")
	// The document as served has exactly these operations.
	want := map[string]bool{}
	for _, op := range buildOpenAPI().ops {
		method, path := op.splitRoute()
		want[strings.ToUpper(method)+" "+path] = true
	}
	got := slices.Sorted(maps.Keys(docOperations(openAPIDoc(t))))
	if w := slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
		t.Errorf("served operations %v, want %v", got, w)
	}
}

// TestOpenAPIServed: GET /openapi.json needs no key and answers the document.
func TestOpenAPIServed(t *testing.T) {
	a := New(Options{})
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if !bytes.Equal(rec.Body.Bytes(), openAPIDocument()) {
		t.Error("GET /openapi.json is not the document")
	}
	if op := docOperations(openAPIDoc(t))["GET /openapi.json"]; op == nil || len(op["security"].([]any)) != 0 {
		t.Errorf("GET /openapi.json is not described as needing no key: %v", op)
	}
}

// TestOpenAPIDocument checks the document's structure as OpenAPI 3.1
// requires it: every $ref resolves, every component is used, every
// operation has a unique operationId, a known tag and responses with
// descriptions, and declares each path parameter of its path (and no
// other) as a required string.
func TestOpenAPIDocument(t *testing.T) {
	doc := openAPIDoc(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] == "" || info["version"] == "" {
		t.Errorf("info needs title and version: %v", info)
	}
	used := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				if _, err := resolve(doc, r); err != nil {
					t.Errorf("%s: %v", at, err)
				}
				used[r] = true
			}
			for k, x := range v {
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
	comps := doc["components"].(map[string]any)
	for kind, group := range comps {
		if kind == "securitySchemes" {
			continue
		}
		for name := range group.(map[string]any) {
			if r := "#/components/" + kind + "/" + name; !used[r] {
				t.Errorf("%s is not used", r)
			}
		}
	}
	tags := map[string]bool{}
	for _, tag := range doc["tags"].([]any) {
		tags[tag.(map[string]any)["name"].(string)] = true
	}
	ids := map[string]string{}
	for name, op := range docOperations(doc) {
		id, _ := op["operationId"].(string)
		if id == "" || ids[id] != "" {
			t.Errorf("%s: operationId %q is empty or also %s's", name, id, ids[id])
		}
		ids[id] = name
		for _, tag := range op["tags"].([]any) {
			if !tags[tag.(string)] {
				t.Errorf("%s: tag %q is not declared", name, tag)
			}
		}
		if s, _ := op["summary"].(string); s == "" {
			t.Errorf("%s has no summary", name)
		}
		resps, _ := op["responses"].(map[string]any)
		if len(resps) == 0 {
			t.Errorf("%s has no responses", name)
		}
		for code, r := range resps {
			if n, err := strconv.Atoi(code); err != nil || n < 100 || n > 599 {
				t.Errorf("%s: response %q", name, code)
			}
			r := r.(map[string]any)
			if ref, ok := r["$ref"].(string); ok {
				target, _ := resolve(doc, ref)
				r, _ = target.(map[string]any)
			}
			if d, _ := r["description"].(string); d == "" {
				t.Errorf("%s: response %s has no description", name, code)
			}
		}
		var inPath []string
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(name, -1) {
			inPath = append(inPath, m[1])
		}
		var declared []string
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			p := p.(map[string]any)
			switch p["in"] {
			case "path":
				if p["required"] != true {
					t.Errorf("%s: path parameter %v is not required", name, p["name"])
				}
				declared = append(declared, p["name"].(string))
			case "query", "header":
			default:
				t.Errorf("%s: parameter %v in %v", name, p["name"], p["in"])
			}
		}
		if !slices.Equal(inPath, declared) {
			t.Errorf("%s declares path parameters %v, want %v", name, declared, inPath)
		}
	}
}

// TestOpenAPISchemasMatchTypes checks each component schema derived from a
// Go type against what encoding/json makes of that type: a value with
// every field set has exactly the schema's properties, the zero value
// exactly its required ones, and both are valid against it (types,
// nullability, closed objects).
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	built := buildOpenAPI()
	doc := openAPIDoc(t)
	if len(built.schemas.types) < 30 {
		t.Fatalf("only %d component schemas come from Go types", len(built.schemas.types))
	}
	for name, typ := range built.schemas.types {
		s := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		props := slices.Sorted(maps.Keys(s["properties"].(map[string]any)))
		var required []string
		for _, r := range s["required"].([]any) {
			required = append(required, r.(string))
		}
		slices.Sort(required)

		full := fill(reflect.New(typ).Elem(), 0)
		fullJSON, fields := marshalKeys(t, full.Interface())
		if !slices.Equal(fields, props) {
			t.Errorf("%s (%v): the type has the fields %v, the schema %v", name, typ, fields, props)
		}
		zeroJSON, present := marshalKeys(t, reflect.New(typ).Elem().Interface())
		if !slices.Equal(present, required) {
			t.Errorf("%s (%v): the zero value has the fields %v, the schema requires %v", name, typ, present, required)
		}
		for _, b := range [][]byte{fullJSON, zeroJSON} {
			var v any
			json.Unmarshal(b, &v)
			for _, e := range validate(doc, map[string]any{"$ref": "#/components/schemas/" + name}, v, name) {
				t.Errorf("%s: %s", b, e)
			}
		}
	}
}

func marshalKeys(t *testing.T, v any) ([]byte, []string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%T is not a JSON object: %s", v, b)
	}
	return b, slices.Sorted(maps.Keys(m))
}

// fill sets every field of v, recursively: non-zero scalars, one element
// per slice and map, allocated pointers.
func fill(v reflect.Value, depth int) reflect.Value {
	if depth > 8 {
		return v
	}
	switch v.Type() {
	case timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return v
	case rawType:
		v.SetBytes([]byte(`{"x":1}`))
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.String:
		v.SetString("x")
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf("x"))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() && v.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
				// An embedded struct of an unexported type: its exported
				// fields are the JSON object's (encoding/json promotes them).
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			if f.CanSet() {
				fill(f, depth+1)
			}
		}
	}
	return v
}

// goldenRoutes are the operation and status of each body of
// testdata/golden (TestGolden*), checked against the document by
// TestOpenAPIGolden. The Kernel Gateway's (jupyter_*) are not
// described; error_no_route is the catch-all's.
var goldenRoutes = map[string]string{
	"admin_key_create": "POST /v1/admin/keys 201", "admin_key_list": "GET /v1/admin/keys 200",
	"admin_key_list_revoked": "GET /v1/admin/keys 200", "admin_org_create": "POST /v1/admin/orgs 201",
	"admin_org_list": "GET /v1/admin/orgs 200", "audit": "GET /v1/audit 200", "usage": "GET /v1/usage 200",
	"computer_create": "POST /v1/computers 201", "computer_get": "GET /v1/computers/{id} 200",
	"computer_deleted": "GET /v1/computers/{id} 200", "computer_list": "GET /v1/computers 200",
	"error_bad_json": "POST /v1/computers/{id}/exec 400", "error_unknown_field": "POST /v1/computers/{id}/exec 400",
	"error_exec_sse": "POST /v1/computers/{id}/exec 200", "error_forbidden": "GET /v1/admin/keys 403",
	"error_no_gateway": "POST /v1/responses 503", "error_not_found": "GET /v1/computers/{id} 404",
	"error_param": "GET /v1/audit 400", "error_unauthenticated": "GET /v1/computers 401", "error_no_route": "",
	"exec": "POST /v1/computers/{id}/exec 200", "exec_base64": "POST /v1/computers/{id}/exec 200",
	"exec_sse": "POST /v1/computers/{id}/exec 200", "exec_sse_base64": "POST /v1/computers/{id}/exec 200",
	"exec_background": "POST /v1/computers/{id}/exec 201",
	"file_put":        "PUT /v1/computers/{id}/files/{path} 201", "files_list": "GET /v1/computers/{id}/files 200",
	"process_start": "POST /v1/computers/{id}/processes 201", "process_list": "GET /v1/computers/{id}/processes 200",
	"process_get": "GET /v1/computers/{id}/processes/{pid} 200", "process_kill": "DELETE /v1/computers/{id}/processes/{pid} 200",
	"process_output": "GET /v1/computers/{id}/processes/{pid}/output 200", "process_output_base64": "GET /v1/computers/{id}/processes/{pid}/output 200",
	"process_output_sse": "GET /v1/computers/{id}/processes/{pid}/output 200",
	"process_stdin":      "POST /v1/computers/{id}/processes/{pid}/stdin 200", "process_signal": "POST /v1/computers/{id}/processes/{pid}/signal 200",
	"python": "POST /v1/computers/{id}/python 200", "python_sse": "POST /v1/computers/{id}/python 200",
	"responses_create": "POST /v1/responses 200", "responses_get": "GET /v1/responses/{id} 200",
	"responses_stream": "POST /v1/responses 200", "responses_error_param": "POST /v1/responses 400",
	"responses_error_not_found": "GET /v1/responses/{id} 404",
	"tool_exec":                 "POST /v1/computers/{id}/tools/{name} 200", "tool_write_file": "POST /v1/computers/{id}/tools/{name} 200",
	"tool_read_file": "POST /v1/computers/{id}/tools/{name} 200", "tool_python": "POST /v1/computers/{id}/tools/{name} 200",
}

// TestOpenAPIGolden validates every body pinned in testdata/golden (what
// the API really answers) against the document: the JSON against its
// operation's response schema, each SSE event's data against the
// schema of its event (x-events). A new golden body must be given its
// operation here.
func TestOpenAPIGolden(t *testing.T) {
	doc := openAPIDoc(t)
	files, _ := filepath.Glob("testdata/golden/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		if strings.HasPrefix(name, "jupyter_") {
			continue // the Kernel Gateway API is not described
		}
		route, ok := goldenRoutes[name]
		if !ok {
			t.Errorf("%s: give it its operation and status in goldenRoutes", f)
			continue
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if route == "" {
			checkSchemaJSON(t, doc, name, body, map[string]any{"$ref": "#/components/schemas/Error"})
			continue
		}
		i := strings.LastIndex(route, " ")
		content, err := answerContent(doc, route[:i], route[i+1:])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if bytes.HasPrefix(body, []byte("event: ")) || bytes.HasPrefix(body, []byte("id: ")) {
			media, _ := content["text/event-stream"].(map[string]any)
			if media == nil {
				t.Errorf("%s: %s answers no text/event-stream", name, route)
				continue
			}
			checkSchemaEvents(t, doc, name, body, media["x-events"].(map[string]any))
			continue
		}
		media, _ := content["application/json"].(map[string]any)
		if media == nil {
			t.Errorf("%s: %s answers no application/json", name, route)
			continue
		}
		checkSchemaJSON(t, doc, name, body, media["schema"].(map[string]any))
	}
}

// answerContent is the content (media type → media type object) of the
// answer with status of the operation "METHOD /path" of doc.
func answerContent(doc map[string]any, operation, status string) (map[string]any, error) {
	op := docOperations(doc)[operation]
	if op == nil {
		return nil, fmt.Errorf("no operation %s", operation)
	}
	r, ok := op["responses"].(map[string]any)[status].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s documents no status %s", operation, status)
	}
	if ref, ok := r["$ref"].(string); ok {
		res, err := resolve(doc, ref)
		if err != nil {
			return nil, err
		}
		r = res.(map[string]any)
	}
	content, _ := r["content"].(map[string]any)
	return content, nil
}

func checkSchemaJSON(t *testing.T, doc map[string]any, name string, body []byte, s map[string]any) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for _, e := range validate(doc, s, v, name) {
		t.Error(e)
	}
}

func checkSchemaEvents(t *testing.T, doc map[string]any, name string, body []byte, events map[string]any) {
	t.Helper()
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var event, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		s, ok := events[event].(map[string]any)
		if !ok && strings.HasPrefix(event, "response.") {
			s, ok = events["response.*"].(map[string]any)
		}
		if !ok {
			t.Errorf("%s: event %q is not described", name, event)
			continue
		}
		checkSchemaJSON(t, doc, name+" "+event, []byte(data), s)
	}
}

// TestOpenAPIQueryParameters: every query parameter a handler reads
// (q.Get("x"), r.URL.Query().Get("x"), timeParam(r, "x")) is a parameter
// of some operation of the document, and every documented one is read.
func TestOpenAPIQueryParameters(t *testing.T) {
	read := map[string]bool{}
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			// q["name"]: a repeated parameter.
			if ix, ok := n.(*ast.IndexExpr); ok {
				if x, ok := ix.X.(*ast.Ident); ok && x.Name == "q" {
					if lit, ok := ix.Index.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						read[name] = true
					}
				}
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			lit, ok := call.Args[len(call.Args)-1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name == "timeParam" || fn.Name == "boolParam" {
					read[name] = true
				}
			case *ast.SelectorExpr:
				if fn.Sel.Name != "Get" {
					return true
				}
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "q" {
					read[name] = true
				}
				if x, ok := fn.X.(*ast.CallExpr); ok {
					if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Query" {
						read[name] = true
					}
				}
			}
			return true
		})
	}
	if len(read) < 10 {
		t.Fatalf("found only the query parameters %v", read)
	}
	documented := map[string]bool{}
	for _, op := range docOperations(openAPIDoc(t)) {
		ps, _ := op["parameters"].([]any)
		for _, p := range ps {
			if p := p.(map[string]any); p["in"] == "query" {
				documented[p["name"].(string)] = true
			}
		}
	}
	compareSets(t, read, documented, "query parameter %q is read but not documented",
		"query parameter %q is documented but never read")
}

// compareSets reports each name of a that b lacks (notInB) and of b that
// a lacks (notInA).
func compareSets(t *testing.T, a, b map[string]bool, notInB, notInA string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !b[k] {
			t.Errorf(notInB, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if !a[k] {
			t.Errorf(notInA, k)
		}
	}
}

// resolve follows a local $ref.
func resolve(doc map[string]any, ref string) (any, error) {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("%s: not a local reference", ref)
	}
	var v any = doc
	for _, part := range strings.Split(path, "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s does not resolve", ref)
		}
		if v, ok = m[part]; !ok {
			return nil, fmt.Errorf("%s does not resolve", ref)
		}
	}
	return v, nil
}

// validate checks v against the JSON Schema s, in the subset the document
// uses: $ref, anyOf, type, const, properties, required,
// additionalProperties and items.
func validate(doc map[string]any, s map[string]any, v any, at string) []string {
	if r, ok := s["$ref"].(string); ok {
		target, err := resolve(doc, r)
		if err != nil {
			return []string{at + ": " + err.Error()}
		}
		return validate(doc, target.(map[string]any), v, at)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		var errs []string
		for _, alt := range alts {
			e := validate(doc, alt.(map[string]any), v, at)
			if len(e) == 0 {
				return nil
			}
			errs = append(errs, e...)
		}
		return []string{fmt.Sprintf("%s: matches none of anyOf: %v", at, errs)}
	}
	if c, ok := s["const"]; ok && !reflect.DeepEqual(c, v) {
		return []string{fmt.Sprintf("%s: %v, want %v", at, v, c)}
	}
	if typ, ok := s["type"]; ok {
		var types []any
		if ts, ok := typ.([]any); ok {
			types = ts
		} else {
			types = []any{typ}
		}
		if !slices.ContainsFunc(types, func(ty any) bool { return jsonTypeIs(v, ty.(string)) }) {
			return []string{fmt.Sprintf("%s: %v (%T) is not of type %v", at, v, v, typ)}
		}
	}
	var errs []string
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := v[r.(string)]; !ok {
					errs = append(errs, fmt.Sprintf("%s: %q is required", at, r))
				}
			}
		}
		for k, x := range v {
			if p, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(doc, p, x, at+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: %q is not in the schema", at, k))
				}
			case map[string]any:
				errs = append(errs, validate(doc, ap, x, at+"."+k)...)
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range v {
				errs = append(errs, validate(doc, items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func jsonTypeIs(v any, typ string) bool {
	switch typ {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	return false
}

// TestOpenAPIValidator validates the document with an OpenAPI validator
// (@seriousme/openapi-schema-validator: the specification's JSON Schemas
// for 3.1, and every $ref resolved), installed by scripts/testdeps.sh;
// and sees it refuse a broken copy.
func TestOpenAPIValidator(t *testing.T) {
	if _, err := os.Stat("testdata/openapi/node_modules/@seriousme/openapi-schema-validator"); err != nil {
		t.Fatalf("the OpenAPI validator is not installed (make test installs it: bash scripts/testdeps.sh): %v", err)
	}
	run := func(doc []byte) (string, error) {
		cmd := exec.CommandContext(t.Context(), "node", "validate.mjs")
		cmd.Dir = "testdata/openapi"
		cmd.Stdin = bytes.NewReader(doc)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(openAPIDocument()); err != nil || !strings.Contains(out, `"valid":true,"version":"3.1"`) {
		t.Fatalf("the document is not valid OpenAPI 3.1: %v\n%s", err, out)
	}
	broken := openAPIDoc(t)
	broken["paths"].(map[string]any)["/healthz"].(map[string]any)["get"].(map[string]any)["responses"] = []any{}
	b, _ := json.Marshal(broken)
	if out, err := run(b); err == nil {
		t.Fatalf("the validator accepts a document whose responses are a list: %s", out)
	}
}

// TestGoldenOpenAPI pins the document (testdata/golden/openapi.json), so
// a change of the API shows in review; -update rewrites it.
func TestGoldenOpenAPI(t *testing.T) {
	var want bytes.Buffer
	if err := json.Indent(&want, openAPIDocument(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	const file = "testdata/golden/openapi.json"
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(file, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s differs from the document served: run go test -run TestGoldenOpenAPI -update ./internal/httpapi/ and review the change", file)
	}
}
