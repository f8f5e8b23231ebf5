package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

var errBadRequest = errors.New("bad request")

const maxJSONBody = 16 << 20

// decode reads a strict JSON body: unknown fields, trailing data and wrong
// types are errors naming the field.
func decode(r *http.Request, v any) error {
	return decodeFrom(http.MaxBytesReader(nil, r.Body, maxJSONBody), v)
}

// decodeFrom is decode of any reader (a WebSocket frame).
func decodeFrom(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		if dec.More() {
			return fmt.Errorf("%w: trailing data after the JSON object", errBadRequest)
		}
		return nil
	case errors.As(err, &maxErr):
		return fmt.Errorf("%w: the JSON body is limited to %d bytes", errTooLarge, maxJSONBody)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body; send a JSON object", errBadRequest)
	case errors.As(err, &typeErr):
		return withParam(typeErr.Field, fmt.Errorf("%w: %s must be %s", errBadRequest, typeErr.Field, typeErr.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return withParam(field, fmt.Errorf("%w: unknown field %q", errBadRequest, field))
	}
	return fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err)
}
