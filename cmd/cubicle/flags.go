package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultData is where computers' disks and records live unless --data says otherwise.
const defaultData = "/var/lib/cubicle"

// newFlags makes a flag set whose errors are reported by parse, one line each.
func newFlags(name, usageText string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // errors are reported in one line by parse
	helpText[fs] = usageText
	return fs
}

var helpText = map[*flag.FlagSet]string{}

func printHelp(fs *flag.FlagSet) {
	fmt.Fprint(os.Stdout, helpText[fs])
	fs.SetOutput(os.Stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse parses args; it returns an exit code when the command must stop
// (0 after --help, 2 after a bad flag, with a one-line error naming it).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(fs)
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle %s: %v (see 'cubicle %s --help')\n", fs.Name(), err, fs.Name())
		return 2, false
	}
	return 0, true
}

// sizeFlag is a byte size such as 512M, 1G, 1.5G or 1048576.
type sizeFlag struct{ bytes int64 }

func (s *sizeFlag) String() string { return formatSize(s.bytes) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	s.bytes = n
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(v)), "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || !(f > 0) || f*float64(mult) > 1<<50 { // !(f > 0) also refuses NaN
		return 0, fmt.Errorf("%q is not a size like 512M or 1G", v)
	}
	return int64(f * float64(mult)), nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// durationFlag accepts Go durations (30s, 2m) or whole seconds (30).
type durationFlag struct{ d time.Duration }

func (d *durationFlag) String() string { return d.d.String() }

func (d *durationFlag) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= int(math.MaxInt64/time.Second) {
		d.d = time.Duration(n) * time.Second
		return nil
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 0 {
		return fmt.Errorf("%q is not a duration like 30s or 2m", v)
	}
	d.d = dur
	return nil
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not NAME=value", v)
	}
	*l = append(*l, v)
	return nil
}
