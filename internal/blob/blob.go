package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Errors.
var (
	ErrNotFound   = errors.New("blob not found")
	ErrTooLarge   = errors.New("blob too large")
	ErrInvalidKey = errors.New("invalid blob key")
)

// Store keeps objects by key. Implementations are safe for concurrent use.
type Store interface {
	// Put stores r under key, reading at most limit bytes: a longer stream
	// is ErrTooLarge and nothing is stored. An object is visible whole or
	// not at all.
	Put(ctx context.Context, key string, r io.Reader, limit int64) (size int64, sha256hex string, err error)
	// Open returns the object and its size, ErrNotFound if absent.
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// Delete removes the object; deleting an absent one is not an error.
	Delete(ctx context.Context, key string) error
}

// ValidKey reports whether key is acceptable: 1 to 200 characters of
// [A-Za-z0-9_-] in segments separated by single slashes, no "." or ".."
// segment. Keys are therefore safe as relative paths and as S3 keys.
func ValidKey(key string) bool {
	if key == "" || len(key) > 200 {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" {
			return false
		}
		for _, c := range seg {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
			if !ok {
				return false
			}
		}
	}
	return true
}

// Dir stores objects as files under a directory.
type Dir struct {
	root string
}

var _ Store = (*Dir)(nil)

// NewDir returns a store rooted at root, creating it if needed.
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return &Dir{root: root}, nil
}

func (d *Dir) path(key string) (string, error) {
	if !ValidKey(key) {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Put writes to a temporary file beside the target and renames it.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, limit int64) (int64, string, error) {
	p, err := d.path(key)
	if err != nil {
		return 0, "", err
	}
	if limit < 0 {
		limit = 0
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return 0, "", err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(ctxReader{ctx, r}, limit+1))
	if err != nil {
		return 0, "", err
	}
	if n > limit {
		return 0, "", fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, limit)
	}
	if err := tmp.Sync(); err != nil {
		return 0, "", err
	}
	if err := tmp.Close(); err != nil {
		return 0, "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return 0, "", err
	}
	done = true
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// Open opens the object's file.
func (d *Dir) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// Delete removes the object's file.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
