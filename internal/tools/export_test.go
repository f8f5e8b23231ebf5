package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
)

func TestExportHook(t *testing.T) {
	f := &fake{files: map[string][]byte{"/workspace/out/r.bin": {1, 0, 2}}}
	var got []string
	env := Env{Artifacts: true, Export: func(_ context.Context, p string) (artifact.Ref, error) {
		got = append(got, p)
		return artifact.Ref{ID: "art_1", Filename: "r.bin", Bytes: 3}, nil
	}}
	res := run(t, f, env, ReadFileName, `{"path":"out/r.bin","export":true}`)
	if res.Output != "Exported 3 bytes from /workspace/out/r.bin." || res.Failed {
		t.Fatalf("%q", res.Output)
	}
	b, _ := json.Marshal(res.Artifacts)
	if string(b) != `[{"id":"art_1","filename":"r.bin","bytes":3}]` || len(got) != 1 || got[0] != "/workspace/out/r.bin" {
		t.Fatalf("artifacts %s, calls %v", b, got)
	}
	// Without the capability nothing is stored.
	env.Artifacts = false
	res = run(t, f, env, ReadFileName, `{"path":"out/r.bin","export":true}`)
	if res.Output != "[binary output omitted: 3 bytes]" || len(got) != 1 || len(res.Artifacts) != 0 {
		t.Fatalf("%q, calls %v", res.Output, got)
	}
	// The hook's size error is the fixed sentence.
	env = Env{Artifacts: true, Export: func(context.Context, string) (artifact.Ref, error) { return artifact.Ref{}, artifact.ErrTooLarge }}
	res = run(t, f, env, ReadFileName, `{"path":"out/r.bin","export":true}`)
	if res.Output != "File is too large to export: the limit is 26214400 bytes." || !res.Failed {
		t.Fatalf("%q", res.Output)
	}
}
