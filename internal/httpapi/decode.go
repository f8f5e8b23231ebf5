package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/strictjson"
)

// MaxJSONBody bounds a JSON request body.
const MaxJSONBody = 16 << 20

// decode reads a strict JSON body: unknown fields, field names in another
// case, duplicate keys, trailing data and wrong types are errors naming
// the field.
func decode(r *http.Request, v any) error {
	return decodeFrom(http.MaxBytesReader(nil, r.Body, MaxJSONBody), v)
}

// decodeFrom is decode of any reader (a WebSocket frame).
func decodeFrom(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return fmt.Errorf("%w: the JSON body is limited to %d bytes", errTooLarge, MaxJSONBody)
	case errors.Is(err, errBodyTimeout):
		return err
	case err != nil:
		return fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	case len(bytes.TrimSpace(data)) == 0:
		return fmt.Errorf("%w: empty body; send a JSON object", errBadRequest)
	}
	if err := checkJSON(data, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		if dec.More() {
			return fmt.Errorf("%w: trailing data after the JSON object", errBadRequest)
		}
		return nil
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Errorf("%w: the body must be a JSON object", errBadRequest)
		}
		return withParam(typeErr.Field, fmt.Errorf("%w: %s must be %s", errBadRequest, typeErr.Field, strictjson.Kind(typeErr.Type)))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return withParam(field, fmt.Errorf("%w: unknown field %q", errBadRequest, field))
	}
	return fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err)
}

// checkJSON is strictjson.Check: a duplicate key, a field name in another
// case or a value of the wrong type is a 400 naming the field.
func checkJSON(data []byte, t reflect.Type) error { return checkJSONAt(data, t, "") }

// checkJSONAt is checkJSON of a value found at path.
func checkJSONAt(data []byte, t reflect.Type, path string) error {
	err := strictjson.CheckAt(data, t, path)
	var se *strictjson.Error
	if errors.As(err, &se) {
		return withParam(se.Field, fmt.Errorf("%w: %s", errBadRequest, se.Msg))
	}
	return err
}
