package artifact

import "github.com/cubicle-sandbox/cubicle/internal/errdefs"

// MaxBytes is the largest artifact kept (25 MiB): an export, a saved image.
const MaxBytes = 25 << 20

// ErrTooLarge: the file to keep is larger than MaxBytes.
var ErrTooLarge = errdefs.New(errdefs.TooLarge, "", "file is too large to export")

// Ref is a file a computer exported and the server stored: what a tool's
// result, a python cell and an export answer carry.
type Ref struct {
	ID       string `json:"id"`
	Filename string `json:"filename"`
	Bytes    int64  `json:"bytes"`
}
