package computer_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// TestCheckKernelTemplate: a template a configuration key names for
// Python cells (the code interpreter's) is refused at start when it does
// not exist or has no python3 with ipykernel, saying what is missing;
// none and the host's are fine.
func TestCheckKernelTemplate(t *testing.T) {
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Limits{MaxBytes: 1 << 30, MaxFiles: 100000})
	if err != nil {
		t.Fatal(err)
	}
	templatetest.Import(t, s, "mini", templatetest.MiniRoot(t, t.TempDir(), templatetest.Programs...))
	f := newFixture(t, "", &fakeDriver{}, func(c *computer.Config) { c.Templates = s })
	const key = "gateway.code_interpreter_template"
	for name, want := range map[string]string{
		"": "", "host": "",
		"mini": key + `: template "mini" has no python3 with ipykernel, which runs the code interpreter's cells: build it with the Debian package python3-ipykernel`,
		"gone": key + `: invalid request: no gateway.code_interpreter_template, "gone",`,
	} {
		err := f.mgr.CheckKernelTemplate(context.Background(), name, key)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
}
