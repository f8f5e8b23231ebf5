package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// multipartSlack is what a multipart body may carry beyond the file itself
// (boundaries, headers, the purpose field) before Content-Length alone
// refuses it.
const multipartSlack = 64 << 10

var errFilesOff = fmt.Errorf("%w: files and artifacts are not configured on this deployment", store.ErrNotFound)

func (a *API) filesService() (*files.Service, error) {
	if a.files == nil {
		return nil, errFilesOff
	}
	return a.files, nil
}

type fileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
}

func fileView(f store.File) fileObject {
	return fileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename, Purpose: f.Purpose}
}

type artifactObject struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Bytes      int64  `json:"bytes"`
	CreatedAt  int64  `json:"created_at"`
	Filename   string `json:"filename"`
	ComputerID string `json:"computer_id"`
	ResponseID string `json:"response_id"`
}

func artifactView(x store.Artifact) artifactObject {
	return artifactObject{ID: x.ID, Object: "artifact", Bytes: x.Bytes, CreatedAt: x.CreatedAt.Unix(),
		Filename: x.Filename, ComputerID: x.ComputerID, ResponseID: x.ResponseID}
}

// fileError maps the files service's errors to the API's.
func fileError(err error) error {
	switch {
	case errors.Is(err, files.ErrTooLarge):
		return fmt.Errorf("%w: %v", errTooLarge, err)
	case errors.Is(err, files.ErrInvalidFilename):
		return withParam("filename", err)
	}
	return err
}

func (a *API) uploadFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	if err := files.NeedFiles(p); err != nil {
		return err
	}
	limit := svc.MaxBytes()
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType == "multipart/form-data" {
		if r.ContentLength > limit+multipartSlack {
			return fmt.Errorf("%w: %s", errTooLarge, sandbox.FilesLimited(limit))
		}
		mr, err := r.MultipartReader()
		if err != nil {
			return bodyError(r, fmt.Errorf("%w: malformed multipart body: %v", errBadRequest, err))
		}
		purpose := ""
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return withParam("file", fmt.Errorf("%w: the multipart body has no \"file\" field", errBadRequest))
			}
			if err != nil {
				return bodyError(r, fmt.Errorf("%w: malformed multipart body: %v", errBadRequest, err))
			}
			switch part.FormName() {
			case "purpose":
				b, err := io.ReadAll(io.LimitReader(part, 65))
				if err != nil {
					return fmt.Errorf("%w: malformed multipart body: %v", errBadRequest, err)
				}
				purpose = string(b)
			case "file":
				name := part.FileName()
				if name == "" {
					return withParam("filename", fmt.Errorf("%w: the \"file\" field has no filename", errBadRequest))
				}
				f, err := svc.Upload(r.Context(), p, name, purpose, part)
				if err != nil {
					return fileError(bodyError(r, err))
				}
				writeJSON(w, http.StatusOK, fileView(f))
				return nil
			}
			part.Close()
		}
	}
	q := r.URL.Query()
	name := q.Get("filename")
	if name == "" {
		return withParam("filename", fmt.Errorf("%w: filename is required (query parameter) for a raw upload", errBadRequest))
	}
	if r.ContentLength > limit {
		return fmt.Errorf("%w: %s", errTooLarge, sandbox.FilesLimited(limit))
	}
	f, err := svc.Upload(r.Context(), p, name, q.Get("purpose"), r.Body)
	if err != nil {
		return fileError(bodyError(r, err))
	}
	writeJSON(w, http.StatusOK, fileView(f))
	return nil
}

func (a *API) listUploads(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	fs, err := svc.ListFiles(r.Context(), p)
	if err != nil {
		return err
	}
	data := make([]fileObject, len(fs))
	for i, f := range fs {
		data[len(fs)-1-i] = fileView(f) // the store's newest first, turned oldest first
	}
	page, err := listPage(r, data, func(f fileObject) string { return f.ID }, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getUpload(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	f, err := svc.GetFile(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileView(f))
	return nil
}

func (a *API) uploadContent(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	f, rc, err := svc.OpenFile(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	sendBytes(w, rc, f.Filename, f.Bytes)
	return nil
}

func (a *API) deleteUpload(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	if err := svc.DeleteFile(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listArtifacts(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	as, err := svc.ListArtifacts(r.Context(), p, q.Get("computer_id"), q.Get("response_id"))
	if err != nil {
		return err
	}
	data := make([]artifactObject, len(as))
	for i, x := range as {
		data[len(as)-1-i] = artifactView(x) // the store's newest first, turned oldest first
	}
	page, err := listPage(r, data, func(x artifactObject) string { return x.ID }, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getArtifact(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	x, err := svc.GetArtifact(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, artifactView(x))
	return nil
}

func (a *API) artifactContent(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	svc, err := a.filesService()
	if err != nil {
		return err
	}
	x, rc, err := svc.OpenArtifact(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	sendBytes(w, rc, x.Filename, x.Bytes)
	return nil
}

// sendBytes streams a stored object as an attachment.
func sendBytes(w http.ResponseWriter, rc io.Reader, filename string, size int64) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(filename))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, rc)
}
