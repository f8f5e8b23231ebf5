package httpapi_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

const filesTestMax = 1 << 20

// newFilesEnv is newEnv with the files service wired as serve does; it
// returns the blob directory.
func newFilesEnv(t *testing.T, tweak func(*computer.Config)) (*env, string) {
	t.Helper()
	e := newEnv(t, tweak, withFiles)
	return e, e.blobDir()
}

// blobDir is where the withFiles option keeps blobs.
func (e *env) blobDir() string { return filepath.Join(e.dir, "blobs") }

type fileObj struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Bytes      int64  `json:"bytes"`
	CreatedAt  int64  `json:"created_at"`
	Filename   string `json:"filename"`
	Purpose    string `json:"purpose"`
	ComputerID string `json:"computer_id"`
	ResponseID string `json:"response_id"`
}

func multipartBody(t *testing.T, filename, purpose string, content []byte) (*bytes.Buffer, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if purpose != "" {
		mw.WriteField("purpose", purpose)
	}
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func blobCount(t *testing.T, dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(ents)
}

func TestFilesAPI(t *testing.T) {
	e, bdir := newFilesEnv(t, nil)
	_, key := e.newKey("", `{"files":{}}`)

	body, ct := multipartBody(t, "report.csv", "assistants", []byte("a,b\n1,2\n"))
	r := e.doCtx(t.Context(), key, "POST", "/v1/files", body, map[string]string{"Content-Type": ct})
	if r.code != http.StatusOK {
		t.Fatalf("multipart upload: %s", r)
	}
	var f1 fileObj
	r.json(t, &f1)
	if !strings.HasPrefix(f1.ID, "file_") || f1.Object != "file" || f1.Bytes != 8 || f1.Filename != "report.csv" || f1.Purpose != "assistants" || f1.CreatedAt == 0 {
		t.Fatalf("multipart upload: %s", r)
	}
	r = e.doCtx(t.Context(), key, "POST", "/v1/files?filename=../../etc/data.bin", []byte{0, 1, 2}, map[string]string{"Content-Type": "application/octet-stream"})
	var f2 fileObj
	r.json(t, &f2)
	if r.code != http.StatusOK || f2.Filename != "data.bin" || f2.Bytes != 3 {
		t.Fatalf("raw upload: %s", r)
	}

	// Bad names.
	for _, name := range []string{"..", "a%00b", "x%0Ay", strings.Repeat("n", 256)} {
		r = e.doCtx(t.Context(), key, "POST", "/v1/files?filename="+name, "x", map[string]string{"Content-Type": "application/octet-stream"})
		if er := r.wantError(t, http.StatusBadRequest, ""); er.Error.Param == nil || *er.Error.Param != "filename" {
			t.Fatalf("filename %q: %s", name, r)
		}
	}
	r = e.doCtx(t.Context(), key, "POST", "/v1/files", "x", map[string]string{"Content-Type": "application/octet-stream"})
	r.wantError(t, http.StatusBadRequest, "")

	// Too large: by Content-Length, and while streaming (no length).
	big := bytes.Repeat([]byte("z"), filesTestMax+1)
	r = e.doCtx(t.Context(), key, "POST", "/v1/files?filename=big.bin", big, nil)
	r.wantError(t, http.StatusRequestEntityTooLarge, "too_large")
	r = e.doCtx(t.Context(), key, "POST", "/v1/files?filename=big.bin", io.MultiReader(bytes.NewReader(big)), nil)
	r.wantError(t, http.StatusRequestEntityTooLarge, "too_large")
	body, ct = multipartBody(t, "big.bin", "", big)
	r = e.doCtx(t.Context(), key, "POST", "/v1/files", io.MultiReader(body), map[string]string{"Content-Type": ct})
	r.wantError(t, http.StatusRequestEntityTooLarge, "too_large")
	if n := blobCount(t, filepath.Join(bdir, "files")); n != 2 {
		t.Fatalf("%d blobs after refused uploads, want 2", n)
	}
	// Exactly at the limit is accepted.
	r = e.doCtx(t.Context(), key, "POST", "/v1/files?filename=max.bin", big[:filesTestMax], nil)
	if r.code != http.StatusOK {
		t.Fatalf("at the limit: %s", r)
	}
	var f3 fileObj
	r.json(t, &f3)

	// List, get, content.
	var list struct {
		Object string    `json:"object"`
		Data   []fileObj `json:"data"`
	}
	e.do(key, "GET", "/v1/files", nil).json(t, &list)
	if list.Object != "list" || len(list.Data) != 3 {
		t.Fatalf("list: %+v", list)
	}
	var got fileObj
	e.do(key, "GET", "/v1/files/"+f1.ID, nil).json(t, &got)
	if got != f1 {
		t.Fatalf("get: %+v, want %+v", got, f1)
	}
	r = e.do(key, "GET", "/v1/files/"+f2.ID+"/content", nil)
	if r.code != http.StatusOK || !bytes.Equal(r.body, []byte{0, 1, 2}) || r.hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("content: %s", r)
	}

	// Another org sees nothing; a key without files is refused.
	org := e.newOrg("other", true)
	_, otherKey := e.newKey(org, `{"files":{},"artifacts":{}}`)
	for _, path := range []string{"/v1/files/" + f1.ID, "/v1/files/" + f1.ID + "/content"} {
		e.do(otherKey, "GET", path, nil).wantError(t, http.StatusNotFound, "not_found")
	}
	e.do(otherKey, "DELETE", "/v1/files/"+f1.ID, nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(otherKey, "GET", "/v1/files", nil).json(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("other org lists %+v", list.Data)
	}
	_, noFiles := e.newKey("", `{"artifacts":{}}`)
	e.do(noFiles, "GET", "/v1/files", nil).wantError(t, http.StatusForbidden, "forbidden")
	e.do(noFiles, "GET", "/v1/files/"+f1.ID, nil).wantError(t, http.StatusForbidden, "forbidden")
	e.doCtx(t.Context(), noFiles, "POST", "/v1/files?filename=a.txt", "x", nil).wantError(t, http.StatusForbidden, "forbidden")

	// Delete.
	r = e.do(key, "DELETE", "/v1/files/"+f1.ID, nil)
	if r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.do(key, "GET", "/v1/files/"+f1.ID, nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(key, "GET", "/v1/files/"+f1.ID+"/content", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(key, "DELETE", "/v1/files/"+f1.ID, nil).wantError(t, http.StatusNotFound, "not_found")
	if n := blobCount(t, filepath.Join(bdir, "files")); n != 2 {
		t.Fatalf("%d blobs after delete, want 2", n)
	}
}

type exportAnswer struct {
	Output    string `json:"output"`
	Artifacts []struct {
		ID       string `json:"id"`
		Filename string `json:"filename"`
		Bytes    int64  `json:"bytes"`
	} `json:"artifacts"`
}

func (e *env) exportTool(key, id, name string, args any) exportAnswer {
	e.t.Helper()
	r := e.do(key, "POST", "/v1/computers/"+id+"/tools/"+name, map[string]any{"arguments": args})
	if r.code != http.StatusOK {
		e.t.Fatalf("tool %s: %s", name, r)
	}
	var a exportAnswer
	r.json(e.t, &a)
	return a
}

func TestExportArtifact(t *testing.T) {
	e, bdir := newFilesEnv(t, func(c *computer.Config) { c.Disk = 64 << 20 })
	_, key := e.newKey("", computerCaps)
	c := e.create(key, map[string]any{})
	e.sh(key, c.ID, `mkdir -p out && printf 'col\n\001\000\002' > out/data.bin && truncate -s 26M big.bin && truncate -s 26214400 edge.bin`)

	a := e.exportTool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "out/data.bin", "export": true})
	if a.Output != "Exported 7 bytes from /workspace/out/data.bin." || len(a.Artifacts) != 1 ||
		a.Artifacts[0].Filename != "data.bin" || a.Artifacts[0].Bytes != 7 || !strings.HasPrefix(a.Artifacts[0].ID, "art_") {
		t.Fatalf("export: %+v", a)
	}
	id := a.Artifacts[0].ID
	var art fileObj
	e.do(key, "GET", "/v1/artifacts/"+id, nil).json(t, &art)
	if art.Object != "artifact" || art.ComputerID != c.ID || art.Bytes != 7 || art.Filename != "data.bin" {
		t.Fatalf("artifact: %+v", art)
	}
	r := e.do(key, "GET", "/v1/artifacts/"+id+"/content", nil)
	if r.code != http.StatusOK || string(r.body) != "col\n\001\000\002" {
		t.Fatalf("content: %s", r)
	}
	var list struct {
		Data []fileObj `json:"data"`
	}
	e.do(key, "GET", "/v1/artifacts?computer_id="+c.ID, nil).json(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != id {
		t.Fatalf("list by computer: %+v", list)
	}
	e.do(key, "GET", "/v1/artifacts?computer_id=cmp_other", nil).json(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("list by another computer: %+v", list)
	}
	e.do(key, "GET", "/v1/artifacts?response_id=resp_none", nil).json(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("list by response: %+v", list)
	}

	// Exactly 25 MiB is kept; one byte more is the fixed sentence.
	a = e.exportTool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "edge.bin", "export": true})
	if a.Output != "Exported 26214400 bytes from /workspace/edge.bin." || len(a.Artifacts) != 1 {
		t.Fatalf("25 MiB export: %+v", a)
	}
	a = e.exportTool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "big.bin", "export": true})
	if a.Output != "File is too large to export: the limit is 26214400 bytes." || len(a.Artifacts) != 0 {
		t.Fatalf("over-limit export: %+v", a)
	}
	if n := blobCount(t, filepath.Join(bdir, "artifacts")); n != 2 {
		t.Fatalf("%d artifact blobs, want 2", n)
	}

	// Another org: not found; a key without artifacts: forbidden, and its
	// export stores nothing.
	org := e.newOrg("other", true)
	_, otherKey := e.newKey(org, computerCaps)
	e.do(otherKey, "GET", "/v1/artifacts/"+id, nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(otherKey, "GET", "/v1/artifacts/"+id+"/content", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(otherKey, "GET", "/v1/artifacts", nil).json(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("other org lists %+v", list.Data)
	}
	_, noArt := e.newKey("", `{"tooling":{"system_tools":["computer"]},"computer":{},"files":{}}`)
	e.do(noArt, "GET", "/v1/artifacts", nil).wantError(t, http.StatusForbidden, "forbidden")
	e.do(noArt, "GET", "/v1/artifacts/"+id, nil).wantError(t, http.StatusForbidden, "forbidden")
	e.do(noArt, "GET", "/v1/artifacts/"+id+"/content", nil).wantError(t, http.StatusForbidden, "forbidden")
	c2 := e.create(noArt, map[string]any{})
	e.sh(noArt, c2.ID, `printf 'abc' > r.txt`)
	a = e.exportTool(noArt, c2.ID, "builtin__computer_read_file", map[string]any{"path": "r.txt", "export": true})
	if a.Output != "[binary output omitted: 3 bytes]" || len(a.Artifacts) != 0 {
		t.Fatalf("export without artifacts: %+v", a)
	}
	if n := blobCount(t, filepath.Join(bdir, "artifacts")); n != 2 {
		t.Fatalf("%d artifact blobs after a refused export, want 2", n)
	}
}
