package httpapi

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// metrics renders the Prometheus text exposition format.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	s := a.comp.Snapshot()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP cubicle_computers Computers run by this server, by state.")
	fmt.Fprintln(w, "# TYPE cubicle_computers gauge")
	for _, state := range slices.Sorted(maps.Keys(s.ByState)) {
		fmt.Fprintf(w, "cubicle_computers{state=%q} %d\n", state, s.ByState[state])
	}
	fmt.Fprintln(w, "# HELP cubicle_pool_depth Ready computers waiting in the warm pool.")
	fmt.Fprintln(w, "# TYPE cubicle_pool_depth gauge")
	fmt.Fprintf(w, "cubicle_pool_depth %d\n", s.PoolDepth)
	fmt.Fprintln(w, "# HELP cubicle_admissions_refused_total Computer creations refused for capacity.")
	fmt.Fprintln(w, "# TYPE cubicle_admissions_refused_total counter")
	fmt.Fprintf(w, "cubicle_admissions_refused_total %d\n", s.AdmissionsRefused)
	fmt.Fprintln(w, "# HELP cubicle_audit_dropped_total Audit events given up because the server's disk stayed full (each is logged).")
	fmt.Fprintln(w, "# TYPE cubicle_audit_dropped_total counter")
	fmt.Fprintf(w, "cubicle_audit_dropped_total %d\n", s.AuditDropped)
	histogram(w, "cubicle_exec_duration_seconds", "Latency of processes run through the exec API.", s.Exec)
	histogram(w, "cubicle_python_duration_seconds", "Latency of calls of the python API (all their cells).", s.Python)
	histogram(w, "cubicle_tool_duration_seconds", "Latency of tool calls (REST tool endpoints and the Responses gateway).", s.ToolDuration)
	fmt.Fprintln(w, "# HELP cubicle_tool_calls_total Tool calls by tool and outcome (ok; failed: the tool reported an error to the model; error: the call did not complete).")
	fmt.Fprintln(w, "# TYPE cubicle_tool_calls_total counter")
	for _, c := range s.ToolCalls {
		fmt.Fprintf(w, "cubicle_tool_calls_total{tool=%q,outcome=%q} %d\n", c.Tool, c.Outcome, c.Count)
	}
}

// histogram writes one latency histogram over computer.DurationBuckets.
func histogram(w io.Writer, name, help string, h computer.Histogram) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	for i, le := range computer.DurationBuckets {
		fmt.Fprintf(w, "%s_bucket{le=%q} %d\n", name, strconv.FormatFloat(le, 'g', -1, 64), h.Buckets[i])
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, h.Buckets[len(computer.DurationBuckets)])
	fmt.Fprintf(w, "%s_sum %g\n%s_count %d\n", name, h.Sum, name, h.Count)
}
