package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// DefaultData is where computers' disks and records live unless --data
// says otherwise.
const DefaultData = "/var/lib/cubicle"

// usages are the usage texts and program names of the flag sets made by
// NewFlags.
var usages = struct {
	sync.Mutex
	m map[*flag.FlagSet]usage
}{m: map[*flag.FlagSet]usage{}}

type usage struct{ prog, text string }

// NewFlags makes the flag set of command name ("python") of program prog
// ("cubicle"); Parse reports its errors, one line each, and prints text
// and the flags' defaults for --help.
func NewFlags(prog, name, text string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // errors are reported in one line by Parse
	usages.Lock()
	usages.m[fs] = usage{prog, text}
	usages.Unlock()
	return fs
}

// Parse parses args; it returns an exit code when the command must stop
// (0 after --help, 2 after a bad flag, with a one-line error naming it).
func Parse(fs *flag.FlagSet, args []string) (int, bool) {
	usages.Lock()
	u := usages.m[fs]
	usages.Unlock()
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, u.text)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return 0, false
	}
	if err != nil {
		cmd := strings.TrimSpace(u.prog + " " + fs.Name())
		fmt.Fprintf(os.Stderr, "%s: %v (see '%s --help')\n", cmd, err, cmd)
		return 2, false
	}
	return 0, true
}

// Size is a byte size flag such as 512M, 1G, 1.5G or 1048576.
type Size struct{ Bytes int64 }

func (s *Size) String() string { return config.Size(s.Bytes).String() }

func (s *Size) Set(v string) error {
	n, err := config.ParseSize(v)
	if err != nil {
		return err
	}
	s.Bytes = n
	return nil
}

// Duration is a duration flag: Go durations (30s, 2m) or whole seconds (30).
type Duration struct{ D time.Duration }

func (d *Duration) String() string { return d.D.String() }

func (d *Duration) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= int(math.MaxInt64/time.Second) {
		d.D = time.Duration(n) * time.Second
		return nil
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 0 {
		return fmt.Errorf("%q is not a duration like 30s or 2m", v)
	}
	d.D = dur
	return nil
}

// List collects a repeatable NAME=value flag.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

func (l *List) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not NAME=value", v)
	}
	*l = append(*l, v)
	return nil
}
