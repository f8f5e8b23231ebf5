package kernel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTMLToMarkdown(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct{ name, in, want string }{
		{"pandas multiindex", read("pandas_multiindex.html"),
			"| k | n | x / p | x / q | y / p |\n| --- | --- | --- | --- | --- |\n| a | 1 | 0 | 1 | 2 |\n|  | 2 | 3 | 4 | 5 |\n| b | 1 | 6 | 7 | 8 |"},
		{"pandas truncated", read("pandas_truncated.html"),
			"|  | v |\n| --- | --- |\n| 0 | 0 |\n| 1 | 1 |\n| ... | ... |\n| 98 | 98 |\n| 99 | 99 |\n\n100 rows × 1 columns"},
		{"no thead", "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>",
			"| a | b |\n| --- | --- |\n| 1 | 2 |"},
		{"td only", "<table><tr><td>a</td></tr><tr><td>b</td><td>c</td></tr></table>",
			"| a |  |\n| --- | --- |\n| b | c |"},
		{"entities and pipes", "<table><tr><th>a&amp;b</th></tr><tr><td>x|y &lt;z&gt; &#39;q&#39;</td></tr></table>",
			"| a&b |\n| --- |\n| x\\|y <z> 'q' |"},
		{"text", "<h2>Title</h2><p>Hello <b>big</b>\n   world &amp; co.</p><p>second<br>line</p>",
			"## Title\n\nHello **big** world & co.\n\nsecond\nline"},
		{"lists", "<ul><li>one</li><li>two<ol><li>a</li><li>b</li></ol></li></ul>after",
			"- one\n- two\n  1. a\n  2. b\n\nafter"},
		{"script and style", "<script>alert('<b>x</b>')</script><STYLE>p{}</STYLE>kept<!-- <b>comment</b> -->!",
			"kept!"},
		{"pre", "<pre>a  b\n  c</pre>", "```\na  b\n  c\n```"},
		{"literal less-than", "1 < 2 and 3 <= 4 <3", "1 < 2 and 3 <= 4 <3"},
		{"unclosed", "<table><tr><td>a<td>b<tr><td>c", "| a | b |\n| --- | --- |\n| c |  |"},
		{"unterminated tag", "text <b class=\"x", "text"},
		{"nested table", "<table><tr><td>out</td><td><table><tr><td>in</td></tr></table></td></tr></table>",
			"| out | \\| in \\| \\| --- \\| |\n| --- | --- |"},
		{"huge spans", "<table><tr><td colspan=999999 rowspan=99999>x</td></tr><tr><td>y</td></tr></table>", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := HTMLToMarkdown(tc.in)
			if tc.name == "huge spans" {
				// The span is clamped to 1000 columns and to the table's rows.
				if !strings.HasPrefix(got, "| x |") || len(got) > 100<<10 || !strings.HasSuffix(got, "| y |") {
					t.Errorf("got %.200q", got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestStripANSI(t *testing.T) {
	cases := map[string]string{
		"plain":                               "plain",
		"\x1b[0;31mZeroDivisionError\x1b[0m":  "ZeroDivisionError",
		"a\x1b[38;5;12mb\x1b[1Kc":             "abc",
		"\x1b]0;title\x07x\x1b]8;;url\x1b\\y": "xy",
		"trailing \x1b":                       "trailing ",
		"trailing \x1b[":                      "trailing ",
		"\x1bcreset":                          "reset",
	}
	for in, want := range cases {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCutText(t *testing.T) {
	if got := cutText("aaaa\nbbbb\ncc", 11); got != "aaaa\nbbbb\n" {
		t.Errorf("line cut: %q", got)
	}
	if got := cutText("héllo", 2); got != "h" || !utf8.ValidString(got) {
		t.Errorf("utf-8 cut: %q", got)
	}
	if got := cutText("日本語", 7); got != "日本" {
		t.Errorf("utf-8 cut: %q", got)
	}
	if got := cutText("abc", 0); got != "" {
		t.Errorf("zero: %q", got)
	}
}

func testPNG(t *testing.T, w int) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, 1))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func msg(t *testing.T, typ string, content any) *Message {
	b, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	return &Message{Header: Header{MsgType: typ}, Content: b}
}

func TestCollector(t *testing.T) {
	c := newCollector(100, 1<<20)
	handle := func(typ string, content any) {
		t.Helper()
		if err := c.handle(msg(t, typ, content)); err != nil {
			t.Fatal(err)
		}
	}
	img := base64.StdEncoding.EncodeToString(testPNG(t, 3))
	handle("stream", map[string]string{"name": "stdout", "text": "ab"})
	handle("stream", map[string]string{"name": "stdout", "text": "cd\n"})
	handle("stream", map[string]string{"name": "stderr", "text": "e"})
	handle("display_data", map[string]any{"data": map[string]any{"image/png": img, "text/plain": "<Figure>"}})
	handle("execute_result", map[string]any{"data": map[string]any{"image/png": img, "text/plain": "<Figure>"}, "execution_count": 3})
	outs := c.outputs()
	if len(outs) != 3 || outs[0].Text != "abcd\n" || outs[1].Name != "stderr" || outs[2].Width != 3 || c.dedup != 1 {
		t.Fatalf("outputs %+v dedup %d", outs, c.dedup)
	}
	// Waiting events are coalesced as the outputs are.
	if ev := c.drainEvents(); len(ev) != 3 || ev[0].Text != "abcd\n" || ev[1].Text != "e" {
		t.Errorf("events %+v", ev)
	}
	used := c.used
	// Over the cap: the stream is cut at a line break, then the marker.
	handle("stream", map[string]string{"name": "stdout", "text": strings.Repeat("line\n", 100)})
	handle("display_data", map[string]any{"data": map[string]any{"text/plain": "dropped"}})
	handle("error", map[string]any{"ename": "ValueError", "evalue": "bad", "traceback": []string{"\x1b[31mframe 1", "frame 2"}})
	handle("error", map[string]any{"ename": "Second", "evalue": "", "traceback": []string{}})
	outs = c.outputs()
	if c.used > 100 || len(outs) != 6 {
		t.Fatalf("used %d (was %d), outputs %v", c.used, used, summarize(outs))
	}
	if outs[3].Type != OutStream || outs[3].Text != "line\nline\n" || used != 87 {
		t.Errorf("cut stream %q", outs[3].Text)
	}
	if outs[4].Type != OutTruncated || !strings.Contains(outs[4].Text, "100 bytes limit") || !strings.Contains(outs[4].Text, "in 3 outputs") {
		t.Errorf("marker %q", outs[4].Text)
	}
	if outs[5].Type != OutError || outs[5].EName != "ValueError" || outs[5].Traceback[0] != "frame 1" {
		t.Errorf("error after cap: %+v", outs[5])
	}

	// clear_output drops earlier outputs (not the marker) and leaves a note.
	c = newCollector(1000, 1<<20)
	handle("stream", map[string]string{"name": "stdout", "text": "a"})
	handle("display_data", map[string]any{"data": map[string]any{"image/png": img}})
	handle("clear_output", map[string]bool{"wait": true})
	if len(c.outputs()) != 2 {
		t.Fatal("clear_output(wait=True) applied early")
	}
	handle("display_data", map[string]any{"data": map[string]any{"image/png": img}}) // same image again: shown after a clear
	outs = c.outputs()
	if len(outs) != 2 || outs[0].Type != OutClear || !strings.Contains(outs[0].Text, "2 earlier outputs") || outs[1].PNG == nil {
		t.Errorf("after clear: %v", summarize(outs))
	}

	// Malformed content is reported, not applied.
	for _, bad := range []string{`{"name": 1}`, `[`, `{"data": {"text/plain": 1}, "execution_count": "x"}`} {
		typ := "stream"
		if strings.Contains(bad, "data") {
			typ = "execute_result"
		}
		if err := c.handle(&Message{Header: Header{MsgType: typ}, Content: []byte(bad)}); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestDisplayOutput(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	o := displayOutput(map[string]json.RawMessage{
		"text/plain": raw("<IPython.core.display.HTML object>"),
		"text/html":  raw("<b>bold</b>"),
		"image/jpeg": raw("..."),
	}, 1<<20, 1<<20)
	if o.MIME != "text/html" || o.Text != "**bold**" || len(o.Omitted) != 2 {
		t.Errorf("placeholder repr: %+v", o)
	}
	o = displayOutput(map[string]json.RawMessage{
		"text/plain": raw([]string{"a", "b"}),
		"image/png":  raw(strings.Repeat("A", 2000)),
	}, 1000, 1000)
	if o.Text != "ab" || o.PNG != nil || len(o.Omitted) != 1 || !strings.Contains(o.Omitted[0], "limit is 1000 bytes") {
		t.Errorf("oversized png: %+v", o)
	}
	p := testPNG(t, 5)
	enc := base64.StdEncoding.EncodeToString(p)
	o = displayOutput(map[string]json.RawMessage{"image/png": raw(enc[:10] + "\n" + enc[10:])}, 1<<20, 1<<20)
	if !bytes.Equal(o.PNG, p) || o.Width != 5 || o.Height != 1 {
		t.Errorf("png with newline: %+v", o)
	}
	for _, s := range []string{"<IPython.core.display.HTML object>", "<foo.Bar object at 0x7f00>"} {
		if !isDefaultRepr(s) {
			t.Errorf("isDefaultRepr(%q) = false", s)
		}
	}
	for _, s := range []string{"<Figure size 640x480 with 1 Axes>", "   a  b\n0  1  2", "<a> object>"} {
		if isDefaultRepr(s) {
			t.Errorf("isDefaultRepr(%q) = true", s)
		}
	}
}

func TestMessageSignature(t *testing.T) {
	s := &signer{key: []byte("secret"), session: "s", username: "u"}
	frames, err := s.encode([][]byte{[]byte("id")}, s.header("m1", "execute_request"), nil, map[string]string{"code": "1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMessage(frames, newVerifier([]byte("secret")))
	if err != nil || m.Header.MsgID != "m1" || string(m.Identities[0]) != "id" || string(m.Content) != `{"code":"1"}` {
		t.Fatalf("round trip: %+v %v", m, err)
	}
	if _, err := parseMessage(frames, newVerifier([]byte("other"))); !errors.Is(err, errBadSignature) {
		t.Errorf("wrong key: %v", err)
	}
	frames[len(frames)-1] = []byte(`{"code":"2"}`)
	if _, err := parseMessage(frames, newVerifier([]byte("secret"))); !errors.Is(err, errBadSignature) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := parseMessage(frames, newVerifier(nil)); err != nil {
		t.Errorf("unsigned: %v", err)
	}
	frames[3] = []byte(`{"msg_type": 5}`)
	if _, err := parseMessage(frames, newVerifier(nil)); !errors.Is(err, errMalformed) {
		t.Errorf("bad header: %v", err)
	}
}

func TestConnInfoFile(t *testing.T) {
	ci, err := NewConnInfo("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[int]bool{ci.ShellPort: true, ci.IOPubPort: true, ci.StdinPort: true, ci.ControlPort: true, ci.HBPort: true}
	if len(ports) != 5 || len(ci.Key) != 64 {
		t.Fatalf("%+v", ci)
	}
	path := t.TempDir() + "/k.json"
	if err := ci.WriteConnectionFile(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	back, err := ReadConnectionFile(path)
	if err != nil || back != ci {
		t.Errorf("read back %+v %v", back, err)
	}
}

// Past MaxOutputs outputs a cell keeps one marker that counts the rest;
// its error is still kept.
func TestCollectorOutputCount(t *testing.T) {
	c := newCollector(1<<20, 1<<20)
	for i := range 3 * MaxOutputs {
		name := []string{"stdout", "stderr"}[i%2]
		if err := c.handle(msg(t, "stream", map[string]string{"name": name, "text": "x"})); err != nil {
			t.Fatal(err)
		}
	}
	c.handle(msg(t, "error", map[string]any{"ename": "ValueError", "evalue": "late", "traceback": []string{}}))
	outs := c.outputs()
	if len(outs) != MaxOutputs+2 {
		t.Fatalf("%d outputs", len(outs))
	}
	want := "[output truncated: the cell's output reached the limit of 1000 outputs; 2000 more bytes in 2000 outputs were dropped]"
	if m := outs[MaxOutputs]; m.Type != OutTruncated || m.Text != want {
		t.Errorf("marker %+v, want %q", m, want)
	}
	if e := outs[MaxOutputs+1]; e.Type != OutError || e.EValue != "late" {
		t.Errorf("error after the cap: %+v", e)
	}
	if ev := c.drainEvents(); len(ev) != MaxOutputs+2 {
		t.Errorf("%d events", len(ev))
	}
}

// Waiting events: a clear drops what it clears (not the marker), an update
// what it supersedes.
func TestCollectorEventCoalescing(t *testing.T) {
	c := newCollector(1<<20, 1<<20)
	for i := range 100 {
		c.handle(msg(t, "clear_output", map[string]bool{"wait": false}))
		c.handle(msg(t, "stream", map[string]string{"name": "stdout", "text": fmt.Sprintf("%d%%\n", i)}))
	}
	c.handle(msg(t, "display_data", map[string]any{"data": map[string]any{"text/plain": "v0"}, "transient": map[string]string{"display_id": "d"}}))
	for i := range 50 {
		c.handle(msg(t, "update_display_data", map[string]any{"data": map[string]any{"text/plain": fmt.Sprint("v", i+1)}, "transient": map[string]string{"display_id": "d"}}))
	}
	ev := c.drainEvents()
	if len(ev) != 4 || ev[0].Type != OutClear || ev[1].Text != "99%\n" || ev[2].Text != "v0" || ev[3].Type != OutUpdate || ev[3].Text != "v50" {
		t.Fatalf("events %v", summarize(ev))
	}
	outs := c.outputs()
	if len(outs) != 3 || outs[1].Text != "99%\n" || outs[2].Text != "v50" {
		t.Errorf("outputs %v", summarize(outs))
	}
}

// An Accumulator rebuilds what the collector keeps from the streamed events.
func TestAccumulator(t *testing.T) {
	a := NewAccumulator(0)
	for range 150000 {
		a.Add(Output{Type: OutStream, Name: "stdout", Text: "x"})
	}
	a.Add(Output{Type: OutDisplay, Text: "v0", DisplayID: "d"})
	a.Add(Output{Type: OutUpdate, Text: "v1", DisplayID: "d"})
	a.Add(Output{Type: OutStream, Name: "stderr", Text: "e"})
	a.Add(Output{Type: OutTruncated, Text: "first"})
	a.Add(Output{Type: OutTruncated, Text: "final"})
	outs := a.Outputs()
	if len(outs) != 4 || outs[0].Text != strings.Repeat("x", 150000) || outs[1].Text != "v1" || outs[1].Type != OutDisplay ||
		outs[2].Name != "stderr" || outs[3].Text != "final" {
		t.Fatalf("outputs %v", summarize(outs))
	}
	a = NewAccumulator(0)
	for i := range 3 * MaxOutputs {
		a.Add(Output{Type: OutDisplay, Text: fmt.Sprint(i)})
	}
	if outs := a.Outputs(); len(outs) != MaxOutputs+1 || outs[MaxOutputs].Type != OutTruncated {
		t.Fatalf("%d outputs, last %+v", len(outs), outs[len(outs)-1])
	}
	a.Add(Output{Type: OutClear})
	if outs := a.Outputs(); len(outs) != 2 || outs[0].Type != OutClear || outs[1].Type != OutTruncated {
		t.Fatalf("after a clear: %v", summarize(outs))
	}
}
