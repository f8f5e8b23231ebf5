package linux

import (
	"context"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

var _ sandbox.FileTree = (*computer)(nil)

// Walk answers a page of a directory listing (the agent walks it).
func (c *computer) Walk(ctx context.Context, req sandbox.WalkRequest) (sandbox.WalkPage, error) {
	return c.client.Walk(ctx, req)
}

// WatchFiles watches a directory with the agent's inotify.
func (c *computer) WatchFiles(ctx context.Context, req sandbox.WatchRequest) (sandbox.FileWatch, error) {
	w, err := c.client.WatchFiles(ctx, req)
	if err != nil {
		return nil, err
	}
	return w, nil
}
