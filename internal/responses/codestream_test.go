package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCodeStream: whatever the fragments, the decoded deltas add up to
// the code json.Unmarshal finds.
func TestCodeStream(t *testing.T) {
	code := "import matplotlib.pyplot as plt\nprint(\"a\\tb\", 'é', \"😀\")\n\tx = '\\\\'\n"
	enc, _ := json.Marshal(map[string]string{"code": code})
	for _, args := range []string{
		string(enc),
		` { "code" : "x\u00e9\ud83d\ude00\/\"\\\n\t\r\b\f" }`,
		`{"code":"lone \ud800 and \ud800\u0041 then \udc00"}`,
	} {
		var want struct{ Code string }
		if err := json.Unmarshal([]byte(args), &want); err != nil {
			t.Fatal(err)
		}
		for size := 1; size <= len(args); size++ {
			c := &codeStream{}
			var got strings.Builder
			for i := 0; i < len(args); i += size {
				got.WriteString(c.feed(args[i:min(i+size, len(args))]))
			}
			if got.String() != want.Code {
				t.Fatalf("%s in %d-byte fragments: %q, want %q", args, size, got.String(), want.Code)
			}
		}
	}
	// Another shape is not streamed.
	for _, args := range []string{`{"other":1,"code":"x"}`, `{"code": 5}`, strings.Repeat(" ", 70) + `{"code":"x"}`} {
		c := &codeStream{}
		for i := 0; i < len(args); i++ {
			if d := c.feed(args[i : i+1]); d != "" {
				t.Fatalf("%s: streamed %q", args, d)
			}
		}
	}
}
