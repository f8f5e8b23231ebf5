package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// cubicleBin is the real cubicle binary: `cubicle serve` is the server
// under test (the console as serve mounts it), and computers run it as
// their agent.
var cubicleBin string

func TestMain(m *testing.M) {
	code := testbin.Main(m, &cubicleBin)
	shared.stop()
	os.Exit(code)
}

const adminKey = "cub_console_test_admin_key_01"

// server is one `cubicle serve` shared by this package's tests.
type server struct {
	once sync.Once
	cmd  *exec.Cmd
	dir  string
	url  string
	log  string // the file of its output
	err  error
}

// output is the end of what the server printed.
func (s *server) output() string {
	b, _ := os.ReadFile(s.log)
	return tail(string(b), 3000)
}

var shared server

// start runs `cubicle serve` on a free port over a fresh data directory
// and waits until it is ready (the isolation probe passed).
func (s *server) start(t *testing.T) string {
	t.Helper()
	s.once.Do(func() { s.err = s.run() })
	if s.err != nil {
		t.Fatalf("cubicle serve: %v\n%s", s.err, s.output())
	}
	return s.url
}

func (s *server) run() error {
	var err error
	if s.dir, err = os.MkdirTemp("", "cubicle-console-test"); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	s.cmd = exec.Command(cubicleBin, "serve", "--data", s.dir, "--listen", addr)
	s.cmd.Env = append(os.Environ(), "CUBICLE_ADMIN_KEY="+adminKey, "CUBICLE_COMPUTERS_POOL_SIZE=0",
		"CUBICLE_COMPUTERS_MEMORY=256M", "CUBICLE_COMPUTERS_DISK=64M")
	logFile, err := os.Create(filepath.Join(s.dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logFile.Close() // the process has its own descriptor
	s.log = logFile.Name()
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.url = "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(s.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("not ready within 60 s")
}

// stop ends the server (SIGTERM: it destroys its computers) and removes
// its data.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

// TestServedBeside: in the real server, the console answers / and
// /console/…, and the API's routes, /openapi.json, /mcp, the Kernel
// Gateway API, the E2B API, health and the 404/405 fallback still answer
// as before.
func TestServedBeside(t *testing.T) {
	url := shared.start(t)
	for _, c := range []struct {
		method, path string
		status       int
		contains     string
	}{
		{"GET", "/", 200, "<title>Cubicle console</title>"},
		{"HEAD", "/", 200, ""},
		{"GET", "/console/js/app.js", 200, "import"},
		{"GET", "/healthz", 200, `"ok"`},
		{"GET", "/readyz", 200, `"ready"`},
		{"GET", "/openapi.json", 200, `"openapi":"3.1`},
		{"GET", "/metrics", 200, "cubicle_computers"},
		{"GET", "/v1/computers", 401, "invalid_api_key"},
		{"POST", "/mcp", 401, "invalid_api_key"},
		{"GET", "/api/kernels", 401, ""},
		{"GET", "/api/kernelspecs", 401, ""},
		{"GET", "/e2b/sandboxes", 401, ""},
		{"GET", "/nope", 404, "no route for GET /nope"},
		{"GET", "/console/nope.js", 404, "not_found"},
		{"POST", "/", 405, "allowed: GET, HEAD"},
		{"DELETE", "/console/js/app.js", 405, "allowed: GET, HEAD"},
	} {
		resp, body := do(t, c.method, url+c.path)
		if resp.StatusCode != c.status || !strings.Contains(body, c.contains) || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: %d (want %d), request id %q: %.300s", c.method, c.path, resp.StatusCode, c.status, resp.Header.Get("X-Request-Id"), body)
		}
	}
}

// seen is what testdata/e2e/console.mjs prints.
type seen struct {
	Error    string
	CSP      string
	Steps    []struct{ Name string }
	Shots    []string
	Computer string
	Terminal string
	Stored   struct {
		Session bool
		Cookies string
	}
	File struct{ Name, Text string }
	Plot struct {
		Width, Height int
		Alt           string
	}
	Table    [][]string
	Repr     string
	Artifact struct {
		Name, Magic string
		Bytes       int
	}
	NewSecret     string
	AfterSignOut  *string
	ConsoleErrors []string
	Unlabelled    []string
	Violations    []string
}

// TestConsoleInBrowser drives the console in headless Chromium
// (testdata/e2e/console.mjs, playwright-core): sign in, create a computer,
// a command in its terminal, a file up and down, a Python plot and table,
// the plot's artifact downloaded, audit, a new key, delete, sign out —
// with no violation of the page's Content-Security-Policy and no script
// error; then checks the screenshots it took.
func TestConsoleInBrowser(t *testing.T) {
	if _, err := os.Stat("testdata/e2e/node_modules/playwright-core"); err != nil {
		t.Fatalf("playwright-core is not installed (make test installs it: bash scripts/testdeps.sh): %v", err)
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("Debian's chromium is not installed (make test installs it: bash scripts/testdeps.sh): %v", err)
	}
	url := shared.start(t)
	// CONSOLE_SHOTS=dir keeps the screenshots there to look at; else
	// they are kept only when the test fails.
	shots, keep := os.Getenv("CONSOLE_SHOTS"), os.Getenv("CONSOLE_SHOTS") != ""
	var err error
	if keep {
		err = os.MkdirAll(shots, 0o755)
	} else {
		shots, err = os.MkdirTemp("", "cubicle-console-shots")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || keep {
			t.Logf("screenshots kept in %s", shots)
		} else {
			os.RemoveAll(shots)
		}
	})
	cmd := exec.CommandContext(t.Context(), "node", "console.mjs")
	cmd.Dir = "testdata/e2e"
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+url, "CUBICLE_KEY="+adminKey, "SHOTS="+shots)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr.String())
	}
	var got seen
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	if got.Error != "" {
		t.Fatalf("the browser run failed at %s\n(screenshot %s)\nsteps done: %+v\nscript errors: %q\nserver log:\n%s",
			got.Error, filepath.Join(shots, "failure.png"), got.Steps, got.ConsoleErrors, shared.output())
	}
	if len(got.Steps) != 14 {
		t.Errorf("steps: %+v", got.Steps)
	}
	if !strings.Contains(got.CSP, "script-src 'self';") {
		t.Errorf("the page's policy: %q", got.CSP)
	}
	if len(got.Violations) != 0 {
		t.Errorf("Content-Security-Policy violations: %q", got.Violations)
	}
	// The refused key's 401 is the only failed load the browser reports.
	for _, e := range got.ConsoleErrors {
		if !strings.Contains(e, "status of 401") {
			t.Errorf("script error: %s", e)
		}
	}
	if len(got.Unlabelled) != 0 {
		t.Errorf("form controls without a label: %q", got.Unlabelled)
	}
	if !got.Stored.Session || got.Stored.Cookies != "" || got.AfterSignOut != nil {
		t.Errorf("the key: in sessionStorage %v, cookies %q, after sign-out %v", got.Stored.Session, got.Stored.Cookies, got.AfterSignOut)
	}
	if !strings.HasPrefix(got.Computer, "cmp_") || !strings.Contains(got.Terminal, "console-42 1000") {
		t.Errorf("computer %q, terminal:\n%s", got.Computer, got.Terminal)
	}
	if got.File.Name != "hello.txt" || got.File.Text != "hello from the browser\n" {
		t.Errorf("downloaded file: %+v", got.File)
	}
	if got.Plot.Width < 100 || got.Plot.Height < 100 {
		t.Errorf("plot: %+v", got.Plot)
	}
	if len(got.Table) != 3 || strings.Join(got.Table[0], ",") != ",alpha,beta" || strings.Join(got.Table[2], ",") != "1,2,y|z" {
		t.Errorf("table: %q", got.Table)
	}
	if !strings.Contains(got.Repr, "alpha") || !strings.Contains(got.Repr, "y|z") {
		t.Errorf("the DataFrame's text: %q", got.Repr)
	}
	if !strings.HasSuffix(got.Artifact.Name, ".png") || got.Artifact.Magic != "89504e470d0a1a0a" || got.Artifact.Bytes < 1000 {
		t.Errorf("artifact: %+v", got.Artifact)
	}
	if !strings.HasPrefix(got.NewSecret, "cub_") {
		t.Errorf("new key's secret %q", got.NewSecret)
	}
	checkShots(t, shots, got.Shots)
}

