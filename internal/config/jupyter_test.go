package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

func TestJupyterSection(t *testing.T) {
	def := config.Default().Jupyter
	if !def.Enabled || def.CullIdleSeconds != 1800 || len(def.MountRoots) != 0 {
		t.Fatalf("defaults %+v", def)
	}
	path := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(path, []byte("[jupyter]\ncull_idle_seconds = 60\nmemory = \"1G\"\nmount_roots = [\"/srv/projects:rw\", \"/data/ref/:ro\"]\n"), 0o600)
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Jupyter
	want := config.MountRoots{{Path: "/srv/projects"}, {Path: "/data/ref", ReadOnly: true}}
	if j.CullIdleSeconds != 60 || j.Memory != 1<<30 || len(j.MountRoots) != 2 || j.MountRoots[0] != want[0] || j.MountRoots[1] != want[1] {
		t.Fatalf("from file %+v", j)
	}
	cfg, err = config.Load(path, []string{"CUBICLE_JUPYTER_MOUNT_ROOTS=/home/dev:ro", "CUBICLE_JUPYTER_ENABLED=false"})
	if err != nil {
		t.Fatal(err)
	}
	if j := cfg.Jupyter; j.Enabled || len(j.MountRoots) != 1 || j.MountRoots[0] != (config.MountRoot{Path: "/home/dev", ReadOnly: true}) {
		t.Fatalf("env override %+v", j)
	}
	if b, _ := cfg.Jupyter.MountRoots.MarshalText(); string(b) != "/home/dev:ro" {
		t.Fatalf("marshal %q", b)
	}
	for env, key := range map[string]string{
		"CUBICLE_JUPYTER_MOUNT_ROOTS=relative:rw": "CUBICLE_JUPYTER_MOUNT_ROOTS",
		"CUBICLE_JUPYTER_MOUNT_ROOTS=/srv":        "CUBICLE_JUPYTER_MOUNT_ROOTS",
		"CUBICLE_JUPYTER_MOUNT_ROOTS=/srv:rx":     "CUBICLE_JUPYTER_MOUNT_ROOTS",
		"CUBICLE_JUPYTER_MOUNT_ROOTS=/:ro":        "CUBICLE_JUPYTER_MOUNT_ROOTS",
		"CUBICLE_JUPYTER_CULL_IDLE_SECONDS=-1":    "jupyter.cull_idle_seconds",
		"CUBICLE_JUPYTER_MEMORY=8M":               "jupyter.memory",
		"CUBICLE_JUPYTER_LIFETIME_SECONDS=-5":     "jupyter.lifetime_seconds",
	} {
		if _, err := config.Load("", []string{env}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", env, err, key)
		}
	}
}
