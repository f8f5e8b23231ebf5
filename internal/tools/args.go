package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/strictjson"
)

// Workspace is where relative paths resolve.
const Workspace = "/workspace"

// notAnObject is the sentence of arguments that are not a JSON object.
const notAnObject = "Invalid arguments: expected a JSON object."

// DecodeArgs reads a tool's arguments strictly into v: a JSON object (or a
// JSON string holding one, as OpenAI sends them), no unknown fields, the
// required fields present and not null, the right types. It returns the
// error sentence for the model, or "". The MCP tools (internal/mcp) read
// theirs with it too, so they say the same sentences.
func DecodeArgs(raw json.RawMessage, v any, required ...string) string {
	raw, msg := ArgsObject(raw)
	if msg != "" {
		return msg
	}
	if msg := DuplicateKeys(raw); msg != "" {
		return msg
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return notAnObject
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			return notAnObject
		}
	case errors.As(err, &typeErr):
		return fmt.Sprintf("Invalid arguments: %s must be %s.", typeErr.Field, strictjson.Kind(typeErr.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("Invalid arguments: unknown field %s.", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return notAnObject
	}
	for _, f := range required {
		if r, ok := fields[f]; !ok || string(bytes.TrimSpace(r)) == "null" {
			return fmt.Sprintf("Invalid arguments: %s is required.", f)
		}
	}
	return ""
}

// ArgsObject returns a tool's arguments as the JSON object they hold
// (they may come as a JSON string holding one, as OpenAI sends them;
// none is {}), or the sentence for arguments that are not one object.
func ArgsObject(raw json.RawMessage) (json.RawMessage, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage("{}"), ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, notAnObject
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, notAnObject
	}
	return raw, ""
}

// ResolvePath turns a tool's path into the absolute path inside the
// computer: relative paths resolve under /workspace. It returns the error
// sentence for a path that cannot be used, or "".
func ResolvePath(p string) (string, string) {
	switch {
	case p == "":
		return "", "Invalid arguments: path must not be empty."
	case strings.IndexByte(p, 0) >= 0:
		return "", "Invalid arguments: path contains a NUL byte."
	case len(p) > 4096:
		return "", "Invalid arguments: path is longer than 4096 bytes."
	}
	abs := p
	if !path.IsAbs(abs) {
		abs = path.Join(Workspace, abs)
	}
	abs = path.Clean(abs)
	if abs != Workspace && !strings.HasPrefix(abs, Workspace+"/") {
		return abs, outsideWorkspace(abs)
	}
	return abs, ""
}

// DuplicateKeys is the sentence for arguments that give a key twice in
// one object (at any depth), or "": decoders keep the last, so the model
// or client would not be told which one ran.
func DuplicateKeys(raw json.RawMessage) string {
	if err := strictjson.Check(raw, nil); err != nil {
		return "Invalid arguments: " + err.Error() + "."
	}
	return ""
}
