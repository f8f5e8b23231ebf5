package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// benchScratch is the temporary state of 'bench api' and 'bench python': a
// directory under which its servers and in-process computers keep their
// state, the steps that stop them, and the notes their clean-up left.
type benchScratch struct {
	root          string
	cubicle       string   // the cubicle binary: servers, and the agent of in-process computers
	undo          []func() // run last first by close
	notes         []string
	cleanupFailed bool
}

// note records a clean-up note (failed: something could not be removed)
// and shows it at once, since the report that will carry it comes last.
func (s *benchScratch) note(failed bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, "note: "+msg)
	s.notes = append(s.notes, msg)
	s.cleanupFailed = s.cleanupFailed || failed
}

// gc removes what computers under dir left, after their owner is gone;
// wantNone notes computers it found (their owner should have removed them).
func (s *benchScratch) gc(dir string, wantNone bool) {
	drv, err := linux.New(linux.Config{StateDir: dir})
	if err != nil {
		s.note(true, "gc %s: %v", dir, err)
		return
	}
	gctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := drv.GC(gctx)
	switch {
	case err != nil:
		s.note(true, "gc %s: %v", dir, err)
	case r.Computers > 0 && wantNone:
		s.note(false, "%d computers were left in %s and removed by gc", r.Computers, dir)
	}
}

// sandbox makes the driver whose computers the bench runs in this process;
// close collects what they left.
func (s *benchScratch) sandbox() (sandbox.Driver, error) {
	dir := filepath.Join(s.root, "sandbox")
	drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: s.cubicle})
	if err != nil {
		return nil, fmt.Errorf("in-process computers: %w (--sandbox=false measures over HTTP only)", err)
	}
	s.undo = append(s.undo, func() { s.gc(dir, true) })
	return drv, nil
}

// startServer starts s.cubicle's 'cubicle serve' with scfg's limits in
// its own directory root/dir; close stops it and collects what its
// computers left. label names it in messages when there are several ("":
// one); desc says how it is set up.
func (s *benchScratch) startServer(ctx context.Context, dir, label, desc string, scfg bench.ServerConfig) (*bench.Server, bench.ServerInfo, error) {
	which, prefix := "", ""
	if label != "" {
		which, prefix = " ("+label+")", label+" server: "
	}
	dir = filepath.Join(s.root, dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, bench.ServerInfo{}, err
	}
	if scfg.Binary == "" {
		scfg.Binary = s.cubicle
	}
	scfg.Data = dir
	fmt.Fprintf(os.Stderr, "starting cubicle serve (%s) in %s\n", desc, dir)
	srv, err := bench.StartServer(ctx, scfg)
	if err != nil {
		s.gc(dir, false)
		if label != "" {
			err = fmt.Errorf("%s server: %w", label, err)
		}
		return nil, bench.ServerInfo{}, err
	}
	fmt.Fprintf(os.Stderr, "cubicle serve%s is ready at %s\n", which, srv.URL)
	s.undo = append(s.undo, func() {
		fmt.Fprintf(os.Stderr, "stopping cubicle serve%s\n", which)
		stopErr := srv.Stop()
		if stopErr != nil {
			s.note(true, "%s%v; its log ends with:\n%s", prefix, stopErr, srv.LogTail(2048))
		}
		s.gc(dir, stopErr == nil)
	})
	return srv, bench.ServerInfo{Started: true, PoolSize: scfg.PoolSize, MaxConcurrent: scfg.MaxConcurrent, MemoryBudget: scfg.MemoryBudget}, nil
}

// close stops what was started, last first, removes the directory, and
// hands the notes to add, the report's AddNote (nil: there is no report;
// the notes were shown already).
func (s *benchScratch) close(add func(cleanup bool, format string, args ...any)) {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	if err := bench.RemoveTree(s.root); err != nil {
		s.note(true, "%v", err)
	}
	if add == nil {
		return
	}
	for _, n := range s.notes {
		add(false, "%s", n)
	}
	if s.cleanupFailed {
		add(true, "clean-up incomplete")
	}
}
