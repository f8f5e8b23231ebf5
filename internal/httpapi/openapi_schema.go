package httpapi

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The OpenAPI document's component schemas are derived by reflection from
// the Go types the handlers decode and write (models.go and the handlers'
// own), as encoding/json sees them: a json name, omitempty (not
// required), a pointer (nullable), a slice or map without omitempty
// (nullable: a nil one is null), json.RawMessage and interfaces (any
// JSON), []byte (base64), time.Time (an RFC 3339 string). A type that
// marshals itself has no derived schema: naming it panics, so it cannot
// be described wrongly. Objects are closed (additionalProperties false):
// every body is decoded strictly, and an answer has exactly its fields.

// schemaNames names the component schemas whose Go names are not the
// public ones; any other type is named by its Go name, first letter upper.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[computerView]():      "Computer",
	reflect.TypeFor[createBody]():        "ComputerCreate",
	reflect.TypeFor[lifetimeBody]():      "ComputerLifetime",
	reflect.TypeFor[volumeView]():        "Volume",
	reflect.TypeFor[createVolumeBody]():  "VolumeCreate",
	reflect.TypeFor[scriptView]():        "Script",
	reflect.TypeFor[scriptBody]():        "ScriptCreate",
	reflect.TypeFor[execBody]():          "ExecRequest",
	reflect.TypeFor[execAnswer]():        "ExecResult",
	reflect.TypeFor[pythonBody]():        "PythonRequest",
	reflect.TypeFor[pythonCellBody]():    "PythonCell",
	reflect.TypeFor[pythonCellView]():    "PythonCellResult",
	reflect.TypeFor[toolAnswer]():        "ToolResult",
	reflect.TypeFor[toolCall]():          "ToolArguments",
	reflect.TypeFor[processView]():       "Process",
	reflect.TypeFor[stdinBody]():         "ProcessStdin",
	reflect.TypeFor[stdinAnswer]():       "ProcessStdinResult",
	reflect.TypeFor[signalBody]():        "ProcessSignal",
	reflect.TypeFor[droppedEvent]():      "ProcessOutputDropped",
	reflect.TypeFor[containerBody]():     "ContainerCreate",
	reflect.TypeFor[containerView]():     "Container",
	reflect.TypeFor[containerFileView](): "ContainerFile",
	reflect.TypeFor[containerFileBody](): "ContainerFileCreate",
	reflect.TypeFor[fileObject]():        "File",
	reflect.TypeFor[artifactObject]():    "Artifact",
	reflect.TypeFor[templateView]():      "Template",
	reflect.TypeFor[templateBody]():      "TemplateCreate",
	reflect.TypeFor[createOrgBody]():     "OrgCreate",
	reflect.TypeFor[orgSwitches]():       "OrgUpdate",
	reflect.TypeFor[createKeyBody]():     "KeyCreate",
	reflect.TypeFor[keyPolicyBody]():     "KeyUpdate",
	reflect.TypeFor[store.Event]():       "AuditEvent",
	reflect.TypeFor[errhttp.Body]():      "ErrorObject",
	reflect.TypeFor[responses.Request](): "ResponseCreate",
	reflect.TypeFor[responses.Text]():    "ResponseText",
	reflect.TypeFor[tools.Definition]():  "ToolDefinition",
	reflect.TypeFor[tools.Function]():    "ToolFunction",
	reflect.TypeFor[artifact.Ref]():      "ArtifactRef",
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// schema is a JSON Schema (or any OpenAPI object) as it is written.
type schema = map[string]any

// schemaGen derives component schemas from Go types.
type schemaGen struct {
	schemas map[string]any          // component name → schema
	types   map[string]reflect.Type // component name → its Go type
}

func newSchemaGen() *schemaGen {
	return &schemaGen{schemas: map[string]any{}, types: map[string]reflect.Type{}}
}

// of is the schema of v's type: a $ref to its component for a named
// struct.
func (g *schemaGen) of(v any) schema { return g.schema(reflect.TypeOf(v)) }

// name is the component name of the named type t.
func (g *schemaGen) name(t reflect.Type) string {
	if n, ok := schemaNames[t]; ok {
		return n
	}
	r := []rune(t.Name())
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

func (g *schemaGen) schema(t reflect.Type) schema {
	switch t {
	case timeType:
		return schema{"type": "string", "format": "date-time"}
	case rawType:
		return schema{} // any JSON value
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface &&
		(t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
			t.Implements(textType) || reflect.PointerTo(t).Implements(textType)) {
		panic(fmt.Sprintf("openapi: %v marshals itself: describe it by hand", t))
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.schema(t.Elem()))
	case reflect.Bool:
		return schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return schema{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return schema{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return schema{"type": "number"}
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Interface:
		return schema{}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return schema{"type": "string", "contentEncoding": "base64"}
		}
		return schema{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("openapi: %v: map keys must be strings", t))
		}
		return schema{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := g.name(t)
		if prev, ok := g.types[name]; ok {
			if prev != t {
				panic(fmt.Sprintf("openapi: %v and %v are both named %s", prev, t, name))
			}
		} else {
			g.types[name] = t
			g.schemas[name] = schema{} // placeholder: a type may refer to itself
			g.schemas[name] = g.object(t)
		}
		return schema{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

// object is the schema of struct t, its embedded structs' fields inline.
func (g *schemaGen) object(t reflect.Type) schema {
	props := schema{}
	required := []string{}
	g.fields(t, props, &required)
	return schema{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func (g *schemaGen) fields(t reflect.Type, props schema, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(","+opts+",", ",omitempty,")
		s := g.schema(f.Type)
		if k := f.Type.Kind(); !omit && (k == reflect.Slice || k == reflect.Map) {
			s = nullable(s) // a nil slice or map is null
		}
		props[name] = s
		if !omit {
			*required = append(*required, name)
		}
	}
}

// nullable is s or null.
func nullable(s schema) schema {
	switch typ := s["type"].(type) {
	case string:
		out := schema{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		return out
	case []any:
		return s
	}
	if len(s) == 0 {
		return s // any JSON, null included
	}
	return schema{"anyOf": []any{s, schema{"type": "null"}}}
}
