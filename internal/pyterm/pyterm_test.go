package pyterm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// The pieces of 'cubicle python' that need no computer; cmd/cubicle's
// tests run the command on real ones.

func TestSplitCells(t *testing.T) {
	src := "import os\n\n# %% first one\na = 1\n\n\n# %%\n\n# %% [markdown]\n# prose\n# %%   third  \r\nb = 2\r\n"
	got := SplitCells(src)
	want := []computer.PythonCell{{Code: "import os\n"}, {Code: "a = 1\n", Title: "first one"}, {Code: "b = 2\n", Title: "third"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SplitCells = %q, want %q", got, want)
	}
	if got := SplitCells("# %% only a title\n\n"); len(got) != 0 {
		t.Errorf("no code: %q", got)
	}
}

func TestREPLNeedMore(t *testing.T) {
	cases := []struct {
		lines []string
		more  bool
	}{
		{[]string{"x = 5"}, false},
		{[]string{"def f():"}, true},
		{[]string{"def f():", "    return 7"}, true},
		{[]string{"def f():", "    return 7", ""}, false},
		{[]string{"for i in range(3): print(i)"}, true},
		{[]string{"for i in range(3): print(i)", ""}, false},
		{[]string{"if x:  # comment"}, true},
		{[]string{"x = 1  # note:"}, false},
		{[]string{"s = 'a:'"}, false},
		{[]string{"d = {1:"}, true},
		{[]string{"d = {1:", "2}"}, false},
		{[]string{"print(1,"}, true},
		{[]string{"print(1,", "", "2)"}, false},
		{[]string{"x[1:]"}, false},
		{[]string{`s = """doc`}, true},
		{[]string{`s = """doc`, "", `end"""`}, false},
		{[]string{`s = '''it's`, `'''`}, false},
		{[]string{`s = "a\"b"`}, false},
		{[]string{`s = "a(" + ')'`}, false},
		{[]string{`x = 1 + \`}, true},
		{[]string{`x = 1 + \`, "2"}, false},
		{[]string{"@decorator"}, true},
		{[]string{"@decorator", "def g(): pass", ""}, false},
		{[]string{"lambda x: x"}, false},
		{[]string{"if x: y = 1"}, true},
		{[]string{"if(x): y = 1", ""}, false},
		{[]string{"for_each = 3"}, false},
		{[]string{"import os"}, false},
		{[]string{"s = 'unterminated"}, false},
		{[]string{"class A:", "    def m(self):", "        return {", "", "        }", ""}, false},
		{[]string{"class A:", "    def m(self):", "        return {", ""}, true},
	}
	for _, c := range cases {
		if got := needMore(c.lines); got != c.more {
			t.Errorf("needMore(%q) = %v, want %v", c.lines, got, c.more)
		}
	}
}

func TestRenderer(t *testing.T) {
	var out, errb bytes.Buffer
	r := &Renderer{stdout: &out, stderr: &errb, saveDir: t.TempDir(), next: 1}
	emit := r.output
	emit(kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "partial"})
	emit(kernel.Output{Type: kernel.OutResult, Text: "10", MIME: "text/plain"})
	emit(kernel.Output{Type: kernel.OutError, EName: "ZeroDivisionError", EValue: "division by zero", Traceback: []string{
		"---------------------------------------------------------------------------",
		"ZeroDivisionError                         Traceback (most recent call last)",
		"Cell In[1], line 1\n----> 1 1/0\n",
		"ZeroDivisionError: division by zero"}})
	emit(kernel.Output{Type: kernel.OutError, EName: "KeyboardInterrupt"})
	emit(kernel.Output{Type: kernel.OutError, EName: "KeyboardInterrupt", Traceback: []string{"Traceback:", "KeyboardInterrupt"}})
	emit(kernel.Output{Type: kernel.OutClear})
	emit(kernel.Output{Type: kernel.OutTruncated, Text: "[output truncated: ...]"})
	img := tinyPNG(t)
	emit(kernel.Output{Type: kernel.OutDisplay, Text: "<Figure size 640x480 with 1 Axes>", PNG: img, Width: 3, Height: 2})
	r.endLine()
	if want := "partial\n10\n[image saved to " + filepath.Join(r.saveDir, "cubicle-out-1.png") + " (3x2)]\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	wantErr := "---------------------------------------------------------------------------\n" +
		"ZeroDivisionError                         Traceback (most recent call last)\n" +
		"Cell In[1], line 1\n----> 1 1/0\n\nZeroDivisionError: division by zero\nKeyboardInterrupt\nTraceback:\nKeyboardInterrupt\n[output truncated: ...]\n"
	if errb.String() != wantErr {
		t.Errorf("stderr %q, want %q", errb.String(), wantErr)
	}
	if b, err := os.ReadFile(filepath.Join(r.saveDir, "cubicle-out-1.png")); err != nil || !bytes.Equal(b, img) {
		t.Errorf("saved image: %v", err)
	}
	// --json prints nothing while streaming.
	out.Reset()
	r.json = true
	emit(kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "x"})
	if out.Len() != 0 {
		t.Errorf("--json streamed %q", out.String())
	}
}

func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPythonRemoteProtocol checks the remote backend against a fake
// server: the key, the streamed outputs handed to the renderer and
// assembled for --json in the service's shape, errors, and interrupt (the
// protocol itself is internal/client's, tested there).
func TestRemoteProtocol(t *testing.T) {
	var interrupted int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cub_k" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad key","param":null}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/computers/cmp_1/python/interrupt":
			interrupted++
			w.WriteHeader(204)
		case "/v1/computers/cmp_1/python":
			var req client.PythonRequest
			json.NewDecoder(r.Body).Decode(&req)
			if r.Header.Get("Accept") != "text/event-stream" || len(req.Cells) != 2 || req.Timeout != 7 || req.Cells[1].Title != "two" {
				w.WriteHeader(400)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: output\ndata: {\"cell\":0,\"output\":{\"type\":\"stream\",\"name\":\"stdout\",\"text\":\"a\\n\"}}\n\n")
			fmt.Fprintf(w, "event: output\ndata: {\"cell\":1,\"output\":{\"type\":\"error\",\"ename\":\"E\",\"traceback\":[\"t\"]}}\n\n")
			fmt.Fprintf(w, "event: result\ndata: {\"status\":\"error\",\"cells\":[{\"index\":0,\"status\":\"ok\",\"outputs\":null},{\"index\":1,\"title\":\"two\",\"status\":\"error\",\"outputs\":null}],\"failed_cell\":1,\"cancelled\":false,\"timed_out\":false,\"duration_ms\":3}\n\n")
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no such computer","param":null}}`)
		}
	}))
	defer srv.Close()
	c, err := client.New(client.Config{URL: srv.URL, Key: "cub_k"})
	if err != nil {
		t.Fatal(err)
	}
	b := NewRemote(c, "cmp_1")
	var streamed []kernel.Output
	res, err := b.Run(context.Background(), computer.PythonRequest{Cells: []computer.PythonCell{{Code: "1"}, {Code: "2", Title: "two"}}, Timeout: 7 * time.Second},
		func(o kernel.Output) { streamed = append(streamed, o) })
	if err != nil || res.Status != "error" || len(streamed) != 2 || res.FailedCell == nil || *res.FailedCell != 1 {
		t.Fatalf("run: %v, %+v, %d outputs streamed", err, res, len(streamed))
	}
	if len(res.Cells[0].Outputs) != 1 || res.Cells[0].Outputs[0].Text != "a\n" || res.Cells[1].Title != "two" ||
		res.Cells[1].Outputs[0].Type != kernel.OutError || res.Cells[1].Outputs[0].Traceback[0] != "t" {
		t.Errorf("assembled outputs: %+v", res.Cells)
	}
	if err := b.Interrupt(context.Background()); err != nil || interrupted != 1 {
		t.Errorf("interrupt: %v (%d)", err, interrupted)
	}
	b.id = "cmp_2"
	if _, err := b.Run(context.Background(), computer.PythonRequest{Cells: []computer.PythonCell{{Code: "1"}}}, func(kernel.Output) {}); err == nil ||
		!strings.Contains(err.Error(), "no such computer") || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown computer: %v", err)
	}
	c, _ = client.New(client.Config{URL: srv.URL, Key: "cub_wrong"})
	if err := NewRemote(c, "cmp_1").Interrupt(context.Background()); err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("bad key: %v", err)
	}
}
