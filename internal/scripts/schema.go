package scripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Bounds of an input schema: its compact JSON, and how many JSON values
// validating one argument may visit with every $ref followed (a chain of
// $defs that each use the next twice doubles at each step).
const (
	MaxSchemaBytes    = 16 << 10
	MaxSchemaExpanded = 4096
	// MaxSchemaDepth bounds how deep a schema's JSON nests (a property
	// of an object property is 4 deep: properties, name, properties,
	// name); the validator's cost grows with the square of it.
	MaxSchemaDepth = 64
	// MaxCheckWork bounds checking one call's arguments: the schema's
	// values (with its $refs followed) times the arguments' JSON values.
	// Each pair is checked at most once, so this bounds the validator's
	// work (about 1 s of a core at its worst: a failing anyOf branch
	// costs microseconds).
	MaxCheckWork = 250_000
)

// compiled is a checked input schema.
type compiled struct {
	schema json.RawMessage // compact
	rs     *jsonschema.Resolved
	// expanded counts its JSON values with every $ref followed.
	expanded int
}

// schemaVersions are the $schema values a schema may name (none: 2020-12).
var schemaVersions = []string{"https://json-schema.org/draft/2020-12/schema",
	"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#"}

// compileSchema checks raw as a tool's input schema and compiles it: a
// JSON object of at most MaxSchemaBytes and MaxSchemaDepth whose type is
// "object", a valid JSON Schema (2020-12 or draft-07; checked against its
// meta-schema when meta: at registration, not again at each call) whose
// references are local JSON pointers ("#/$defs/…") that never lead back
// into themselves. It returns the compiled schema, or an error saying
// what is wrong.
func compileSchema(raw json.RawMessage, meta bool) (*compiled, error) {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, fmt.Errorf("input_schema is required: a JSON Schema object such as {\"type\":\"object\",\"properties\":{…}}")
	}
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("input_schema is not JSON: %v", err)
	}
	if buf.Len() > MaxSchemaBytes {
		return nil, fmt.Errorf("input_schema is %d bytes; the limit is %d", buf.Len(), MaxSchemaBytes)
	}
	compact := json.RawMessage(buf.Bytes())
	var doc any
	if err := json.Unmarshal(compact, &doc); err != nil {
		return nil, fmt.Errorf("input_schema is not JSON: %v", err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil, fmt.Errorf(`input_schema must be a JSON Schema whose "type" is "object" (a tool's arguments are one object)`)
	}
	if v, ok := root["$schema"]; ok {
		if s, _ := v.(string); !slices.Contains(schemaVersions, s) {
			return nil, fmt.Errorf("input_schema.$schema must be JSON Schema 2020-12 or draft-07, got %v", v)
		}
	}
	n, err := checkRefs(doc)
	if err != nil {
		return nil, err
	}
	if meta {
		if props, _ := root["properties"].(map[string]any); props != nil {
			if _, ok := props[ReservedProperty]; ok {
				return nil, fmt.Errorf("input_schema.properties.%s is reserved: MCP passes the computer's id in it (name the property otherwise)", ReservedProperty)
			}
		}
		if err := checkMeta(root); err != nil {
			return nil, err
		}
	}
	rs, err := resolve(compact)
	if err != nil {
		return nil, err
	}
	return &compiled{schema: compact, rs: rs, expanded: n}, nil
}

// resolve unmarshals and resolves a schema; a panic of the library is
// an invalid schema, never the server's.
func resolve(compact json.RawMessage) (rs *jsonschema.Resolved, err error) {
	defer func() {
		if r := recover(); r != nil {
			rs, err = nil, fmt.Errorf("input_schema is not a valid JSON Schema")
		}
	}()
	var s jsonschema.Schema
	if err := json.Unmarshal(compact, &s); err != nil {
		return nil, fmt.Errorf("input_schema is not a valid JSON Schema: %v", err)
	}
	rs, err = s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input_schema is not a valid JSON Schema: %v", err)
	}
	return rs, nil
}

// validate checks an instance against a compiled schema; a panic of the
// library is a failed validation.
func validate(rs *jsonschema.Resolved, instance any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the schema could not be checked")
		}
	}()
	return rs.Validate(instance)
}

// ref is one "$ref": where it is and the pointer it names.
type ref struct{ at, target []string }

