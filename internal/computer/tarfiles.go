package computer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Directory transfer as tar, moves, stat and mkdir: the agent does each
// as the sandbox user, confined to /workspace (sandbox.Files).

// MaxTarBytes is the most one tar transfer carries (computers.max_tar_bytes):
// an archive's bytes as sent, a downloaded directory's files.
func (m *Manager) MaxTarBytes() int64 {
	if m.cfg.MaxTarBytes > 0 {
		return m.cfg.MaxTarBytes
	}
	return sandbox.DefaultMaxTarBytes
}

func (m *Manager) maxTarEntries() int {
	return cmp.Or(max(m.cfg.MaxTarEntries, 0), sandbox.DefaultMaxTarEntries)
}

// PutTar extracts the tar archive body into directory dir (created when
// missing). A hostile entry is refused (ErrInvalid, naming it), and so is
// an archive past the limits (ErrTooLarge); entries before it stay.
func (m *Manager) PutTar(ctx context.Context, p governance.Principal, id, dir string, body io.Reader) (sandbox.TarDone, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.TarDone{}, err
	}
	defer m.busy(l)()
	dir = cmp.Or(dir, ".")
	limit := m.MaxTarBytes()
	done, err := l.sb.WriteTar(ctx, sandbox.TarWrite{Path: dir, MaxBytes: limit, MaxEntries: m.maxTarEntries()},
		&limitedReader{r: body, n: limit})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return done, fmt.Errorf("%w: a tar archive is limited to %d bytes", ErrTooLarge, limit)
		}
		return done, m.fileError(ctx, id, err)
	}
	return done, nil
}

// GetTar writes directory dir as a tar archive to w; a directory past the
// limits is refused before anything is written. An error after the first
// write leaves the archive cut short.
func (m *Manager) GetTar(ctx context.Context, p governance.Principal, id, dir string, w io.Writer) (sandbox.TarDone, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.TarDone{}, err
	}
	defer m.busy(l)()
	done, err := l.sb.ReadTar(ctx, sandbox.TarRead{Path: cmp.Or(dir, "."), MaxBytes: m.MaxTarBytes(), MaxEntries: m.maxTarEntries()}, w)
	return done, m.fileError(ctx, id, err)
}

// MoveFile renames a file or directory; an existing target is replaced
// only with overwrite.
func (m *Manager) MoveFile(ctx context.Context, p governance.Principal, id, from, to string, overwrite bool) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	return m.fileError(ctx, id, l.sb.Move(ctx, from, to, overwrite))
}

// StatFile describes one path (a symlink itself, not what it points to).
func (m *Manager) StatFile(ctx context.Context, p governance.Principal, id, path string) (sandbox.FileInfo, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := l.sb.Stat(ctx, cmp.Or(path, "."))
	return fi, m.fileError(ctx, id, err)
}

// MakeDir creates a directory (with its missing parents when parents).
func (m *Manager) MakeDir(ctx context.Context, p governance.Principal, id, path string, parents bool) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	return m.fileError(ctx, id, l.sb.Mkdir(ctx, path, parents))
}
