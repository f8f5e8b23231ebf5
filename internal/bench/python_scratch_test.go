package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

func TestScratchSplit(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	ctx := context.Background()
	dir := t.TempDir()
	drv, err := linux.New(linux.Config{StateDir: dir + "/state", AgentPath: "/tmp/cubicle-pybench"})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.GC(ctx)
	mk := func(cpus float64) sandbox.Sandbox {
		spec := sandbox.DefaultSpec()
		spec.CPUs = cpus
		sb, err := drv.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Python(ctx, sandbox.PythonRequest{Prelude: config.DefaultPrelude, Mode: "session", Timeout: sandbox.Millis(time.Minute)}, nil)
		if err != nil || res.Status != "ok" {
			t.Fatal(err, res)
		}
		return sb
	}
	q := mk(1)
	defer q.Destroy(ctx)
	nq := mk(0)
	defer nq.Destroy(ctx)
	os.Mkdir(dir+"/hk", 0o700)
	hk, err := startHostKernel(ctx, HostKernelConfig{Dir: dir + "/hk", Prelude: config.DefaultPrelude})
	if err != nil {
		t.Fatal(err)
	}
	defer hk.stop()
	req := sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "1+1"}}, Timeout: sandbox.Millis(10 * time.Second)}
	var a, b, c []time.Duration
	for i := 0; i < 150; i++ {
		hk.execute(ctx, "1+1", "2")
		time.Sleep(10 * time.Millisecond)
		s := time.Now()
		if _, err := q.Python(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		a = append(a, time.Since(s))
		s = time.Now()
		if _, err := q.Python(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		b = append(b, time.Since(s))
		d, _ := hk.execute(ctx, "1+1", "2")
		c = append(c, d)
	}
	p := func(n string, x []time.Duration) {
		x = x[20:]
		sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
		fmt.Printf("%-40s p50 %v p90 %v\n", n, x[len(x)/2], x[len(x)*9/10])
	}
	p("driver Python 1+1 after 10ms idle", a)
	p("driver Python 1+1 (right after the other)", b)
	p("host kernel 1+1", c)
}
