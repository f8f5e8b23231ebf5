package bench

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestJupyterServerRoundTrip drives a real jupyter_server (Debian's
// python3-jupyter-server, installed by scripts/setup.sh) the way the bench does.
func TestJupyterServerRoundTrip(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import jupyter_server, ipykernel").Run() != nil {
		t.Fatal("jupyter_server is not installed: run scripts/setup.sh (apt-get install python3-jupyter-server)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	j, err := StartJupyter(ctx, JupyterConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			j.Stop()
		}
	}()
	if len(j.KernelArgv) == 0 || j.KernelArgv[0] != "/usr/bin/python3" {
		t.Logf("python3 kernelspec argv %q", j.KernelArgv)
	}
	kid, err := j.StartKernel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := j.OpenChannels(ctx, kid, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.KernelInfo(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		d, err := ch.Execute(ctx, "1+1", "2")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("1+1 round trip %v", d)
	}
	// The client that acknowledges at once (the quick-ACK row) speaks to
	// the same server.
	qch, err := j.OpenChannels(ctx, kid, true)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := qch.Execute(ctx, "1+1", "2"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("1+1 round trip with quick ACKs %v", d)
	}
	qch.Close()
	if _, err := ch.Execute(ctx, "1/0", "2"); err == nil {
		t.Fatal("1/0 succeeded")
	} else {
		t.Logf("1/0: %v", err)
	}
	ch.Close()
	if err := j.ShutdownKernel(ctx, kid); err != nil {
		t.Error(err)
	}
	stopped = true
	if err := j.Stop(); err != nil {
		t.Error(err)
	}
	if n, err := killUnder(dir); n != 0 || err != nil {
		t.Errorf("after Stop: %d processes under %s (%v)", n, dir, err)
	}
	if _, err := os.Stat(dir + "/runtime"); err != nil {
		t.Errorf("runtime dir not inside the bench's dir: %v", err)
	}
}
