package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// liveEnv is a files env with one live computer of org and its sandbox,
// caught through the exporter (exporting /workspace/seed.txt as an artifact).
type liveEnv struct {
	*env
	svc   *files.Service
	blobs blob.Store
	sb    sandbox.Sandbox
	org   string
	art   artifact.Ref
}

// sandboxCatcher is the files service as the manager's artifact store,
// keeping the sandbox of the last export.
type sandboxCatcher struct {
	*files.Service
	mu sync.Mutex
	sb sandbox.Sandbox
}

func (c *sandboxCatcher) Export(ctx context.Context, p governance.Principal, sb sandbox.Files, id, path string) (artifact.Ref, error) {
	c.mu.Lock()
	c.sb, _ = sb.(sandbox.Sandbox) // the manager exports from the whole computer
	c.mu.Unlock()
	return c.Service.Export(ctx, p, sb, id, path)
}

func newLiveEnv(t *testing.T) *liveEnv {
	t.Helper()
	catcher := &sandboxCatcher{}
	e := newEnv(t, nil, func(s *envSetup) {
		s.artifacts = func(svc *files.Service) computer.Artifacts { catcher.Service = svc; return catcher }
	})
	b, err := blob.NewDir(e.blobDir())
	if err != nil {
		t.Fatal(err)
	}
	l := &liveEnv{env: e, svc: e.files, blobs: b}
	l.org = e.newOrg("inputs", true)
	_, key := e.newKey(l.org, computerCaps)
	c := e.create(key, map[string]any{})
	e.sh(key, c.ID, `printf 'seed artifact' > seed.txt`)
	a := e.exportTool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "seed.txt", "export": true})
	if len(a.Artifacts) != 1 {
		t.Fatalf("export: %+v", a)
	}
	l.art = artifact.Ref{ID: a.Artifacts[0].ID, Filename: a.Artifacts[0].Filename, Bytes: a.Artifacts[0].Bytes}
	catcher.mu.Lock()
	defer catcher.mu.Unlock()
	l.sb = catcher.sb
	if l.sb == nil {
		t.Fatal("no sandbox caught")
	}
	return l
}

func inputsPrincipal(org string, caps governance.Capabilities) governance.Principal {
	return governance.Principal{Org: store.Org{ID: org}, Key: store.Key{ID: "key_" + org}, Caps: caps}
}

func (l *liveEnv) upload(p governance.Principal, name string, size int) store.File {
	l.t.Helper()
	f, err := l.svc.Upload(context.Background(), p, name, "", strings.NewReader(strings.Repeat("x", size)))
	if err != nil {
		l.t.Fatal(err)
	}
	return f
}

func (l *liveEnv) read(path string) string {
	l.t.Helper()
	var buf bytes.Buffer
	if _, err := l.sb.ReadFile(context.Background(), sandbox.FileRead{Path: path, Limit: 1 << 20}, &buf); err != nil {
		l.t.Fatalf("read %s: %v", path, err)
	}
	return buf.String()
}

// summary renders a report as "id:path" / "id!reason" lines, in order.
func summary(r files.InputsReport) (copied, skipped []string) {
	for _, c := range r.Copied {
		copied = append(copied, c.ID+":"+c.Path)
	}
	for _, s := range r.Skipped {
		skipped = append(skipped, s.ID+"!"+s.Reason)
	}
	return
}

