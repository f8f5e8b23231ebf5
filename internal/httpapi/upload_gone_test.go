package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUploadCutByDelete: a PUT whose computer is deleted while its body
// is still coming ends at once with 409 computer_gone, as an exec does,
// rather than reading on until the client is done.
func TestUploadCutByDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "PUT", e.url+"/v1/computers/"+id+"/files/slow.bin", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	done := make(chan resp, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- resp{code: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		done <- resp{code: res.StatusCode, body: b}
	}()
	// Some of the body, then a client that sends nothing more.
	if _, err := pw.Write([]byte(strings.Repeat("x", 100<<10))); err != nil {
		t.Fatal(err)
	}
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	r := <-done // without the cut: blocked until the client sends the rest
	r.wantError(t, http.StatusConflict, "computer_gone")
}
