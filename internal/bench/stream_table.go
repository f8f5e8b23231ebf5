package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The goals of issue 15 (goal 4), judged on p50s.
const (
	StreamMinRatio    = 0.5 // of the host pipe's MiB/s, for text and binary
	StreamMaxCPURatio = 0.5 // of the baseline's server CPU per GiB
)

// streamRows turns the paths' samples (rows, from pathRows, in the same
// order) into throughput rows.
func streamRows(paths []*streamPath, rows []Row, size int64) []StreamRow {
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	mibs := func(d Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(size) / (1 << 20) / time.Duration(d).Seconds()
	}
	pipe := map[string]float64{}
	var out []StreamRow
	for _, p := range paths {
		r, ok := byID[p.row.ID]
		if !ok {
			continue
		}
		row := p.row
		row.N, row.Failures = r.N, r.Failures
		row.P50, row.Min, row.Max = mibs(r.P50), mibs(r.Max), mibs(r.Min)
		if p.bytes > 0 {
			gib := float64(p.bytes) / (1 << 30)
			perGiB := func(ticks int64) float64 { return (time.Duration(ticks) * clockTick).Seconds() / gib }
			if p.serverPID > 0 {
				row.ServerCPU = perGiB(p.cpuTicks)
			}
			if p.agentPID != nil && *p.agentPID > 0 {
				row.AgentCPU = perGiB(p.agentTicks)
			}
			row.CommandCPU = perGiB(p.cmdTicks) + p.cmdCPU.Seconds()/gib
			row.ReaderCPU = p.readerCPU.Seconds() / gib
		}
		if row.Mode == ModePipe {
			pipe[row.Kind] = row.P50
		} else if pipe[row.Kind] > 0 {
			row.Ratio = row.P50 / pipe[row.Kind]
		}
		out = append(out, row)
	}
	return out
}

// streamTargets judges the first server's rows: for each kind its
// fastest way (every way measured is byte-exact for its kind: SSE text
// carries the text kind's ASCII, base64 and the binary stream any byte)
// at least StreamMinRatio of the host pipe; and, with a baseline, that
// way's server CPU per GiB at most StreamMaxCPURatio of the baseline's
// SSE way of the kind (text: UTF-8 events; random and zeros: base64),
// what a client had before the binary stream.
func streamTargets(rows []StreamRow) []NetTarget {
	if len(rows) == 0 {
		return nil
	}
	first := ""
	for _, r := range rows {
		if r.Server != "host" {
			first = r.Server
			break
		}
	}
	best := map[string]StreamRow{} // kind → the first server's fastest way
	base := map[string]StreamRow{} // kind → the baseline's (any other server's) SSE way
	for _, r := range rows {
		switch {
		case r.N == 0 || r.Server == "host":
		case r.Server == first && r.P50 > best[r.Kind].P50:
			best[r.Kind] = r
		case r.Server != first && r.Mode != ModeBinary:
			base[r.Kind] = r
		}
	}
	var t []NetTarget
	for _, kind := range []string{StreamText, StreamRandom, StreamZeros} {
		b, ok := best[kind]
		if !ok {
			continue
		}
		t = append(t, NetTarget{What: fmt.Sprintf("%s (%s) ÷ host pipe, p50", kind, b.Mode), Unit: "x", Limit: StreamMinRatio,
			Value: b.Ratio, AtLeast: true, Met: b.Ratio >= StreamMinRatio})
		if o, ok := base[kind]; ok && o.ServerCPU > 0 && b.ServerCPU > 0 {
			v := b.ServerCPU / o.ServerCPU
			t = append(t, NetTarget{What: fmt.Sprintf("server CPU/GiB %s (%s) ÷ %s (%s)", kind, b.Mode, o.Server, o.Mode), Unit: "x",
				Limit: StreamMaxCPURatio, Value: v, Met: v <= StreamMaxCPURatio})
		}
	}
	return t
}

// WriteStreamTable prints a stream report as a text table.
func WriteStreamTable(w io.Writer, r *StreamReport) error {
	var b strings.Builder
	writeHeader(&b, "stream", r.Date, r.Host)
	fmt.Fprintf(&b, "%s of output per run; %d timed runs per path after %d warm-up runs, interleaved; load at the end %s\n",
		size(r.Size), r.N, r.Warmup, r.LoadAvgEnd)
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "  %s: %s (pid %d)\n", s.Label, s.Binary, s.PID)
	}
	fmt.Fprintf(&b, "text: yes lines; random: a 32M random file again and again; zeros: /dev/zero (the same command on the host and in the computer)\n")
	fmt.Fprintf(&b, "CPU in seconds per GiB: server, the computer's agent, the command (its processes), reader (this process)\n\n")
	fmt.Fprintf(&b, "%-*s %7s %7s %7s %6s %8s %8s %8s %8s %4s\n", labelWidth, "MiB/s", "p50", "min", "max", "÷pipe",
		"server", "agent", "command", "reader", "n")
	for _, row := range r.Rows {
		ratio := ""
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", row.Ratio)
		}
		cpu := func(v float64) string {
			if v <= 0 {
				return ""
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(&b, "%-*s %7.0f %7.0f %7.0f %6s %8s %8s %8s %8.2f %4d", labelWidth, row.Label, row.P50, row.Min, row.Max, ratio,
			cpu(row.ServerCPU), cpu(row.AgentCPU), cpu(row.CommandCPU), row.ReaderCPU, row.N)
		if row.Failures > 0 {
			fmt.Fprintf(&b, "  (%d failed)", row.Failures)
		}
		b.WriteByte('\n')
	}
	writeTargets(&b, "issue 15 goal 4", 56, r.Targets)
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}
