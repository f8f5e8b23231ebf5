package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// MaxDepth bounds the nesting of a client's JSON body (tool schemas nest,
// but never this deep).
const MaxDepth = 256

// Error is a body Check refuses: Field is the path of the field at fault
// ("" for the body as a whole), Msg the sentence that names it.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// ErrorParam is Field (errhttp.Param: the field an API error names).
func (e *Error) ErrorParam() string { return e.Field }

func refuse(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Check is the strict pre-pass over a JSON body before it is decoded into
// a value of type t: encoding/json alone accepts a duplicate key (the last
// wins) and matches field names case-insensitively. It refuses, with an
// *Error naming the field, any object with a key twice (at any depth) and
// a key of a struct of t that is a field name in another case. Values with
// a JSON decoder of their own (json.RawMessage, interfaces) are checked for
// duplicates only. Malformed JSON is left to the decoder's message (nil).
func Check(data []byte, t reflect.Type) error { return CheckAt(data, t, "") }

// CheckAt is Check of a value found at path (its errors name path.field).
func CheckAt(data []byte, t reflect.Type, path string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walkJSON(dec, t, path, 0)
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil // the decoder names what is malformed
	}
	return err
}

// walkJSON reads one value; t is its Go type, nil when unknown.
func walkJSON(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	if depth > MaxDepth {
		return refuse("", "the JSON body nests deeper than %d levels", MaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	t = plainType(t)
	if err := checkKind(tok, t, path); err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, t, path, depth)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, elem, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

func walkObject(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = structFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		name := joinPath(path, key)
		if seen[key] {
			return refuse(name, "duplicate field %q", name)
		}
		seen[key] = true
		child := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				if want := foldedField(fields, key); want != "" {
					return refuse(name, "unknown field %q (field names are case-sensitive: %q)", name, joinPath(path, want))
				}
			}
			child = ft
		}
		if err := walkJSON(dec, child, name, depth+1); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// plainType is t without pointers, or nil when t decodes itself (a
// json.Unmarshaler, an interface): its keys are not known here.
func plainType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

// foldedField is the field that key names in another case, or "".
func foldedField(fields map[string]reflect.Type, key string) string {
	for f := range fields {
		if strings.EqualFold(f, key) {
			return f
		}
	}
	return ""
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// structFields are the JSON names of t's fields (embedded structs'
// fields promoted) and their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	if v, ok := fieldCache.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := plainType(f.Type); et != nil && et.Kind() == reflect.Struct {
				for k, v := range structFields(et) {
					fields[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
		if strings.Contains(","+opts+",", ",string,") {
			fields[name] = nil // a number or boolean sent as a JSON string
		}
	}
	fieldCache.Store(t, fields)
	return fields
}

// checkKind refuses a value of the wrong JSON type for t, naming the
// field and the JSON type (never a Go type); null fits every type.
func checkKind(tok json.Token, t reflect.Type, path string) error {
	if t == nil || tok == nil {
		return nil
	}
	want := Kind(t)
	var got string
	switch v := tok.(type) {
	case json.Delim:
		got = map[json.Delim]string{'{': "an object", '[': "an array"}[v]
	case string:
		got = "a string"
	case bool:
		got = "a boolean"
	case json.Number:
		got = "a number"
		if want == "an integer" && !strings.ContainsAny(v.String(), ".eE") {
			got = want
		}
	}
	if want == "" || got == want || (want == "a number" && got == "an integer") {
		return nil
	}
	if path == "" {
		return refuse("", "the body must be a JSON object")
	}
	return refuse(path, "%s must be %s", path, want)
}

// Kind names the JSON type a Go type decodes from, as JSON schema
// does, with an article ("a string", "an object"); "" when any JSON is
// accepted. The decoders of the API and of the tools' arguments word
// their type errors with it too.
func Kind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string" // base64
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return ""
}
