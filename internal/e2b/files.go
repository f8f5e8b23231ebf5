package e2b

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// envd's /files: GET downloads a file, POST uploads files (multipart
// form parts named "file" whose filename is the path, or one body of
// application/octet-stream), each at most the deployment's file size.

// maxUploadParts bounds the files of one multipart upload.
const maxUploadParts = 1000

func (s *Server) download(w http.ResponseWriter, r *http.Request, b *box) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, r, invalid("the query parameter path is required"))
		return
	}
	started := false
	err := s.mgr.GetFile(r.Context(), b.p, b.id, p, func(fi sandbox.FileInfo) io.Writer {
		started = true
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err != nil && !started {
		writeError(w, r, err)
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, b *box) {
	out, err := s.uploadFiles(r, b)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) uploadFiles(r *http.Request, b *box) ([]writtenEntry, error) {
	query := r.URL.Query().Get("path")
	body := io.Reader(r.Body)
	if ce := r.Header.Get("Content-Encoding"); ce == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, invalid("the gzip body is not gzip: %v", err)
		}
		body = zr
	} else if ce != "" && ce != "identity" {
		return nil, invalid("Content-Encoding %q is not supported (gzip is)", ce)
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/octet-stream":
		if query == "" {
			return nil, invalid("the query parameter path is required")
		}
		wr, err := s.mgr.PutFile(r.Context(), b.p, b.id, query, body)
		if err != nil {
			return nil, err
		}
		return []writtenEntry{written(wr)}, nil
	case "multipart/form-data":
	default:
		return nil, invalid("an upload is multipart/form-data or application/octet-stream, not %q", ct)
	}
	if params["boundary"] == "" {
		return nil, invalid("the multipart body has no boundary")
	}
	mr := multipart.NewReader(body, params["boundary"])
	out := []writtenEntry{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalid("the multipart body is malformed: %v", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		if len(out) >= maxUploadParts {
			return nil, errdefs.New(errdefs.TooLarge, "", fmt.Sprintf("an upload holds at most %d files", maxUploadParts))
		}
		p := query
		if p == "" {
			// The raw filename: Part.FileName keeps only its base.
			_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			p = dp["filename"]
		}
		if p == "" {
			return nil, invalid("a file part has no path (neither ?path= nor a filename)")
		}
		wr, err := s.mgr.PutFile(r.Context(), b.p, b.id, p, part)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, written(wr))
	}
	if len(out) == 0 {
		return nil, invalid("the upload holds no part named file")
	}
	return out, nil
}
