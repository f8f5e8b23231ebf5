package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteGatewayTable prints a gateway report as a text table.
func WriteGatewayTable(w io.Writer, r *GatewayReport) error {
	var b strings.Builder
	writeHeader(&b, "gateway", r.Date, r.Host)
	fmt.Fprintf(&b, "server: %s at %s, warm pool %d; upstream: zero-latency scripted Chat Completions server in the bench, streamed\n",
		serverWho(r.Server), r.Server.URL, r.Server.PoolSize)
	fmt.Fprintf(&b, "one response: code_interpreter call (%s), then the answer; %d sequential after %d warm-up, pool full before each\n",
		gatewayBenchCode, r.N, r.Warmup)
	b.WriteString("overhead = Server-Timing total − upstream handler time − code_interpreter call − computer create (its delete follows the answer)\n\n")
	fmt.Fprintf(&b, "%-*s %9s %9s %9s %9s %5s\n", labelWidth, "ms", "p50", "p95", "p99", "mean", "n")
	for _, row := range r.Rows {
		cell := func(d Duration) string {
			if row.N == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", d.Milliseconds())
		}
		fmt.Fprintf(&b, "%-*s %9s %9s %9s %9s %5d", labelWidth, row.Label, cell(row.P50), cell(row.P95), cell(row.P99),
			cell(row.Mean), row.N)
		if row.Failures > 0 {
			fmt.Fprintf(&b, "  (%d failed)", row.Failures)
		}
		b.WriteByte('\n')
	}
	if r.Batches > 0 {
		fmt.Fprintf(&b, "\nstreamed: %d batches of %d at once, pool full before each; %.1f responses/s over %.0f ms, %d errors\n",
			r.Batches, r.Concurrency, r.Throughput, r.StreamWall.Milliseconds(), r.Errors)
	}
	b.WriteString("\ntargets\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "  %-50s ≤ %g ms p50: %s (%.2f ms)\n", t.What, t.Limit.Milliseconds(), verdict(t.Met), t.P50.Milliseconds())
	}
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}
