package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"path"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Workspace is an in-memory /workspace: Attach scripts a Sandbox's
// WriteFile, ReadFile and Stat to answer from it. Paths are taken as they
// come (no resolution); a missing one is sandbox.ErrNotFound.
type Workspace struct {
	mu     sync.Mutex
	files  map[string][]byte
	writes []string
}

// NewWorkspace holds files (the map is shared, not copied; nil: empty).
func NewWorkspace(files map[string][]byte) *Workspace {
	if files == nil {
		files = map[string][]byte{}
	}
	return &Workspace{files: files}
}

// Attach scripts s's file calls with w and returns s.
func (w *Workspace) Attach(s *Sandbox) *Sandbox {
	s.WriteFileFunc, s.ReadFileFunc, s.StatFunc = w.write, w.read, w.stat
	return s
}

// Writes are the paths written so far, in order.
func (w *Workspace) Writes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func (w *Workspace) write(_ context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return sandbox.Written{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files[req.Path] = b
	w.writes = append(w.writes, req.Path)
	return sandbox.Written{Path: req.Path, Bytes: int64(len(b))}, nil
}

func (w *Workspace) read(_ context.Context, req sandbox.FileRead, out io.Writer) (sandbox.DataEnd, error) {
	w.mu.Lock()
	b, ok := w.files[req.Path]
	w.mu.Unlock()
	if !ok {
		return sandbox.DataEnd{}, fmt.Errorf("%w: %s", sandbox.ErrNotFound, req.Path)
	}
	n := min(int64(len(b)), req.Limit)
	out.Write(b[:n])
	return sandbox.DataEnd{Path: req.Path, Size: int64(len(b)), Truncated: n < int64(len(b))}, nil
}

func (w *Workspace) stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	w.mu.Lock()
	b, ok := w.files[p]
	w.mu.Unlock()
	if !ok {
		return sandbox.FileInfo{}, fmt.Errorf("%w: %s", sandbox.ErrNotFound, p)
	}
	return sandbox.FileInfo{Name: path.Base(p), Path: p, Type: "file", Size: int64(len(b))}, nil
}
