package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// OpenAI's container files (/v1/containers/{id}/files) over a computer's
// workspace: a container file is a regular file under /workspace, its id
// derived from the container and the path (the same file has the same id
// for as long as it exists). Uploads land in /workspace/<filename>.

// maxContainerFiles bounds a listing's walk of the workspace; past it the
// list says has_more and a file not reached is not found by id.
const maxContainerFiles = 2000

// containerFileView is OpenAI's container.file object. Cubicle does not
// track who wrote a file: source is "user" for every file.
type containerFileView struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	ContainerID string `json:"container_id"`
	CreatedAt   int64  `json:"created_at"`
	Bytes       int64  `json:"bytes"`
	Path        string `json:"path"`
	Source      string `json:"source"`
}

func containerFileOf(container string, fi sandbox.FileInfo) containerFileView {
	return containerFileView{ID: computer.ContainerFileID(container, fi.Path), Object: "container.file", ContainerID: container,
		CreatedAt: fi.ModTime.Unix(), Bytes: fi.Size, Path: fi.Path, Source: "user"}
}

// containerFiles lists the container's files (computer.WorkspaceFiles).
func (a *API) containerFiles(r *http.Request, p governance.Principal, id string) ([]sandbox.FileInfo, bool, error) {
	return a.comp.WorkspaceFiles(r.Context(), p, id, maxContainerFiles)
}

// containerFile finds the file of the path's id.
func (a *API) containerFile(r *http.Request, p governance.Principal) (string, sandbox.FileInfo, error) {
	id, fileID := r.PathValue("id"), r.PathValue("file")
	all, _, err := a.containerFiles(r, p, id)
	if err != nil {
		return id, sandbox.FileInfo{}, err
	}
	for _, fi := range all {
		if computer.ContainerFileID(id, fi.Path) == fileID {
			return id, fi, nil
		}
	}
	return id, sandbox.FileInfo{}, fmt.Errorf("%w: no file %.64q in container %s", errNotFound, fileID, id)
}

func (a *API) listContainerFiles(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	all, capped, err := a.containerFiles(r, p, id)
	if err != nil {
		return err
	}
	data := make([]containerFileView, len(all))
	for i, fi := range all {
		data[i] = containerFileOf(id, fi)
	}
	page, err := cursorPage(r, data, func(f containerFileView) string { return f.ID })
	if err != nil {
		return err
	}
	page["has_more"] = page["has_more"].(bool) || capped
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getContainerFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id, fi, err := a.containerFile(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, containerFileOf(id, fi))
	return nil
}

func (a *API) containerFileContent(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id, fi, err := a.containerFile(r, p)
	if err != nil {
		return err
	}
	return a.comp.GetFile(r.Context(), p, id, fi.Path, func(sandbox.FileInfo) io.Writer {
		w.Header().Set("Content-Type", "application/octet-stream")
		return w
	})
}

func (a *API) deleteContainerFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id, fi, err := a.containerFile(r, p)
	if err != nil {
		return err
	}
	if err := a.comp.DeleteFile(r.Context(), p, id, fi.Path); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": computer.ContainerFileID(id, fi.Path), "object": "container.file.deleted", "deleted": true})
	return nil
}

// createContainerFile uploads a file (multipart/form-data, part "file")
// or copies one of the caller's files ({"file_id"}) to
// /workspace/<filename>.
func (a *API) createContainerFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	name, body, err := a.containerUpload(r, p)
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := a.comp.PutFile(r.Context(), p, id, name, body); err != nil {
		return bodyError(r, err)
	}
	list, err := a.comp.ListFiles(r.Context(), p, id, path.Dir(name))
	if err != nil {
		return err
	}
	for _, e := range list.Entries {
		if e.Path == "/workspace/"+name {
			writeJSON(w, http.StatusOK, containerFileOf(id, e))
			return nil
		}
	}
	return fmt.Errorf("%w: %s vanished after its upload", computer.ErrGone, name)
}

// containerFileBody is the JSON body of POST /v1/containers/{id}/files.
type containerFileBody struct {
	FileID string `json:"file_id"`
}

// containerUpload is the name and content of a container file upload:
// a multipart form with a file part "file" or a field "file_id" (what
// OpenAI's SDKs send), or a JSON body {"file_id"}.
func (a *API) containerUpload(r *http.Request, p governance.Principal) (string, io.ReadCloser, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		var body containerFileBody
		if err := decode(r, &body); err != nil {
			return "", nil, err
		}
		return a.uploadedFile(r, p, body.FileID)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return "", nil, withParam("file", fmt.Errorf("%w: %v", errBadRequest, err))
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return "", nil, withParam("file", fmt.Errorf("%w: give a file part \"file\" or a field \"file_id\"", errBadRequest))
		}
		if err != nil {
			return "", nil, withParam("file", fmt.Errorf("%w: %v", errBadRequest, err))
		}
		switch part.FormName() {
		case "file_id":
			b, _ := io.ReadAll(io.LimitReader(part, 256))
			part.Close()
			return a.uploadedFile(r, p, string(b))
		case "file":
			name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
			if name == "" || name == "." || name == "/" || name == ".." || strings.ContainsRune(name, 0) {
				part.Close()
				return "", nil, withParam("file", fmt.Errorf("%w: the file part needs a filename", errBadRequest))
			}
			return name, part, nil
		}
		part.Close()
	}
}

// uploadedFile opens the caller's uploaded file id, named by its filename.
func (a *API) uploadedFile(r *http.Request, p governance.Principal, id string) (string, io.ReadCloser, error) {
	if id == "" {
		return "", nil, withParam("file_id", fmt.Errorf("%w: give a file (multipart) or file_id", errBadRequest))
	}
	if a.files == nil {
		return "", nil, withParam("file_id", fmt.Errorf("%w: this server keeps no files", errBadRequest))
	}
	f, rc, err := a.files.OpenFile(r.Context(), p, id)
	if err != nil {
		return "", nil, withParam("file_id", err)
	}
	return path.Base(f.Filename), rc, nil
}