// checkShots: every screenshot is a whole page (or the terminal) with
// content, not a blank or single-colour image; the terminal's is dark with
// light text on it.
func checkShots(t *testing.T, dir string, names []string) {
	t.Helper()
	want := []string{"login", "computers", "terminal", "terminal-only", "files", "python", "python-cell", "artifacts", "activity", "keys", "scripts"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("screenshots %q, want %q", names, want)
	}
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s.png: %v", name, err)
			continue
		}
		colours, dark, light := census(img)
		b := img.Bounds()
		switch {
		case name == "terminal-only":
			if dark < 0.8 || light == 0 {
				t.Errorf("terminal screenshot: %.2f dark, %d light pixels: not a terminal with text", dark, light)
			}
		case name == "python-cell": // the code, the plot (at least its 100x100 pixels), the text, the table
			if b.Dy() < 300 || dark == 0 {
				t.Errorf("python cell screenshot: %dx%d, %.2f dark", b.Dx(), b.Dy(), dark)
			}
		case b.Dx() != 1280 || b.Dy() != 900:
			t.Errorf("%s.png is %dx%d, want the 1280x900 viewport", name, b.Dx(), b.Dy())
		}
		if colours < 8 {
			t.Errorf("%s.png has %d colours: blank", name, colours)
		}
	}
}

// census counts an image's distinct colours, the share of dark pixels and
// the number of light ones.
func census(img image.Image) (colours int, dark float64, light int) {
	seen := map[uint32]bool{}
	var n, nDark int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			lum := (299*r + 587*g + 114*bl) / 1000 >> 8
			n++
			if lum < 60 {
				nDark++
			}
			if lum > 180 {
				light++
			}
		}
	}
	return len(seen), float64(nDark) / float64(n), light
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
