package httpapi

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A computer's files beyond one file's bytes: directories as tar (GET
// ?format=tar, PUT with Content-Type application/x-tar), stat (GET
// ?stat=true), mkdir and move (POST …/files/mkdir, …/files/move). Their
// bodies are here rather than in models.go, and so are their conversions.

const tarMediaType = "application/x-tar"

// tarWritten is the answer of a PUT of a tar archive.
type tarWritten struct {
	Bytes   int64  `json:"bytes"`
	Entries int    `json:"entries"`
	Path    string `json:"path"`
}

func tarWrittenView(d sandbox.TarDone) tarWritten {
	return tarWritten{Bytes: d.Bytes, Entries: d.Entries, Path: d.Path}
}

// moveBody is the body of POST /v1/computers/{id}/files/move.
type moveBody struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// mkdirBody is the body of POST /v1/computers/{id}/files/mkdir.
type mkdirBody struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// isTar reports whether a PUT's body is a tar archive.
func isTar(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == tarMediaType
}

// boolParam reads a true/false query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, withParam(name, fmt.Errorf("%w: %s must be true or false, not %q", errBadRequest, name, v))
	}
}

// startedWriter sends the response's header with its first byte, so an
// error before it is still an error response.
type startedWriter struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", tarMediaType)
		h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(s.name))
		h.Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
	return s.w.Write(p)
}

// getTar streams a directory as a tar archive. An error after its first
// byte cuts the connection, so that no client takes a short archive for a
// whole one.
func (a *API) getTar(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	dir := r.PathValue("path")
	name := path.Base(path.Clean("/" + dir))
	if name == "/" {
		name = "workspace"
	}
	sw := &startedWriter{w: w, name: name + ".tar"}
	_, err := a.comp.GetTar(r.Context(), p, r.PathValue("id"), dir, sw)
	if err != nil && sw.started {
		panic(http.ErrAbortHandler)
	}
	return err
}

// putTar extracts the body, a tar archive, into a directory.
func (a *API) putTar(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if limit := a.comp.MaxTarBytes(); r.ContentLength > limit {
		return fmt.Errorf("%w: a tar archive is limited to %d bytes", errTooLarge, limit)
	}
	// As putFile: a computer that goes during the upload ends it at once.
	ctx, cancel, err := a.comp.Watch(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer cancel()
	defer context.AfterFunc(ctx, func() { cutBody(w, r) })()
	done, err := a.comp.PutTar(ctx, p, r.PathValue("id"), r.PathValue("path"), r.Body)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, computer.ErrGone) {
		return cause
	}
	if err != nil {
		return bodyError(r, err)
	}
	writeJSON(w, http.StatusCreated, tarWrittenView(done))
	return nil
}

func (a *API) statFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	fi, err := a.comp.StatFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileEntry(fi))
	return nil
}

func (a *API) mkdirFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body mkdirBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Path) == "" {
		return withParam("path", fmt.Errorf("%w: path is required", errBadRequest))
	}
	if err := sandbox.CheckPath(body.Path); err != nil {
		return withParam("path", fmt.Errorf("%w: %w", errBadRequest, err))
	}
	if err := a.comp.MakeDir(r.Context(), p, r.PathValue("id"), body.Path, body.Parents); err != nil {
		if errors.Is(err, computer.ErrInvalid) {
			return withParam("path", err)
		}
		return err
	}
	fi, err := a.comp.StatFile(r.Context(), p, r.PathValue("id"), body.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, fileEntry(fi))
	return nil
}

func (a *API) moveFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body moveBody
	if err := decode(r, &body); err != nil {
		return err
	}
	switch {
	case body.From == "":
		return withParam("from", fmt.Errorf("%w: from is required", errBadRequest))
	case body.To == "":
		return withParam("to", fmt.Errorf("%w: to is required", errBadRequest))
	}
	if err := sandbox.CheckPath(body.From); err != nil {
		return withParam("from", fmt.Errorf("%w: %w", errBadRequest, err))
	}
	if err := sandbox.CheckPath(body.To); err != nil {
		return withParam("to", fmt.Errorf("%w: %w", errBadRequest, err))
	}
	err := a.comp.MoveFile(r.Context(), p, r.PathValue("id"), body.From, body.To, body.Overwrite)
	if err != nil {
		if errors.Is(err, sandbox.ErrNotFound) {
			return withParam("from", err)
		}
		if errors.Is(err, computer.ErrInvalid) {
			return withParam("to", err)
		}
		return err
	}
	fi, err := a.comp.StatFile(r.Context(), p, r.PathValue("id"), body.To)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileEntry(fi))
	return nil
}
