package bench

import (
	"fmt"
	"io"
	"strings"
)

// WritePythonTable prints a python report as a text table in the style of
// WriteAPITable.
func WritePythonTable(w io.Writer, r *PythonReport) error {
	var b strings.Builder
	writeHeader(&b, "python", r.Date, r.Host)
	server := func(name string, s ServerInfo) {
		fmt.Fprintf(&b, "%s server: %s at %s, warm pool %d", name, serverWho(s), s.URL, s.PoolSize)
		if s.PoolSize > 0 {
			b.WriteString(" (kernels ran the default prelude: numpy and pandas imported, matplotlib at the first plot)")
		}
		b.WriteByte('\n')
	}
	server("warm", r.WarmServer)
	if r.ColdServer != nil {
		server("cold", *r.ColdServer)
	}
	if j := r.Jupyter; j != nil {
		fmt.Fprintf(&b, "peer: jupyter_server %s (%s -m jupyter_server), kernel %s; one WebSocket kept open\n",
			j.Version, j.Python, strings.Join(j.KernelArgv, " "))
	}
	for _, row := range r.Rows {
		if row.ID == RowHostKernelOnePlusOne {
			b.WriteString("floor: an ipykernel on the host with the agent's arguments and the prelude, Cubicle's kernel client, no computer/agent/HTTP\n")
		}
	}
	fmt.Fprintf(&b, "%d timed round trips per path after %d warm-up runs; %d first cells per path, spread among them; interleaved\n",
		r.N, r.Warmup, r.FirstN)
	b.WriteString("1+1: until the answer is decoded (Cubicle's API) or execute_reply and iopub idle arrived (WebSockets: Cubicle's\n" +
		"  Kernel Gateway API, one kernel in a computer of its own; jupyter_server, a local kernel; the same client, and\n" +
		"  for jupyter_server also one with TCP_QUICKACK, which its delayed-ACK stall (~40 ms) does not reach)\n")
	b.WriteString("first cell: import pandas as pd; df = pd.DataFrame({'a': range(100)}); df.describe(); cold also 1+1\n")
	b.WriteString("kernel CPU ms: the kernel process's user+sys time (getrusage) read by a cell: after the cold first cell,\n" +
		"  and in a pool computer before any cell (its start and the whole prelude, what each pool refill costs)\n\n")
	writeRows(&b, labelWidth, r.Rows)

	if len(r.Speedups)+len(r.Deltas) > 0 {
		b.WriteString("\nside by side (p50, ms)\n")
		for _, s := range r.Speedups {
			fmt.Fprintf(&b, "  %-58s %8.2f vs %8.2f = %6.1f× faster\n", s.What, s.FastP50.Milliseconds(), s.SlowP50.Milliseconds(), s.Ratio)
		}
		for _, d := range r.Deltas {
			fmt.Fprintf(&b, "  %-58s %8.2f − %8.2f = %+7.2f\n", d.What, d.P50.Milliseconds(), d.BaseP50.Milliseconds(), d.Delta.Milliseconds())
		}
	}
	b.WriteString("\ntargets\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "  %-50s ≤ %g ms p50: %s (%.2f ms)\n", t.What, t.Limit.Milliseconds(), verdict(t.Met), t.P50.Milliseconds())
	}
	for _, d := range r.Deltas {
		if d.Met != nil {
			fmt.Fprintf(&b, "  %-50s ≤ %+g ms p50: %s (%+.2f ms)\n", d.What, d.Limit.Milliseconds(), verdict(*d.Met), d.Delta.Milliseconds())
		}
	}
	judged := false
	for _, s := range r.Speedups {
		if s.Minimum > 0 {
			judged = true
			fmt.Fprintf(&b, "  %-50s ≥ %g× p50: %s (%.1f×)\n", s.What, s.Minimum, verdict(s.Met), s.Ratio)
		}
	}
	if !judged {
		fmt.Fprintf(&b, "  %-50s ≥ %g× p50: not judged (no jupyter_server row)\n", "1+1: Cubicle's API vs jupyter_server", pythonSpeedupMinimum)
	}
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}
