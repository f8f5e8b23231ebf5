package files

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Default input limits of a deployment ([files] input_max_files and
// input_max_bytes).
const (
	DefaultInputMaxFiles = 50
	DefaultInputMaxBytes = 256 << 20
)

// Where inputs go inside a computer.
const (
	InputsDir    = "/workspace/inputs"
	ArtifactsDir = "/workspace/artifacts"
)

// Reasons of a skipped input (InputsReport.Skipped), fixed sentences; the
// first two are also the detail of NeedFiles' and NeedArtifacts' errors.
const (
	SkipNoFilesCap     = "the key lacks the files capability"
	SkipNoArtifactsCap = "the key lacks the artifacts capability"
	SkipNotFound       = "not found"
	SkipInvalidID      = "invalid id"
	SkipCountLimit     = "the file limit is reached"
	SkipByteLimit      = "it would exceed the byte limit"
	SkipPresent        = "already present"
	SkipUnwritable     = "the computer cannot hold it"
)

// InputsRequest names what to copy into a computer, newest first.
type InputsRequest struct {
	// FileIDs: the request's files, then the conversation's.
	FileIDs []string
	// ArtifactIDs: the conversation's artifacts.
	ArtifactIDs []string
	// MaxFiles and MaxBytes bound the copy; ≤ 0 takes the service's limits.
	MaxFiles int
	MaxBytes int64
}

// Copied is one input written into the computer.
type Copied struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Skipped is one input not written, with one of the Skip* reasons.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// InputsReport is what CopyInputs did, in the order of the request.
type InputsReport struct {
	Copied  []Copied  `json:"copied"`
	Skipped []Skipped `json:"skipped"`
}

// input is one candidate of CopyInputs.
type input struct {
	id       string
	artifact bool
}

// CopyInputs copies p's files to /workspace/inputs/<file id>/<filename>
// and then p's artifacts to /workspace/artifacts/<artifact id>/<filename>,
// each list in the given order (newest first). Files need the files
// capability and artifacts the artifacts capability; an id p's
// organisation cannot read (another organisation's, deleted, unknown) is
// skipped. Copying stops once MaxFiles inputs are in place; an input larger
// than the bytes left is skipped and smaller later ones are still copied.
// An input whose path already exists in the computer is not copied again:
// it is reported as skipped (SkipPresent) and counts toward MaxFiles but
// not toward MaxBytes. The error return is for a computer that failed.
func (s *Service) CopyInputs(ctx context.Context, p governance.Principal, sb sandbox.Files, req InputsRequest) (InputsReport, error) {
	rep := InputsReport{Copied: []Copied{}, Skipped: []Skipped{}}
	maxFiles, left := req.MaxFiles, req.MaxBytes
	if maxFiles <= 0 {
		maxFiles = s.inputMaxFiles
	}
	if left <= 0 {
		left = s.inputMaxBytes
	}
	count := 0
	skip := func(id, reason string) { rep.Skipped = append(rep.Skipped, Skipped{ID: id, Reason: reason}) }
	for _, in := range req.inputs() {
		switch {
		case !in.artifact && !p.Caps.HasFiles():
			skip(in.id, SkipNoFilesCap)
			continue
		case in.artifact && !p.Caps.HasArtifacts():
			skip(in.id, SkipNoArtifactsCap)
			continue
		case count >= maxFiles:
			skip(in.id, SkipCountLimit)
			continue
		}
		src, reason, err := s.locate(ctx, p, in)
		if err != nil {
			return rep, err
		}
		var n int64
		if reason == "" {
			if n, reason, err = s.copyInput(ctx, sb, src, left); err != nil {
				return rep, err
			}
		}
		switch reason {
		case "":
			count++
			left -= n
			rep.Copied = append(rep.Copied, Copied{ID: in.id, Path: src.target, Bytes: n})
		case SkipPresent:
			count++
			skip(in.id, reason)
		default:
			skip(in.id, reason)
		}
	}
	return rep, nil
}

// inputs lists req's files, then its artifacts.
func (req InputsRequest) inputs() []input {
	var all []input
	for _, id := range req.FileIDs {
		all = append(all, input{id: id})
	}
	for _, id := range req.ArtifactIDs {
		all = append(all, input{id: id, artifact: true})
	}
	return all
}

// source is where an input's bytes are (a blob key) and where they go.
type source struct {
	key, target string
	size        int64
}

// locate finds the input p's organisation may read and its target path in
// the computer; a non-empty reason says why it is skipped instead.
func (s *Service) locate(ctx context.Context, p governance.Principal, in input) (source, string, error) {
	if safe, err := SanitizeFilename(in.id); err != nil || safe != in.id {
		return source{}, SkipInvalidID, nil
	}
	var (
		name, key, dir string
		size           int64
	)
	if in.artifact {
		a, err := s.st.Artifacts().Get(ctx, p.Org.ID, in.id)
		if errors.Is(err, store.ErrNotFound) {
			return source{}, SkipNotFound, nil
		} else if err != nil {
			return source{}, "", err
		}
		name, key, dir, size = a.Filename, artifactKey(a.ID), ArtifactsDir, a.Bytes
	} else {
		f, err := s.st.Files().Get(ctx, p.Org.ID, in.id)
		if errors.Is(err, store.ErrNotFound) {
			return source{}, SkipNotFound, nil
		} else if err != nil {
			return source{}, "", err
		}
		name, key, dir, size = f.Filename, fileKey(f.ID), InputsDir, f.Bytes
	}
	name, err := SanitizeFilename(name)
	if err != nil {
		name = "file"
	}
	return source{key: key, target: dir + "/" + in.id + "/" + name, size: size}, "", nil
}

// copyInput writes src into the computer if it is not there yet and fits in
// left bytes, and returns the bytes written; a non-empty reason says why it
// was not written. The error return is for a computer that failed.
func (s *Service) copyInput(ctx context.Context, sb sandbox.Files, src source, left int64) (int64, string, error) {
	if _, err := sb.Stat(ctx, src.target); err == nil {
		return 0, SkipPresent, nil
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		if fatal(err) {
			return 0, "", err
		}
		return 0, SkipUnwritable, nil
	}
	if src.size > left {
		return 0, SkipByteLimit, nil
	}
	n, err := s.copyBlob(ctx, sb, src.key, src.target, src.size)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return 0, SkipNotFound, nil
	case err != nil && fatal(err):
		return 0, "", err
	case err != nil:
		sb.Remove(context.WithoutCancel(ctx), src.target, false)
		return 0, SkipUnwritable, nil
	}
	return n, "", nil
}

// copyBlob writes at most size bytes of the blob key to target.
func (s *Service) copyBlob(ctx context.Context, sb sandbox.Files, key, target string, size int64) (int64, error) {
	rc, _, err := s.blobs.Open(ctx, key)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	w, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: target, Mode: 0o644, Parents: true}, io.LimitReader(rc, size))
	if err != nil {
		return 0, fmt.Errorf("copy to the computer: %w", err)
	}
	return w.Bytes, nil
}

// fatal reports an error that is the computer's or the caller's, not the
// input's: a gone agent or a cancelled context.
func fatal(err error) bool {
	return errors.Is(err, sandbox.ErrGone) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
