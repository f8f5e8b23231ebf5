package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

func TestTemplateSection(t *testing.T) {
	if def := config.Default().Template; def.MaxBytes != 8<<30 || def.MaxFiles != 500000 {
		t.Fatalf("defaults %+v", def)
	}
	path := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(path, []byte("[template]\nmax_bytes = \"2G\"\nmax_files = 1000\n"), 0o600)
	cfg, err := config.Load(path, []string{"CUBICLE_TEMPLATE_MAX_FILES=2000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Template.MaxBytes != 2<<30 || cfg.Template.MaxFiles != 2000 {
		t.Fatalf("from file and env %+v", cfg.Template)
	}
	for env, key := range map[string]string{
		"CUBICLE_TEMPLATE_MAX_BYTES=512K": "template.max_bytes",
		"CUBICLE_TEMPLATE_MAX_BYTES=lots": "CUBICLE_TEMPLATE_MAX_BYTES",
		"CUBICLE_TEMPLATE_MAX_FILES=0":    "template.max_files",
		"CUBICLE_TEMPLATE_MAX_FILE=3":     "CUBICLE_TEMPLATE_MAX_FILE",
	} {
		if _, err := config.Load("", []string{env}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", env, err, key)
		}
	}
}
