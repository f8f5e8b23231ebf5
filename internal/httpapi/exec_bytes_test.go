package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// execSSE runs an exec with Accept: text/event-stream and returns the
// data of its stdout events and the exit event's JSON.
func (e *env) execSSE(t *testing.T, id string, body map[string]any) (stdout []string, exit map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(context.Background(), "POST", e.url+"/v1/computers/"+id+"/exec", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for _, ev := range readSSE(t, res.Body, nil) {
		switch ev.name {
		case "stdout":
			var d struct {
				Data string `json:"data"`
			}
			if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
				t.Fatalf("stdout event %q: %v", ev.data, err)
			}
			stdout = append(stdout, d.Data)
		case "exit":
			json.Unmarshal([]byte(ev.data), &exit)
		default:
			t.Fatalf("event %s: %s", ev.name, ev.data)
		}
	}
	return stdout, exit
}

// TestExecStreamedBytes: a UTF-8 character cut between two reads arrives
// whole over SSE; binary output is lossless with "encoding":"base64", in
// the streamed events and in the JSON answer; an unknown encoding is 400.
func TestExecStreamedBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	split := `printf 'a\342'; sleep .3; printf '\202\254\n'; printf '\342'`
	out, exit := e.execSSE(t, id, map[string]any{"command": split})
	if strings.Join(out, "") != "a€\n\uFFFD" || exit["exit_code"] != float64(0) {
		t.Fatalf("streamed %q (exit %v), want %q", out, exit, "a€\n\uFFFD")
	}

	binary := `printf '\377\000\342\202'; sleep .3; printf '\254\200'`
	want := "\xff\x00\xe2\x82\xac\x80"
	out, exit = e.execSSE(t, id, map[string]any{"command": binary, "encoding": "base64"})
	var got []byte
	for _, part := range out { // one base64 text per event
		b, err := base64.StdEncoding.DecodeString(part)
		if err != nil {
			t.Fatalf("streamed %q: %v", out, err)
		}
		got = append(got, b...)
	}
	if string(got) != want || exit["encoding"] != "base64" {
		t.Fatalf("streamed %q (exit %v), want %q", got, exit, want)
	}

	r := e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": "{ " + binary + "; } >&2; printf '\\377'", "encoding": "base64"})
	var res struct {
		Stdout, Stderr, Encoding string
	}
	r.json(t, &res)
	o, _ := base64.StdEncoding.DecodeString(res.Stdout)
	er, _ := base64.StdEncoding.DecodeString(res.Stderr)
	if r.code != 200 || string(o) != "\xff" || string(er) != want || res.Encoding != "base64" {
		t.Fatalf("unary base64: %s", r)
	}
	r = e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": "true", "encoding": "latin1"})
	if er := r.wantError(t, http.StatusBadRequest, "invalid_request"); er.Error.Param == nil || *er.Error.Param != "encoding" {
		t.Fatalf("unknown encoding: %s", r)
	}
}