func TestCopyInputs(t *testing.T) {
	l := newLiveEnv(t)
	ctx := context.Background()
	all := governance.AllCapabilities()
	p := inputsPrincipal(l.org, all)
	in := func(f store.File) string { return "/workspace/inputs/" + f.ID + "/" + f.Filename }
	copyIn := func(p governance.Principal, req files.InputsRequest) files.InputsReport {
		t.Helper()
		rep, err := l.svc.CopyInputs(ctx, p, l.sb, req)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	check := func(what string, rep files.InputsReport, copied, skipped []string) {
		t.Helper()
		c, s := summary(rep)
		if !slices.Equal(c, copied) || !slices.Equal(s, skipped) {
			t.Fatalf("%s:\ncopied %v\nwant   %v\nskipped %v\nwant    %v", what, c, copied, s, skipped)
		}
	}

	// Byte budget: 60, 50, 30 within 100 → 60 and 30, the 50 is skipped.
	f60, f50, f30 := l.upload(p, "a.txt", 60), l.upload(p, "b.txt", 50), l.upload(p, "c.txt", 30)
	rep := copyIn(p, files.InputsRequest{FileIDs: []string{f60.ID, f50.ID, f30.ID}, MaxBytes: 100})
	check("budget", rep, []string{f60.ID + ":" + in(f60), f30.ID + ":" + in(f30)}, []string{f50.ID + "!" + files.SkipByteLimit})
	if rep.Copied[0].Bytes != 60 || rep.Copied[1].Bytes != 30 || l.read(in(f60)) != strings.Repeat("x", 60) {
		t.Fatalf("bytes: %+v", rep)
	}

	// No recopy: present files count as files but not bytes, so the 50 fits now.
	l.sb.WriteFile(ctx, sandbox.FileWrite{Path: in(f60)}, strings.NewReader("changed by the model"))
	rep = copyIn(p, files.InputsRequest{FileIDs: []string{f60.ID, f50.ID, f30.ID}, MaxBytes: 100})
	check("recopy", rep, []string{f50.ID + ":" + in(f50)},
		[]string{f60.ID + "!" + files.SkipPresent, f30.ID + "!" + files.SkipPresent})
	if l.read(in(f60)) != "changed by the model" {
		t.Fatal("a present file was overwritten")
	}

	// Count limit: a present file counts toward it.
	n1, n2 := l.upload(p, "n1.txt", 1), l.upload(p, "n2.txt", 1)
	rep = copyIn(p, files.InputsRequest{FileIDs: []string{f30.ID, n1.ID, n2.ID}, MaxFiles: 2})
	check("count", rep, []string{n1.ID + ":" + in(n1)},
		[]string{f30.ID + "!" + files.SkipPresent, n2.ID + "!" + files.SkipCountLimit})

	// Forbidden: another org's file, a deleted file, an unknown id, a bad id.
	other := l.upload(inputsPrincipal("org_other", all), "other.txt", 5)
	gone := l.upload(p, "gone.txt", 5)
	if err := l.svc.DeleteFile(ctx, p, gone.ID); err != nil {
		t.Fatal(err)
	}
	rep = copyIn(p, files.InputsRequest{FileIDs: []string{other.ID, gone.ID, "file_nope", "../etc"}})
	check("forbidden", rep, nil, []string{other.ID + "!" + files.SkipNotFound, gone.ID + "!" + files.SkipNotFound,
		"file_nope!" + files.SkipNotFound, "../etc!" + files.SkipInvalidID})
	if _, err := l.sb.Stat(ctx, "/workspace/inputs/"+other.ID); err == nil {
		t.Fatal("another org's file reached the computer")
	}

	// Capabilities: files need files, artifacts need artifacts.
	noFiles := all
	noFiles.Files = nil
	f2 := l.upload(p, "f2.txt", 2)
	rep = copyIn(inputsPrincipal(l.org, noFiles), files.InputsRequest{FileIDs: []string{f2.ID}, ArtifactIDs: []string{l.art.ID}})
	artPath := "/workspace/artifacts/" + l.art.ID + "/seed.txt"
	check("no files", rep, []string{l.art.ID + ":" + artPath}, []string{f2.ID + "!" + files.SkipNoFilesCap})
	if l.read(artPath) != "seed artifact" {
		t.Fatal("artifact content")
	}
	noArts := all
	noArts.Artifacts = nil
	rep = copyIn(inputsPrincipal(l.org, noArts), files.InputsRequest{FileIDs: []string{f2.ID}, ArtifactIDs: []string{l.art.ID}})
	check("no artifacts", rep, []string{f2.ID + ":" + in(f2)}, []string{l.art.ID + "!" + files.SkipNoArtifactsCap})

	// Unsafe stored names stay inside the input's directory.
	for name, want := range map[string]string{"../../escape.txt": "escape.txt", "..": "file", `sub\..\x.csv`: "x.csv"} {
		id := governance.NewID("file")
		if _, _, err := l.blobs.Put(ctx, "files/"+id, strings.NewReader("data"), 100); err != nil {
			t.Fatal(err)
		}
		if err := l.st.Files().Create(ctx, store.File{ID: id, OrgID: l.org, KeyID: "k", Filename: name, Bytes: 4, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		rep = copyIn(p, files.InputsRequest{FileIDs: []string{id}})
		path := "/workspace/inputs/" + id + "/" + want
		check("sanitize "+name, rep, []string{id + ":" + path}, nil)
		if l.read(path) != "data" {
			t.Fatalf("%s: content", name)
		}
	}
}

func TestCodeInterpreterOnAComputer(t *testing.T) {
	l := newLiveEnv(t)
	ctx := context.Background()
	run := func(code string) tools.Result {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"code": code})
		res, err := tools.Default().Run(ctx, tools.Env{Sandbox: l.sb}, tools.CodeInterpreterName, args)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("print('hello')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()")
	if res.Failed || !strings.HasPrefix(res.Output, "hello\n") || !strings.Contains(res.Output, "[image: ") {
		t.Fatalf("output %q", res.Output)
	}
	var logs, images []tools.CodeOutput
	for _, o := range res.Outputs {
		switch o.Type {
		case "logs":
			logs = append(logs, o)
		case "image":
			images = append(images, o)
		default:
			t.Fatalf("output type %q", o.Type)
		}
	}
	// The client's logs are the model's text without the image placeholder.
	if len(logs) != 1 || logs[0].Logs != "hello" || len(images) != 1 {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	url, ok := strings.CutPrefix(images[0].URL, "data:image/png;base64,")
	png, err := base64.StdEncoding.DecodeString(url)
	if !ok || err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("image url %.60q: %v", images[0].URL, err)
	}
	b, _ := json.Marshal(res.Outputs[0])
	if string(b) != `{"type":"logs","logs":"hello"}` {
		t.Fatalf("logs shape %s", b)
	}

	res = run("x = 1/0")
	if !res.Failed || !strings.Contains(res.Output, "ZeroDivisionError") || len(res.Outputs) != 1 ||
		!strings.Contains(res.Outputs[0].Logs, "ZeroDivisionError") {
		t.Fatalf("error: %q %+v", res.Output, res.Outputs)
	}
}
