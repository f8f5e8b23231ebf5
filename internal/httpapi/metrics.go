package httpapi

import (
	"fmt"
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
	fmt.Fprintln(w, "# HELP cubicle_exec_duration_seconds Latency of processes run through the exec API.")
	fmt.Fprintln(w, "# TYPE cubicle_exec_duration_seconds histogram")
	for i, le := range computer.ExecBuckets {
		fmt.Fprintf(w, "cubicle_exec_duration_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(le, 'g', -1, 64), s.ExecBucketCounts[i])
	}
	fmt.Fprintf(w, "cubicle_exec_duration_seconds_bucket{le=\"+Inf\"} %d\n", s.ExecBucketCounts[len(computer.ExecBuckets)])
	fmt.Fprintf(w, "cubicle_exec_duration_seconds_sum %g\n", s.ExecSum)
	fmt.Fprintf(w, "cubicle_exec_duration_seconds_count %d\n", s.ExecCount)
}
