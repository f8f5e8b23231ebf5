package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// netPath is a path and, for a download, the CPU time this process spent
// in its runs.
type netPath struct {
	*path
	cpu *cpuTally
}

// cpuTally adds up this process's CPU time and the bytes downloaded.
type cpuTally struct {
	cpu   time.Duration
	bytes int64
}

// perGiB compares the CPU per GiB of downloads through Cubicle (t) and on
// the host (host); nil when either moved nothing.
func (t *cpuTally) perGiB(host *cpuTally) *NetCPU {
	if t.bytes == 0 || host.bytes == 0 {
		return nil
	}
	c := t.cpu.Seconds() / (float64(t.bytes) / (1 << 30))
	h := host.cpu.Seconds() / (float64(host.bytes) / (1 << 30))
	return &NetCPU{Cubicle: c, Host: h, Proxy: c - h}
}

// netPaths are the latency paths (run every iteration) and the two
// download paths, Cubicle's first (none without downloads).
func netPaths(cfg NetConfig, drv sandbox.Driver, attach *timedNetwork, host curlRunner) (lat []*path, dl []netPath) {
	ispec := cfg.Spec
	ispec.Network, ispec.Internet = sandbox.NetworkInternet, sandbox.InternetPolicy{Domains: []string{netName}}
	nspec := cfg.Spec
	nspec.Network = sandbox.NetworkNone
	comp := &netComputer{spec: ispec, driver: drv, timeout: cfg.Timeout}

	hello := fmt.Sprintf("http://%s/", netName)
	resolve := fmt.Sprintf("%s:80:%s", netName, egresstest.Web)
	want := int64(len(fmt.Sprintf("hello %s from %s\n", netName, egresstest.Web)))
	cub := &path{name: "cubicle curl", required: true, setup: comp.setup, close: comp.close, rows: []rowDef{
		{RowNetConnect, "cubicle  TCP connect (curl in the computer)"},
		{RowNetGet, "cubicle  connect + GET"},
		{RowNetDNS, "cubicle  DNS lookup (answered by Cubicle)"},
	}}
	cub.sample = curlSample(comp.curl, curlArgs(hello, cfg.Timeout), cfg.Timeout, want, func(c curlTiming) map[string]time.Duration {
		return map[string]time.Duration{RowNetConnect: c.TCP(), RowNetGet: c.ConnectGet(), RowNetDNS: c.Lookup}
	})
	hst := &path{name: "host curl", required: true, rows: []rowDef{
		{RowNetHostConnect, "host     TCP connect (same curl, test netns)"},
		{RowNetHostGet, "host     connect + GET"},
	}}
	hst.sample = curlSample(host, curlArgs(hello, cfg.Timeout, "--resolve", resolve), cfg.Timeout, want, func(c curlTiming) map[string]time.Duration {
		return map[string]time.Duration{RowNetHostConnect: c.TCP(), RowNetHostGet: c.ConnectGet()}
	})
	lat = []*path{cub, hst,
		createPath(drv, nspec, cfg.Timeout, RowNetCreateNone, "cubicle  Create() → ready, network none", nil),
		createPath(drv, ispec, cfg.Timeout, RowNetCreateInternet, "cubicle  Create() → ready, network internet", attach),
	}

	if cfg.Downloads == 0 {
		return lat, nil
	}
	bytesURL := fmt.Sprintf("http://%s/bytes?n=%d", netName, cfg.Size)
	dlTimeout := cfg.Timeout * time.Duration(1+(cfg.Size-1)/(256<<20))
	dl = []netPath{
		downloadPath(comp.curl, curlArgs(bytesURL, dlTimeout), dlTimeout, cfg.Size, RowNetDownload,
			fmt.Sprintf("cubicle  download %s", size(cfg.Size))),
		downloadPath(host, curlArgs(bytesURL, dlTimeout, "--resolve", resolve), dlTimeout, cfg.Size, RowNetHostDownload,
			fmt.Sprintf("host     download %s", size(cfg.Size))),
	}
	return lat, dl
}

