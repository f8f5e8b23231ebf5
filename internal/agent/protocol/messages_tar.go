package protocol

// Directory transfer as tar, and moves, inside the workspace.
const (
	// KindTarWrite starts an extraction (JSON TarWrite); the archive
	// follows as KindData frames and a KindDataEnd (non-empty: aborted).
	// The agent answers KindOK (JSON TarDone) or KindError, possibly
	// before the archive's end (a refused entry): the host then stops
	// sending and ends the stream with an aborting KindDataEnd.
	KindTarWrite Kind = iota + 13
	// KindTarRead asks for a directory as tar (JSON TarRead): KindData
	// frames, then KindDataEnd (JSON TarDone) or KindError. The host
	// stops it early with a KindDataEnd on the same stream.
	KindTarRead
	// KindMove renames a file or directory (JSON MoveRequest); KindOK
	// with an empty object.
	KindMove
)

// TarWrite extracts a tar archive into the directory Path (created with
// its parents when missing). Regular files, directories and symlinks are
// extracted as the sandbox user; no symlink, in the archive or in the
// workspace, is ever followed. Hard links, devices, FIFOs, absolute names
// and ".." are refused, naming the entry. MaxBytes bounds the sum of the
// files' sizes, MaxEntries the number of entries.
type TarWrite struct {
	Path       string `json:"path"`
	MaxBytes   int64  `json:"max_bytes"`
	MaxEntries int    `json:"max_entries"`
}

// TarRead asks for the directory Path as a tar archive (regular files,
// directories and symlinks as symlinks; sockets, FIFOs and devices are
// left out), refused before any byte is sent when it has more than
// MaxEntries entries or its files more than MaxBytes bytes.
type TarRead struct {
	Path       string `json:"path"`
	MaxBytes   int64  `json:"max_bytes"`
	MaxEntries int    `json:"max_entries"`
}

// TarDone ends a tar transfer: the directory, how many entries and how
// many bytes of file content it carried.
type TarDone struct {
	Path    string `json:"path"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// MoveRequest renames From to To (both inside the workspace); an existing
// To is replaced only with Overwrite.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}
