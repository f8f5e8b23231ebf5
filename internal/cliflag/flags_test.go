package cliflag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"1", 1},
		{"1048576", 1 << 20},
		{"1k", 1 << 10},
		{"1K", 1 << 10},
		{"1KB", 1 << 10},
		{"1KiB", 1 << 10},
		{"512M", 512 << 20},
		{"512m", 512 << 20},
		{"512MB", 512 << 20},
		{"512MiB", 512 << 20},
		{"1G", 1 << 30},
		{"1g", 1 << 30},
		{"1.5G", 3 << 29},
		{"0.5K", 512},
		{"2T", 2 << 40},
		{" 64M ", 64 << 20},
		{"1024T", 1 << 50},
	}
	for _, c := range good {
		got, err := config.ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("config.ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"", " ", "lots", "M", "G", "B", "0", "0M", "-1", "-5G", "1X", "1.2.3G", "1 G G",
		"1025T", "1P", "9999999999999999999", "inf", "Inf", "+Inf", "-inf", "nan", "NaN", "1e400",
	}
	for _, in := range bad {
		got, err := config.ParseSize(in)
		if err == nil {
			t.Errorf("config.ParseSize(%q) = %d, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("config.ParseSize(%q): error %q does not quote the input", in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	cases := map[int64]string{
		1 << 30: "1G", 4 << 30: "4G", 512 << 20: "512M", 1536 << 20: "1536M",
		1000: "1000", 1 << 10: "1K", 0: "0",
	}
	for in, want := range cases {
		if got := config.Size(in).String(); got != want {
			t.Errorf("config.Size(%d) = %q, want %q", in, got, want)
		}
		// What is printed parses back to the same size.
		if in > 0 {
			if back, err := config.ParseSize(config.Size(in).String()); err != nil || back != in {
				t.Errorf("config.ParseSize(config.Size(%d)) = %d, %v", in, back, err)
			}
		}
	}
}

func TestSize(t *testing.T) {
	s := &Size{512 << 20}
	if s.String() != "512M" {
		t.Errorf("default prints as %q", s.String())
	}
	if err := s.Set("2G"); err != nil || s.Bytes != 2<<30 {
		t.Errorf("Set(2G): %d, %v", s.Bytes, err)
	}
	if err := s.Set("lots"); err == nil || s.Bytes != 2<<30 {
		t.Errorf("Set(lots): %v; the value changed to %d", err, s.Bytes)
	}
}

func TestDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"1", time.Second},
		{"30", 30 * time.Second},
		{"3600", time.Hour},
		{"30s", 30 * time.Second},
		{"2m", 2 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1500ms", 1500 * time.Millisecond},
		{"0s", 0},
	}
	for _, c := range good {
		var d Duration
		if err := d.Set(c.in); err != nil || d.D != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v", c.in, d.D, err, c.want)
		}
	}
	for _, in := range []string{"", "soon", "-1", "-5s", "1.5", "s", "10 s", "1d", "99999999999999999999",
		// Whole seconds that overflow a time.Duration must not wrap around
		// (18446744074 s wraps to 0.29 s).
		"9999999999", "18446744074"} {
		d := Duration{7 * time.Second}
		err := d.Set(in)
		if err == nil {
			t.Errorf("Set(%q) = %v, want an error", in, d.D)
			continue
		}
		if d.D != 7*time.Second {
			t.Errorf("Set(%q) failed but changed the value to %v", in, d.D)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("Set(%q): error %q does not quote the input", in, err)
		}
	}
	if got := (&Duration{90 * time.Second}).String(); got != "1m30s" {
		t.Errorf("String() = %q", got)
	}
}

func TestList(t *testing.T) {
	var l List
	for _, v := range []string{"A=1", "B=", "C=x=y", "A=2", "PATH=/bin:/usr/bin"} {
		if err := l.Set(v); err != nil {
			t.Errorf("Set(%q): %v", v, err)
		}
	}
	if got := strings.Join(l, "|"); got != "A=1|B=|C=x=y|A=2|PATH=/bin:/usr/bin" {
		t.Errorf("collected %q", got)
	}
	if l.String() != "A=1,B=,C=x=y,A=2,PATH=/bin:/usr/bin" {
		t.Errorf("String() = %q", l.String())
	}
	for _, v := range []string{"", "A", "=1", "="} {
		n := len(l)
		if err := l.Set(v); err == nil {
			t.Errorf("Set(%q) accepted", v)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", v)) {
			t.Errorf("Set(%q): error %q does not quote the input", v, err)
		}
		if len(l) != n {
			t.Errorf("Set(%q) failed but was appended", v)
		}
	}
}
