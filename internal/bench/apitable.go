package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteAPITable prints an API report as a text table in the style of
// WriteTable.
func WriteAPITable(w io.Writer, r *APIReport) error {
	var b strings.Builder
	writeHeader(&b, "api", r.Date, r.Host)
	fmt.Fprintf(&b, "server: %s at %s, warm pool %d", serverWho(r.Server), r.Server.URL, r.Server.PoolSize)
	if r.Server.MaxConcurrent > 0 {
		fmt.Fprintf(&b, ", max_concurrent %d, memory_budget %s", r.Server.MaxConcurrent, r.Server.MemoryBudget)
	}
	b.WriteString("; one HTTP/1.1 client with keep-alive\n")
	fmt.Fprintf(&b, "%d timed runs per path after %d warm-up runs, interleaved", r.N, r.Warmup)
	if r.Spec.MemoryBytes > 0 {
		fmt.Fprintf(&b, "; computer: %s memory, %d pids, %g CPUs, %s disk", size(r.Spec.MemoryBytes), r.Spec.Pids, r.Spec.CPUs, size(r.Spec.DiskBytes))
	}
	if r.Spec.MemoryBytes > 0 {
		b.WriteString("\ncubicle rows: the sandbox driver called in this process; api rows: the same over HTTP")
	}
	b.WriteByte('\n')
	if r.Server.PoolSize > 0 {
		fmt.Fprintf(&b, "every timed POST /v1/computers found the pool full (%d) and waited for its refill afterwards\n", r.Server.PoolSize)
	}
	b.WriteByte('\n')
	writeRows(&b, labelWidth, r.Rows)

	if len(r.Overheads) > 0 {
		b.WriteString("\nHTTP next to the driver (p50, ms)\n")
		for _, o := range r.Overheads {
			fmt.Fprintf(&b, "  %-46s %7.2f − %7.2f = %+7.2f\n", o.What, o.APIP50.Milliseconds(), o.SbP50.Milliseconds(), o.Delta.Milliseconds())
		}
	}

	if l := r.Load; l != nil {
		fmt.Fprintf(&b, "\nload: %d computers created at once, then %d × /bin/true in each (in sequence), all computers in parallel\n\n",
			l.Computers, l.ExecsEach)
		writeRows(&b, labelWidth, l.Rows)
		fmt.Fprintf(&b, "\n  throughput  %.0f execs/s (%d execs in %.2f s", l.Throughput, l.Execs, l.Seconds)
		if l.CPUBusy > 0 {
			fmt.Fprintf(&b, ", host CPUs %.0f%% busy", 100*l.CPUBusy)
		}
		b.WriteString(")\n")
		switch c := l.CPUPerExec; {
		case c == nil:
		case c.Server > 0 || c.Computers > 0:
			fmt.Fprintf(&b, "  CPU/exec    %.2f ms: client %.2f, server %.2f, computers (agents + execs) %.2f, other %.2f\n",
				c.Total, c.Client, c.Server, c.Computers, c.Other)
		default: // the server is not a child of the bench
			fmt.Fprintf(&b, "  CPU/exec    %.2f ms on this host, %.2f of it in the bench's client\n", c.Total, c.Client)
		}
		fmt.Fprintf(&b, "  errors      %d (429 capacity_exceeded: %d)", l.Errors, l.Refused)
		if l.Skipped > 0 {
			fmt.Fprintf(&b, "; %d execs not run", l.Skipped)
		}
		b.WriteByte('\n')
	}

	if len(r.Targets) > 0 || r.Load != nil {
		b.WriteString("\ntargets\n")
		for _, t := range r.Targets {
			fmt.Fprintf(&b, "  %-50s ≤ %g ms p50: %s (%.2f ms)\n", t.What, t.Limit.Milliseconds(), verdict(t.Met), t.P50.Milliseconds())
		}
		if l := r.Load; l != nil {
			fmt.Fprintf(&b, "  %-50s   0 errors: %s (%d errors, %d of them 429)\n",
				fmt.Sprintf("load: %d × %d execs, every request succeeded", l.Computers, l.ExecsEach), verdict(l.OK), l.Errors, l.Refused)
		}
	}
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}
