package computer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// fileError maps sandbox file errors to the service's kinds, keeping the
// sandbox sentinel in the chain for precise messages.
func fileError(err error) error {
	switch {
	case isAny(err, sandbox.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isAny(err, sandbox.ErrTooLarge, sandbox.ErrNoSpace):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case isAny(err, sandbox.ErrPathEscape, sandbox.ErrNotRegular, sandbox.ErrPermission,
		sandbox.ErrInvalid, sandbox.ErrNotDir, sandbox.ErrIsDir, sandbox.ErrExists, sandbox.ErrNotEmpty):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case isAny(err, sandbox.ErrGone):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case isAny(err, sandbox.ErrLocked):
		return errdefs.Wrap(errdefs.Conflict, "file_locked", err)
	}
	return err
}

// fileError is fileError for a call on computer id: a computer whose
// agent died during it is gone (409), as for exec.
func (m *Manager) fileError(ctx context.Context, id string, err error) error {
	if isAny(err, sandbox.ErrGone) {
		return m.callError(ctx, id, err)
	}
	return fileError(err)
}

// limitedReader fails once more than n bytes were read.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, fmt.Errorf("%w: the upload exceeds the limit", ErrTooLarge)
	}
	return n, err
}

// PutFile writes body to path (relative to /workspace), at most the
// deployment's file limit; the file appears atomically when complete.
func (m *Manager) PutFile(ctx context.Context, p governance.Principal, id, path string, body io.Reader) (sandbox.Written, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.Written{}, err
	}
	defer m.busy(l)()
	w, err := l.sb.WriteFile(ctx, sandbox.FileWrite{Path: path, Parents: true}, &limitedReader{r: body, n: m.cfg.MaxFileBytes})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return w, fmt.Errorf("%w: %s", ErrTooLarge, sandbox.FilesLimited(m.cfg.MaxFileBytes))
		}
		return w, m.fileError(ctx, id, err)
	}
	return w, nil
}

// GetFile copies a file to w; files over the limit are refused before any
// byte is sent.
func (m *Manager) GetFile(ctx context.Context, p governance.Principal, id, path string, w func(sandbox.FileInfo) io.Writer) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	defer m.busy(l)()
	fi, err := l.sb.Stat(ctx, path)
	if err != nil {
		return m.fileError(ctx, id, err)
	}
	if fi.Type == "dir" {
		return fmt.Errorf("%w: %s is a directory; list it with ?dir=", ErrInvalid, fi.Path)
	}
	if fi.Type != "file" {
		return fmt.Errorf("%w: %s is a %s, not a regular file", ErrInvalid, fi.Path, fi.Type)
	}
	if fi.Size > m.cfg.MaxFileBytes {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d", ErrTooLarge, fi.Path, fi.Size, m.cfg.MaxFileBytes)
	}
	_, err = l.sb.ReadFile(ctx, sandbox.FileRead{Path: path, Limit: m.cfg.MaxFileBytes}, w(fi))
	return m.fileError(ctx, id, err)
}

// DeleteFile removes a file or a directory tree.
func (m *Manager) DeleteFile(ctx context.Context, p governance.Principal, id, path string) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	return m.fileError(ctx, id, l.sb.Remove(ctx, path, true))
}

// ListFiles lists a directory.
func (m *Manager) ListFiles(ctx context.Context, p governance.Principal, id, dir string) (sandbox.Listing, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.Listing{}, err
	}
	if dir == "" {
		dir = "."
	}
	list, err := l.sb.List(ctx, dir)
	return list, m.fileError(ctx, id, err)
}
