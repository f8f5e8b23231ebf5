package jupyter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
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
		log.From(ctx).InfoContext(ctx, "jupyter: the working directory does not exist on this host; the kernel starts in /workspace")
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
		// The driver resolves source again from rr without following any
		// symlink and binds what it opened, so a tenant swapping a
		// directory for a symlink after this check cannot redirect the
		// mount (it fails with sandbox.ErrMountSource; see start).
		m := sandbox.Mount{Source: source, Target: target, ReadOnly: root.ReadOnly, Root: rr}
		spec := sandbox.DefaultSpec()
		spec.Mounts = []sandbox.Mount{m}
		if err := spec.Validate(); err != nil {
			log.From(ctx).InfoContext(ctx, "jupyter: the working directory cannot be mounted at its own path (a reserved path); the kernel starts in /workspace")
			return "", nil
		}
		return target, spec.Mounts
	}
	log.From(ctx).InfoContext(ctx, "jupyter: the working directory is not under an allowed mount root; the kernel starts in /workspace")
	return "", nil
}

// createComputer creates a kernel's computer with its working directory
// mounted (see workdir). When the directory changed between the check and
// the mount (sandbox.ErrMountSource: it became a symlink, or vanished), the
// computer is created without it and the kernel starts in /workspace, as
// for any other working directory that cannot be mounted.
//
// A kernel of a template's own spec (tmpl not "") starts in /workspace:
// the template's root is read-only and has no directory to mount the
// working directory on.
func (s *Server) createComputer(ctx context.Context, p governance.Principal, id, tmpl string, env map[string]string) (string, computer.View, error) {
	cwd, mounts := "", []sandbox.Mount(nil)
	if tmpl == "" {
		cwd, mounts = s.workdir(ctx, env)
	}
	req := computer.CreateRequest{MemoryMB: s.cfg.MemoryMB, Lifetime: s.cfg.Lifetime,
		Metadata: map[string]string{KernelMetadataKey: id}, Mounts: mounts, NoPool: true, Template: tmpl}
	view, err := s.mgr.Create(ctx, p, req)
	if err != nil && len(mounts) > 0 && errors.Is(err, sandbox.ErrMountSource) {
		log.From(ctx).InfoContext(ctx, "jupyter: the working directory changed while it was mounted; the kernel starts in /workspace")
		req.Mounts, cwd = nil, ""
		view, err = s.mgr.Create(ctx, p, req)
	}
	return cwd, view, err
}
