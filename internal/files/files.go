package files

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// DefaultMaxBytes is the default upload limit.
const DefaultMaxBytes = 64 << 20

// Errors. A refused capability is governance.ErrForbidden, an unknown or
// foreign id store.ErrNotFound.
var (
	ErrTooLarge        = errdefs.New(errdefs.TooLarge, "", "file too large")
	ErrInvalidFilename = fmt.Errorf("%w: filename is not valid", governance.ErrInvalid)
)

// Service manages files and artifacts.
type Service struct {
	st       store.Store
	blobs    blob.Store
	maxBytes int64
	now      func() time.Time

	inputMaxFiles int
	inputMaxBytes int64
}

// Limits are the deployment's bounds of the service; a field ≤ 0 is its
// default.
type Limits struct {
	// MaxBytes bounds one upload (DefaultMaxBytes).
	MaxBytes int64
	// InputMaxFiles and InputMaxBytes bound what CopyInputs copies into a
	// computer by default (DefaultInputMaxFiles, DefaultInputMaxBytes).
	InputMaxFiles int
	InputMaxBytes int64
}

// New returns the service.
func New(st store.Store, blobs blob.Store, lim Limits) *Service {
	return &Service{st: st, blobs: blobs, now: time.Now, maxBytes: cmp.Or(max(lim.MaxBytes, 0), DefaultMaxBytes),
		inputMaxFiles: cmp.Or(max(lim.InputMaxFiles, 0), DefaultInputMaxFiles),
		inputMaxBytes: cmp.Or(max(lim.InputMaxBytes, 0), DefaultInputMaxBytes)}
}

// MaxBytes is the upload limit.
func (s *Service) MaxBytes() int64 { return s.maxBytes }

// SanitizeFilename keeps the last element of name (either slash) and
// rejects what is still unsafe: empty, "." or "..", NUL or control
// characters, invalid UTF-8, more than 255 bytes.
func SanitizeFilename(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	switch {
	case name == "" || name == "." || name == "..":
		return "", ErrInvalidFilename
	case len(name) > 255:
		return "", fmt.Errorf("%w: longer than 255 bytes", ErrInvalidFilename)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: not UTF-8", ErrInvalidFilename)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("%w: control characters", ErrInvalidFilename)
		}
	}
	return name, nil
}

func fileKey(id string) string     { return "files/" + id }
func artifactKey(id string) string { return "artifacts/" + id }

// NeedFiles is nil for a key with the files capability, else
// governance.ErrForbidden saying so.
func NeedFiles(p governance.Principal) error {
	if !p.Caps.HasFiles() {
		return fmt.Errorf("%w: %s", governance.ErrForbidden, SkipNoFilesCap)
	}
	return nil
}

// NeedArtifacts is nil for a key with the artifacts capability, else
// governance.ErrForbidden saying so.
func NeedArtifacts(p governance.Principal) error {
	if !p.Caps.HasArtifacts() {
		return fmt.Errorf("%w: %s", governance.ErrForbidden, SkipNoArtifactsCap)
	}
	return nil
}

// Upload stores r as a new file of p's organisation. A stream longer than
// MaxBytes is ErrTooLarge and leaves nothing behind.
func (s *Service) Upload(ctx context.Context, p governance.Principal, filename, purpose string, r io.Reader) (store.File, error) {
	if err := NeedFiles(p); err != nil {
		return store.File{}, err
	}
	name, err := SanitizeFilename(filename)
	if err != nil {
		return store.File{}, err
	}
	if len(purpose) > 64 {
		return store.File{}, fmt.Errorf("%w: purpose is longer than 64 bytes", governance.ErrInvalid)
	}
	f := store.File{ID: governance.NewID("file"), OrgID: p.Org.ID, KeyID: p.Key.ID, Filename: name,
		Purpose: purpose, CreatedAt: s.now().UTC()}
	n, sum, err := s.blobs.Put(ctx, fileKey(f.ID), r, s.maxBytes)
	if errors.Is(err, blob.ErrTooLarge) {
		return store.File{}, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, s.maxBytes)
	}
	if err != nil {
		return store.File{}, storeErr(ctx, "upload", err)
	}
	f.Bytes, f.SHA256 = n, sum
	if err := s.st.Files().Create(ctx, f); err != nil {
		s.blobs.Delete(context.WithoutCancel(ctx), fileKey(f.ID))
		return store.File{}, err
	}
	return f, nil
}

