package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Row IDs of the idle-cost run (Config.Idle).
const (
	RowExecAtOne = "cubicle_exec_true_1_computer"
	RowExecAtN   = "cubicle_exec_true_n_computers"
)

// The idle computers' limits: what issue 15 asks 1,000 of to fit on a
// 24 GiB host. Their disks are the smallest a computer may have, as each
// is reserved in full on the data directory's filesystem.
const (
	IdleMemory = 64 << 20
	IdleDisk   = sandbox.MinDisk
)

// idleSettle is how long the idle computers are left alone before their
// threads and memory are counted (a variable for the tests).
var idleSettle = 2 * time.Second

// idleMinAvailable stops the creation of idle computers early when the
// host's available memory falls below it (the machine may be shared).
const idleMinAvailable = 2 << 30

// IdleReport is what an idle computer costs the host (Config.Idle).
type IdleReport struct {
	Asked       int   `json:"asked"`
	Computers   int   `json:"computers"` // created (fewer than asked when memory ran short)
	MemoryBytes int64 `json:"memory_bytes"`
	DiskBytes   int64 `json:"disk_bytes"`
	// CreateSeconds is how long the creation of all of them took.
	CreateSeconds float64 `json:"create_seconds"`
	// Agents are the agents' counts, each idle: threads (/proc/PID/task),
	// resident and proportional set sizes (/proc/PID/smaps_rollup).
	AgentThreadsMean float64 `json:"agent_threads_mean"`
	AgentThreadsMax  int     `json:"agent_threads_max"`
	AgentRSSMean     int64   `json:"agent_rss_bytes_mean"`
	AgentPSSMean     int64   `json:"agent_pss_bytes_mean"`
	// The threads of this process (the driver's) and of the launcher
	// with one computer and with all of them, and the growth per
	// computer.
	ServerThreadsAtOne           int     `json:"server_threads_at_one"`
	ServerThreadsAtN             int     `json:"server_threads_at_n"`
	ServerThreadsPerComputer     float64 `json:"server_threads_per_computer"`
	LauncherThreadsAtOne         int     `json:"launcher_threads_at_one"`
	LauncherThreadsAtN           int     `json:"launcher_threads_at_n"`
	LauncherThreadsPerComputer   float64 `json:"launcher_threads_per_computer"`
	HostAvailableBytesBefore     int64   `json:"host_available_bytes_before"`
	HostAvailableBytesAtN        int64   `json:"host_available_bytes_at_n"`
	HostAvailablePerComputerByte int64   `json:"host_available_bytes_per_computer"`
}

// idleRun creates cfg.Idle idle computers (IdleMemory, IdleDisk), counts
// what they cost, and times /bin/true round trips into the first of them
// while it is alone and while all of them live (rows RowExecAtOne and
// RowExecAtN, cfg.N each). Every computer is destroyed before it returns.
func idleRun(ctx context.Context, cfg Config, note func(string, ...any)) (*IdleReport, []Row, error) {
	spec := cfg.Spec
	spec.MemoryBytes, spec.DiskBytes = IdleMemory, IdleDisk
	rep := &IdleReport{Asked: cfg.Idle, MemoryBytes: spec.MemoryBytes, DiskBytes: spec.DiskBytes}
	fleet := &idleFleet{}
	defer func() {
		if err := fleet.destroyAll(cfg.Timeout); err != nil {
			note("idle computers: clean-up incomplete: %v", err)
		}
	}()
	fmt.Fprintf(cfg.Log, "idle cost: %d computers of %s memory, %s disk\n", cfg.Idle, size(spec.MemoryBytes), size(spec.DiskBytes))
	rep.HostAvailableBytesBefore = memAvailable()
	probe, err := fleet.create(ctx, cfg, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("idle cost: create: %w", err)
	}
	r := &running{cfg: cfg, sb: probe}
	atOne, err := execSamples(ctx, r, cfg.N, cfg.Warmup)
	if err != nil {
		return nil, nil, fmt.Errorf("idle cost: exec with one computer: %w", err)
	}
	sleepCtx(ctx, idleSettle)
	launcher := launcherPid()
	rep.ServerThreadsAtOne, rep.LauncherThreadsAtOne = procThreads(selfPid), procThreads(launcher)

	start := time.Now()
	if err := fleet.grow(ctx, cfg, spec, cfg.Idle, note); err != nil {
		return nil, nil, err
	}
	rep.Computers = len(fleet.sbs)
	rep.CreateSeconds = time.Since(start).Seconds()
	sleepCtx(ctx, idleSettle)
	rep.ServerThreadsAtN, rep.LauncherThreadsAtN = procThreads(selfPid), procThreads(launcherPid())
	rep.HostAvailableBytesAtN = memAvailable()
	if more := rep.Computers - 1; more > 0 {
		rep.ServerThreadsPerComputer = float64(rep.ServerThreadsAtN-rep.ServerThreadsAtOne) / float64(more)
		rep.LauncherThreadsPerComputer = float64(rep.LauncherThreadsAtN-rep.LauncherThreadsAtOne) / float64(more)
		rep.HostAvailablePerComputerByte = (rep.HostAvailableBytesBefore - rep.HostAvailableBytesAtN) / int64(rep.Computers)
	}
	agents := procChildren(launcherPid())
	var threads int
	var rss, pss int64
	for _, pid := range agents {
		n := procThreads(pid)
		threads += n
		rep.AgentThreadsMax = max(rep.AgentThreadsMax, n)
		r, p := procMemory(pid)
		rss, pss = rss+r, pss+p
	}
	if len(agents) > 0 {
		rep.AgentThreadsMean = float64(threads) / float64(len(agents))
		rep.AgentRSSMean, rep.AgentPSSMean = rss/int64(len(agents)), pss/int64(len(agents))
	}
	if len(agents) != rep.Computers {
		note("idle cost: %d agents found for %d computers", len(agents), rep.Computers)
	}
	atN, err := execSamples(ctx, r, cfg.N, cfg.Warmup)
	if err != nil {
		return nil, nil, fmt.Errorf("idle cost: exec with %d computers: %w", rep.Computers, err)
	}
	rows := []Row{
		{ID: RowExecAtOne, Label: "cubicle  exec /bin/true, 1 computer", Summary: Summarize(atOne)},
		{ID: RowExecAtN, Label: fmt.Sprintf("cubicle  exec /bin/true, %d computers", rep.Computers), Summary: Summarize(atN)},
	}
	return rep, rows, nil
}

