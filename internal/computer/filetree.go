package computer

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A computer's directory trees: pages of a (recursive) listing, and
// watches (sandbox.FileTree, done by the computer's agent).

func (m *Manager) treeOf(ctx context.Context, p governance.Principal, id string) (*live, sandbox.FileTree, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	tree, ok := l.sb.(sandbox.FileTree)
	if !ok {
		return nil, nil, errTreeUnsupported
	}
	return l, tree, nil
}

var errTreeUnsupported = errdefs.New(errdefs.FailedPrecondition, "file_tree_unsupported",
	"this host's computers cannot list their directories recursively or watch them")

// listPage is a page of a plain listing, for a computer without a
// FileTree: its entries by name, after the entry req.After.
func listPage(ctx context.Context, files sandbox.Files, req sandbox.WalkRequest) (sandbox.WalkPage, error) {
	list, err := files.List(ctx, req.Path)
	if err != nil {
		return sandbox.WalkPage{}, err
	}
	entries := slices.SortedFunc(slices.Values(list.Entries), func(x, y sandbox.FileInfo) int { return strings.Compare(x.Name, y.Name) })
	if req.After != "" {
		after := path.Base(req.After)
		entries = slices.DeleteFunc(entries, func(e sandbox.FileInfo) bool { return e.Name <= after })
	}
	page := sandbox.WalkPage{Entries: entries[:min(req.Limit, len(entries))], More: len(entries) > req.Limit, Truncated: list.Truncated}
	return page, nil
}

// WalkFiles answers one page of a directory of a computer of p's
// organisation (see sandbox.WalkRequest; Path "" is /workspace, Limit 0
// the most).
func (m *Manager) WalkFiles(ctx context.Context, p governance.Principal, id string, req sandbox.WalkRequest) (sandbox.WalkPage, error) {
	if req.Limit < 0 || req.Limit > sandbox.MaxWalkLimit {
		return sandbox.WalkPage{}, fieldError("limit", "must be between 1 and %d, not %d", sandbox.MaxWalkLimit, req.Limit)
	}
	if req.Limit == 0 {
		req.Limit = sandbox.MaxWalkLimit
	}
	if req.Path == "" {
		req.Path = "."
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.WalkPage{}, err
	}
	defer m.busy(l)()
	tree, ok := l.sb.(sandbox.FileTree)
	if !ok && req.Recursive {
		return sandbox.WalkPage{}, errTreeUnsupported
	}
	var page sandbox.WalkPage
	if ok {
		page, err = tree.Walk(ctx, req)
	} else {
		page, err = listPage(ctx, l.sb, req)
	}
	if err != nil {
		if isAny(err, sandbox.ErrInvalid) && strings.Contains(err.Error(), "after:") {
			return page, &FieldError{Field: "after", Err: fileError(err)}
		}
		return page, m.fileError(ctx, id, err)
	}
	return page, nil
}

// FileWatch is a watch of a computer's directory; it counts as a call
// (the computer does not idle out) until it is closed.
type FileWatch struct {
	sandbox.FileWatch
	m       *Manager
	id      string
	release func()
	once    sync.Once
}

// WatchFiles watches a directory of a computer of p's organisation
// (Path "" is /workspace) and returns once it is watched. Past
// sandbox's bound of watches per computer: ResourceExhausted
// (too_many_watches).
func (m *Manager) WatchFiles(ctx context.Context, p governance.Principal, id string, req sandbox.WatchRequest) (*FileWatch, error) {
	if req.Path == "" {
		req.Path = "."
	}
	l, tree, err := m.treeOf(ctx, p, id)
	if err != nil {
		return nil, err
	}
	release := m.busy(l)
	w, err := tree.WatchFiles(ctx, req)
	if err != nil {
		release()
		if isAny(err, sandbox.ErrTooManyProcesses) {
			return nil, errdefs.Wrap(errdefs.ResourceExhausted, "too_many_watches", err)
		}
		return nil, m.fileError(ctx, id, err)
	}
	return &FileWatch{FileWatch: w, m: m, id: id, release: release}, nil
}

// Next waits for the next events; at the end *sandbox.WatchEnded, or
// computer_gone when the computer ended.
func (w *FileWatch) Next(ctx context.Context) ([]sandbox.FileEvent, error) {
	evs, err := w.FileWatch.Next(ctx)
	var ended *sandbox.WatchEnded
	if err != nil && !errors.As(err, &ended) && ctx.Err() == nil {
		return nil, w.m.fileError(ctx, w.id, err)
	}
	return evs, err
}

// Close ends the watch.
func (w *FileWatch) Close() {
	w.once.Do(func() {
		w.FileWatch.Close()
		w.release()
	})
}
