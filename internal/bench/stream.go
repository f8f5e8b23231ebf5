package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Kinds of output 'cubicle-bench stream' measures: ASCII lines, random
// bytes (every byte value, invalid UTF-8) and NULs.
const (
	StreamText   = "text"
	StreamRandom = "random"
	StreamZeros  = "zeros"
)

// Ways the output reaches the bench: a host pipe, or through the API as
// SSE events of UTF-8 text, SSE events of base64, or the binary stream.
const (
	ModePipe   = "pipe"
	ModeSSE    = "sse"
	ModeBase64 = "sse-base64"
	ModeBinary = "binary"
)

// Defaults of 'cubicle-bench stream'.
const (
	DefaultStreamN    = 3
	DefaultStreamSize = 256 << 20
	// DefaultStreamTimeout bounds a run per 256 MiB: 2 MiB/s.
	DefaultStreamTimeout = 2 * time.Minute
	// randomFile is the size of the file of random bytes that the random
	// kind sends again and again (in the computer's /tmp, a tmpfs).
	randomFile = 32 << 20
)

// StreamConfig says what 'cubicle-bench stream' measures.
type StreamConfig struct {
	// Servers are the servers measured, side by side: the first is the one
	// under test (it also gets the binary stream), a second one is the
	// baseline (e.g. main's binary), measured with the same SSE requests.
	Servers []StreamServer
	N       int   // timed runs per path
	Warmup  int   // untimed runs per path before
	Size    int64 // bytes of output per run
	// Timeout bounds one run per 256 MiB of Size.
	Timeout time.Duration
	// Scratch is a directory for the host's copy of the random file.
	Scratch string
	Log     io.Writer
}

// StreamServer is a server to stream through: its address, key and
// process (its CPU time is read from /proc/PID/stat around each run).
type StreamServer struct {
	Label  string `json:"label"` // "cubicle", "baseline"
	Binary string `json:"binary,omitempty"`
	URL    string `json:"url"`
	Key    string `json:"-"`
	PID    int    `json:"pid"`
	// Binary streams: the server speaks the binary stream (the one under
	// test; a baseline from before it existed does not).
	BinaryStream bool `json:"binary_stream"`
}

// Validate checks the configuration in the words of the command's flags.
func (c StreamConfig) Validate() error {
	switch {
	case c.N < 1 || c.N > 10000:
		return fmt.Errorf("--n must be between 1 and 10000, got %d", c.N)
	case c.Warmup < 0 || c.Warmup > 100:
		return fmt.Errorf("--warmup must be between 0 and 100, got %d", c.Warmup)
	case c.Size < 1<<20 || c.Size > 64<<30:
		return fmt.Errorf("--size must be between 1M and 64G, got %d", c.Size)
	case c.Timeout < 0:
		return errors.New("--timeout must be positive")
	}
	return nil
}

// StreamReport is the result of RunStream.
type StreamReport struct {
	Date    time.Time      `json:"date"`
	Host    Host           `json:"host"`
	N       int            `json:"n"`
	Warmup  int            `json:"warmup"`
	Size    int64          `json:"bytes_per_run"`
	Servers []StreamServer `json:"servers"`
	Rows    []StreamRow    `json:"rows"`
	Targets []NetTarget    `json:"targets"`
	// LoadAvgEnd is /proc/loadavg when the run ended (Host.LoadAvg: when
	// it started).
	LoadAvgEnd    string   `json:"load_avg_end,omitempty"`
	Notes         []string `json:"notes,omitempty"`
	Failed        bool     `json:"failed"`
	CleanupFailed bool     `json:"cleanup_failed,omitempty"`
}

// StreamRow is one path's throughput: MiB/s of the p50, slowest and
// fastest run, CPU seconds per GiB over all runs of each process in the
// path (the server's, 0 for the host pipe; the computer's agent's; the
// command's, the shell and what it ran; this process's, the reader's)
// and the ratio of its p50 to the host pipe's of the same kind.
type StreamRow struct {
	ID        string  `json:"id"`
	Label     string  `json:"label"`
	Kind      string  `json:"kind"`
	Server    string  `json:"server"` // "host" or a StreamServer's label
	Mode      string  `json:"mode"`
	N         int     `json:"n"`
	Failures  int     `json:"failures"`
	P50       float64 `json:"p50_mib_s"`
	Min       float64 `json:"min_mib_s"`
	Max       float64 `json:"max_mib_s"`
	ServerCPU float64 `json:"server_cpu_s_per_gib,omitempty"`
	AgentCPU  float64 `json:"agent_cpu_s_per_gib,omitempty"`
	// CommandCPU is what the command's processes used: on the host this
	// process's children's, in a computer the agent's (which reaps them).
	CommandCPU float64 `json:"command_cpu_s_per_gib,omitempty"`
	ReaderCPU  float64 `json:"reader_cpu_s_per_gib"`
	Ratio      float64 `json:"ratio_to_pipe,omitempty"`
}

// AddNote records a note; cleanup says that something could not be
// removed.
func (r *StreamReport) AddNote(cleanup bool, format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	if cleanup {
		r.Failed, r.CleanupFailed = true, true
	}
}

