package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Validate checks every value and names the first bad key.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.Server.validate,
		c.Computers.validate,
		c.Files.validate,
		c.Gateway.validate,
		c.Jupyter.validate,
		c.Template.validate,
		c.Network.validate,
		c.Log.validate,
		c.Store.validate,
		c.Cluster.validate,
		c.Computers.validateDriver,
		func() error { return c.Kubernetes.validate(c.Computers.Driver) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// previewDomain is a DNS name of at least two labels.
var previewDomain = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

// invalid is the error Validate returns for one bad key (its full dotted name).
func invalid(key, format string, args ...any) error {
	return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
}

func (s Server) validate() error {
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return invalid("server.listen", "%q is not host:port", s.Listen)
	}
	if s.Data == "" || !strings.HasPrefix(s.Data, "/") {
		return invalid("server.data", "must be an absolute path, got %q", s.Data)
	}
	if u := s.PublicURL; u != "" {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || strings.TrimSuffix(pu.Path, "/") != "" || pu.RawQuery != "" {
			return invalid("server.public_url", "must be http(s)://host[:port] without a path, got %q", u)
		}
	}
	if d := s.PreviewDomain; d != "" && !previewDomain.MatchString(d) {
		return invalid("server.preview_domain", "must be a DNS name such as preview.example.com (no scheme, port or wildcard), got %q", d)
	}
	switch {
	case s.MaxConnections < 1:
		return invalid("server.max_connections", "must be at least 1")
	case s.BodyTimeoutSeconds < 0:
		return invalid("server.body_timeout_seconds", "must not be negative")
	case s.IdleTimeoutSeconds < 1:
		return invalid("server.idle_timeout_seconds", "must be at least 1")
	}
	return nil
}

func (k Computers) validate() error {
	switch {
	case k.Memory < sandbox.MinMemory:
		return invalid("computers.memory", "must be at least %s", Size(sandbox.MinMemory))
	case k.Pids < sandbox.MinPids:
		return invalid("computers.pids", "must be at least %d", sandbox.MinPids)
	case k.CPUs < 0:
		return invalid("computers.cpus", "must not be negative")
	case k.Disk < sandbox.MinDisk:
		return invalid("computers.disk", "must be at least %s", Size(sandbox.MinDisk))
	case k.LifetimeSeconds < 1:
		return invalid("computers.lifetime_seconds", "must be at least 1")
	case k.ExecTimeoutSeconds < 1:
		return invalid("computers.exec_timeout_seconds", "must be at least 1")
	case k.PausedMaxSeconds < 1:
		return invalid("computers.paused_max_seconds", "must be at least 1")
	case k.VolumeMaxSize < 16<<20:
		return invalid("computers.volume_max_size", "must be at least 16M")
	case k.MaxVolumes < 0:
		return invalid("computers.max_volumes", "must not be negative")
	case k.MaxConcurrent < 1:
		return invalid("computers.max_concurrent", "must be at least 1")
	case k.MemoryBudget < k.Memory:
		return invalid("computers.memory_budget", "must hold at least one computer (%s)", k.Memory)
	case k.PoolSize < 0 || k.PoolSize > k.MaxConcurrent:
		return invalid("computers.pool_size", "must be between 0 and computers.max_concurrent")
	case k.MaxFileBytes < 1:
		return invalid("computers.max_file_bytes", "must be positive")
	case k.MaxTarBytes < 1:
		return invalid("computers.max_tar_bytes", "must be positive")
	case k.MaxTarEntries < 1:
		return invalid("computers.max_tar_entries", "must be at least 1")
	case k.TerminalGraceSeconds < 0 || k.TerminalGraceSeconds > 86400:
		return invalid("computers.terminal_grace_seconds", "must be between 0 and 86400")
	case k.MaxOutputBytes < 1024:
		return invalid("computers.max_output_bytes", "must be at least 1K")
	case len(k.Region) > 253 || strings.ContainsFunc(k.Region, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }):
		return invalid("computers.region", "%q is not a region name (at most 253 characters, no spaces, commas or control characters)", k.Region)
	}
	if _, n, err := k.UIDs(); err != nil {
		return invalid("computers.uid_range", "%v", err)
	} else if int64(n) < int64(k.MaxConcurrent) {
		return invalid("computers.uid_range", "holds %d uids, fewer than computers.max_concurrent (%d)", n, k.MaxConcurrent)
	}
	return nil
}

func (f Files) validate() error {
	switch {
	case f.MaxBytes < 0:
		return invalid("files.max_bytes", "must not be negative")
	case f.InputMaxFiles < 0:
		return invalid("files.input_max_files", "must not be negative")
	case f.InputMaxBytes < 0:
		return invalid("files.input_max_bytes", "must not be negative")
	case f.Dir != "" && !strings.HasPrefix(f.Dir, "/"):
		return invalid("files.dir", "must be an absolute path, got %q", f.Dir)
	}
	return nil
}

func (g Gateway) validate() error {
	if u := g.UpstreamURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return invalid("gateway.upstream_url", "must be an http:// or https:// URL, got %q", u)
	}
	switch {
	case g.UpstreamURL != "" && len(g.Upstreams) > 0:
		return invalid("gateway.upstream_url", "use either upstream_url or [[gateway.upstreams]], not both")
	case g.UpstreamKeyEnv != "" && len(g.Upstreams) > 0:
		return invalid("gateway.upstream_key_env", "belongs to upstream_url; give each [[gateway.upstreams]] its key_env")
	case g.IdleTimeoutSeconds < 0:
		return invalid("gateway.idle_timeout_seconds", "must not be negative")
	case g.TimeoutSeconds < 0:
		return invalid("gateway.timeout_seconds", "must not be negative")
	case g.MaxRounds < 0:
		return invalid("gateway.max_rounds", "must not be negative")
	case g.ComputerIdleSeconds < 0:
		return invalid("gateway.computer_idle_seconds", "must not be negative")
	case g.ShellTaskGraceSeconds < 0:
		return invalid("gateway.shell_task_grace_seconds", "must not be negative")
	case g.MaxBackgroundResponses < 0:
		return invalid("gateway.max_background_responses", "must not be negative")
	case g.MaxBackgroundResponsesPerOrg < 0:
		return invalid("gateway.max_background_responses_per_org", "must not be negative")
	case g.DeliverMaxRows < 0:
		return invalid("gateway.deliver_max_rows", "must not be negative")
	case g.DeliverMaxBytes < 0:
		return invalid("gateway.deliver_max_bytes", "must not be negative")
	case g.DeliverConcurrency < 0:
		return invalid("gateway.deliver_concurrency", "must not be negative")
	}
	return nil
}

func (l Log) validate() error {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		return invalid("log.level", "%q is not debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		return invalid("log.format", "%q is not text or json", l.Format)
	}
	return nil
}
