package config

import "fmt"

// Template configures the template store (<server.data>/templates): the
// bounds on what one import or pull may unpack (docs/templates.md).
type Template struct {
	// MaxBytes bounds the uncompressed size of one image's layers (the tar
	// streams, summed) (default 8G).
	MaxBytes Size `toml:"max_bytes"`
	// MaxFiles bounds the entries (files, directories, links) one image's
	// layers may create, summed (default 500000).
	MaxFiles int64 `toml:"max_files"`
	// Default is the template computers that name none are made from
	// ("": "host", the host's runtime); it must exist when the server
	// starts.
	Default string `toml:"default"`
	// Pools are warm pools of other templates than the default (whose
	// pool is computers.pool_size): template name → ready computers kept.
	Pools map[string]int `toml:"pools"`
}

// DefaultTemplate is the template section's default.
func DefaultTemplate() Template { return Template{MaxBytes: 8 << 30, MaxFiles: 500000} }

func (t Template) validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: template.%s: %s", key, fmt.Sprintf(format, args...))
	}
	switch {
	case t.MaxBytes < 1<<20:
		return bad("max_bytes", "must be at least 1M")
	case t.MaxFiles < 1:
		return bad("max_files", "must be at least 1")
	}
	for name, n := range t.Pools {
		if n < 0 || n > 64 {
			return bad("pools", "%q: a pool holds 0 to 64 computers, got %d", name, n)
		}
	}
	return nil
}