// streamCommand is the shell command that writes size bytes of kind;
// random is where the random file is.
func streamCommand(kind string, size int64, random string) string {
	n := strconv.FormatInt(size, 10)
	switch kind {
	case StreamText:
		return "yes 'cubicle streams text at pipe speed, line after line' | head -c " + n
	case StreamRandom:
		return "while cat " + random + "; do :; done | head -c " + n
	}
	return "head -c " + n + " /dev/zero"
}

// streamPath is one measured way: its row and what it accumulated.
type streamPath struct {
	*path
	row       StreamRow
	serverPID int
	// agentPID is the computer's agent, found once the computer exists
	// (shared by a server's paths); nil for the host pipe.
	agentPID   *int
	cpuTicks   int64         // the server's, over every run
	agentTicks int64         // the agent's own
	cmdTicks   int64         // the command's: the agent's children's
	cmdCPU     time.Duration // on the host: this process's children's
	readerCPU  time.Duration // this process's, over every run
	bytes      int64         // over every run
}

// RunStream measures, interleaved, the same commands' output read from a
// host pipe and streamed through each server's API. It returns an error
// when it could not finish; failed runs are counted in the report. The
// computers it made are deleted before it returns.
func RunStream(ctx context.Context, cfg StreamConfig) (*StreamReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Servers) == 0 {
		return nil, errors.New("bench: no server")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := &StreamReport{Date: time.Now().UTC(), Host: hostInfo(), N: cfg.N, Warmup: cfg.Warmup, Size: cfg.Size, Servers: cfg.Servers}
	note, cleanup := reportNotes(rep.AddNote, cfg.Log)
	runTimeout := cfg.Timeout * time.Duration(1+(cfg.Size-1)/(256<<20))
	hostRandom := filepath.Join(cfg.Scratch, "random")
	if err := writeRandom(hostRandom); err != nil {
		return rep, err
	}
	var paths []*streamPath
	for _, kind := range []string{StreamText, StreamRandom, StreamZeros} {
		paths = append(paths, hostPipePath(kind, streamCommand(kind, cfg.Size, hostRandom), cfg.Size, runTimeout))
	}
	for _, s := range cfg.Servers {
		sp, err := serverStreamPaths(s, cfg, runTimeout)
		if err != nil {
			return rep, err
		}
		paths = append(paths, sp...)
	}
	plain := make([]*path, len(paths))
	for i, p := range paths {
		plain[i] = p.path
	}
	if err := measure(ctx, plain, cfg.N, cfg.Warmup, cfg.Log, note, cleanup); err != nil {
		return rep, err
	}
	rows, failed := pathRows(plain)
	rep.Failed = rep.Failed || failed
	rep.Rows = streamRows(paths, rows, cfg.Size)
	rep.Targets = streamTargets(rep.Rows)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			rep.LoadAvgEnd = strings.Join(f[:3], " ")
		}
	}
	return rep, nil
}

// writeRandom writes the host's file of random bytes.
func writeRandom(name string) error {
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, f, randomFile); err != nil {
		out.Close()
		return fmt.Errorf("random file: %w", err)
	}
	return out.Close()
}

// hostPipePath runs the command on the host and reads its stdout from a
// pipe: the floor.
func hostPipePath(kind, command string, size int64, timeout time.Duration) *streamPath {
	sp := &streamPath{row: StreamRow{Kind: kind, Server: "host", Mode: ModePipe}}
	sp.row.ID = "stream_host_" + kind + "_pipe"
	sp.row.Label = "host pipe, " + kind
	sp.path = &path{name: sp.row.Label, required: true, rows: []rowDef{{sp.row.ID, sp.row.Label}}}
	sp.path.sample = sp.timed(func(ctx context.Context) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		n, rerr := drain(out)
		if err := cmd.Wait(); err != nil {
			return n, err
		}
		return n, rerr
	}, size)
	return sp
}

// timed wraps run (which returns the bytes it read) as a path's sample:
// it checks the count and adds the run's CPU times and bytes to sp's
// (warm-up runs too: the figures are ratios, CPU per byte).
func (sp *streamPath) timed(run func(ctx context.Context) (int64, error), size int64) func(ctx context.Context) (map[string]time.Duration, error) {
	return func(ctx context.Context) (map[string]time.Duration, error) {
		agent := 0
		if sp.agentPID != nil {
			agent = *sp.agentPID
		}
		cpu0, a0 := processTicks(sp.serverPID), ticksOf(agent)
		self0, children0 := selfCPU(), childrenCPU()
		start := time.Now()
		n, err := run(ctx)
		d := time.Since(start)
		if err != nil {
			return nil, err
		}
		if n != size {
			return nil, fmt.Errorf("read %d bytes, want %d", n, size)
		}
		a1 := ticksOf(agent)
		sp.cpuTicks += processTicks(sp.serverPID) - cpu0
		sp.agentTicks += int64(a1.own - a0.own)
		sp.cmdTicks += int64(a1.children - a0.children)
		sp.readerCPU += selfCPU() - self0
		sp.cmdCPU += childrenCPU() - children0
		sp.bytes += n
		return map[string]time.Duration{sp.row.ID: d}, nil
	}
}

// drain reads r to its end in 256 KiB reads (io.Discard's own ReadFrom
// would read 8 KiB at a time) and counts the bytes.
func drain(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
