package responses

import (
	"context"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ContainerFileCitation is OpenAI's container_file_citation annotation:
// a file of the response's container (its computer) that the code wrote,
// cited on the message text that names it.
type ContainerFileCitation struct {
	Type        string `json:"type"`
	ContainerID string `json:"container_id"`
	FileID      string `json:"file_id"`
	Filename    string `json:"filename"`
	StartIndex  int    `json:"start_index"`
	EndIndex    int    `json:"end_index"`
}

// Bounds of the citations: the workspace files looked at, the files cited.
const (
	maxWalkedFiles = 2000
	maxCitedFiles  = 50
)

// fileStamp tells whether a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// stampFiles notes the workspace's files before the response's first
// code runs, to know which the code wrote.
func (r *Run) stampFiles(ctx context.Context) {
	if r.before != nil || r.computerID == "" {
		return
	}
	listed, more, err := r.g.comp.WorkspaceFiles(ctx, r.p, r.computerID, maxWalkedFiles)
	if err != nil || more {
		return // no citations
	}
	r.before = make(map[string]fileStamp, len(listed))
	for _, f := range listed {
		r.before[f.Path] = fileStamp{f.ModTime, f.Size}
	}
}

// citeFiles annotates the answer's text with the files the response's
// code wrote (new or changed in /workspace since its first code ran, not
// hidden ones or those in hidden directories):
// each file on the first span of the last message that names it (its
// path, its path as OpenAI's containers show it, /mnt/data/…, or its
// name), or, when no text names it, at the end of that text (an empty
// span). The annotations are in the response and, streaming, in
// response.output_text.annotation.added events.
func (r *Run) citeFiles(ctx context.Context) {
	if r.before == nil {
		return
	}
	last := -1
	for i, it := range r.resp.Output {
		if m, ok := it.(Message); ok && len(m.Content) > 0 {
			last = i
		}
	}
	if last < 0 {
		return
	}
	listed, _, err := r.g.comp.WorkspaceFiles(ctx, r.p, r.computerID, maxWalkedFiles)
	if err != nil {
		log.From(ctx).WarnContext(ctx, "gateway: listing the files the code wrote failed; no citations", "response", r.resp.ID, "err", err)
		return
	}
	var written []sandbox.FileInfo
	for _, f := range listed {
		if hidden(f.Path) {
			continue // caches and settings (HOME is /workspace): .cache/matplotlib, .ipython…
		}
		if old, ok := r.before[f.Path]; (!ok || old != fileStamp{f.ModTime, f.Size}) && len(written) < maxCitedFiles {
			written = append(written, f)
		}
	}
	m := r.resp.Output[last].(Message)
	for _, f := range written {
		part := len(m.Content) - 1
		for j, c := range m.Content {
			if _, _, ok := mention(c.Text, f.Path); ok {
				part = j
				break
			}
		}
		c := &m.Content[part]
		start, end, _ := mention(c.Text, f.Path)
		a := ContainerFileCitation{Type: "container_file_citation", ContainerID: r.computerID,
			FileID: computer.ContainerFileID(r.computerID, f.Path), Filename: path.Base(f.Path),
			StartIndex: start, EndIndex: end}
		c.Annotations = append(c.Annotations, a)
		r.emit("response.output_text.annotation.added", map[string]any{"item_id": m.ID, "output_index": last,
			"content_index": part, "annotation_index": len(c.Annotations) - 1, "annotation": a})
	}
	r.resp.Output[last] = m
}

// mention finds where text names the file at p (/workspace/…): its path,
// its path under /mnt/data (how OpenAI's containers show files), or its
// name, first found in that order; the span counts characters (Unicode
// code points, as OpenAI's indices do). Not named: an empty span at the
// end.
func mention(text, p string) (start, end int, ok bool) {
	rel := strings.TrimPrefix(p, "/workspace/")
	for _, s := range []string{p, "/mnt/data/" + rel, rel, path.Base(p)} {
		if i := strings.Index(text, s); i >= 0 {
			start = utf8.RuneCountInString(text[:i])
			return start, start + utf8.RuneCountInString(s), true
		}
	}
	n := utf8.RuneCountInString(text)
	return n, n, false
}

// hidden reports whether a name on the path starts with a dot.
func hidden(p string) bool {
	return strings.HasPrefix(path.Base(p), ".") || strings.Contains(p, "/.")
}
