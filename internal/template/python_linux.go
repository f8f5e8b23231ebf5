package template

import (
	"os"
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

// kernelDirs are where a Python's packages live in an image, relative to
// its root: Debian's (and its derivatives') system packages, then the
// versioned site-packages of /usr, /usr/local (the official python images)
// and /opt/conda.
var kernelDirs = []string{"usr/lib/python3/dist-packages", "usr/lib", "usr/local/lib", "opt/conda/lib"}

// hasKernel reports whether the image has ipykernel's launcher, which a
// computer's Python cells run (python -m ipykernel_launcher), in one of
// kernelDirs (or a python3.N/site-packages or dist-packages below one).
// Paths are resolved inside root (RESOLVE_IN_ROOT).
func hasKernel(root string) (bool, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(rfd)
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	exists := func(p string) bool {
		fd, err := unix.Openat2(rfd, p, how)
		if err == nil {
			unix.Close(fd)
		}
		return err == nil
	}
	for _, d := range kernelDirs {
		if exists(path.Join(d, "ipykernel_launcher.py")) {
			return true, nil
		}
		fd, err := unix.Openat2(rfd, d, &unix.OpenHow{Flags: how.Flags | unix.O_DIRECTORY, Resolve: how.Resolve})
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), d)
		names, _ := f.Readdirnames(1000)
		f.Close()
		for _, n := range names {
			if !strings.HasPrefix(n, "python3") {
				continue
			}
			for _, sub := range []string{"site-packages", "dist-packages"} {
				if exists(path.Join(d, n, sub, "ipykernel_launcher.py")) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
