package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Row IDs of 'cubicle-bench net', stable for JSON consumers.
const (
	RowNetConnect        = "net_cubicle_connect"
	RowNetHostConnect    = "net_host_connect"
	RowNetGet            = "net_cubicle_connect_get"
	RowNetHostGet        = "net_host_connect_get"
	RowNetDNS            = "net_cubicle_dns"
	RowNetCreateNone     = "net_create_none"
	RowNetCreateInternet = "net_create_internet"
	RowNetAttach         = "net_attach"
	RowNetDownload       = "net_cubicle_download"
	RowNetHostDownload   = "net_host_download"
)

// The goals of issue 13 on this machine, judged on p50s.
const (
	NetConnectAddedMax = time.Millisecond     // added per connect, cubicle − host
	NetDownloadMinGbps = 1.0                  // download through Cubicle
	NetCreateAddedMax  = 5 * time.Millisecond // Create(), internet − none
)

// Defaults of 'cubicle-bench net'.
const (
	DefaultNetN         = 100
	DefaultNetDownloads = 20
	DefaultNetSize      = 256 << 20
)

// netName is the name the computer's policy allows; the test internet's
// DNS answers it with egresstest.Web.
const netName = "allowed.test"

// NetConfig says what 'cubicle-bench net' measures.
type NetConfig struct {
	// NewDriver makes the driver whose computers are measured; network
	// (the egress service, dialing into the test internet) is its
	// sandbox.Network.
	NewDriver func(network sandbox.Network) (sandbox.Driver, error)
	Spec      sandbox.Spec // the computers' limits
	N         int          // timed runs per latency path
	Warmup    int          // untimed runs per path before (downloads: at most 1)
	// Downloads is the number of timed downloads of Size bytes per path,
	// spread evenly among the N iterations.
	Downloads int
	Size      int64
	// Timeout bounds one run; a download gets it once per 256 MiB.
	Timeout time.Duration
	Log     io.Writer
}

// Validate checks the configuration in the words of the command's flags.
func (c NetConfig) Validate() error {
	switch {
	case c.N < 1 || c.N > 100000:
		return fmt.Errorf("--n must be between 1 and 100000, got %d", c.N)
	case c.Warmup < 0 || c.Warmup > 1000:
		return fmt.Errorf("--warmup must be between 0 and 1000, got %d", c.Warmup)
	case c.Downloads < 0 || c.Downloads > 10000:
		return fmt.Errorf("--downloads must be between 0 and 10000, got %d", c.Downloads)
	case c.Size < 1 || c.Size > egresstest.MaxBytes:
		return fmt.Errorf("--size must be between 1 byte and %s, got %d", size(egresstest.MaxBytes), c.Size)
	case c.Timeout < 0:
		return errors.New("--timeout must be positive")
	}
	return nil
}

// NetReport is the result of RunNet.
type NetReport struct {
	Date      time.Time `json:"date"`
	Host      Host      `json:"host"`
	N         int       `json:"n"`
	Warmup    int       `json:"warmup"`
	Downloads int       `json:"downloads"`
	Size      int64     `json:"download_bytes"`
	Spec      SpecInfo  `json:"spec"`
	// Netns is the test internet's namespace (removed at the end).
	Netns      string       `json:"netns,omitempty"`
	Rows       []Row        `json:"rows"`
	Throughput []Throughput `json:"throughput,omitempty"`
	CPU        *NetCPU      `json:"cpu,omitempty"`
	Deltas     []Delta      `json:"deltas,omitempty"`
	Targets    []NetTarget  `json:"targets"`
	Notes      []string     `json:"notes,omitempty"`
	// Failed is set when a timed run failed or a path could not run.
	Failed        bool `json:"failed"`
	CleanupFailed bool `json:"cleanup_failed,omitempty"`
}

// Throughput is a download row in Gbit/s: P10 is the slowest tenth's edge,
// from the row's p90 time.
type Throughput struct {
	Row   string  `json:"row"`
	Label string  `json:"label"`
	N     int     `json:"n"`
	P50   float64 `json:"p50_gbit_s"`
	P10   float64 `json:"p10_gbit_s"`
	Min   float64 `json:"min_gbit_s"`
	Max   float64 `json:"max_gbit_s"`
}

// NetCPU is this process's CPU time per GiB downloaded. The test servers
// run in this process, so Host is theirs alone and Cubicle theirs plus the
// computer's userspace stack and splice: Proxy is the difference.
type NetCPU struct {
	Cubicle float64 `json:"cubicle_s_per_gib"`
	Host    float64 `json:"host_s_per_gib"`
	Proxy   float64 `json:"proxy_s_per_gib"`
}

// NetTarget says whether a goal was met: Value at most Limit, or at least
// it when AtLeast.
type NetTarget struct {
	What    string  `json:"what"`
	Unit    string  `json:"unit"`
	Limit   float64 `json:"limit"`
	Value   float64 `json:"value"`
	AtLeast bool    `json:"at_least,omitempty"`
	Met     bool    `json:"met"`
}

