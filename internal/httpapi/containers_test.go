package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestContainersOpenAI: OpenAI's Containers API through the official Go
// client: create (name, expires_after, memory_limit, network_policy,
// file_ids copied into the workspace), retrieve, list with its cursor,
// order and name filter, delete; a container is a computer, usable with
// Cubicle's own API by the same id.
func TestContainersOpenAI(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	_, key := e.newKey("", computerCaps)
	ctx := t.Context()
	r := e.do(key, "POST", "/v1/files?filename=data.csv", "a,b\n1,2\n")
	var f struct{ ID string }
	r.json(t, &f)
	client := e.sdk(key)
	c, err := client.Containers.New(ctx, openai.ContainerNewParams{
		Name:          "analysis",
		ExpiresAfter:  openai.ContainerNewParamsExpiresAfter{Anchor: "last_active_at", Minutes: 5},
		MemoryLimit:   openai.ContainerNewParamsMemoryLimit1g,
		NetworkPolicy: openai.ContainerNewParamsNetworkPolicyUnion{OfDisabled: &responses.ContainerNetworkPolicyDisabledParam{}},
		FileIDs:       []string{f.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "cmp_") || c.Object != "container" || c.Name != "analysis" || c.Status != "running" ||
		c.ExpiresAfter.Anchor != "last_active_at" || c.ExpiresAfter.Minutes != 5 || c.NetworkPolicy.Type != "disabled" ||
		c.MemoryLimit != "256m" || c.LastActiveAt == 0 {
		t.Fatalf("created %s", c.RawJSON())
	}
	if got := e.sh(key, c.ID, "cat /workspace/inputs/"+f.ID+"/data.csv"); got != "a,b\n1,2\n" {
		t.Fatalf("the file in the container: %q", got)
	}
	got, err := client.Containers.Get(ctx, c.ID)
	if err != nil || got.ID != c.ID || got.Name != "analysis" {
		t.Fatalf("get: %v %+v", err, got)
	}
	other, err := client.Containers.New(ctx, openai.ContainerNewParams{Name: "other"})
	if err != nil || other.ExpiresAfter.Minutes != 20 {
		t.Fatalf("default expiry: %v %+v", err, other)
	}
	page, err := client.Containers.List(ctx, openai.ContainerListParams{Limit: openai.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != other.ID || !page.HasMore || page.Data[0].LastActiveAt == 0 {
		t.Fatalf("first page (newest first): %v %s", err, page.RawJSON())
	}
	if next, err := page.GetNextPage(); err != nil || len(next.Data) != 1 || next.Data[0].ID != c.ID {
		t.Fatalf("next page: %v %+v", err, next)
	}
	asc, err := client.Containers.List(ctx, openai.ContainerListParams{Order: openai.ContainerListParamsOrderAsc, Name: openai.String("other")})
	if err != nil || len(asc.Data) != 1 || asc.Data[0].ID != other.ID {
		t.Fatalf("by name: %v %+v", err, asc)
	}
	if err := client.Containers.Delete(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := client.Containers.Get(ctx, c.ID); err != nil || got.Status != "expired" {
		t.Fatalf("after delete: %v %+v", err, got)
	}
	if err := client.Containers.Delete(ctx, "cmp_nope"); err == nil {
		t.Fatal("delete of no container succeeded")
	}
	for body, param := range map[string]string{
		`{}`:                                  "name",
		`{"name": "x", "memory_limit": "2g"}`: "memory_limit",
		`{"name": "x", "expires_after": {"anchor": "created_at", "minutes": 1}}`:  "expires_after.anchor",
		`{"name": "x", "file_ids": ["file-nope"]}`:                                "file_ids",
		`{"name": "x", "skills": [{"type": "skill_reference", "skill_id": "s"}]}`: "skills",
	} {
		er := e.do(key, "POST", "/v1/containers", body).wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("%s: param %v, want %s (%s)", body, er.Error.Param, param, er.Error.Message)
		}
	}
}

// TestContainerFilesOpenAI: OpenAI's container files through the official
// Go client: upload (multipart) and copy of an uploaded file (file_id),
// list, retrieve, content, delete; the files are the computer's.
func TestContainerFilesOpenAI(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	_, key := e.newKey("", computerCaps)
	ctx := t.Context()
	client := e.sdk(key)
	c, err := client.Containers.New(ctx, openai.ContainerNewParams{Name: "files"})
	if err != nil {
		t.Fatal(err)
	}
	up, err := client.Containers.Files.New(ctx, c.ID, openai.ContainerFileNewParams{
		File: openai.File(strings.NewReader("hello notes\n"), "notes.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(up.ID, "cfile_") || up.Path != "/workspace/notes.txt" || up.Bytes != 12 || up.ContainerID != c.ID || up.Source != "user" {
		t.Fatalf("uploaded %s", up.RawJSON())
	}
	if got := e.sh(key, c.ID, "cat /workspace/notes.txt"); got != "hello notes\n" {
		t.Fatalf("in the computer: %q", got)
	}
	r := e.do(key, "POST", "/v1/files?filename=data.csv", "a,b\n")
	var f struct{ ID string }
	r.json(t, &f)
	byID, err := client.Containers.Files.New(ctx, c.ID, openai.ContainerFileNewParams{FileID: openai.String(f.ID)})
	if err != nil || byID.Path != "/workspace/data.csv" || byID.Bytes != 4 {
		t.Fatalf("by file_id: %v %+v", err, byID)
	}
	e.sh(key, c.ID, "mkdir -p /workspace/out && echo made > /workspace/out/result.txt")
	page, err := client.Containers.Files.List(ctx, c.ID, openai.ContainerFileListParams{Order: openai.ContainerFileListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, cf := range page.Data {
		paths = append(paths, cf.Path)
	}
	if strings.Join(paths, " ") != "/workspace/data.csv /workspace/notes.txt /workspace/out/result.txt" {
		t.Fatalf("listed %v", paths)
	}
	got, err := client.Containers.Files.Get(ctx, c.ID, up.ID)
	if err != nil || got.Path != up.Path {
		t.Fatalf("get: %v %+v", err, got)
	}
	res, err := client.Containers.Files.Content.Get(ctx, c.ID, up.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "hello notes\n" {
		t.Fatalf("content %q", b)
	}
	if err := client.Containers.Files.Delete(ctx, c.ID, up.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Containers.Files.Get(ctx, c.ID, up.ID); err == nil {
		t.Fatal("a deleted file is still found")
	}
	if r := e.exec(key, c.ID, map[string]any{"command": "test -e /workspace/notes.txt"}); r.ExitCode == 0 {
		t.Fatal("the deleted file is still in the computer")
	}
}
