package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// reportNotes are the note and cleanup functions of a bench whose report
// takes notes with add (its AddNote): note records a note and shows it on
// log at once; cleanup runs f within cleanupTimeout and records a failure
// as a clean-up note (which fails the report).
func reportNotes(add func(cleanup bool, format string, args ...any), log io.Writer) (note func(string, ...any),
	cleanup func(string, func(context.Context) error)) {
	note = func(format string, args ...any) {
		add(false, format, args...)
		fmt.Fprintln(log, "note: "+fmt.Sprintf(format, args...))
	}
	cleanup = func(name string, f func(context.Context) error) {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := f(cctx); err != nil {
			msg := fmt.Sprintf("%s: clean-up incomplete: %v", name, err)
			add(true, "%s", msg)
			fmt.Fprintln(log, "note: "+msg)
		}
	}
	return note, cleanup
}

// writeTargets prints a throughput bench's targets (issue names the
// issue whose goals they are).
func writeTargets(b *strings.Builder, issue string, width int, targets []NetTarget) {
	b.WriteString("\ntargets (" + issue + ")\n")
	for _, t := range targets {
		op := "≤"
		if t.AtLeast {
			op = "≥"
		}
		fmt.Fprintf(b, "  %-*s %s %g %s: %s (%.2f)\n", width, t.What, op, t.Limit, t.Unit, verdict(t.Met), t.Value)
	}
}