// storeErr is a failed blob write: store.ErrFull (logged with its cause,
// which the client does not see) when the server's disk is full.
func storeErr(ctx context.Context, what string, err error) error {
	if full := store.Full(err); errors.Is(full, store.ErrFull) {
		log.From(ctx).WarnContext(ctx, what+": the server's disk is full", "err", err)
		return full
	}
	return err
}

// GetFile returns a file of p's organisation.
func (s *Service) GetFile(ctx context.Context, p governance.Principal, id string) (store.File, error) {
	if err := NeedFiles(p); err != nil {
		return store.File{}, err
	}
	return s.st.Files().Get(ctx, p.Org.ID, id)
}

// ListFiles returns p's organisation's files, newest first.
func (s *Service) ListFiles(ctx context.Context, p governance.Principal) ([]store.File, error) {
	if err := NeedFiles(p); err != nil {
		return nil, err
	}
	return s.st.Files().List(ctx, p.Org.ID)
}

// OpenFile returns a file's record and bytes; the caller closes them.
func (s *Service) OpenFile(ctx context.Context, p governance.Principal, id string) (store.File, io.ReadCloser, error) {
	f, err := s.GetFile(ctx, p, id)
	if err != nil {
		return f, nil, err
	}
	rc, _, err := s.blobs.Open(ctx, fileKey(f.ID))
	if errors.Is(err, blob.ErrNotFound) {
		return f, nil, fmt.Errorf("file %s: %w", id, store.ErrNotFound)
	}
	return f, rc, err
}

// DeleteFile deletes a file: its record is marked and its bytes removed.
func (s *Service) DeleteFile(ctx context.Context, p governance.Principal, id string) error {
	if err := NeedFiles(p); err != nil {
		return err
	}
	err := s.st.Files().Delete(ctx, p.Org.ID, id, s.now().UTC())
	if errors.Is(err, store.ErrFull) {
		// Not even the database's headroom was left: free the file's bytes
		// first (it is p's: Get checks), then mark its record.
		if _, err := s.st.Files().Get(ctx, p.Org.ID, id); err != nil {
			return err
		}
		if err := s.blobs.Delete(context.WithoutCancel(ctx), fileKey(id)); err != nil {
			return err
		}
		err = s.st.Files().Delete(ctx, p.Org.ID, id, s.now().UTC())
	}
	if err != nil {
		return err
	}
	return s.blobs.Delete(context.WithoutCancel(ctx), fileKey(id))
}

// GetArtifact returns an artifact of p's organisation.
func (s *Service) GetArtifact(ctx context.Context, p governance.Principal, id string) (store.Artifact, error) {
	if err := NeedArtifacts(p); err != nil {
		return store.Artifact{}, err
	}
	return s.st.Artifacts().Get(ctx, p.Org.ID, id)
}

// ListArtifacts returns p's organisation's artifacts, newest first,
// optionally of one computer and/or response.
func (s *Service) ListArtifacts(ctx context.Context, p governance.Principal, computerID, responseID string) ([]store.Artifact, error) {
	if err := NeedArtifacts(p); err != nil {
		return nil, err
	}
	return s.st.Artifacts().List(ctx, store.ArtifactFilter{OrgID: p.Org.ID, ComputerID: computerID, ResponseID: responseID})
}

