package kgw

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// workdir picks a new kernel's working directory from the client's
// environment: KERNEL_WORKING_DIR (Jupyter Enterprise Gateway's name, which
// jupyter_server sets to a notebook's directory), else PWD. When it names an
// existing directory under one of the operator's mount roots, that
// directory is mounted into the computer at the same path (read-only when
// its root is) and becomes the cwd; otherwise the kernel starts in
// /workspace (cwd ""). Paths are never logged: they name users' projects.
func (s *Server) workdir(ctx context.Context, env map[string]string) (string, []sandbox.Mount) {
	if len(s.cfg.MountRoots) == 0 {
		return "", nil
	}
	dir := env["KERNEL_WORKING_DIR"]
	if dir == "" {
		dir = env["PWD"]
	}
	if dir == "" || !filepath.IsAbs(dir) || strings.Contains(dir, "..") {
		return "", nil
	}
	target := filepath.Clean(dir)
	source, err := filepath.EvalSymlinks(target)
	if err != nil {
		slog.InfoContext(ctx, "jupyter: the working directory does not exist on this host; the kernel starts in /workspace")
		return "", nil
	}
	if fi, err := os.Stat(source); err != nil || !fi.IsDir() {
		return "", nil
	}
	for _, root := range s.cfg.MountRoots {
		rr, err := filepath.EvalSymlinks(root.Path)
		if err != nil || (source != rr && !strings.HasPrefix(source, rr+"/")) {
			continue
		}
		m := sandbox.Mount{Source: source, Target: target, ReadOnly: root.ReadOnly}
		spec := sandbox.DefaultSpec()
		spec.Mounts = []sandbox.Mount{m}
		if err := spec.Validate(); err != nil {
			slog.InfoContext(ctx, "jupyter: the working directory cannot be mounted at its own path (a reserved path); the kernel starts in /workspace")
			return "", nil
		}
		return target, spec.Mounts
	}
	slog.InfoContext(ctx, "jupyter: the working directory is not under an allowed mount root; the kernel starts in /workspace")
	return "", nil
}
