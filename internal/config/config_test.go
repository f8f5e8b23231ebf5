package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cubicle.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDefaultsNeedNoFile: the embedded default is valid on its own.
func TestDefaultsNeedNoFile(t *testing.T) {
	cfg, err := config.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	if !reflect.DeepEqual(cfg, d) {
		t.Fatalf("Load with nothing: %+v, want the default %+v", cfg, d)
	}
	if cfg.Server.Listen != "127.0.0.1:8080" || cfg.Computers.PoolSize != 2 || cfg.Computers.LifetimeSeconds != 3600 || cfg.Computers.MaxOutputBytes != 1<<20 {
		t.Fatalf("defaults %+v", cfg)
	}
}

// TestFileThenEnv: the file overrides the defaults, the environment
// overrides the file; sizes read as 512M, 1.5G, 64K or plain numbers.
func TestFileThenEnv(t *testing.T) {
	p := writeFile(t, `
[server]
listen = "0.0.0.0:9000"
data = "/srv/cubicle"

[computers]
memory = "512M"
memory_budget = "1.5G"
disk = 268435456
max_file_bytes = "64K"
pool_size = 3
cpus = 0.5
lifetime_seconds = 120

[log]
level = "debug"
`)
	cfg, err := config.Load(p, []string{
		"CUBICLE_COMPUTERS_POOL_SIZE=5",
		"CUBICLE_COMPUTERS_MEMORY=1G",
		"CUBICLE_COMPUTERS_MEMORY_BUDGET=4GiB",
		"CUBICLE_COMPUTERS_ENABLED=true",
		"CUBICLE_COMPUTERS_CPUS=2",
		"CUBICLE_LOG_FORMAT=json",
		"CUBICLE_ADMIN_KEY=cub_not_config_0000000", // other features' variables are not config
		"CUBICLE_BIN=/bin/true",
		"PATH=/usr/bin",
		"NOT_A_PAIR",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Computers
	switch {
	case cfg.Server.Listen != "0.0.0.0:9000" || cfg.Server.Data != "/srv/cubicle":
		t.Fatalf("server %+v", cfg.Server)
	case c.PoolSize != 5 || c.Memory != 1<<30 || c.MemoryBudget != 4<<30 || !c.Enabled || c.CPUs != 2:
		t.Fatalf("env overrides: %+v", c)
	case c.Disk != 256<<20 || c.MaxFileBytes != 64<<10 || c.LifetimeSeconds != 120:
		t.Fatalf("file values: %+v", c)
	case c.ExecTimeoutSeconds != 300 || c.MaxConcurrent != 32:
		t.Fatalf("defaults not in the file: %+v", c)
	case cfg.Log.Level != "debug" || cfg.Log.Format != "json":
		t.Fatalf("log %+v", cfg.Log)
	}
	if c.Lifetime().Seconds() != 120 || c.ExecTimeout().Seconds() != 300 {
		t.Fatalf("durations %v %v", c.Lifetime(), c.ExecTimeout())
	}
}

// TestBadValuesNameTheKey: a bad value in the file or the environment, or a
// value that fails validation, stops loading with a message naming the key.
func TestBadValuesNameTheKey(t *testing.T) {
	cases := []struct {
		name, file string
		env        []string
		want       []string // all must appear in the error
	}{
		{"env int", "", []string{"CUBICLE_COMPUTERS_POOL_SIZE=abc"}, []string{"CUBICLE_COMPUTERS_POOL_SIZE", "computers.pool_size"}},
		{"env size", "", []string{"CUBICLE_COMPUTERS_MEMORY=lots"}, []string{"CUBICLE_COMPUTERS_MEMORY", "computers.memory"}},
		{"env bool", "", []string{"CUBICLE_COMPUTERS_ENABLED=perhaps"}, []string{"CUBICLE_COMPUTERS_ENABLED"}},
		{"env float", "", []string{"CUBICLE_COMPUTERS_CPUS=many"}, []string{"CUBICLE_COMPUTERS_CPUS"}},
		{"env negative size", "", []string{"CUBICLE_COMPUTERS_DISK=-1G"}, []string{"CUBICLE_COMPUTERS_DISK"}},
		{"env invalid listen", "", []string{"CUBICLE_SERVER_LISTEN=nowhere"}, []string{"server.listen"}},
		{"no connections", "", []string{"CUBICLE_SERVER_MAX_CONNECTIONS=0"}, []string{"server.max_connections"}},
		{"negative body timeout", "[server]\nbody_timeout_seconds = -1\n", nil, []string{"server.body_timeout_seconds"}},
		{"env negative input files", "", []string{"CUBICLE_FILES_INPUT_MAX_FILES=-1"}, []string{"files.input_max_files"}},
		{"env relative data", "", []string{"CUBICLE_SERVER_DATA=relative/dir"}, []string{"server.data"}},
		{"env log level", "", []string{"CUBICLE_LOG_LEVEL=verbose"}, []string{"log.level"}},
		{"env pool over max", "", []string{"CUBICLE_COMPUTERS_POOL_SIZE=40"}, []string{"computers.pool_size"}},
		{"env zero lifetime", "", []string{"CUBICLE_COMPUTERS_LIFETIME_SECONDS=0"}, []string{"computers.lifetime_seconds"}},
		{"env tiny memory", "", []string{"CUBICLE_COMPUTERS_MEMORY=1M"}, []string{"computers.memory"}},
		{"env budget below memory", "", []string{"CUBICLE_COMPUTERS_MEMORY_BUDGET=256M", "CUBICLE_COMPUTERS_MEMORY=512M"}, []string{"computers.memory_budget"}},
		{"env tiny output", "", []string{"CUBICLE_COMPUTERS_MAX_OUTPUT_BYTES=100"}, []string{"computers.max_output_bytes"}},
		{"env uid range format", "", []string{"CUBICLE_COMPUTERS_UID_RANGE=100000"}, []string{"computers.uid_range", "START:COUNT"}},
		{"env uid range zero", "", []string{"CUBICLE_COMPUTERS_UID_RANGE=0:100"}, []string{"computers.uid_range"}},
		{"env uid range past the top", "", []string{"CUBICLE_COMPUTERS_UID_RANGE=4294967290:10"}, []string{"computers.uid_range"}},
		{"env uid range too small", "", []string{"CUBICLE_COMPUTERS_UID_RANGE=300000:4"}, []string{"computers.uid_range", "max_concurrent"}},
		{"file size", "[computers]\nmemory = \"lots\"\n", nil, []string{"computers.memory"}},
		{"file type", "[computers]\npool_size = \"three\"\n", nil, []string{"computers.pool_size"}},
		{"file validation", "[computers]\nexec_timeout_seconds = -5\n", nil, []string{"computers.exec_timeout_seconds"}},
		{"file log format", "[log]\nformat = \"xml\"\n", nil, []string{"log.format"}},
		{"file syntax", "[computers\n", nil, []string{"toml"}},
		{"env preview domain with a scheme", "", []string{"CUBICLE_SERVER_PREVIEW_DOMAIN=https://p.example.com"}, []string{"server.preview_domain"}},
		{"env preview domain wildcard", "", []string{"CUBICLE_SERVER_PREVIEW_DOMAIN=*.example.com"}, []string{"server.preview_domain"}},
		{"env negative terminal grace", "", []string{"CUBICLE_COMPUTERS_TERMINAL_GRACE_SECONDS=-1"}, []string{"computers.terminal_grace_seconds"}},
		{"env store url", "", []string{"CUBICLE_STORE_URL=mysql://u:hunter2@db/x"}, []string{"store.url", "postgres://", "mysql://u:xxxxx@db/x"}},
		{"file store url", "[store]\nurl = \"/var/lib/cubicle/cubicle.db\"\n", nil, []string{"store.url"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = writeFile(t, c.file)
			}
			_, err := config.Load(path, c.env)
			if err == nil {
				t.Fatalf("accepted %q %q", c.file, c.env)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestUnknownKeysRefused: a typo in the file or in a CUBICLE_<SECTION>_
// variable is refused, not silently ignored.
func TestUnknownKeysRefused(t *testing.T) {
	for _, file := range []string{
		"[computers]\npoolsize = 3\n",
		"[computer]\npool_size = 3\n",
		"listen = \"127.0.0.1:1\"\n",
		"[server.tls]\ncert = \"x\"\n",
	} {
		_, err := config.Load(writeFile(t, file), nil)
		if err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("file %q: %v, want an unknown key error", file, err)
		}
	}
	for _, v := range []string{"CUBICLE_COMPUTERS_POOLSIZE=3", "CUBICLE_SERVER_LISTEN_ADDR=x", "CUBICLE_LOG_LEVELS=debug"} {
		_, err := config.Load("", []string{v})
		name, _, _ := strings.Cut(v, "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("env %s: %v, want an unknown key error naming it", v, err)
		}
	}
}

// TestParseSize reads binary multiples and refuses what is not a size.
func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"512M": 512 << 20, "512m": 512 << 20, "512MB": 512 << 20, "512MiB": 512 << 20, "1G": 1 << 30,
		"1.5G": 3 << 29, "64k": 64 << 10, "64K": 64 << 10, "1048576": 1 << 20, " 2T ": 2 << 40, "1KiB": 1024,
	}
	for in, want := range good {
		got, err := config.ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "abc", "-1", "-1G", "0", "0M", "1X", "12 apples", "1P", "inf", "NaN", "1e300", "2000000T"} {
		if got, err := config.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for _, s := range []config.Size{512 << 20, 1 << 30, 64 << 10, 1000, 3 << 29} {
		back, err := config.ParseSize(s.String())
		if err != nil || config.Size(back) != s {
			t.Errorf("%d → %q → %d, %v", int64(s), s.String(), back, err)
		}
	}
}

func TestGatewaySection(t *testing.T) {
	cfg, err := config.Load("", []string{"CUBICLE_GATEWAY_UPSTREAM_URL=http://127.0.0.1:11434/v1",
		"CUBICLE_GATEWAY_UPSTREAM_KEY_ENV=OPENAI_API_KEY", "CUBICLE_GATEWAY_MODEL=qwen", "CUBICLE_GATEWAY_MAX_ROUNDS=4"})
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Gateway
	if g.UpstreamURL != "http://127.0.0.1:11434/v1" || g.UpstreamKeyEnv != "OPENAI_API_KEY" || g.Model != "qwen" ||
		g.MaxRounds != 4 || g.TimeoutSeconds != 0 {
		t.Fatalf("gateway %+v", g)
	}
	if _, err := config.Load("", []string{"CUBICLE_GATEWAY_UPSTREAM_URL=localhost:11434"}); err == nil ||
		!strings.Contains(err.Error(), "gateway.upstream_url") {
		t.Fatalf("bad upstream_url: %v", err)
	}
	if _, err := config.Load("", []string{"CUBICLE_GATEWAY_TIMEOUT_SECONDS=-1"}); err == nil ||
		!strings.Contains(err.Error(), "gateway.timeout_seconds") {
		t.Fatalf("bad timeout: %v", err)
	}
}

// TestGatewayUpstreams: [[gateway.upstreams]] decode as a list; the
// single-upstream shorthand and the list are exclusive.
func TestGatewayUpstreams(t *testing.T) {
	p := writeFile(t, `
[gateway]
model = "qwen2.5-coder"
idle_timeout_seconds = 30

[[gateway.upstreams]]
name = "local"
base_url = "http://127.0.0.1:11434/v1"
key_env = "OLLAMA_KEY"
api = "chat"
models = ["qwen2.5-coder", "llama3*"]
default = true

[[gateway.upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
api = "responses"
models = ["gpt-*"]
stream = false
`)
	cfg, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Gateway
	if !g.Enabled() || len(g.Upstreams) != 2 || g.IdleTimeoutSeconds != 30 {
		t.Fatalf("gateway %+v", g)
	}
	u0, u1 := g.Upstreams[0], g.Upstreams[1]
	if u0.Name != "local" || u0.KeyEnv != "OLLAMA_KEY" || u0.API != "chat" || !u0.Default || u0.Stream != nil ||
		strings.Join(u0.Models, ",") != "qwen2.5-coder,llama3*" {
		t.Fatalf("upstream 0 %+v", u0)
	}
	if u1.API != "responses" || u1.Default || u1.Stream == nil || *u1.Stream || u1.BaseURL != "https://api.openai.com/v1" {
		t.Fatalf("upstream 1 %+v", u1)
	}
	if _, err := config.Load(p, []string{"CUBICLE_GATEWAY_UPSTREAM_URL=http://127.0.0.1:8000/v1"}); err == nil ||
		!strings.Contains(err.Error(), "gateway.upstream_url") {
		t.Fatalf("upstream_url next to upstreams: %v", err)
	}
	if _, err := config.Load("", []string{"CUBICLE_GATEWAY_IDLE_TIMEOUT_SECONDS=-1"}); err == nil ||
		!strings.Contains(err.Error(), "gateway.idle_timeout_seconds") {
		t.Fatalf("bad idle timeout: %v", err)
	}
}

// TestComputersEnabledAndDurations: computers run unless computers.enabled
// says false, and every *_seconds key reads as the time.Duration the
// program holds.
func TestComputersEnabledAndDurations(t *testing.T) {
	d := config.Default()
	if !d.Computers.Enabled {
		t.Fatal("computers.enabled defaults to false")
	}
	cfg, err := config.Load(writeFile(t, "[computers]\nenabled = false\n"), []string{
		"CUBICLE_SERVER_BODY_TIMEOUT_SECONDS=7", "CUBICLE_SERVER_IDLE_TIMEOUT_SECONDS=8",
		"CUBICLE_GATEWAY_TIMEOUT_SECONDS=9", "CUBICLE_GATEWAY_IDLE_TIMEOUT_SECONDS=10",
		"CUBICLE_JUPYTER_CULL_IDLE_SECONDS=11", "CUBICLE_JUPYTER_LIFETIME_SECONDS=12"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Computers.Enabled {
		t.Fatal("computers.enabled = false was not read")
	}
	for name, got := range map[string]time.Duration{
		"server.body_timeout": cfg.Server.BodyTimeout(), "server.idle_timeout": cfg.Server.IdleTimeout(),
		"gateway.timeout": cfg.Gateway.Timeout(), "gateway.idle_timeout": cfg.Gateway.IdleTimeout(),
		"jupyter.cull_idle": cfg.Jupyter.CullIdle(), "jupyter.lifetime": cfg.Jupyter.Lifetime(),
	} {
		want := map[string]time.Duration{"server.body_timeout": 7, "server.idle_timeout": 8, "gateway.timeout": 9,
			"gateway.idle_timeout": 10, "jupyter.cull_idle": 11, "jupyter.lifetime": 12}[name] * time.Second
		if got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// TestE2BEnabled: the E2B protocols are served unless e2b.enabled says
// false, in the file or as CUBICLE_E2B_ENABLED.
func TestE2BEnabled(t *testing.T) {
	if !config.Default().E2B.Enabled {
		t.Fatal("e2b.enabled defaults to false")
	}
	for _, c := range []struct {
		file string
		env  []string
	}{{"[e2b]\nenabled = false\n", nil}, {"", []string{"CUBICLE_E2B_ENABLED=false"}}} {
		cfg, err := config.Load(writeFile(t, c.file), c.env)
		if err != nil || cfg.E2B.Enabled {
			t.Errorf("%q %v: enabled %v, %v", c.file, c.env, cfg.E2B.Enabled, err)
		}
	}
}