// OpenArtifact returns an artifact's record and bytes; the caller closes them.
func (s *Service) OpenArtifact(ctx context.Context, p governance.Principal, id string) (store.Artifact, io.ReadCloser, error) {
	a, err := s.GetArtifact(ctx, p, id)
	if err != nil {
		return a, nil, err
	}
	rc, _, err := s.blobs.Open(ctx, artifactKey(a.ID))
	if errors.Is(err, blob.ErrNotFound) {
		return a, nil, fmt.Errorf("artifact %s: %w", id, store.ErrNotFound)
	}
	return a, rc, err
}

// Export copies the file at path (resolved, inside the computer) into a
// new artifact of p, at most artifact.MaxBytes (else
// artifact.ErrTooLarge), as it was when the read started: a file that
// changed while it was read is read once more, then refused with
// sandbox.ErrChanging. Sandbox errors are returned as they are.
func (s *Service) Export(ctx context.Context, p governance.Principal, sb sandbox.Files, computerID, filePath string) (artifact.Ref, error) {
	if err := NeedArtifacts(p); err != nil {
		return artifact.Ref{}, err
	}
	buf, err := snapshot(ctx, sb, filePath)
	if err != nil {
		return artifact.Ref{}, err
	}
	name, err := SanitizeFilename(path.Base(filePath))
	if err != nil {
		name = "file"
	}
	return s.keep(ctx, p, computerID, name, buf)
}

// snapshot reads a file whole for an export, at most artifact.MaxBytes.
func snapshot(ctx context.Context, sb sandbox.Files, filePath string) (*bytes.Buffer, error) {
	for try := 0; ; try++ {
		var buf bytes.Buffer
		end, err := sb.ReadFile(ctx, sandbox.FileRead{Path: filePath, Limit: artifact.MaxBytes, Snapshot: true}, &buf)
		switch {
		case err != nil:
			return nil, err
		case end.Truncated || end.Size > artifact.MaxBytes || int64(buf.Len()) > artifact.MaxBytes:
			return nil, artifact.ErrTooLarge
		case !end.Changed:
			return &buf, nil
		case try > 0:
			return nil, fmt.Errorf("%s changed while it was read twice: %w", filePath, sandbox.ErrChanging)
		}
	}
}

// SaveImage keeps an image a kernel produced in computerID as an artifact
// of p (python calls with save_images).
func (s *Service) SaveImage(ctx context.Context, p governance.Principal, computerID, filename string, png []byte) (artifact.Ref, error) {
	if err := NeedArtifacts(p); err != nil {
		return artifact.Ref{}, err
	}
	return s.keep(ctx, p, computerID, filename, bytes.NewReader(png))
}

// keep stores r as a new artifact of p made in computerID.
func (s *Service) keep(ctx context.Context, p governance.Principal, computerID, name string, r io.Reader) (artifact.Ref, error) {
	a := store.Artifact{ID: governance.NewID("art"), OrgID: p.Org.ID, KeyID: p.Key.ID, ComputerID: computerID,
		Filename: name, CreatedAt: s.now().UTC()}
	if c, err := s.st.Computers().Get(ctx, p.Org.ID, computerID); err == nil {
		a.ResponseID = c.ResponseID
	}
	n, sum, err := s.blobs.Put(ctx, artifactKey(a.ID), r, artifact.MaxBytes)
	if errors.Is(err, blob.ErrTooLarge) {
		return artifact.Ref{}, artifact.ErrTooLarge
	}
	if err != nil {
		return artifact.Ref{}, storeErr(ctx, "keep an artifact", err)
	}
	a.Bytes, a.SHA256 = n, sum
	if err := s.st.Artifacts().Create(ctx, a); err != nil {
		s.blobs.Delete(context.WithoutCancel(ctx), artifactKey(a.ID))
		return artifact.Ref{}, err
	}
	return artifact.Ref{ID: a.ID, Filename: a.Filename, Bytes: a.Bytes}, nil
}
