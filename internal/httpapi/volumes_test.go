package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

type volumeView struct {
	ID        string   `json:"id"`
	Object    string   `json:"object"`
	Name      string   `json:"name"`
	SizeMB    int64    `json:"size_mb"`
	Computers []string `json:"computers"`
}

// TestVolumesAPI: a volume written by one computer is read by the next;
// one writer or any number of readers at a time (409 volume_in_use, also
// for a delete while mounted and for a resume); a paused computer holds
// no volume; deleting one records its storage in usage; names are per
// organisation and bad input is 400 with param.
func TestVolumesAPI(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	var vol volumeView
	e.do(key, "POST", "/v1/volumes", map[string]any{"name": "data", "size_mb": 32}).json(t, &vol)
	if vol.Object != "volume" || vol.SizeMB != 32 || !strings.HasPrefix(vol.ID, "vol_") || len(vol.Computers) != 0 {
		t.Fatalf("created %+v", vol)
	}
	e.do(key, "POST", "/v1/volumes", map[string]any{"name": "data"}).wantError(t, http.StatusConflict, "volume_exists")
	for body, param := range map[string]string{
		`{"name": "Data!"}`:                                       "name",
		`{"name": "big", "size_mb": 100000000}`:                   "size_mb",
		`{"volumes": [{"name": "data", "path": "/workspace/x"}]}`: "volumes[0].path",
		`{"volumes": [{"name": "none", "path": "/data"}]}`:        "volumes[0].name",
	} {
		path := "/v1/volumes"
		if strings.Contains(body, "volumes") {
			path = "/v1/computers"
		}
		er := e.do(key, "POST", path, body).wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("%s: param %v, want %s (%s)", body, er.Error.Param, param, er.Error.Message)
		}
	}
	rw := map[string]any{"volumes": []map[string]any{{"name": "data", "path": "/data"}}}
	ro := map[string]any{"volumes": []map[string]any{{"name": "data", "path": "/data", "read_only": true}}}
	a := e.create(key, rw)
	e.sh(key, a.ID, "echo from a > /data/f")
	e.do(key, "POST", "/v1/computers", rw).wantError(t, http.StatusConflict, "volume_in_use")
	e.do(key, "POST", "/v1/computers", ro).wantError(t, http.StatusConflict, "volume_in_use")
	e.do(key, "DELETE", "/v1/volumes/data", nil).wantError(t, http.StatusConflict, "volume_in_use")
	e.do(key, "GET", "/v1/volumes/data", nil).json(t, &vol)
	if len(vol.Computers) != 1 || vol.Computers[0] != a.ID {
		t.Fatalf("mounted by %v, want [%s]", vol.Computers, a.ID)
	}
	// A paused computer holds no volume; its resume waits for the writer
	// slot (409, it stays paused).
	e.do(key, "POST", "/v1/computers/"+a.ID+"/pause", nil).json(t, new(view))
	b := e.create(key, ro)
	c := e.create(key, ro)
	for _, id := range []string{b.ID, c.ID} {
		if out := e.sh(key, id, "cat /data/f; touch /data/x 2>/dev/null || echo read-only"); out != "from a\nread-only\n" {
			t.Fatalf("reader %s: %q", id, out)
		}
	}
	e.do(key, "POST", "/v1/computers/"+a.ID+"/resume", nil).wantError(t, http.StatusConflict, "volume_in_use")
	for _, id := range []string{b.ID, c.ID} {
		if r := e.do(key, "DELETE", "/v1/computers/"+id, nil); r.code != http.StatusNoContent {
			t.Fatalf("delete %s: %s", id, r)
		}
	}
	eventually(t, 10*time.Second, "the readers let the volume go", func() bool {
		var v volumeView
		e.do(key, "GET", "/v1/volumes/data", nil).json(t, &v)
		return len(v.Computers) == 0
	})
	e.do(key, "POST", "/v1/computers/"+a.ID+"/resume", nil).json(t, new(view))
	if out := e.sh(key, a.ID, "cat /data/f"); out != "from a\n" {
		t.Fatalf("resumed with its volume: %q", out)
	}
	if r := e.do(key, "DELETE", "/v1/computers/"+a.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete a: %s", r)
	}
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	e.do(other, "GET", "/v1/volumes/data", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(other, "POST", "/v1/volumes", map[string]any{"name": "data", "size_mb": 16}).json(t, new(volumeView))
	eventually(t, 10*time.Second, "the volume can be deleted", func() bool {
		return e.do(key, "DELETE", "/v1/volumes/data", nil).code == http.StatusNoContent
	})
	e.do(key, "GET", "/v1/volumes/data", nil).wantError(t, http.StatusNotFound, "not_found")
	rows := usageOf(e.usage(key), vol.ID)
	if len(rows) != 1 || rows[0].Kind != "volume_mb_seconds" || rows[0].Quantity < 32 {
		t.Fatalf("volume usage %+v", rows)
	}
	var l struct {
		Data []volumeView `json:"data"`
	}
	e.do(other, "GET", "/v1/volumes", nil).json(t, &l)
	if len(l.Data) != 1 || l.Data[0].Name != "data" || l.Data[0].ID == vol.ID {
		t.Fatalf("the other organisation's volumes: %+v", l.Data)
	}
}
