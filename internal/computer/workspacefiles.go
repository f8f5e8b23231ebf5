package computer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ContainerFileID is OpenAI's id of the file at path (absolute) of
// container (a computer): derived from both, so the same file has the same
// id for as long as it exists.
func ContainerFileID(container, path string) string {
	sum := sha256.Sum256([]byte(container + "\x00" + path))
	return "cfile_" + hex.EncodeToString(sum[:12])
}

// WorkspaceFiles walks a running computer's workspace (not its .cubicle
// directory) for regular files, at most max of them, by path; more says
// there were more.
func (m *Manager) WorkspaceFiles(ctx context.Context, p governance.Principal, id string, max int) ([]sandbox.FileInfo, bool, error) {
	var files []sandbox.FileInfo
	dirs := []string{"."}
	for len(dirs) > 0 {
		dir := dirs[0]
		dirs = dirs[1:]
		list, err := m.ListFiles(ctx, p, id, dir)
		if err != nil {
			return nil, false, err
		}
		for _, e := range list.Entries {
			rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, "/workspace"), "/")
			switch {
			case e.Type == "dir" && rel != ".cubicle":
				dirs = append(dirs, rel)
			case e.Type == "file":
				if len(files) == max {
					return sortedFiles(files), true, nil
				}
				files = append(files, e)
			}
		}
	}
	return sortedFiles(files), false, nil
}

func sortedFiles(files []sandbox.FileInfo) []sandbox.FileInfo {
	slices.SortFunc(files, func(x, y sandbox.FileInfo) int { return strings.Compare(x.Path, y.Path) })
	return files
}
