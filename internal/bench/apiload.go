package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxLoadNotes bounds how many distinct load errors are noted.
const maxLoadNotes = 5

// loadTally collects the load phase's samples and errors from all
// workers.
type loadTally struct {
	mu      sync.Mutex
	samples map[string][]time.Duration
	fails   map[string]int
	errors  int
	refused int
	skipped int
	seen    map[string]bool // error messages already noted
	note    func(string, ...any)
}

func newLoadTally(note func(string, ...any)) *loadTally {
	return &loadTally{samples: map[string][]time.Duration{}, fails: map[string]int{}, seen: map[string]bool{}, note: note}
}

func (t *loadTally) ok(row string, d time.Duration) {
	t.mu.Lock()
	t.samples[row] = append(t.samples[row], d)
	t.mu.Unlock()
}

// fail counts a failed request; a 429 also counts as refused.
func (t *loadTally) fail(row string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fails[row]++
	t.errors++
	if isCapacity(err) {
		t.refused++
	}
	msg := err.Error()
	if !t.seen[msg] && len(t.seen) < maxLoadNotes {
		t.seen[msg] = true
		t.note("load: %s failed: %v", row, err)
	}
}

func (t *loadTally) skip(n int) {
	t.mu.Lock()
	t.skipped += n
	t.mu.Unlock()
}

// result summarises the tally; wall is the exec phase's wall time and cpu
// what the host's CPUs did meanwhile (nil: not measured).
func (t *loadTally) result(computers, execs int, wall time.Duration, cpu *cpuDelta) *Load {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := &Load{Computers: computers, ExecsEach: execs, Errors: t.errors, Refused: t.refused, Skipped: t.skipped,
		Execs: len(t.samples[RowLoadExecTrue]), Seconds: wall.Seconds()}
	if cpu != nil {
		l.CPUBusy = cpu.host.busySince(cpu.host0)
		l.CPUPerExec = cpu.perExec(l.Execs)
	}
	for _, r := range []rowDef{
		{RowLoadCreate, fmt.Sprintf("load     POST /v1/computers (%d at once)", computers)},
		{RowLoadExecTrue, "load     exec /bin/true round trip"},
		{RowLoadDelete, fmt.Sprintf("load     DELETE /v1/computers/{id} (%d at once)", computers)},
	} {
		l.Rows = append(l.Rows, Row{ID: r.id, Label: r.label, Summary: Summarize(t.samples[r.id]), Failures: t.fails[r.id]})
	}
	if wall > 0 {
		l.Throughput = float64(l.Execs) / wall.Seconds()
	}
	l.OK = l.Errors == 0 && l.Skipped == 0 && l.Execs == computers*execs
	return l
}

// runLoad creates cfg.Concurrency computers at once, then runs cfg.Execs
// execs of /bin/true in each, in sequence per computer and all computers in
// parallel, then deletes them all at once. Each stage starts when the
// previous one ended everywhere, so the exec phase's wall time is not
// blurred by creates or deletes.
func runLoad(ctx context.Context, c *apiClient, tr *tracker, pool *poolWaiter, cfg APIConfig, note func(string, ...any)) (*Load, error) {
	n, execs := cfg.Concurrency, cfg.Execs
	t := newLoadTally(note)
	if err := pool.wait(ctx); err != nil {
		return t.result(n, execs, 0, nil), err
	}
	ids := make([]string, n)

	fmt.Fprintf(cfg.Log, "load: creating %d computers at once\n", n)
	parallel(n, func(i int) {
		if ctx.Err() != nil {
			return
		}
		id, d, err := c.create(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.fail(RowLoadCreate, err)
			}
			return
		}
		tr.add(id)
		ids[i] = id
		t.ok(RowLoadCreate, d)
	})
	if err := ctx.Err(); err != nil {
		return t.result(n, execs, 0, nil), err
	}

	// The claims started refills; let them finish so that they do not
	// blur the exec phase.
	if err := pool.wait(ctx); err != nil {
		if ctx.Err() != nil {
			return t.result(n, execs, 0, nil), ctx.Err()
		}
		note("load: %v; measuring the execs anyway", err)
	}

	fmt.Fprintf(cfg.Log, "load: %d × %d execs of /bin/true, all computers in parallel\n", n, execs)
	cpu := startCPU(cfg.ServerPID)
	start := time.Now()
	parallel(n, func(i int) {
		if ids[i] == "" {
			t.skip(execs)
			return
		}
		loadExecs(ctx, c, t, ids[i], execs)
	})
	wall := time.Since(start)
	cpu = cpu.stop()
	if err := ctx.Err(); err != nil {
		return t.result(n, execs, wall, cpu), err
	}

	fmt.Fprintf(cfg.Log, "load: deleting %d computers at once\n", n)
	parallel(n, func(i int) {
		if ids[i] == "" || ctx.Err() != nil {
			return
		}
		d, err := c.delete(ctx, ids[i])
		if err != nil {
			if ctx.Err() == nil {
				t.fail(RowLoadDelete, err)
			}
			return
		}
		tr.remove(ids[i])
		t.ok(RowLoadDelete, d)
	})
	return t.result(n, execs, wall, cpu), ctx.Err()
}

// parallel runs f(0) … f(n-1) each in its own goroutine, released at the
// same moment, and waits for all of them.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			f(i)
		}()
	}
	close(gate)
	wg.Wait()
}

