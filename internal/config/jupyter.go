package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Jupyter configures the Jupyter Kernel Gateway–compatible API (/api/kernels,
// /api/kernelspecs), served on the same listener as the REST API.
type Jupyter struct {
	// Enabled serves the API (default true), unless computers.enabled is
	// false (kernels run in computers).
	Enabled bool `toml:"enabled"`
	// CullIdleSeconds deletes a kernel (and its computer) that had no
	// WebSocket connection and no activity for this long; 0 never culls
	// (the computer's lifetime still applies).
	CullIdleSeconds int `toml:"cull_idle_seconds"`
	// Memory of a kernel's computer, at most computers.memory (which
	// computers may not exceed); 0: computers.memory.
	Memory Size `toml:"memory"`
	// LifetimeSeconds of a kernel's computer; 0: computers.lifetime_seconds.
	LifetimeSeconds int `toml:"lifetime_seconds"`
	// MountRoots are the host directories under which a client's working
	// directory (KERNEL_WORKING_DIR, else PWD) is mounted into the kernel's
	// computer at the same path. Empty (the default): nothing is mounted.
	MountRoots MountRoots `toml:"mount_roots"`
}

// CullIdle is cull_idle_seconds (0: never cull).
func (j Jupyter) CullIdle() time.Duration { return seconds(j.CullIdleSeconds) }

// Lifetime is lifetime_seconds (0: computers.lifetime_seconds).
func (j Jupyter) Lifetime() time.Duration { return seconds(j.LifetimeSeconds) }

// MountRoot is one host directory under which working directories may be
// mounted.
type MountRoot struct {
	Path     string
	ReadOnly bool
}

// MountRoots is written as a list of "PATH:rw" or "PATH:ro" strings in TOML,
// and as the same comma-separated in CUBICLE_JUPYTER_MOUNT_ROOTS.
type MountRoots []MountRoot

// UnmarshalText parses the comma-separated form.
func (r *MountRoots) UnmarshalText(b []byte) error {
	var items []string
	for _, s := range strings.Split(string(b), ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	return r.set(items)
}

// UnmarshalTOML parses a TOML array of strings (or one comma-separated string).
func (r *MountRoots) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		return r.UnmarshalText([]byte(v))
	case []any:
		items := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("mount roots are strings like \"/srv/projects:rw\", got %v", e)
			}
			items = append(items, s)
		}
		return r.set(items)
	}
	return fmt.Errorf("mount roots are a list of strings like \"/srv/projects:rw\", got %T", v)
}

func (r *MountRoots) set(items []string) error {
	out := make(MountRoots, 0, len(items))
	for _, s := range items {
		p, mode, ok := strings.Cut(s, ":")
		if !ok {
			return fmt.Errorf("%q: write PATH:rw or PATH:ro", s)
		}
		if mode != "rw" && mode != "ro" {
			return fmt.Errorf("%q: the mode is rw or ro, got %q", s, mode)
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return fmt.Errorf("%q: the path must be absolute and not /", s)
		}
		out = append(out, MountRoot{Path: filepath.Clean(p), ReadOnly: mode == "ro"})
	}
	*r = out
	return nil
}

// MarshalText writes the comma-separated form.
func (r MountRoots) MarshalText() ([]byte, error) {
	parts := make([]string, len(r))
	for i, m := range r {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		parts[i] = m.Path + ":" + mode
	}
	return []byte(strings.Join(parts, ",")), nil
}

func (j Jupyter) validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: jupyter.%s: %s", key, fmt.Sprintf(format, args...))
	}
	switch {
	case j.CullIdleSeconds < 0:
		return bad("cull_idle_seconds", "must not be negative")
	case j.Memory != 0 && j.Memory < 32<<20:
		return bad("memory", "must be at least 32M (or 0 for computers.memory)")
	case j.LifetimeSeconds < 0:
		return bad("lifetime_seconds", "must not be negative")
	}
	return nil
}
