package sandbox

import (
	"context"
	"time"
)

// FileTree pages through and watches a computer's directories. It is
// optional (a driver's Sandbox may implement it): the caller asserts it.
type FileTree interface {
	// Walk answers one page of a directory's entries (see WalkRequest).
	Walk(ctx context.Context, req WalkRequest) (WalkPage, error)
	// WatchFiles watches a directory and returns once it is watched;
	// cancelling ctx ends the watch as FileWatch.Close does.
	WatchFiles(ctx context.Context, req WatchRequest) (FileWatch, error)
}

// Bounds of a page of a listing (the agent's, see protocol.MaxWalk*).
const (
	MaxWalkLimit = 1000
	MaxWalkDepth = 32
)

// WalkRequest asks for the entries of directory Path after the entry
// After (a path below Path; "": from the start), at most Limit (1 to
// MaxWalkLimit): with Recursive, of every directory below it too, each
// directory followed by its entries, each directory's entries sorted by
// name; no symlink is followed and no mount crossed.
type WalkRequest struct {
	Path      string
	After     string
	Limit     int
	Recursive bool
}

// WalkPage is one page: More when entries follow its last; Truncated
// when some were left out (too deep, or a directory too large).
type WalkPage struct {
	Entries   []FileInfo
	More      bool
	Truncated bool
}

// WatchRequest watches directory Path (Recursive: and every directory
// below it, those made later too).
type WatchRequest struct {
	Path      string
	Recursive bool
}

// FileEvent is one change in a watched directory: Type is "create",
// "modify", "delete", "move" (From is the old path) or "overflow"
// (Dropped events were lost before it; 0: an unknown number).
type FileEvent struct {
	Type    string
	Path    string
	From    string
	Dir     bool
	Time    time.Time
	Dropped int
}

// FileWatch is a running watch.
type FileWatch interface {
	// Path is the watched directory; Dirs how many directories are
	// watched, Truncated whether some were left out.
	Path() string
	Dirs() (int, bool)
	// Next waits for the next events. When the watch ended it returns
	// ErrWatchEnded with why ("stopped", "deleted": the directory went).
	Next(ctx context.Context) ([]FileEvent, error)
	// Close ends the watch and waits (boundedly) for its end.
	Close()
}

// WatchEnded is the end of a watch: Reason is "stopped" or "deleted".
type WatchEnded struct{ Reason string }

func (e *WatchEnded) Error() string { return "the watch ended: " + e.Reason }
