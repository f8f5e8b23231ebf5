package responses

import (
	"fmt"
	"strings"
	"time"
)

// Timing is where a response's time went on the server: waiting for the
// upstream (its calls, answers read whole), running tools in the computer,
// creating the computer (input files copied in included), and the total
// since Begin. The rest of Total is the gateway's own overhead. Deleting
// the computer is not in it: Close does that after the answer was sent.
type Timing struct {
	Upstream time.Duration
	Tools    time.Duration
	Create   time.Duration
	Total    time.Duration
}

// timed adds the time until the returned func is called to *d.
func timed(d *time.Duration) func() {
	start := time.Now()
	return func() { *d += time.Since(start) }
}

// Timing is the response's timing so far (call it after Do).
func (r *Run) Timing() Timing {
	t := r.timing
	t.Total = time.Since(r.started)
	return t
}

// ServerTiming renders t as a Server-Timing header value (milliseconds):
// upstream, tools, create, gateway (the rest) and total.
func (t Timing) ServerTiming() string {
	gw := t.Total - t.Upstream - t.Tools - t.Create
	var b strings.Builder
	for i, m := range []struct {
		name string
		d    time.Duration
	}{{"upstream", t.Upstream}, {"tools", t.Tools}, {"create", t.Create}, {"gateway", gw}, {"total", t.Total}} {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s;dur=%.3f", m.name, float64(m.d)/1e6)
	}
	return b.String()
}