// AddNote records a note of the caller; cleanup says that something could
// not be removed.
func (r *NetReport) AddNote(cleanup bool, format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	if cleanup {
		r.Failed, r.CleanupFailed = true, true
	}
}

// RunNet measures, interleaved, in a test internet of its own: TCP connect
// and connect+GET from curl in an internet computer and from the same curl
// on the host side, downloads both ways with this process's CPU time, and
// Create() of internet and none computers. It returns an error when it
// could not finish; failed runs are counted in the report. The computers
// and the test internet's namespace are gone when it returns (the report
// says otherwise in CleanupFailed and Notes).
func RunNet(ctx context.Context, cfg NetConfig) (*NetReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NewDriver == nil {
		return nil, errors.New("bench: no driver")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := &NetReport{Date: time.Now().UTC(), Host: hostInfo(), N: cfg.N, Warmup: cfg.Warmup, Downloads: cfg.Downloads, Size: cfg.Size,
		Spec: SpecInfo{cfg.Spec.MemoryBytes, cfg.Spec.Pids, cfg.Spec.CPUs, cfg.Spec.DiskBytes}}
	note, cleanup := reportNotes(rep.AddNote, cfg.Log)
	curl, err := exec.LookPath("curl")
	if err != nil {
		return rep, fmt.Errorf("the host client: %w", err)
	}

	fmt.Fprintln(cfg.Log, "making the test internet (a network namespace whose only link is loopback)")
	in, stopInternet, err := startInternet()
	if err != nil {
		return rep, err
	}
	rep.Netns = in.Netns
	defer cleanup("the test internet", func(context.Context) error { return stopInternet() })
	var seen egressCounts
	ecfg := in.Config()
	ecfg.Record = seen.add
	svc, err := egress.New(ecfg)
	if err != nil {
		return rep, fmt.Errorf("egress: %w", err)
	}
	attach := &timedNetwork{Network: svc}
	drv, err := cfg.NewDriver(attach)
	if err != nil {
		return rep, err
	}

	lat, dl := netPaths(cfg, drv, attach, curlOnHost(curl, in.Netns))
	if err := measureNet(ctx, lat, dl, cfg, note, cleanup); err != nil {
		return rep, err
	}
	if s := seen.unexpected(); s != "" {
		note("egress records not allowed: %s", s)
	}
	var failed bool
	all := append([]*path(nil), lat...)
	for _, p := range dl {
		all = append(all, p.path)
	}
	rep.Rows, failed = pathRows(all)
	rep.Failed = rep.Failed || failed
	rep.Throughput, rep.Deltas, rep.Targets = netVerdicts(rep.Rows, cfg.Size)
	if len(dl) == 2 {
		rep.CPU = dl[0].cpu.perGiB(dl[1].cpu)
	}
	return rep, nil
}

// netVerdicts derives the download rows' Gbit/s, the p50 differences and
// the goals from rows.
func netVerdicts(rows []Row, size int64) ([]Throughput, []Delta, []NetTarget) {
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var tp []Throughput
	for _, id := range []string{RowNetDownload, RowNetHostDownload} {
		if r, ok := byID[id]; ok && r.N > 0 {
			tp = append(tp, Throughput{Row: id, Label: r.Label, N: r.N, P50: gbits(size, time.Duration(r.P50)),
				P10: gbits(size, time.Duration(r.P90)), Min: gbits(size, time.Duration(r.Max)), Max: gbits(size, time.Duration(r.Min))})
		}
	}
	var deltas []Delta
	var targets []NetTarget
	for _, d := range []struct {
		what, row, base string
		limit           time.Duration
	}{
		{"TCP connect: cubicle − host", RowNetConnect, RowNetHostConnect, NetConnectAddedMax},
		{"connect + GET: cubicle − host", RowNetGet, RowNetHostGet, 0},
		{"Create(): internet − none", RowNetCreateInternet, RowNetCreateNone, NetCreateAddedMax},
	} {
		r, b := byID[d.row], byID[d.base]
		if r.N == 0 || b.N == 0 {
			continue
		}
		delta := time.Duration(r.P50 - b.P50)
		deltas = append(deltas, Delta{What: d.what, Row: d.row, Base: d.base, P50: r.P50, BaseP50: b.P50, Delta: Duration(delta)})
		if d.limit > 0 {
			targets = append(targets, NetTarget{What: d.what + " (p50)", Unit: "ms", Limit: Duration(d.limit).Milliseconds(),
				Value: Duration(delta).Milliseconds(), Met: delta <= d.limit})
		}
	}
	if len(tp) > 0 && tp[0].Row == RowNetDownload {
		targets = append(targets, NetTarget{What: "download through Cubicle (p50)", Unit: "Gbit/s", Limit: NetDownloadMinGbps,
			Value: tp[0].P50, AtLeast: true, Met: tp[0].P50 >= NetDownloadMinGbps})
	}
	return tp, deltas, targets
}