// curlSample runs curl once, checks it got want bytes with status 200, and
// gives its rows.
func curlSample(run curlRunner, args []string, maxTime time.Duration, want int64,
	rows func(curlTiming) map[string]time.Duration) func(context.Context) (map[string]time.Duration, error) {
	return func(ctx context.Context) (map[string]time.Duration, error) {
		out, err := run(ctx, args, maxTime)
		if err != nil {
			return nil, err
		}
		c, err := parseCurl(out)
		if err == nil {
			err = c.check(want)
		}
		if err != nil {
			return nil, err
		}
		return rows(c), nil
	}
}

// downloadPath downloads size bytes with curl once per sample; its row
// keeps the transfer time at curl's average speed, and its tally this
// process's CPU time around curl.
func downloadPath(run curlRunner, args []string, maxTime time.Duration, size int64, id, label string) netPath {
	p := netPath{path: &path{name: label, required: true, rows: []rowDef{{id, label}}}, cpu: &cpuTally{}}
	p.sample = func(ctx context.Context) (map[string]time.Duration, error) {
		before := selfCPU()
		out, err := run(ctx, args, maxTime)
		p.cpu.cpu += selfCPU() - before
		if err != nil {
			return nil, err
		}
		c, err := parseCurl(out)
		if err == nil {
			err = c.check(size)
		}
		if err != nil {
			return nil, err
		}
		p.cpu.bytes += c.Size
		d, err := c.transferTime()
		return map[string]time.Duration{id: d}, err
	}
	return p
}

// createPath times Create() of a computer with spec until its agent
// answers, and with attach the network's attach within it (Attach until
// the Link's Wait, beside the agent's boot); the computer is
// destroyed afterwards, untimed.
func createPath(drv sandbox.Driver, spec sandbox.Spec, timeout time.Duration, id, label string, attach *timedNetwork) *path {
	p := &path{name: label, required: true, rows: []rowDef{{id, label}}}
	if attach != nil {
		p.rows = append(p.rows, rowDef{RowNetAttach, "cubicle    network attach (beside the boot)"})
	}
	p.sample = func(ctx context.Context) (map[string]time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		sb, err := drv.Create(cctx, spec)
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		got := map[string]time.Duration{id: time.Since(start)}
		if attach != nil {
			a, ok := attach.take()
			if !ok {
				destroy(sb, timeout)
				return nil, errors.New("the internet computer's Create() attached no network")
			}
			got[RowNetAttach] = a
		}
		if err := destroy(sb, timeout); err != nil {
			return nil, err
		}
		return got, nil
	}
	return p
}

// measureNet sets the paths up, warms them up and runs them: every
// iteration runs the latency paths once, and the download paths
// cfg.Downloads times in all, spread evenly over the N iterations.
func measureNet(ctx context.Context, lat []*path, dl []netPath, cfg NetConfig, note func(string, ...any),
	cleanup func(string, func(context.Context) error)) error {
	var dlp []*path
	for _, p := range dl {
		dlp = append(dlp, p.path)
	}
	all := append(append([]*path(nil), lat...), dlp...)
	defer closePaths(all, cleanup)
	if err := setUp(ctx, all, cfg.Log, note); err != nil {
		return err
	}
	dlWarmup := min(cfg.Warmup, 1, cfg.Downloads)
	fmt.Fprintf(cfg.Log, "warming up: %d untimed runs per path, %d downloads\n", cfg.Warmup, dlWarmup)
	for i := range cfg.Warmup {
		if err := iteration(ctx, lat, i, false, note); err != nil {
			return err
		}
	}
	for i := range dlWarmup {
		if err := iteration(ctx, dlp, i, false, note); err != nil {
			return err
		}
	}
	fmt.Fprintf(cfg.Log, "measuring: %d runs per path and %d downloads of %s per path, interleaved\n", cfg.N, cfg.Downloads, size(cfg.Size))
	every, k := max(1, cfg.N/10), 0
	for i := range cfg.N {
		if err := iteration(ctx, lat, i, true, note); err != nil {
			return err
		}
		for range spread(i, cfg.N, cfg.Downloads) {
			if err := iteration(ctx, dlp, k, true, note); err != nil {
				return err
			}
			k++
		}
		if (i+1)%every == 0 || i+1 == cfg.N {
			fmt.Fprintf(cfg.Log, "  %d/%d runs, %d/%d downloads\n", i+1, cfg.N, k, cfg.Downloads)
		}
	}
	return nil
}
