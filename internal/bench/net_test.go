package bench

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

func TestParseCurl(t *testing.T) {
	c, err := parseCurl("0.000512 0.001012 0.002500 200 38 15200\n")
	if err != nil {
		t.Fatal(err)
	}
	want := curlTiming{Lookup: 512 * time.Microsecond, Connect: 1012 * time.Microsecond, Total: 2500 * time.Microsecond,
		Code: 200, Size: 38, Speed: 15200}
	if c != want || c.TCP() != 500*time.Microsecond || c.ConnectGet() != 1988*time.Microsecond {
		t.Errorf("got %+v (tcp %v, get %v), want %+v", c, c.TCP(), c.ConnectGet(), want)
	}
	if c.check(38) != nil || c.check(39) == nil {
		t.Error("check of the size")
	}
	// Errors (--stderr -) come before the timings; a failed transfer
	// still prints them, with status 0.
	c, err = parseCurl("curl: (7) Failed to connect to allowed.test port 80\n0.000100 0.000000 0.000300 000 0 0\n")
	if err == nil {
		t.Errorf("timers out of order accepted: %+v", c)
	}
	c, err = parseCurl("curl: (28) Operation timed out\n0.000100 0.000200 5.000300 000 0 0\n")
	if err != nil || c.check(38) == nil || !strings.Contains(c.check(38).Error(), "status 0") {
		t.Errorf("failed transfer: %+v, %v, check %v", c, err, c.check(38))
	}
	for _, bad := range []string{"", "0.1 0.2 0.3 200 38", "x 0.2 0.3 200 38 1", "0.1 0.2 0.3 OK 38 1", "0.1 0.2 0.3 200 38 -", "-1 0.2 0.3 200 38 1"} {
		if _, err := parseCurl(bad); err == nil {
			t.Errorf("parseCurl(%q) accepted", bad)
		}
	}
}

func TestTransferTimeAndGbits(t *testing.T) {
	c := curlTiming{Size: 256 << 20, Speed: 400e6} // 400 MB/s
	d, err := c.transferTime()
	if err != nil || math.Abs(d.Seconds()-float64(256<<20)/400e6) > 1e-9 {
		t.Errorf("transferTime = %v, %v", d, err)
	}
	if g := gbits(256<<20, d); math.Abs(g-3.2) > 1e-6 {
		t.Errorf("gbits = %g, want 3.2", g)
	}
	if _, err := (curlTiming{Size: 1}).transferTime(); err == nil {
		t.Error("no speed: no error")
	}
	if gbits(1, 0) != 0 {
		t.Error("gbits of no time")
	}
}

func TestCurlArgs(t *testing.T) {
	a := curlArgs("http://allowed.test/", 1500*time.Millisecond, "--resolve", "allowed.test:80:198.51.100.10")
	if a[0] != "-q" || a[len(a)-1] != "http://allowed.test/" || a[len(a)-3] != "--resolve" {
		t.Errorf("args %q: -q must come first, extra before the URL last", a)
	}
	for _, pair := range [][2]string{{"--max-time", "1.5"}, {"-w", curlFormat}, {"--noproxy", "*"}, {"-o", "/dev/null"}, {"--stderr", "-"}} {
		if i := slices.Index(a, pair[0]); i < 0 || a[i+1] != pair[1] {
			t.Errorf("args %q: want %s %s", a, pair[0], pair[1])
		}
	}
}

// TestBenchTB: Fatalf ends the goroutine with its error; cleanups run last
// first, once.
func TestBenchTB(t *testing.T) {
	tb := &benchTB{}
	var order []int
	after := false
	err := tb.run(func() {
		tb.Cleanup(func() { order = append(order, 1) })
		tb.Cleanup(func() { order = append(order, 2) })
		tb.Fatalf("ip netns add: %v", errors.New("exit status 1"))
		after = true
	})
	if err == nil || err.Error() != "ip netns add: exit status 1" || after {
		t.Errorf("run = %v, ran on after Fatalf: %v", err, after)
	}
	tb.close()
	tb.close()
	if !slices.Equal(order, []int{2, 1}) {
		t.Errorf("cleanups ran %v, want [2 1]", order)
	}
	if err := (&benchTB{}).run(func() {}); err != nil {
		t.Errorf("no Fatalf: %v", err)
	}
}

