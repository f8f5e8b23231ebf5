package agent

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// move renames a file or directory inside the workspace, as the sandbox
// user: both parents are resolved beneath /workspace like every path, and
// rename never follows the last component (a symlink is moved, not what
// it points to). Without Overwrite an existing target is refused
// (RENAME_NOREPLACE, atomically).
func (s *Server) move(id uint32, req protocol.MoveRequest) {
	from, err := rel(req.From)
	if err != nil {
		s.sendError(id, err)
		return
	}
	to, err := rel(req.To)
	if err != nil {
		s.sendError(id, err)
		return
	}
	if from == "." || to == "." {
		s.sendError(id, fmt.Errorf("%w: the workspace itself cannot be moved or replaced", protocol.ErrInvalid))
		return
	}
	err = s.ws.as(func() error {
		fromDir, fromBase := path.Split(from)
		toDir, toBase := path.Split(to)
		ffd, err := s.ws.open(path.Clean(fromDir+"."), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ffd)
		tfd, err := s.ws.open(path.Clean(toDir+"."), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		var flags uint
		if !req.Overwrite {
			flags = unix.RENAME_NOREPLACE
		}
		switch err := unix.Renameat2(ffd, fromBase, tfd, toBase, flags); err {
		case nil:
			return nil
		case unix.ENOENT:
			return pathError(protocol.ErrNotFound, display(from))
		case unix.EXDEV:
			return fmt.Errorf("%w: %s and %s are on different filesystems (a mount); copy instead", protocol.ErrInvalid, display(from), display(to))
		case unix.EINVAL:
			return fmt.Errorf("%w: %s cannot be moved into itself", protocol.ErrInvalid, display(from))
		default:
			return errnoError(err, display(to))
		}
	})
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.sendJSON(protocol.KindOK, id, struct{}{})
}
