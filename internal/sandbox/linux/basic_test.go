package linux_test

import (
	"strings"
	"testing"
)

func TestIdentityAndLayout(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	out := mustSucceed(t, sb, "id -u; id -g; pwd; hostname; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; ls /")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"1000", "1000", "/workspace", "computer", "CapEff:\t0000000000000000"}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
	for _, w := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\nsys\n") {
		t.Errorf("/sys must not exist:\n%s", out)
	}
}
