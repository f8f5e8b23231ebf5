package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// WriteTable prints the report as a text table.
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	writeHeader(&b, "sandbox", r.Date, r.Host)
	fmt.Fprintf(&b, "%d timed runs per path after %d warm-up runs, interleaved; computer: %s memory, %d pids, %g CPUs, %s disk\n\n",
		r.N, r.Warmup, size(r.Spec.MemoryBytes), r.Spec.Pids, r.Spec.CPUs, size(r.Spec.DiskBytes))
	writeRows(&b, sandboxLabelWidth, r.Rows)
	if len(r.Targets) > 0 {
		b.WriteString("\ntargets (p50)\n")
		for _, t := range r.Targets {
			fmt.Fprintf(&b, "  %-50s ≤ %g ms: %s (%.2f ms)\n", t.What, t.Limit.Milliseconds(), verdict(t.Met), t.P50.Milliseconds())
		}
	}
	writeIdle(&b, r.Idle)
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}

// serverWho says who started the server a report measured.
func serverWho(s ServerInfo) string {
	if s.Started {
		return "cubicle serve started by the bench"
	}
	return "a running server"
}

// Label column widths: the sandbox table's labels are shorter than those
// of the API and python tables, whose widths stay as they were printed.
const (
	sandboxLabelWidth = 40
	labelWidth        = 48
)

// writeRows prints the latency rows under a header, labels padded to
// width (or to the longest label, such as one naming a template), so
// every table of the bench reads the same.
func writeRows(b *strings.Builder, width int, rows []Row) {
	for _, row := range rows {
		width = max(width, utf8.RuneCountInString(row.Label))
	}
	fmt.Fprintf(b, "%-*s %9s %9s %9s %9s %5s\n", width, "ms", "p50", "p90", "p99", "mean", "n")
	for _, row := range rows {
		fmt.Fprintf(b, "%-*s %9s %9s %9s %9s %5d", width, row.Label, msCell(row, row.P50), msCell(row, row.P90),
			msCell(row, row.P99), msCell(row, row.Mean), row.N)
		if row.Failures > 0 {
			fmt.Fprintf(b, "  (%d failed)", row.Failures)
		}
		b.WriteByte('\n')
	}
}

// writeHeader prints a table's first line: which bench, when, and the
// host it ran on (its load skews every row).
func writeHeader(b *strings.Builder, bench string, date time.Time, h Host) {
	fmt.Fprintf(b, "cubicle-bench %s  %s  kernel %s, %d CPUs, cgroup %s, load %s\n",
		bench, date.Format("2006-01-02 15:04 MST"), h.Kernel, h.CPUs, h.Cgroup, h.LoadAvg)
}

// writeNotes prints the notes section (nothing when there are none).
func writeNotes(b *strings.Builder, notes []string) {
	if len(notes) == 0 {
		return
	}
	b.WriteString("\nnotes\n")
	for _, n := range notes {
		fmt.Fprintf(b, "  %s\n", n)
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
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