// execSamples times n /bin/true round trips into r after warmup untimed.
func execSamples(ctx context.Context, r *running, n, warmup int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range warmup + n {
		d, err := r.execTrue(ctx)
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, d)
		}
	}
	return out, nil
}

// idleFleet is the idle computers of a run.
type idleFleet struct {
	mu  sync.Mutex
	sbs []sandbox.Sandbox
}

func (f *idleFleet) create(ctx context.Context, cfg Config, spec sandbox.Spec) (sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	sb, err := cfg.Driver.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.sbs = append(f.sbs, sb)
	f.mu.Unlock()
	return sb, nil
}

// idleCreators is how many creates run at once.
const idleCreators = 4

// grow creates computers until there are n, or the host's available
// memory runs short (noted).
func (f *idleFleet) grow(ctx context.Context, cfg Config, spec sandbox.Spec, n int, note func(string, ...any)) error {
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
		short bool
		next  = make(chan struct{})
	)
	for range idleCreators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := f.create(ctx, cfg, spec); err != nil {
					errMu.Lock()
					first = cmpOr(first, err)
					errMu.Unlock()
				}
			}
		}()
	}
	every := max(1, n/10)
	for i := 1; i < n; i++ {
		errMu.Lock()
		stop := first != nil
		errMu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		if i%every == 0 {
			fmt.Fprintf(cfg.Log, "  %d/%d idle computers\n", i, n)
			if memAvailable() < idleMinAvailable {
				short = true
				break
			}
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if short {
		note("idle cost: stopped at %d computers: the host's available memory fell below %s", len(f.sbs), size(idleMinAvailable))
	}
	if first != nil {
		return fmt.Errorf("idle cost: create: %w", first)
	}
	return ctx.Err()
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// destroyAll destroys the fleet, a few at a time.
func (f *idleFleet) destroyAll(timeout time.Duration) error {
	f.mu.Lock()
	sbs := f.sbs
	f.sbs = nil
	f.mu.Unlock()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, 8)
	)
	for _, sb := range sbs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := destroy(sb, timeout); err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// sleepCtx waits d, or less when ctx ends first (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// writeIdle prints the idle-cost section of the sandbox table.
func writeIdle(b *strings.Builder, r *IdleReport) {
	if r == nil {
		return
	}
	fmt.Fprintf(b, "\nidle cost: %d idle computers (%d asked) of %s memory, %s disk, created in %.1f s\n",
		r.Computers, r.Asked, size(r.MemoryBytes), size(r.DiskBytes), r.CreateSeconds)
	fmt.Fprintf(b, "  agent threads per idle computer       %.2f mean, %d max\n", r.AgentThreadsMean, r.AgentThreadsMax)
	fmt.Fprintf(b, "  agent memory per idle computer        %s RSS, %s PSS (mean)\n", mib(r.AgentRSSMean), mib(r.AgentPSSMean))
	fmt.Fprintf(b, "  host memory available per computer    %s less\n", mib(r.HostAvailablePerComputerByte))
	fmt.Fprintf(b, "  server (driver) threads               %d at 1, %d at %d: %+.3f per computer\n",
		r.ServerThreadsAtOne, r.ServerThreadsAtN, r.Computers, r.ServerThreadsPerComputer)
	fmt.Fprintf(b, "  launcher threads                      %d at 1, %d at %d: %+.3f per computer\n",
		r.LauncherThreadsAtOne, r.LauncherThreadsAtN, r.Computers, r.LauncherThreadsPerComputer)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
