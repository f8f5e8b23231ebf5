package bench

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestHostKernel starts the floor's kernel on this host, runs the prelude
// and 1+1, and checks that nothing of it is left after stop.
func TestHostKernel(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run() != nil {
		t.Fatal("ipykernel is not installed: run scripts/setup.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k, err := startHostKernel(ctx, HostKernelConfig{Dir: dir, Prelude: "x = 40"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.execute(ctx, "x + 2", "42"); err != nil {
		t.Error(err)
	}
	d, err := k.execute(ctx, onePlusOne, onePlusOneResult)
	if err != nil || d <= 0 {
		t.Errorf("1+1: %v, %v", d, err)
	}
	if _, err := k.execute(ctx, onePlusOne, "3"); err == nil {
		t.Error("a wrong result passed")
	}
	if _, err := k.execute(ctx, "1/0", "2"); err == nil {
		t.Error("a failing cell passed")
	}
	if err := k.stop(); err != nil {
		t.Error(err)
	}
	if n, _ := killUnder(dir); n != 0 {
		t.Errorf("%d processes left under %s", n, dir)
	}
	if _, err := startHostKernel(ctx, HostKernelConfig{Dir: t.TempDir(), Prelude: "import no_such_module_x"}); err == nil {
		t.Error("a failing prelude started")
	}
}
