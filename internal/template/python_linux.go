package template

import (
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// findPython returns the first executable python3 on the image's PATH,
// as a path inside root ("" if none). Paths are resolved inside root
// (RESOLVE_IN_ROOT): the image's symbolic links never reach the host.
func findPython(root string, env []string) (string, error) {
	pathVar := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(rfd)
	for _, d := range filepath.SplitList(pathVar) {
		if !path.IsAbs(d) {
			continue
		}
		cand := path.Join(d, "python3")
		fd, err := unix.Openat2(rfd, cand, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
		if err != nil {
			continue
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 {
			return cand, nil
		}
	}
	return "", nil
}
