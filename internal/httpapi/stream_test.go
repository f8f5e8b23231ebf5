package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// streamed is what a streamed exec delivered: each stream's bytes, the
// number of stdout chunks (events or frames), when the first stdout byte
// came, and the exit.
type streamed struct {
	stdout, stderr []byte
	chunks         int
	first          time.Duration
	exit           client.ExecResult
}

// streamModes are the ways a process's exact bytes can be streamed.
var streamModes = []string{"sse-base64", "binary"}

// stream runs req on computer id in mode: "sse" (UTF-8 text events, as
// strings: ExecStream), "sse-base64" (decoded by ExecStreamBytes) or
// "binary" (the binary stream), through internal/client.
func (e *env) stream(ctx context.Context, id string, req client.ExecRequest, mode string) (streamed, error) {
	var s streamed
	start := time.Now()
	add := func(kind string, data []byte) {
		if kind == "stdout" {
			if s.chunks == 0 {
				s.first = time.Since(start)
			}
			s.chunks++
			s.stdout = append(s.stdout, data...)
		} else {
			s.stderr = append(s.stderr, data...)
		}
	}
	c := e.apiClient(e.admin)
	var err error
	if mode == "binary" {
		s.exit, err = c.ExecBinary(ctx, id, req, add)
		return s, err
	}
	if mode == "sse-base64" {
		req.Encoding = "base64"
		s.exit, err = c.ExecStreamBytes(ctx, id, req, add)
		return s, err
	}
	s.exit, err = c.ExecStream(ctx, id, req, func(o client.ExecOutput) { add(o.Stream, []byte(o.Data)) })
	return s, err
}

// streamOK is stream within callCtx's bound; it fails the test on error.
func (e *env) streamOK(t *testing.T, id string, req client.ExecRequest, mode string) streamed {
	t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	s, err := e.stream(ctx, id, req, mode)
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	return s
}

// TestExecStreamExactBytes (issue 15 goal 4): random bytes (NULs, invalid
// UTF-8, every byte value) written to stdout and stderr arrive exactly as
// written through SSE base64 events and through the binary stream, whose
// exit carries the result as SSE's exit event does.
func TestExecStreamExactBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxFileBytes = 8 << 20 })
	id := e.create(e.admin, nil).ID
	data := make([]byte, 3<<20+12345)
	rand.Read(data)
	copy(data, "\x00\xff\xe2\x82\x00\xc0\x80") // a NUL, a cut sequence, an overlong one
	if r := e.do(e.admin, "PUT", "/v1/computers/"+id+"/files/random.bin", data); r.code != http.StatusOK && r.code != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	errPart := data[:100000]
	req := client.ExecRequest{Command: "cat random.bin; head -c 100000 random.bin >&2; exit 3"}
	for _, mode := range streamModes {
		s := e.streamOK(t, id, req, mode)
		if !bytes.Equal(s.stdout, data) || !bytes.Equal(s.stderr, errPart) {
			t.Errorf("%s: %d bytes of stdout, %d of stderr; want the %d and %d written, byte for byte", mode, len(s.stdout), len(s.stderr), len(data), len(errPart))
		}
		if s.exit.ExitCode != 3 || s.exit.Stdout != "" || s.exit.Stderr != "" {
			t.Errorf("%s: exit %+v, want exit code 3 without the streamed output", mode, s.exit)
		}
		t.Logf("%s: %d stdout chunks for %d bytes", mode, s.chunks, len(data))
	}
}

// TestExecStreamCoalesced: a fast writer's many small writes reach the
// client as far fewer, larger events or frames; the process's output is
// read up to a frame's worth (protocol.OutputChunk, 1 MiB) at a time,
// and an SSE event carries at most 256 KiB of it.
func TestExecStreamCoalesced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	const writes, size = 16384, 1024 // 16 MiB in 1 KiB writes
	req := client.ExecRequest{Command: fmt.Sprintf("dd if=/dev/zero bs=%d count=%d status=none", size, writes)}
	for _, mode := range append([]string{"sse"}, streamModes...) {
		s := e.streamOK(t, id, req, mode)
		if len(s.stdout) != writes*size || bytes.Count(s.stdout, []byte{0}) != writes*size {
			t.Fatalf("%s: %d bytes, want %d NULs", mode, len(s.stdout), writes*size)
		}
		if s.chunks > writes/8 {
			t.Errorf("%s: %d chunks for %d writes of %d bytes, want at most %d (coalesced)", mode, s.chunks, writes, size, writes/8)
		}
		t.Logf("%s: %d chunks for %d writes, %d KiB on average", mode, s.chunks, writes, writes*size/s.chunks>>10)
	}
}

// TestExecStreamPrompt: a slow writer's line arrives while it sleeps,
// not with the next output or the exit, in every mode.
func TestExecStreamPrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	req := client.ExecRequest{Command: "echo first; sleep 3; echo second"}
	for _, mode := range append([]string{"sse"}, streamModes...) {
		s := e.streamOK(t, id, req, mode)
		if string(s.stdout) != "first\nsecond\n" || s.chunks != 2 {
			t.Errorf("%s: stdout %q in %d chunks, want 2 lines in 2", mode, s.stdout, s.chunks)
		}
		if s.first > 2*time.Second {
			t.Errorf("%s: the first line came after %v, want it before the 3 s sleep ended", mode, s.first)
		}
	}
}

// TestExecStreamOrder: what a process writes to stdout and to stderr,
// interleaved, arrives in order within each stream.
func TestExecStreamOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	const n = 3000
	req := client.ExecRequest{Command: fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "o$i"; echo "e$i" >&2; i=$((i+1)); done`, n)}
	var wantOut, wantErr strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&wantOut, "o%d\n", i)
		fmt.Fprintf(&wantErr, "e%d\n", i)
	}
	for _, mode := range append([]string{"sse"}, streamModes...) {
		s := e.streamOK(t, id, req, mode)
		if string(s.stdout) != wantOut.String() || string(s.stderr) != wantErr.String() {
			t.Errorf("%s: %d bytes of stdout and %d of stderr out of order or lost (want %d and %d)",
				mode, len(s.stdout), len(s.stderr), wantOut.Len(), wantErr.Len())
		}
	}
}

// TestExecStreamStalledReader: a client that stops reading an endless
// stream does not make the server buffer it: the process is held back by
// the pipe (backpressure), the server's live heap stays small, and
// closing the stream ends the process. Not parallel: the heap measured is
// the whole test process's.
func TestExecStreamStalledReader(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.ExecTimeout = 5 * time.Minute })
	id := e.create(e.admin, nil).ID
	for _, accept := range []string{client.BinaryStream, "text/event-stream"} {
		stop := peakHeap()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/computers/"+id+"/exec",
			strings.NewReader(`{"command": "cat /dev/zero", "encoding": "base64"}`))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 1<<20)); err != nil {
			t.Fatalf("%s: the first MiB: %v", accept, err)
		}
		time.Sleep(3 * time.Second) // not reading: everything the process writes now would pile up somewhere
		grew := stop()
		cancel()
		res.Body.Close()
		if grew > 32<<20 {
			t.Errorf("%s: the live heap grew %d MiB while the client did not read", accept, grew>>20)
		}
		t.Logf("%s: live heap growth %d KiB", accept, grew>>10)
	}
	eventually(t, 10*time.Second, "the stalled streams' processes end", func() bool {
		return e.sh(e.admin, id, "grep -lx cat /proc/[0-9]*/comm || true") == ""
	})
}