// cpuTimes are the host's aggregate CPU times from /proc/stat, in ticks.
type cpuTimes struct{ busy, idle uint64 }

func readCPU() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	return parseCPU(string(b))
}

// parseCPU reads the "cpu" line: user nice system idle iowait irq softirq
// steal ...; idle and iowait count as idle, the rest (up to steal) as busy.
func parseCPU(stat string) (cpuTimes, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		if i == 3 || i == 4 {
			t.idle += v
		} else {
			t.busy += v
		}
	}
	return t, true
}

// busySince is the share of CPU time that was busy between a and t.
func (t cpuTimes) busySince(a cpuTimes) float64 {
	busy, idle := float64(t.busy-a.busy), float64(t.idle-a.idle)
	if busy+idle <= 0 {
		return 0
	}
	return busy / (busy + idle)
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// procTicks are CPU times in ticks of the processes taking part in the
// load: this process (the client), the server, and the server's
// descendants (the computers' inits and agents, with the processes they
// reaped).
type procTicks struct{ client, server, computers uint64 }

// readProcTicks reads procTicks; serverPID 0 (a server elsewhere) leaves
// the server and its computers at zero.
func readProcTicks(serverPID int) procTicks {
	var t procTicks
	if c, _, ok := readStat(os.Getpid()); ok {
		t.client = c.own
	}
	if serverPID <= 0 {
		return t
	}
	if c, _, ok := readStat(serverPID); ok {
		t.server = c.own
	}
	// Every descendant of the server (a computer's init, its agent, the
	// processes it runs), with what each reaped: those are gone from /proc,
	// so nothing is counted twice.
	type proc struct {
		ppid  int
		ticks uint64
	}
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ppid, ok := readStat(pid); ok {
			procs[pid] = proc{ppid, c.own + c.children}
		}
	}
	for _, p := range procs {
		for a, hops := p.ppid, 0; a > 1 && hops < 64; a, hops = procs[a].ppid, hops+1 {
			if a == serverPID {
				t.computers += p.ticks
				break
			}
		}
	}
	return t
}

type statTicks struct{ own, children uint64 }

// readStat reads utime+stime, cutime+cstime and the parent of a process.
func readStat(pid int) (statTicks, int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statTicks{}, 0, false
	}
	return parseStat(string(b))
}

// parseStat parses /proc/PID/stat: after "(comm)" come state, ppid, ...,
// utime (14th field), stime, cutime, cstime.
func parseStat(s string) (statTicks, int, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return statTicks{}, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return statTicks{}, 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return statTicks{}, 0, false
	}
	var v [4]uint64
	for k := range v {
		if v[k], err = strconv.ParseUint(f[11+k], 10, 64); err != nil {
			return statTicks{}, 0, false
		}
	}
	return statTicks{own: v[0] + v[1], children: v[2] + v[3]}, ppid, true
}

// cpuDelta measures the host's and the participants' CPU time over the
// exec phase.
type cpuDelta struct {
	serverPID   int
	host0, host cpuTimes
	p0, p       procTicks
}

func startCPU(serverPID int) *cpuDelta {
	h, ok := readCPU()
	if !ok {
		return nil
	}
	return &cpuDelta{serverPID: serverPID, host0: h, p0: readProcTicks(serverPID)}
}

func (d *cpuDelta) stop() *cpuDelta {
	if d == nil {
		return nil
	}
	h, ok := readCPU()
	if !ok {
		return nil
	}
	d.host, d.p = h, readProcTicks(d.serverPID)
	return d
}

// CPUPerExec splits the CPU time the host spent during the exec phase,
// per successful exec, in milliseconds.
type CPUPerExec struct {
	Total     float64 `json:"total_ms"`
	Client    float64 `json:"client_ms"`              // the bench's own HTTP client
	Server    float64 `json:"server_ms,omitempty"`    // cubicle serve
	Computers float64 `json:"computers_ms,omitempty"` // agents and the execs they ran
	Other     float64 `json:"other_ms"`               // everything else (kernel threads, other work)
}

func (d *cpuDelta) perExec(execs int) *CPUPerExec {
	if d == nil || execs == 0 {
		return nil
	}
	ms := func(ticks uint64) float64 { return float64(ticks) * 1000 / userHZ / float64(execs) }
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	c := &CPUPerExec{
		Total:     ms(sub(d.host.busy, d.host0.busy)),
		Client:    ms(sub(d.p.client, d.p0.client)),
		Server:    ms(sub(d.p.server, d.p0.server)),
		Computers: ms(sub(d.p.computers, d.p0.computers)),
	}
	c.Other = max(0, c.Total-c.Client-c.Server-c.Computers)
	return c
}

// loadExecs runs execs execs of /bin/true in computer id, one after the
// other, into t.
func loadExecs(ctx context.Context, c *apiClient, t *loadTally, id string, execs int) {
	failRun := 0
	for k := range execs {
		if ctx.Err() != nil {
			return
		}
		d, err := c.exec(ctx, id, trueArgv, "")
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.fail(RowLoadExecTrue, err)
			// A computer that keeps failing (gone, broken) would cost a
			// timeout per exec: give up on it.
			if failRun++; failRun >= consecutiveFailures {
				t.skip(execs - k - 1)
				return
			}
			continue
		}
		failRun = 0
		t.ok(RowLoadExecTrue, d)
	}
}
