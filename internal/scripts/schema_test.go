package scripts

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCompileSchema: local references that do not lead back into
// themselves are accepted and followed; recursion, remote references,
// $dynamicRef and a nested $id are refused before any validation runs
// (a reference cycle would recurse without end).
func TestCompileSchema(t *testing.T) {
	ok := `{"type":"object","$defs":{"day":{"type":"string","pattern":"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},"span":{"type":"object","properties":{"from":{"$ref":"#/$defs/day"},"to":{"$ref":"#/$defs/day"}},"required":["from","to"]}},"properties":{"span":{"$ref":"#/$defs/span"}},"required":["span"]}`
	cs, err := compileSchema(json.RawMessage(ok), true)
	if err != nil {
		t.Fatal(err)
	}
	rs := cs.rs
	for in, want := range map[string]bool{
		`{"span":{"from":"2026-01-01","to":"2026-02-01"}}`: true,
		`{"span":{"from":"2026-01-01","to":"soon"}}`:       false,
		`{"span":{"from":"2026-01-01"}}`:                   false,
	} {
		var v any
		json.Unmarshal([]byte(in), &v)
		if err := validate(rs, v); (err == nil) != want {
			t.Errorf("%s: %v, want valid %v", in, err, want)
		}
	}
	for schema, says := range map[string]string{
		`{"type":"object","$ref":"#"}`:                                                                              "recursive",
		`{"type":"object","properties":{"a":{"$ref":"#/properties"}}}`:                                              "recursive",
		`{"type":"object","$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"$ref":"#/$defs/a"}}}`:                 "recursive",
		`{"type":"object","$defs":{"a/b":{"$ref":"#/$defs/a~1b"}}}`:                                                 "recursive",
		`{"type":"object","properties":{"a":{"$ref":"other.json#/x"}}}`:                                             "local JSON pointers",
		`{"type":"object","properties":{"a":{"$ref":"#anchor"}}}`:                                                   "local JSON pointers",
		`{"type":"object","properties":{"a":{"$ref":3}}}`:                                                           "local JSON pointers",
		`{"type":"object","properties":{"a":{"type":"nope"}}}`:                                                      "not a valid JSON Schema",
		`{"type":"object","$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"minLength":-1}}}`: "not a valid JSON Schema",
		`{"type":"object","properties":{"a":{"$dynamicRef":"#x"}}}`:                                                 "not supported",
		`{"type":"object","properties":{"a":{"$id":"https://example.com/a"}}}`:                                      "only at the root",
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`:                                           "not a valid JSON Schema",
		`{"type":"object","required":"a"}`:                                                                          "not a valid JSON Schema",
		`[1]`:                                                                                                       `"type" is "object"`,
		`{"type":"object"`:                                                                                          "not JSON",
	} {
		_, err := compileSchema(json.RawMessage(schema), true)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", schema, err, says)
		}
	}
	deep := `{"type":"object","not":` + strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100) + `}`
	if _, err := compileSchema(json.RawMessage(deep), true); err == nil || !strings.Contains(err.Error(), "deeper than 64 levels") {
		t.Errorf("100 nested nots: %v", err)
	}
	// Each definition uses the next twice: 14 small definitions that
	// validation would visit 2^14 times.
	defs := map[string]any{"d14": map[string]any{"type": "string"}}
	for i := range 14 {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"allOf": []any{next, next}}
	}
	doubling, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs,
		"properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/d0"}}})
	if _, err := compileSchema(doubling, true); err == nil || !strings.Contains(err.Error(), "more than 4096 values") {
		t.Errorf("a doubling chain of $refs: %v", err)
	}
}

// TestCheckWork: the validator's work on one call is bounded by the
// schema's values times the arguments' (MaxCheckWork): 32,000 items each
// tried against 470 failing branches of an anyOf took 100 s of a core
// before the bound; now they are refused at once, and a few pass.
func TestCheckWork(t *testing.T) {
	var subs []any
	for i := range 470 {
		subs = append(subs, map[string]any{"maximum": -i - 1})
	}
	subs = append(subs, map[string]any{"type": "integer"})
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "array", "items": map[string]any{"anyOf": subs}}}})
	msg := checkArgs(schema, json.RawMessage(`{"a":[`+strings.Repeat("1,", 32000)+`1]}`))
	if !strings.HasPrefix(msg, "Invalid arguments: they hold 32003 JSON values, too many to check against this script's input schema (at most ") {
		t.Fatalf("32,000 items: %q", msg)
	}
	if msg := checkArgs(schema, json.RawMessage(`{"a":[1,2,3]}`)); msg != "" {
		t.Fatalf("3 items: %q", msg)
	}
}
