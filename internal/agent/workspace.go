package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// WorkspacePath is where the user's files live inside a computer; the file
// API never reaches outside it.
const WorkspacePath = "/workspace"

const maxPathLen = sandbox.MaxPathLen

// resolveFlags confine every lookup beneath /workspace: no "..", absolute
// symlink or magic link (/proc/*/fd, /proc/*/root) can lead out, and no
// mount point is crossed.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// workspace performs file operations as the sandbox user. The agent is root
// (with only a few capabilities); each file operation runs on an OS thread
// locked for its duration whose filesystem uid and gid are the user's, so
// the kernel checks exactly the permissions the user's own code would have.
// The thread takes that identity for the operation and gives it back
// after (four system calls, a few microseconds), rather than being a
// dedicated thread: an idle computer's agent holds no thread for its files
// (docs/ARCHITECTURE.md, "Threads").
type workspace struct {
	root  *os.File
	slots chan struct{} // one per file operation running (fsWorkers at most)
}

// fsWorkers bounds the file operations running at once, and so the
// threads they hold.
const fsWorkers = 2

func newWorkspace(root *os.File) *workspace {
	return &workspace{root: root, slots: make(chan struct{}, fsWorkers)}
}

// as runs fn on a thread with the sandbox user's filesystem identity.
func (ws *workspace) as(fn func() error) error {
	ws.slots <- struct{}{}
	defer func() { <-ws.slots }()
	done := make(chan error, 1)
	go func() {
		// Locked while it is the user's; a thread that cannot be given
		// back its identity is never unlocked, so it ends with this
		// goroutine and no other goroutine ever runs with it.
		runtime.LockOSThread()
		if err := takeUserFSIdentity(); err != nil {
			done <- fmt.Errorf("%w: cannot take the sandbox user's identity: %v", protocol.ErrInternal, err)
			return
		}
		err := fn()
		if setFSIdentity(0, 0) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// takeUserFSIdentity gives the calling (locked) thread the sandbox user's
// filesystem uid and gid (setFSIdentity).
func takeUserFSIdentity() error {
	return setFSIdentity(SandboxUID, SandboxGID)
}

// setFSIdentity gives the calling (locked) thread filesystem uid and gid,
// keeping its parent-death signal: the kernel clears a thread's on any
// change of fsuid or fsgid, and the agent dies with its launcher only
// through its main thread's, which this thread may be when the main
// goroutine is not locked to it (the agent's init in
// internal/sandbox/linux/agentmain.go locks it).
func setFSIdentity(uid, gid int) error {
	var sig int
	if err := unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0); err != nil {
		return fmt.Errorf("read the parent-death signal: %w", err)
	}
	if err := unix.Setfsgid(gid); err != nil {
		return fmt.Errorf("setfsgid: %w", err)
	}
	if err := unix.Setfsuid(uid); err != nil {
		return fmt.Errorf("setfsuid: %w", err)
	}
	// setfsuid and setfsgid report no failure but their previous value:
	// read the values back (-1 changes nothing).
	if u, _ := unix.SetfsuidRetUid(-1); u != uid {
		return fmt.Errorf("setfsuid %d: the thread's fsuid is %d", uid, u)
	}
	if g, _ := unix.SetfsgidRetGid(-1); g != gid {
		return fmt.Errorf("setfsgid %d: the thread's fsgid is %d", gid, g)
	}
	if sig == 0 {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0); err != nil {
		return fmt.Errorf("restore the parent-death signal: %w", err)
	}
	return nil
}

// rel turns a user path into a clean path relative to /workspace.
func rel(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty path", protocol.ErrInvalid)
	}
	if len(p) > maxPathLen || strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: path too long or contains a NUL byte", protocol.ErrInvalid)
	}
	if path.IsAbs(p) {
		r, ok := strings.CutPrefix(path.Clean(p), WorkspacePath)
		if !ok || (r != "" && r[0] != '/') {
			return "", pathError(protocol.ErrPathEscape, p)
		}
		p = strings.TrimPrefix(r, "/")
		if p == "" {
			p = "."
		}
	}
	r := path.Clean(p)
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", pathError(protocol.ErrPathEscape, p)
	}
	return r, nil
}

// display is the absolute in-computer path of a relative one.
func display(r string) string {
	if r == "." {
		return WorkspacePath
	}
	return WorkspacePath + "/" + r
}

