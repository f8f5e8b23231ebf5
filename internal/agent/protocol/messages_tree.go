package protocol

import "time"

// Directory trees: a page of a (recursive) listing, and watches.
//
//   - KindWalk (JSON WalkRequest) answers KindOK (JSON WalkPage) or
//     KindError.
//   - KindWatch (JSON WatchRequest) answers KindOK (JSON WatchStarted)
//     once the directory is watched, then KindWatchEvents frames (JSON
//     WatchBatch) as things change, and finally KindDataEnd (JSON
//     WatchEnd); or KindError instead of the KindOK. The host ends a watch
//     with KindWatchStop (empty) on its stream.
const (
	KindWalk        Kind = 16 // JSON WalkRequest
	KindWatch       Kind = 17 // JSON WatchRequest
	KindWatchStop   Kind = 18 // empty, on a KindWatch stream
	KindWatchEvents Kind = 19 // JSON WatchBatch (agent to host)
)

// Bounds of a page of a listing. A page holds at most MaxWalkLimit
// entries; a recursive listing descends at most MaxWalkDepth levels below
// its directory and reads at most MaxWalkDirEntries names of one directory;
// one page reads at most MaxWalkNames names in all (it ends early, with
// More, when it has entries to answer; without any it is ErrTooLarge).
const (
	MaxWalkLimit      = 1000
	MaxWalkDepth      = 32
	MaxWalkDirEntries = 10000
	MaxWalkNames      = 100000
)

// WalkRequest asks for the entries of the directory Path (with
// Recursive: of every directory below it, each directory followed by its
// entries, each directory's entries sorted by name) after the entry
// After (a path below Path, as a previous page's last entry's Path; ""
// from the start), at most Limit of them.
type WalkRequest struct {
	Path      string `json:"path"`
	After     string `json:"after,omitempty"`
	Limit     int    `json:"limit"`
	Recursive bool   `json:"recursive,omitempty"`
}

// WalkPage is one page: More says that entries follow the last one;
// Truncated that some were left out (a directory deeper than
// MaxWalkDepth, or with more than MaxWalkDirEntries entries).
type WalkPage struct {
	Entries   []FileInfo `json:"entries"`
	More      bool       `json:"more"`
	Truncated bool       `json:"truncated,omitempty"`
}

// Bounds of watches, per computer and per watch.
const (
	// MaxWatches is how many watches a computer's agent runs at a time.
	MaxWatches = 8
	// MaxWatchDirs bounds the directories one recursive watch watches;
	// those past it are not watched (WatchStarted.Truncated, or an
	// overflow event when they appear later).
	MaxWatchDirs = 4096
	// WatchQueue bounds the events a watch holds for the host; WatchRate
	// is how many it passes per second (with bursts of WatchQueue). What
	// does not fit is dropped and counted in an overflow event.
	WatchQueue = 1024
	WatchRate  = 1000
	// WatchBatchMax bounds the events of one KindWatchEvents frame.
	WatchBatchMax = 256
)

// WatchRequest watches the directory Path (with Recursive: and every
// directory below it, those made later included).
type WatchRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// WatchStarted says what is watched: the directory, how many
// directories, and whether some were left out (MaxWatchDirs).
type WatchStarted struct {
	Path      string `json:"path"`
	Dirs      int    `json:"dirs"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Watch event types.
const (
	EventCreate   = "create"
	EventModify   = "modify"
	EventDelete   = "delete"
	EventMove     = "move"
	EventOverflow = "overflow"
)

// WatchEvent is one change: Path (absolute in the computer) was created,
// modified, deleted, or moved (from From; a move into the watched tree
// from outside is a create, out of it a delete). An overflow event says
// that events were lost before it: Dropped of them by the agent's bounds,
// or an unknown number (Dropped 0) when the kernel's own queue overflowed.
type WatchEvent struct {
	Type    string    `json:"type"`
	Path    string    `json:"path,omitempty"`
	From    string    `json:"from,omitempty"`
	Dir     bool      `json:"dir,omitempty"`
	Time    time.Time `json:"time"`
	Dropped int       `json:"dropped,omitempty"`
}

// WatchBatch is the events of one frame, oldest first.
type WatchBatch struct {
	Events []WatchEvent `json:"events"`
}

// Reasons a watch ends.
const (
	WatchStopped = "stopped" // the host stopped it
	WatchDeleted = "deleted" // the directory was deleted, moved or unmounted
)

// WatchEnd ends a watch's stream.
type WatchEnd struct {
	Reason string `json:"reason"`
}
