package config

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Config is the whole configuration. Field tags name the TOML keys; the
// environment variable of a key is CUBICLE_<SECTION>_<KEY> in upper case.
type Config struct {
	Server     Server     `toml:"server"`
	Computers  Computers  `toml:"computers"`
	Python     Python     `toml:"python"`
	Files      Files      `toml:"files"`
	Log        Log        `toml:"log"`
	Gateway    Gateway    `toml:"gateway"`
	Jupyter    Jupyter    `toml:"jupyter"`
	E2B        E2B        `toml:"e2b"`
	Template   Template   `toml:"template"`
	Network    Network    `toml:"network"`
	Store      Store      `toml:"store"`
	Cluster    Cluster    `toml:"cluster"`
	Kubernetes Kubernetes `toml:"kubernetes"`
}

// Gateway configures POST /v1/responses and its upstream model servers:
// either the single-upstream shorthand (upstream_url, upstream_key_env: one
// streamed Chat Completions upstream serving every model) or a list of
// [[gateway.upstreams]], not both.
type Gateway struct {
	// UpstreamURL is the upstream's OpenAI-compatible base URL (…/v1);
	// empty (and no upstreams): the gateway is off.
	UpstreamURL string `toml:"upstream_url"`
	// UpstreamKeyEnv names the environment variable holding the upstream's
	// API key (the key itself never lives in the file); empty: no key.
	UpstreamKeyEnv string `toml:"upstream_key_env"`
	// Upstreams are several upstreams, routed by the request's model.
	Upstreams []GatewayUpstream `toml:"upstreams"`
	// Model is used when a request names none.
	Model string `toml:"model"`
	// TimeoutSeconds bounds one upstream call; 0: the gateway's default
	// (responses.DefaultTimeout, 300).
	TimeoutSeconds int `toml:"timeout_seconds"`
	// IdleTimeoutSeconds bounds the silence of a streamed upstream answer;
	// 0: the gateway's default (responses.DefaultIdleTimeout, 120).
	IdleTimeoutSeconds int `toml:"idle_timeout_seconds"`
	// MaxRounds bounds the upstream calls of one response; 0: the
	// gateway's default (responses.DefaultMaxRounds, 8).
	MaxRounds int `toml:"max_rounds"`
	// CodeInterpreterTemplate is the template of the computers the
	// code_interpreter tool runs on ("": the deployment's
	// template.default).
	CodeInterpreterTemplate string `toml:"code_interpreter_template"`
	// ReuseComputers keeps a stored response's computer after the answer
	// for the responses continuing it (OpenAI's auto container); false:
	// one computer per response, deleted after the answer.
	ReuseComputers bool `toml:"reuse_computers"`
	// ComputerIdleSeconds ends a kept computer that long after its last
	// call; 0: the gateway's default (responses.DefaultComputerIdle, 1200).
	ComputerIdleSeconds int `toml:"computer_idle_seconds"`
	// ShellTaskGraceSeconds is how long a computer that shell tasks keep
	// for their conversation stays after the last task ended or the last
	// response used it; 0: the gateway's default
	// (responses.DefaultShellTaskGrace, 300).
	ShellTaskGraceSeconds int `toml:"shell_task_grace_seconds"`
	// MaxBackgroundResponses bounds the background responses running on
	// the server, MaxBackgroundResponsesPerOrg those of one organisation;
	// 0: the gateway's defaults (responses.DefaultMaxBackground, 32;
	// responses.DefaultMaxBackgroundPerOrg, 8).
	MaxBackgroundResponses       int `toml:"max_background_responses"`
	MaxBackgroundResponsesPerOrg int `toml:"max_background_responses_per_org"`
	// Datastores are the operator's databases offered as tools
	// ([[gateway.datastores]]); SQLTools their named queries
	// ([[gateway.sql_tools]]). Checked at startup (datastore.Config).
	Datastores []GatewayDatastore `toml:"datastores"`
	SQLTools   []GatewaySQLTool   `toml:"sql_tools"`
	// DeliverMaxRows and DeliverMaxBytes bound the rows one call delivers
	// to a computer; 0: the defaults (datastore.DefaultDeliverMaxRows,
	// 1,000,000; DefaultDeliverMaxBytes, 64M). DeliverConcurrency is how
	// many deliveries run at once (0: datastore.DefaultDeliverConcurrency, 4).
	DeliverMaxRows     int64 `toml:"deliver_max_rows"`
	DeliverMaxBytes    Size  `toml:"deliver_max_bytes"`
	DeliverConcurrency int   `toml:"deliver_concurrency"`
}

