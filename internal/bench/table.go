package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints the report as a text table.
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cubicle bench sandbox  %s  kernel %s, %d CPUs, cgroup %s, load %s\n",
		r.Date.Format("2006-01-02 15:04 MST"), r.Host.Kernel, r.Host.CPUs, r.Host.Cgroup, r.Host.LoadAvg)
	fmt.Fprintf(&b, "%d timed runs per path after %d warm-up runs, interleaved; computer: %s memory, %d pids, %g CPUs, %s disk\n\n",
		r.N, r.Warmup, size(r.Spec.MemoryBytes), r.Spec.Pids, r.Spec.CPUs, size(r.Spec.DiskBytes))
	fmt.Fprintf(&b, "%-40s %9s %9s %9s %9s %5s\n", "ms", "p50", "p90", "p99", "mean", "n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%-40s %9s %9s %9s %9s %5d", row.Label, msCell(row, row.P50), msCell(row, row.P90),
			msCell(row, row.P99), msCell(row, row.Mean), row.N)
		if row.Failures > 0 {
			fmt.Fprintf(&b, "  (%d failed)", row.Failures)
		}
		b.WriteByte('\n')
	}
	if len(r.Targets) > 0 {
		b.WriteString("\ntargets (p50)\n")
		for _, t := range r.Targets {
			verdict := "NOT MET"
			if t.Met {
				verdict = "met"
			}
			fmt.Fprintf(&b, "  %-50s ≤ %g ms: %s (%.2f ms)\n", t.What, t.Limit.Milliseconds(), verdict, t.P50.Milliseconds())
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func msCell(row Row, d Duration) string {
	if row.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", d.Milliseconds())
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprint(n)
}