// checkRefs refuses what would make validation unbounded or reach
// outside the schema: $dynamicRef and $recursiveRef, an $id below the
// root, a $ref that is not a local JSON pointer ("#", "#/…"), references
// that lead back into themselves (a recursive schema), and references
// that expand the schema past MaxSchemaExpanded values. Every object is
// looked at, data in enum or const too: a refusal there is
// conservative, never unsafe.
func checkRefs(doc any) (int, error) {
	var refs []ref
	sizes := map[string]int{} // the JSON values under each location
	var walk func(v any, at []string) (int, error)
	walk = func(v any, at []string) (int, error) {
		if len(at) > MaxSchemaDepth {
			return 0, fmt.Errorf("input_schema nests deeper than %d levels (at %s)", MaxSchemaDepth, pointer(at[:8]))
		}
		n := 1
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if err := checkKeyword(k, child, at, &refs); err != nil {
					return 0, err
				}
				c, err := walk(child, append(at, k))
				if err != nil {
					return 0, err
				}
				n += c
			}
		case []any:
			for i, child := range v {
				c, err := walk(child, append(at, fmt.Sprint(i)))
				if err != nil {
					return 0, err
				}
				n += c
			}
		}
		sizes[key(at)] = n
		return n, nil
	}
	if _, err := walk(doc, nil); err != nil {
		return 0, err
	}
	if cyclic(refs) {
		return 0, fmt.Errorf("input_schema: its $refs lead back into themselves (recursive schemas are not supported)")
	}
	n := expanded(nil, refs, sizes, map[string]int{})
	if n > MaxSchemaExpanded {
		return 0, fmt.Errorf("input_schema: with its $refs followed it has more than %d values (%d); use fewer references", MaxSchemaExpanded, n)
	}
	return n, nil
}

// values counts the JSON values of a decoded document.
func values(v any) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			n += values(c)
		}
	case []any:
		for _, c := range v {
			n += values(c)
		}
	}
	return n
}

// checkKeyword checks one key of a schema object at at, collecting a $ref.
func checkKeyword(k string, v any, at []string, refs *[]ref) error {
	switch k {
	case "$dynamicRef", "$recursiveRef":
		return fmt.Errorf("input_schema: %s is not supported (at %s)", k, pointer(at))
	case "$id":
		if len(at) > 0 {
			return fmt.Errorf("input_schema: $id is accepted only at the root (at %s)", pointer(at))
		}
	case "$ref":
		s, _ := v.(string)
		target, err := localPointer(s)
		if err != nil {
			return fmt.Errorf("input_schema: $ref at %s: %v", pointer(at), err)
		}
		*refs = append(*refs, ref{at: slices.Clone(at), target: target})
	}
	return nil
}

// expanded is how many values validating the subtree at at may visit:
// its own, and for each $ref in it those of its target, expanded too
// (memo by location; refs are acyclic; the sum saturates past the bound).
func expanded(at []string, refs []ref, sizes, memo map[string]int) int {
	k := key(at)
	if n, ok := memo[k]; ok {
		return n
	}
	n := sizes[k]
	for _, r := range refs {
		if hasPrefix(r.at, at) && n <= MaxSchemaExpanded {
			n += expanded(r.target, refs, sizes, memo)
		}
	}
	memo[k] = n
	return n
}

// key is a location as a map key.
func key(at []string) string { return strings.Join(at, "\x00") }

// localPointer decodes a $ref that is a JSON pointer into the schema
// itself ("#" or "#/a/b", RFC 6901 in a URI fragment).
func localPointer(s string) ([]string, error) {
	frag, ok := strings.CutPrefix(s, "#")
	if !ok || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return nil, fmt.Errorf("only local JSON pointers (\"#/$defs/name\") are supported, got %q", s)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid pointer", s)
	}
	if frag == "" {
		return []string{}, nil
	}
	parts := strings.Split(frag[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// cyclic reports whether following references can come back to one:
// validating a $ref's target reaches every $ref inside that target.
func cyclic(refs []ref) bool {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(refs))
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		for j := range refs {
			if !hasPrefix(refs[j].at, refs[i].target) {
				continue
			}
			if state[j] == open || (state[j] == unseen && visit(j)) {
				return true
			}
		}
		state[i] = done
		return false
	}
	for i := range refs {
		if state[i] == unseen && visit(i) {
			return true
		}
	}
	return false
}

func hasPrefix(s, prefix []string) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}

// pointer renders a location as a JSON pointer ("" is the root: "#").
func pointer(at []string) string {
	if len(at) == 0 {
		return "#"
	}
	return "#/" + strings.Join(at, "/")
}
