package template

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"
)

// ComputerDefaults is what a template asks of the computers made from it, besides
// its image's defaults: default limits, a Python prelude and a network
// policy. A zero field leaves the deployment's. The server applies them
// at create: a request's own value replaces the template's, and the key's
// limits and the deployment's caps bound both (never above them); the
// network policy is checked like a request's.
type ComputerDefaults struct {
	MemoryMB           int `json:"memory_mb,omitempty"`
	ExecTimeoutSeconds int `json:"exec_timeout_seconds,omitempty"`
	LifetimeSeconds    int `json:"lifetime_seconds,omitempty"`
	// Prelude replaces the deployment's Python prelude (python.prelude)
	// in the computers' kernels; checked to compile.
	Prelude       string     `json:"prelude,omitempty"`
	NetworkPolicy *Allowlist `json:"network_policy,omitempty"`
}

// ParseComputer parses and checks defaults given as JSON (an import's or
// pull's, like a spec's "defaults").
func ParseComputer(ctx context.Context, b []byte) (ComputerDefaults, error) {
	var c ComputerDefaults
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, errf(ErrInvalid, "defaults: %v (want {\"memory_mb\", \"exec_timeout_seconds\", \"lifetime_seconds\", \"prelude\", \"network_policy\"})", err)
	}
	return c, c.Check(ctx, "defaults")
}

// Bounds of ComputerDefaults fields.
const (
	maxDefaultMemoryMB = 1 << 20
	maxDefaultSeconds  = 365 * 24 * 3600
	maxPrelude         = 64 << 10
)

// Check refuses values out of bounds, naming the field under prefix
// ("defaults").
func (c *ComputerDefaults) Check(ctx context.Context, prefix string) error {
	for _, f := range []struct {
		name     string
		v        int
		min, max int
	}{
		{"memory_mb", c.MemoryMB, 32, maxDefaultMemoryMB},
		{"exec_timeout_seconds", c.ExecTimeoutSeconds, 1, maxDefaultSeconds},
		{"lifetime_seconds", c.LifetimeSeconds, 1, maxDefaultSeconds},
	} {
		if f.v != 0 && (f.v < f.min || f.v > f.max) {
			return errf(ErrInvalid, "%s.%s: %d is not between %d and %d", prefix, f.name, f.v, f.min, f.max)
		}
	}
	if err := c.NetworkPolicy.checkShape(prefix + ".network_policy"); err != nil {
		return errf(ErrInvalid, "%v", err)
	}
	return checkPrelude(ctx, c.Prelude, prefix+".prelude")
}

// checkPrelude refuses a prelude that is too long, not text, or not
// Python the host's python3 compiles (compiled only, never run; skipped
// when the host has none).
func checkPrelude(ctx context.Context, prelude, field string) error {
	if prelude == "" {
		return nil
	}
	if len(prelude) > maxPrelude || !utf8.ValidString(prelude) || strings.Contains(prelude, "\x00") {
		return errf(ErrInvalid, "%s: give Python source of at most %d bytes of UTF-8 text", field, maxPrelude)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-I", "-S", "-c", "import sys; compile(sys.stdin.read(), 'prelude', 'exec')")
	cmd.Stdin = strings.NewReader(prelude)
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return errf(ErrInvalid, "%s does not compile: %s", field, lines[len(lines)-1])
	}
	return nil
}

// merge is c with o's fields that are set over it (a spec's defaults over
// its base's).
func (c ComputerDefaults) merge(o ComputerDefaults) ComputerDefaults {
	if o.MemoryMB != 0 {
		c.MemoryMB = o.MemoryMB
	}
	if o.ExecTimeoutSeconds != 0 {
		c.ExecTimeoutSeconds = o.ExecTimeoutSeconds
	}
	if o.LifetimeSeconds != 0 {
		c.LifetimeSeconds = o.LifetimeSeconds
	}
	if o.Prelude != "" {
		c.Prelude = o.Prelude
	}
	if o.NetworkPolicy != nil {
		c.NetworkPolicy = o.NetworkPolicy
	}
	return c
}