// GatewayDatastore is one [[gateway.datastores]] entry: a SQLite file
// (path) or a PostgreSQL database (dsn, or the environment variable
// dsn_env naming it, so a password stays out of the file).
type GatewayDatastore struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Path        string   `toml:"path"`
	DSN         string   `toml:"dsn"`
	DSNEnv      string   `toml:"dsn_env"`
	MaxRows     int      `toml:"max_rows"`
	TimeoutSecs int      `toml:"timeout_seconds"`
	Orgs        []string `toml:"orgs"`
}

// GatewaySQLTool is one [[gateway.sql_tools]] entry: a named read-only
// query on a datastore, offered as sql__<name>.
type GatewaySQLTool struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Datastore   string   `toml:"datastore"`
	Query       string   `toml:"query"`
	Params      []string `toml:"params"`
	MaxRows     int      `toml:"max_rows"`
}

// GatewayUpstream is one [[gateway.upstreams]] entry; the gateway checks
// the list at startup (gateway.ValidateUpstreams).
type GatewayUpstream struct {
	Name    string `toml:"name"`
	BaseURL string `toml:"base_url"`
	// KeyEnv names the environment variable holding its API key.
	KeyEnv string `toml:"key_env"`
	// API is "chat" (default) or "responses".
	API string `toml:"api"`
	// Models are exact model names or patterns ("llama3*").
	Models []string `toml:"models"`
	// Default serves every model no upstream names.
	Default bool `toml:"default"`
	// Stream asks for streamed answers (default true).
	Stream *bool `toml:"stream"`
}

// Enabled reports whether any upstream is configured.
func (g Gateway) Enabled() bool { return g.UpstreamURL != "" || len(g.Upstreams) > 0 }

// Timeout is timeout_seconds.
func (g Gateway) Timeout() time.Duration { return seconds(g.TimeoutSeconds) }

// IdleTimeout is idle_timeout_seconds.
func (g Gateway) IdleTimeout() time.Duration { return seconds(g.IdleTimeoutSeconds) }

// Files configures uploaded files and artifacts.
type Files struct {
	// MaxBytes bounds one upload (artifacts have their own 25 MiB cap);
	// 0: files.DefaultMaxBytes (64M).
	MaxBytes Size `toml:"max_bytes"`
	// Dir is the blob directory; empty: <server.data>/blobs.
	Dir string `toml:"dir"`
	// InputMaxFiles bounds how many files and artifacts are copied into a
	// computer at the first computer call of a turn; 0:
	// files.DefaultInputMaxFiles (50).
	InputMaxFiles int `toml:"input_max_files"`
	// InputMaxBytes bounds their total size; 0: files.DefaultInputMaxBytes
	// (256M).
	InputMaxBytes Size `toml:"input_max_bytes"`
}

// Python configures the kernels in computers.
type Python struct {
	// Prelude runs in every new kernel; warm-pool computers run it ahead of
	// time. Empty: no prelude, and pool computers start no kernel.
	Prelude string `toml:"prelude"`
}

// Server is the HTTP listener and where state lives.
type Server struct {
	Listen string `toml:"listen"`
	Data   string `toml:"data"`
	// PublicURL is the URL clients reach this server at (scheme and host,
	// e.g. https://cubicle.example.com), for the absolute links the API
	// answers with (artifact URLs in code_interpreter outputs). Empty:
	// each request's own Host.
	PublicURL string `toml:"public_url"`
	// PreviewDomain, when set, serves the host <port>-<computer id>.<domain>
	// as that port of that computer (with the path proxy's auth); its
	// names must resolve to this server (a wildcard DNS record). Empty: off.
	PreviewDomain string `toml:"preview_domain"`
	// MaxConnections bounds the open connections; one more is answered
	// 503 and closed.
	MaxConnections int `toml:"max_connections"`
	// BodyTimeoutSeconds is how long a request body may go without a
	// byte (408 then; 0: httpapi.DefaultBodyTimeout, 30);
	// IdleTimeoutSeconds closes an idle keep-alive connection.
	BodyTimeoutSeconds int `toml:"body_timeout_seconds"`
	IdleTimeoutSeconds int `toml:"idle_timeout_seconds"`
}

