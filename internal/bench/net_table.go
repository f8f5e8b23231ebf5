package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
)

// WriteNetTable prints a net report as a text table in the style of the
// other benches'.
func WriteNetTable(w io.Writer, r *NetReport) error {
	var b strings.Builder
	writeHeader(&b, "net", r.Date, r.Host)
	fmt.Fprintf(&b, "test internet: a network namespace whose only link is loopback, HTTP on %s:80; Cubicle's egress dials into it\n", egresstest.Web)
	fmt.Fprintf(&b, "cubicle: curl http://%s/ in an internet computer (allowed_domains [%s]); host: the same curl in the test\n"+
		"  namespace (nsenter), --resolve %s:80:%s; curl's own timers, connect = time_connect − time_namelookup\n", netName, netName, netName, egresstest.Web)
	fmt.Fprintf(&b, "%d timed runs per path after %d warm-up runs; %d downloads of %s per path spread among them; interleaved\n\n",
		r.N, r.Warmup, r.Downloads, size(r.Size))
	var lat []Row
	for _, row := range r.Rows {
		if row.ID != RowNetDownload && row.ID != RowNetHostDownload {
			lat = append(lat, row)
		}
	}
	writeRows(&b, labelWidth, lat)
	if len(r.Throughput) > 0 {
		fmt.Fprintf(&b, "\n%-*s %9s %9s %9s %9s %5s\n", labelWidth, "Gbit/s (curl's speed_download)", "p50", "p10", "min", "max", "n")
		for _, t := range r.Throughput {
			fmt.Fprintf(&b, "%-*s %9.2f %9.2f %9.2f %9.2f %5d\n", labelWidth, t.Label, t.P50, t.P10, t.Min, t.Max, t.N)
		}
	}
	if c := r.CPU; c != nil {
		fmt.Fprintf(&b, "\nCPU of this process per GiB downloaded: %.2f s through Cubicle (test server, the computer's stack and splice),\n"+
			"  %.2f s on the host (test server alone): Cubicle's path ≈ %.2f s per GiB\n", c.Cubicle, c.Host, c.Proxy)
	}
	if len(r.Deltas) > 0 {
		b.WriteString("\nside by side (p50, ms)\n")
		for _, d := range r.Deltas {
			fmt.Fprintf(&b, "  %-40s %8.2f − %8.2f = %+7.2f\n", d.What, d.P50.Milliseconds(), d.BaseP50.Milliseconds(), d.Delta.Milliseconds())
		}
	}
	writeTargets(&b, "issue 13", 44, r.Targets)
	writeNotes(&b, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}
