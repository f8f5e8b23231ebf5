package responses

import (
	"slices"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
)

// TestRedactToolResults: for a key that redacts personal data every tool
// result the model reads is redacted, also those a request brings: the
// client's function output and a conversation continued from a key that
// does not redact. The user's own words are no tool result and stay.
func TestRedactToolResults(t *testing.T) {
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("ok") }, nil)
	first, err := h.create(`{"input":[{"role":"user","content":"look up Jan"},
		{"type":"function_call","call_id":"c1","name":"crm","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"Jan: jan@example.nl, 06-12345678"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(h.up.Request(0)); got[2] != "tool:Jan: jan@example.nl, 06-12345678" {
		t.Fatalf("a key that does not redact: %q", got)
	}
	h.p.KeyPolicy.Settings.RedactPII = true
	_, err = h.create(`{"previous_response_id":"` + first.ID + `","input":[{"role":"user","content":"mail piet@example.com too"},
		{"type":"function_call","call_id":"c2","name":"crm","arguments":"{}"},
		{"type":"function_call_output","call_id":"c2","output":"Piet: NL91ABNA0417164300"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:look up Jan", "assistant:<nil> crm", "tool:Jan: [redacted email], [redacted phone]", "assistant:ok",
		"user:mail piet@example.com too", "assistant:<nil> crm", "tool:Piet: [redacted iban]"}
	if got := messages(h.up.Request(1)); !slices.Equal(got, want) {
		t.Fatalf("a key that redacts:\n got %q\nwant %q", got, want)
	}
}
