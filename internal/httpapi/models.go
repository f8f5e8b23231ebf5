package httpapi

import (
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The REST API's own shapes of what comes from the sandbox layer, and the
// one place each is converted: a change below (the sandbox's types, the
// control channel) cannot change a body (testdata/golden pins them).

// fileEntry is one file of a listing (GET /v1/computers/{id}/files).
type fileEntry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// fileListing is the answer of GET /v1/computers/{id}/files.
type fileListing struct {
	Data      []fileEntry `json:"data"`
	Object    string      `json:"object"`
	Truncated bool        `json:"truncated"`
}

func listingView(l sandbox.Listing) fileListing {
	out := fileListing{Data: make([]fileEntry, len(l.Entries)), Object: "list", Truncated: l.Truncated}
	for i, fi := range l.Entries {
		out.Data[i] = fileEntry(fi)
	}
	return out
}

// fileWritten is the answer of PUT /v1/computers/{id}/files/{path}.
type fileWritten struct {
	Bytes int64  `json:"bytes"`
	Path  string `json:"path"`
}

func writtenView(w sandbox.Written) fileWritten {
	return fileWritten{Bytes: w.Bytes, Path: w.Path}
}

// pythonOutputEvent is the data of a python call's "output" event.
type pythonOutputEvent struct {
	Cell   int           `json:"cell"`
	Output kernel.Output `json:"output"`
}

func outputEvent(o sandbox.PythonOutput) pythonOutputEvent {
	return pythonOutputEvent{Cell: o.Cell, Output: o.Output}
}