func TestNetVerdicts(t *testing.T) {
	row := func(id string, p50, p90, lo, hi time.Duration) Row {
		return Row{ID: id, Label: id, Summary: Summary{N: 10, P50: Duration(p50), P90: Duration(p90), Min: Duration(lo), Max: Duration(hi)}}
	}
	ms := time.Millisecond
	const size = 250e6 // 2 Gbit
	rows := []Row{
		row(RowNetConnect, 1500*time.Microsecond, 0, 0, 0), row(RowNetHostConnect, 300*time.Microsecond, 0, 0, 0),
		row(RowNetGet, 3*ms, 0, 0, 0), row(RowNetHostGet, ms, 0, 0, 0),
		row(RowNetCreateNone, 20*ms, 0, 0, 0), row(RowNetCreateInternet, 23*ms, 0, 0, 0),
		row(RowNetDownload, 1000*ms, 2000*ms, 500*ms, 4000*ms), row(RowNetHostDownload, 200*ms, 250*ms, 100*ms, 400*ms),
	}
	tp, deltas, targets := netVerdicts(rows, size)
	if len(tp) != 2 || tp[0].P50 != 2 || tp[0].P10 != 1 || tp[0].Max != 4 || tp[0].Min != 0.5 || tp[1].P50 != 10 {
		t.Errorf("throughput %+v", tp)
	}
	if len(deltas) != 3 || deltas[0].Delta != Duration(1200*time.Microsecond) || deltas[2].Delta != Duration(3*ms) {
		t.Errorf("deltas %+v", deltas)
	}
	got := map[string]bool{}
	for _, tg := range targets {
		got[tg.What] = tg.Met
	}
	if len(targets) != 3 || got["TCP connect: cubicle − host (p50)"] || !got["Create(): internet − none (p50)"] || !got["download through Cubicle (p50)"] {
		t.Errorf("targets %+v", targets)
	}
	var b strings.Builder
	rep := &NetReport{N: 10, Size: size, Rows: rows, Throughput: tp, Deltas: deltas, Targets: targets,
		CPU: (&cpuTally{cpu: 3 * time.Second, bytes: 1 << 30}).perGiB(&cpuTally{cpu: time.Second, bytes: 2 << 30})}
	if err := WriteNetTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TCP connect: cubicle − host (p50)            ≤ 1 ms: NOT MET (1.20)", "≥ 1 Gbit/s: met (2.00)",
		"3.00 s through Cubicle", "0.50 s on the host", "≈ 2.50 s per GiB", RowNetHostDownload} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if (&cpuTally{}).perGiB(&cpuTally{bytes: 1}) != nil {
		t.Error("CPU per GiB of nothing downloaded")
	}
}

func TestNetConfigValidate(t *testing.T) {
	ok := NetConfig{N: 100, Warmup: 3, Downloads: 20, Size: DefaultNetSize}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*NetConfig)
		want string
	}{
		{func(c *NetConfig) { c.N = 0 }, "--n"},
		{func(c *NetConfig) { c.Warmup = -1 }, "--warmup"},
		{func(c *NetConfig) { c.Downloads = -1 }, "--downloads"},
		{func(c *NetConfig) { c.Size = 0 }, "--size"},
		{func(c *NetConfig) { c.Size = 5 << 30 }, "--size"},
		{func(c *NetConfig) { c.Timeout = -time.Second }, "--timeout"},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error naming %s", err, tc.want)
		}
	}
}

type slowNetwork struct{}

func (slowNetwork) Attach(context.Context, sandbox.Attachment) (sandbox.Link, error) {
	time.Sleep(time.Millisecond)
	return slowLink{}, nil
}

// slowLink's interface is up 2 ms after Wait is called.
type slowLink struct{ sandbox.Link }

func (slowLink) Wait(context.Context) error {
	time.Sleep(2 * time.Millisecond)
	return nil
}

// TestTimedNetwork: take gives the last attach's time (Attach until the
// Link's Wait returned) once.
func TestTimedNetwork(t *testing.T) {
	n := &timedNetwork{Network: slowNetwork{}}
	if _, ok := n.take(); ok {
		t.Error("a time before any Attach")
	}
	l, err := n.Attach(context.Background(), sandbox.Attachment{ComputerID: "c", Netns: "/proc/1/ns/net"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.take(); ok {
		t.Error("a time before the interface was up")
	}
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d, ok := n.take(); !ok || d < 3*time.Millisecond {
		t.Errorf("take = %v, %v", d, ok)
	}
	if _, ok := n.take(); ok {
		t.Error("the same time taken twice")
	}
}
