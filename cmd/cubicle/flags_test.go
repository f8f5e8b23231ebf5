package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

func TestFlagErrorNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		spec func(*sandbox.Spec)
		want string
	}{
		{func(s *sandbox.Spec) { s.MemoryBytes = 1 << 20 }, "--memory: "},
		{func(s *sandbox.Spec) { s.Pids = -1 }, "--pids: "},
		{func(s *sandbox.Spec) { s.CPUs = -1 }, "--cpus: "},
		{func(s *sandbox.Spec) { s.DiskBytes = 1 }, "--disk: "},
		{func(s *sandbox.Spec) { s.Timeout = -time.Second }, "--timeout: "},
		{func(s *sandbox.Spec) { s.Env = []string{"X"} }, "--env: "},
	} {
		spec := sandbox.DefaultSpec()
		tc.spec(&spec)
		err := spec.Validate()
		if !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Fatalf("spec %+v validated: %v", spec, err)
		}
		if got := flagError(err); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("flagError(%v) = %q, want prefix %q", err, got, tc.want)
		}
	}
	if got := trimSentinel("short", "longer prefix"); got != "short" {
		t.Errorf("trimSentinel = %q", got)
	}
}
