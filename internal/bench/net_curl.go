package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// curlFormat is the -w of every curl the net bench runs: its own timers,
// so neither the exec into a computer nor nsenter is in a number.
const curlFormat = "%{time_namelookup} %{time_connect} %{time_total} %{http_code} %{size_download} %{speed_download}\n"

// curlTiming is what curlFormat reports of one transfer.
type curlTiming struct {
	Lookup  time.Duration // start → name resolved
	Connect time.Duration // start → TCP connected (includes Lookup)
	Total   time.Duration // start → last byte (includes Connect)
	Code    int           // HTTP status
	Size    int64         // body bytes received
	Speed   float64       // average download speed, bytes per second
}

// TCP is the TCP handshake alone: time_connect − time_namelookup.
func (c curlTiming) TCP() time.Duration { return c.Connect - c.Lookup }

// ConnectGet is connect and GET until the last byte, without the name
// lookup: time_total − time_namelookup.
func (c curlTiming) ConnectGet() time.Duration { return c.Total - c.Lookup }

// curlArgs are curl's arguments for one GET of url with its body thrown
// away, at most maxTime long: no ~/.curlrc (-q), no proxy from the
// environment, errors on stdout before the timings; extra goes before url.
func curlArgs(url string, maxTime time.Duration, extra ...string) []string {
	args := []string{"-q", "-sS", "--stderr", "-", "-o", "/dev/null", "--noproxy", "*",
		"--max-time", strconv.FormatFloat(maxTime.Seconds(), 'f', -1, 64), "-w", curlFormat}
	return append(append(args, extra...), url)
}

// parseCurl reads curlFormat's line, the last line of out (error messages
// come before it).
func parseCurl(out string) (curlTiming, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 6 {
		return curlTiming{}, fmt.Errorf("curl printed %q, want 6 timing fields", strings.TrimSpace(out))
	}
	var c curlTiming
	var err error
	secs := func(s string) time.Duration {
		v, e := strconv.ParseFloat(s, 64)
		if e != nil || v < 0 || math.IsInf(v, 0) {
			err = errors.Join(err, fmt.Errorf("bad time %q", s))
		}
		return time.Duration(math.Round(v * 1e9))
	}
	c.Lookup, c.Connect, c.Total = secs(f[0]), secs(f[1]), secs(f[2])
	code, e1 := strconv.Atoi(f[3])
	size, e2 := strconv.ParseInt(f[4], 10, 64)
	speed, e3 := strconv.ParseFloat(f[5], 64)
	if err = errors.Join(err, e1, e2, e3); err != nil {
		return curlTiming{}, fmt.Errorf("curl printed %q: %w", lines[len(lines)-1], err)
	}
	c.Code, c.Size, c.Speed = code, size, speed
	if c.Lookup > c.Connect || c.Connect > c.Total {
		return curlTiming{}, fmt.Errorf("curl's timers out of order: %q", lines[len(lines)-1])
	}
	return c, nil
}

// check turns a transfer that did not get 200 and want bytes into an
// error.
func (c curlTiming) check(want int64) error {
	switch {
	case c.Code != 200:
		return fmt.Errorf("HTTP status %d", c.Code)
	case c.Size != want:
		return fmt.Errorf("%d bytes received, want %d", c.Size, want)
	}
	return nil
}

// transferTime is how long size bytes take at curl's average speed: the
// duration a download row keeps (its Gbit/s are derived from it).
func (c curlTiming) transferTime() (time.Duration, error) {
	if c.Speed <= 0 {
		return 0, errors.New("curl reported no download speed")
	}
	return time.Duration(math.Round(float64(c.Size) / c.Speed * 1e9)), nil
}

// gbits is size bytes in d, in Gbit/s.
func gbits(size int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(size) * 8 / d.Seconds() / 1e9
}
