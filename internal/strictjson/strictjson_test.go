package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestCheck: duplicate keys at any depth, a field name in another case
// and a wrong JSON type are refused naming the field; unknown fields and
// malformed JSON are left to the caller's decoder.
func TestCheck(t *testing.T) {
	type inner struct {
		Cmd string `json:"cmd"`
	}
	type body struct {
		Name  string            `json:"name"`
		Env   map[string]string `json:"env"`
		Inner inner             `json:"inner"`
	}
	typ := reflect.TypeFor[body]()
	for data, field := range map[string]string{
		`{"name":"a","name":"b"}`:   "name",
		`{"env":{"A":"1","A":"2"}}`: "env.A",
		`{"NAME":"a"}`:              "NAME",
		`{"inner":{"CMD":"x"}}`:     "inner.CMD",
		`{"name":1}`:                "name",
		`[]`:                        "",
		`{"other":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`: "",
	} {
		var e *Error
		if err := Check([]byte(data), typ); !errors.As(err, &e) || e.Field != field {
			t.Errorf("%.40s: %v, want an *Error naming %q", data, err, field)
		}
	}
	for _, data := range []string{`{"name":"a","other":{"x":1}}`, `{"name":`, `not json`} {
		if err := Check([]byte(data), typ); err != nil {
			t.Errorf("%s: %v, want nil", data, err)
		}
	}
}
