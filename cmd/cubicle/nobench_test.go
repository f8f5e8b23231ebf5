package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerCarriesNoBench: the benchmarks are cmd/cubicle-bench's; the
// cubicle binary links none of their code and does not offer them.
func TestServerCarriesNoBench(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/cubicle-sandbox/cubicle/cmd/cubicle").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/cubicle-sandbox/cubicle/internal/bench") {
			t.Errorf("cmd/cubicle depends on %s", pkg)
		}
	}
	if !strings.Contains(string(out), "github.com/cubicle-sandbox/cubicle/internal/sandbox/linux") {
		t.Fatalf("go list -deps does not list what cubicle uses:\n%s", out)
	}
	if r := cli(t, "--help"); strings.Contains(r.stdout, "bench") {
		t.Errorf("cubicle --help offers bench:\n%s", r.stdout)
	}
	if r := cli(t, "bench"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("cubicle bench: code %d, stderr %q", r.code, r.stderr)
	}
}
