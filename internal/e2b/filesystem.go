package e2b

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// envd's filesystem.Filesystem service over the computer's files
// (internal/computer's files API: paths under /workspace, relative ones
// resolved there).

func (s *Server) filesystemRoutes(envd func(string, boxHandler)) {
	envd("POST /filesystem.Filesystem/ListDir", unary(s.listDir))
	envd("POST /filesystem.Filesystem/Stat", unary(s.stat))
	envd("POST /filesystem.Filesystem/MakeDir", unary(s.makeDir))
	envd("POST /filesystem.Filesystem/Remove", unary(s.remove))
	envd("POST /filesystem.Filesystem/Move", unary(s.move))
	envd("POST /filesystem.Filesystem/", func(w http.ResponseWriter, r *http.Request, b *box) {
		writeBoxError(w, r, unimplemented("filesystem.Filesystem/"+r.URL.Path[len("/filesystem.Filesystem/"):]))
	})
}

// entryInfo is envd's EntryInfo in protobuf's JSON mapping.
type entryInfo struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Path          string  `json:"path"`
	Size          string  `json:"size"` // int64
	Mode          uint32  `json:"mode"`
	Permissions   string  `json:"permissions"`
	Owner         string  `json:"owner"`
	Group         string  `json:"group"`
	ModifiedTime  string  `json:"modifiedTime"`
	SymlinkTarget *string `json:"symlinkTarget,omitempty"`
}

// fileTypes are envd's FileType names of Cubicle's file types; other
// types (fifo, socket, device) are left out of listings, as the SDK
// drops entries of no known type.
var fileTypes = map[string]string{"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY", "symlink": "FILE_TYPE_SYMLINK"}

// user is the owner and group the SDK is told: every file of the
// workspace is the computer's user's.
const user = "user"

func entryOf(fi sandbox.FileInfo) entryInfo {
	mode := fs.FileMode(fi.Mode) & fs.ModePerm
	switch fi.Type {
	case "dir":
		mode |= fs.ModeDir
	case "symlink":
		mode |= fs.ModeSymlink
	}
	return entryInfo{Name: fi.Name, Type: fileTypes[fi.Type], Path: fi.Path, Size: strconv.FormatInt(fi.Size, 10),
		Mode: uint32(mode), Permissions: mode.String(), Owner: user, Group: user,
		ModifiedTime: fi.ModTime.UTC().Format(time.RFC3339Nano)}
}

type pathRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth"`
}

type listDirResponse struct {
	Entries []entryInfo `json:"entries"`
}

// Bounds of a recursive listing.
const (
	maxListDepth   = 16
	maxListEntries = 10000
)

func (s *Server) listDir(ctx context.Context, b *box, req *pathRequest) (*listDirResponse, error) {
	if req.Path == "" {
		return nil, rpcInvalid("path is required")
	}
	depth := max(req.Depth, 1)
	if depth > maxListDepth {
		return nil, rpcInvalid("depth is at most %d", maxListDepth)
	}
	res := &listDirResponse{Entries: []entryInfo{}}
	return res, s.walk(ctx, b, req.Path, depth, res)
}

// walk lists dir into res, and its subdirectories down to depth levels,
// up to maxListEntries entries.
func (s *Server) walk(ctx context.Context, b *box, dir string, depth uint32, res *listDirResponse) error {
	list, err := s.mgr.ListFiles(ctx, b.p, b.id, dir)
	if err != nil {
		return err
	}
	for _, fi := range list.Entries {
		if fileTypes[fi.Type] == "" {
			continue
		}
		if len(res.Entries) >= maxListEntries {
			return nil
		}
		res.Entries = append(res.Entries, entryOf(fi))
		if fi.Type == "dir" && depth > 1 {
			if err := s.walk(ctx, b, fi.Path, depth-1, res); err != nil {
				return err
			}
		}
	}
	return nil
}

type entryResponse struct {
	Entry entryInfo `json:"entry"`
}

func (s *Server) statEntry(ctx context.Context, b *box, p string) (*entryResponse, error) {
	fi, err := s.mgr.StatFile(ctx, b.p, b.id, p)
	if err != nil {
		return nil, err
	}
	return &entryResponse{Entry: entryOf(fi)}, nil
}

func (s *Server) stat(ctx context.Context, b *box, req *pathRequest) (*entryResponse, error) {
	if req.Path == "" {
		return nil, rpcInvalid("path is required")
	}
	return s.statEntry(ctx, b, req.Path)
}

// makeDir makes a directory and its parents; one that exists is
// already_exists (the SDK answers false).
func (s *Server) makeDir(ctx context.Context, b *box, req *pathRequest) (*entryResponse, error) {
	if req.Path == "" {
		return nil, rpcInvalid("path is required")
	}
	if _, err := s.mgr.StatFile(ctx, b.p, b.id, req.Path); err == nil {
		return nil, &rpcError{Code: "already_exists", Message: req.Path + " already exists"}
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return nil, err
	}
	if err := s.mgr.MakeDir(ctx, b.p, b.id, req.Path, true); err != nil {
		return nil, err
	}
	return s.statEntry(ctx, b, req.Path)
}

func (s *Server) remove(ctx context.Context, b *box, req *pathRequest) (*struct{}, error) {
	if req.Path == "" {
		return nil, rpcInvalid("path is required")
	}
	return &struct{}{}, s.mgr.DeleteFile(ctx, b.p, b.id, req.Path)
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// move renames a file or directory, replacing what is at the destination
// (envd renames).
func (s *Server) move(ctx context.Context, b *box, req *moveRequest) (*entryResponse, error) {
	if req.Source == "" || req.Destination == "" {
		return nil, rpcInvalid("source and destination are required")
	}
	if err := s.mgr.MoveFile(ctx, b.p, b.id, req.Source, req.Destination, true); err != nil {
		return nil, err
	}
	return s.statEntry(ctx, b, req.Destination)
}

// writtenEntry is envd's HTTP EntryInfo of an uploaded file.
type writtenEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func written(w sandbox.Written) writtenEntry {
	return writtenEntry{Path: w.Path, Name: path.Base(w.Path), Type: "file"}
}
