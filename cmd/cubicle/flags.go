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

	"github.com/cubicle-sandbox/cubicle/internal/config"
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

func parseSize(v string) (int64, error) { return config.ParseSize(v) }

// formatSize writes a size the way the flags read it.
func formatSize(n int64) string { return config.Size(n).String() }

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