// open resolves r beneath /workspace. Call it on a worker thread.
func (ws *workspace) open(r string, flags uint64, mode uint32) (int, error) {
	for races := 0; ; {
		fd, err := unix.Openat2(int(ws.root.Fd()), r, &unix.OpenHow{
			Flags: flags | unix.O_CLOEXEC, Mode: uint64(mode), Resolve: resolveFlags,
		})
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			// A lease on the file (with O_NONBLOCK), or a concurrent
			// rename that raced the lookup: retry only the latter, boundedly.
			if ws.leased(r, flags) {
				return -1, lockedError(display(r))
			}
			if races++; races > maxLookupRetries {
				return -1, lookupRacedError(display(r))
			}
			continue
		}
		if err != nil {
			return -1, errnoError(err, display(r))
		}
		return fd, nil
	}
}

// errnoError maps a kernel error to a sentinel, naming the path.
func errnoError(err error, p string) error {
	var sentinel error
	switch {
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		sentinel = protocol.ErrPathEscape
	case errors.Is(err, unix.ENOENT):
		sentinel = protocol.ErrNotFound
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		sentinel = protocol.ErrPermission
	case errors.Is(err, unix.ENOTDIR):
		sentinel = protocol.ErrNotDir
	case errors.Is(err, unix.EISDIR):
		sentinel = protocol.ErrIsDir
	case errors.Is(err, unix.EEXIST):
		sentinel = protocol.ErrExists
	case errors.Is(err, unix.ENOTEMPTY):
		sentinel = protocol.ErrNotEmpty
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		sentinel = protocol.ErrNoSpace
	case errors.Is(err, unix.EFBIG):
		sentinel = protocol.ErrTooLarge
	case errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENODEV):
		sentinel = protocol.ErrNotRegular
	case errors.Is(err, unix.ENAMETOOLONG), errors.Is(err, unix.EINVAL):
		sentinel = protocol.ErrInvalid
	default:
		return fmt.Errorf("%w: %s: %v", protocol.ErrInternal, p, err)
	}
	return pathError(sentinel, p)
}

// cwd validates a working directory for a new process.
func (ws *workspace) cwd(dir string) (string, error) {
	if dir == "" {
		return WorkspacePath, nil
	}
	if !path.IsAbs(dir) {
		dir = path.Join(WorkspacePath, dir)
	}
	if len(dir) > maxPathLen || strings.IndexByte(dir, 0) >= 0 {
		return "", fmt.Errorf("%w: working directory too long or contains a NUL byte", protocol.ErrInvalid)
	}
	return path.Clean(dir), nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "device"
}

func notRegular(p string, mode uint32) error {
	if mode&unix.S_IFMT == unix.S_IFDIR {
		return pathError(protocol.ErrIsDir, p)
	}
	return fmt.Errorf("%s: %w (it is a %s)", p, protocol.ErrNotRegular, typeName(mode))
}

// resolveCwd checks a requested working directory as the sandbox user.
func (s *Server) resolveCwd(cwd string) (string, error) {
	dir, err := s.ws.cwd(cwd)
	if err != nil {
		return "", err
	}
	var st os.FileInfo
	var real string
	err = s.ws.as(func() error {
		var err error
		if st, err = os.Stat(dir); err == nil {
			real, err = filepath.EvalSymlinks(dir)
		}
		return err
	})
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: working directory %s does not exist or is not a directory", protocol.ErrNotFound, dir)
	}
	if agentProc(real) {
		return "", fmt.Errorf("%w: working directory %s cannot be used: it is in /proc of the computer's agent, which commands cannot see; use a directory such as /workspace", protocol.ErrNotFound, dir)
	}
	return dir, nil
}

// agentProc reports whether dir is in the /proc directory of the agent's
// own process (pid 1, or one of its threads). The agent sees it as itself,
// so its checks pass, but to the sandbox user's processes it does not exist.
func agentProc(dir string) bool {
	rest, ok := strings.CutPrefix(dir, "/proc/")
	if !ok {
		return false
	}
	pid, _, _ := strings.Cut(rest, "/")
	if _, err := strconv.Atoi(pid); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			return strings.TrimSpace(v) == strconv.Itoa(os.Getpid())
		}
	}
	return false
}

// pathError wraps a sentinel with the path it concerns.
func pathError(sentinel error, path string) error {
	return fmt.Errorf("%s: %w", path, sentinel)
}