// BodyTimeout is body_timeout_seconds.
func (s Server) BodyTimeout() time.Duration { return seconds(s.BodyTimeoutSeconds) }

// IdleTimeout is idle_timeout_seconds.
func (s Server) IdleTimeout() time.Duration { return seconds(s.IdleTimeoutSeconds) }

// seconds is a *_seconds key as the program counts time. Keys are whole
// seconds in the file and the environment only; everything past this
// package holds a time.Duration.
func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// Computers are the deployment's limits for computers. Keys may only shrink
// the time limits (lifetime, exec timeout); memory and CPU are fixed here.
type Computers struct {
	// Enabled runs computers (default true). false: no new computer
	// (POST /v1/computers answers 403 naming this key), no computer tools
	// and no code_interpreter in the Responses gateway, no warm pool and
	// no Jupyter Kernel Gateway API; the rest of the API is served.
	Enabled bool `toml:"enabled"`
	// Driver is what computers are: "linux" (on this host) or
	// "kubernetes" (Pods, [kubernetes]).
	Driver             string  `toml:"driver"`
	Memory             Size    `toml:"memory"`
	Pids               int64   `toml:"pids"`
	CPUs               float64 `toml:"cpus"`
	Disk               Size    `toml:"disk"`
	LifetimeSeconds    int     `toml:"lifetime_seconds"`
	ExecTimeoutSeconds int     `toml:"exec_timeout_seconds"`
	// PausedMaxSeconds is how long a paused computer is kept before it is
	// deleted (its workspace with it).
	PausedMaxSeconds int `toml:"paused_max_seconds"`
	// VolumeMaxSize bounds one volume; MaxVolumes is how many an
	// organisation may have.
	VolumeMaxSize  Size `toml:"volume_max_size"`
	MaxVolumes     int  `toml:"max_volumes"`
	MaxConcurrent  int  `toml:"max_concurrent"`
	MemoryBudget   Size `toml:"memory_budget"`
	PoolSize       int  `toml:"pool_size"`
	MaxFileBytes   Size `toml:"max_file_bytes"`
	MaxOutputBytes Size `toml:"max_output_bytes"`
	// MaxTarBytes bounds a directory's transfer as tar (the archive sent,
	// the files of one downloaded); MaxTarEntries its entries.
	MaxTarBytes   Size `toml:"max_tar_bytes"`
	MaxTarEntries int  `toml:"max_tar_entries"`
	// TerminalGraceSeconds is how long a terminal outlives its WebSocket
	// for a client to re-attach (0: it is hung up at once).
	TerminalGraceSeconds int `toml:"terminal_grace_seconds"`
	// UIDRange is "START:COUNT", the host uids computers run as: each live
	// computer's uid 1000 is one of them (and its gid the same number).
	UIDRange string `toml:"uid_range"`
	// Region is where this deployment runs its computers ("" : not set).
	// An organisation or key whose policy.settings.regions_allow does not
	// list it gets no computer ("Denied by policy.") unless its
	// region_exceptions name builtin:computer.
	Region string `toml:"region"`
}

// DefaultUIDRange is computers.uid_range when nothing else is configured.
const DefaultUIDRange = "1879048192:65536"

// UIDs parses UIDRange.
func (c Computers) UIDs() (start, count uint32, err error) {
	a, b, ok := strings.Cut(c.UIDRange, ":")
	s, err1 := strconv.ParseUint(a, 10, 32)
	n, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q is not START:COUNT (e.g. %q)", c.UIDRange, DefaultUIDRange)
	}
	if s == 0 || n == 0 || s+n > 1<<32-1 {
		return 0, 0, fmt.Errorf("%q must start at 1 or above, hold at least one uid and end below 4294967295", c.UIDRange)
	}
	return uint32(s), uint32(n), nil
}

// Log configures logging.
type Log struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
}

// Default is the embedded default: everything works without a file. The
// keys a component has its own default for (server.body_timeout_seconds,
// [files], the gateway's timeouts and rounds) are left 0 here: the
// component takes 0 as "mine", so each such number is defined once.
func Default() Config {
	c := Config{
		Server: Server{Listen: "127.0.0.1:8080", Data: "/var/lib/cubicle", MaxConnections: 1024,
			IdleTimeoutSeconds: 120},
		Computers: Computers{
			Enabled: true, Driver: DriverLinux, Memory: 512 << 20, Pids: 256, CPUs: 1, Disk: 1 << 30,
			LifetimeSeconds: 3600, ExecTimeoutSeconds: 300, MaxConcurrent: 32, PausedMaxSeconds: 604800,
			VolumeMaxSize: 4 << 30, MaxVolumes: 20,
			MemoryBudget: 16 << 30, PoolSize: 2, MaxFileBytes: 64 << 20, MaxOutputBytes: kernel.DefaultMaxOutputBytes,
			MaxTarBytes: sandbox.DefaultMaxTarBytes, MaxTarEntries: sandbox.DefaultMaxTarEntries,
			UIDRange: DefaultUIDRange, TerminalGraceSeconds: 60,
		},
		Python:  Python{Prelude: DefaultPrelude},
		Log:     Log{Level: "info", Format: "text"},
		Jupyter: Jupyter{Enabled: true, CullIdleSeconds: 1800},
		E2B:     E2B{Enabled: true},
	}
	c.Template = DefaultTemplate()
	c.Kubernetes = DefaultKubernetes()
	return c
}

// DefaultPrelude imports the scientific stack, with matplotlib inline.
const DefaultPrelude = "import numpy as np\nimport pandas as pd\nimport matplotlib\nimport matplotlib.pyplot as plt\n%matplotlib inline\n"

// Lifetime is the deployment's lifetime cap (lifetime_seconds).
func (c Computers) Lifetime() time.Duration { return seconds(c.LifetimeSeconds) }

// PausedMax is how long paused computers are kept (paused_max_seconds).
func (c Computers) PausedMax() time.Duration { return seconds(c.PausedMaxSeconds) }

// TerminalGrace is terminal_grace_seconds.
func (c Computers) TerminalGrace() time.Duration { return seconds(c.TerminalGraceSeconds) }

// ExecTimeout is the deployment's per-process cap (exec_timeout_seconds).
func (c Computers) ExecTimeout() time.Duration { return seconds(c.ExecTimeoutSeconds) }

// Load reads path (empty: defaults only), then applies environment
// overrides from env (os.Environ() form), then validates.
func Load(path string, env []string) (Config, error) {
	cfg := Default()
	if path != "" {
		md, err := toml.DecodeFile(path, &cfg)
		if err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
		if undecoded := md.Undecoded(); len(undecoded) > 0 {
			return cfg, fmt.Errorf("config %s: unknown key %q", path, undecoded[0].String())
		}
	}
	if err := applyEnv(&cfg, env); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// applyEnv sets every CUBICLE_<SECTION>_<KEY> found in env. Unknown
// CUBICLE_ variables of a known section are an error (a typo must not be
// silently ignored); other CUBICLE_ variables belong to other features.
func applyEnv(cfg *Config, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CUBICLE_") {
			vars[k] = v
		}
	}
	root := reflect.ValueOf(cfg).Elem()
	known := map[string]bool{}
	for i := 0; i < root.NumField(); i++ {
		section := root.Type().Field(i).Tag.Get("toml")
		sv := root.Field(i)
		for j := 0; j < sv.NumField(); j++ {
			key := sv.Type().Field(j).Tag.Get("toml")
			name := "CUBICLE_" + strings.ToUpper(section+"_"+key)
			known[name] = true
			v, ok := vars[name]
			if !ok {
				continue
			}
			if err := setField(sv.Field(j), v); err != nil {
				return fmt.Errorf("%s (%s.%s): %w", name, section, key, err)
			}
		}
	}
	for k := range vars {
		for i := 0; i < root.NumField(); i++ {
			prefix := "CUBICLE_" + strings.ToUpper(root.Type().Field(i).Tag.Get("toml")) + "_"
			if strings.HasPrefix(k, prefix) && !known[k] {
				return fmt.Errorf("%s: unknown configuration key", k)
			}
		}
	}
	return nil
}

func setField(f reflect.Value, v string) error {
	if s, ok := f.Addr().Interface().(interface{ UnmarshalText([]byte) error }); ok {
		return s.UnmarshalText([]byte(v))
	}
	switch f.Kind() {
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", f.Type())
		}
		var list []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				list = append(list, s)
			}
		}
		f.Set(reflect.ValueOf(list))
	case reflect.String:
		f.SetString(v)
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		f.SetInt(n)
	case reflect.Float64:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		f.SetFloat(n)
	default:
		return fmt.Errorf("unsupported type %s", f.Kind())
	}
	return nil
}

// Environ is os.Environ, for callers that load the real environment.
func Environ() []string { return os.Environ() }
