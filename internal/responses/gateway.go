package responses

import (
	"net/http"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Config configures the gateway.
type Config struct {
	// Upstreams are the model servers; a request's model picks one (see
	// UpstreamConfig.Models), else the default one.
	Upstreams []UpstreamConfig
	// UpstreamURL and UpstreamKey are the shorthand for one streamed Chat
	// Completions upstream serving every model, used when Upstreams is
	// empty.
	UpstreamURL string
	UpstreamKey string
	// Model is used when a request names none.
	Model string
	// Timeout bounds one upstream call, streamed answer included (default 300s).
	Timeout time.Duration
	// IdleTimeout bounds the silence of a streamed upstream answer: before
	// its headers and between two reads (default 120s).
	IdleTimeout time.Duration
	// MaxRounds bounds the upstream calls of one response (default 8).
	MaxRounds int
	// MaxUpstreamBytes bounds one upstream answer (default 8 MiB).
	MaxUpstreamBytes int64
	// Client is the HTTP client (default: a fresh one).
	Client *http.Client
	// PublicURL is where clients reach the server (scheme://host[:port]),
	// for absolute artifact URLs; empty: the request's Origin.
	PublicURL string
	// CodeInterpreterTemplate is the template code_interpreter's
	// computers are made from ("": the key's or the deployment's default).
	CodeInterpreterTemplate string
	// ReuseComputers keeps a stored response's computer after the answer
	// (ending ComputerIdle after its last call) so that a response
	// continuing it (previous_response_id) runs in the same computer,
	// with its files and Python state: OpenAI's auto container. Without
	// it every response has a computer of its own, deleted after the
	// answer (the seed's behaviour).
	ReuseComputers bool
	// ComputerIdle is a kept computer's idle timeout (default 20 minutes,
	// OpenAI's).
	ComputerIdle time.Duration
	// ShellTaskGrace is how long a computer that shell tasks keep for
	// their conversation stays after the last task ended or the last
	// response used it (default DefaultShellTaskGrace; shelltasks.go).
	ShellTaskGrace time.Duration
	// MaxBackground bounds the background runs of the server, and
	// MaxBackgroundPerOrg those of one organisation (defaults
	// DefaultMaxBackground, DefaultMaxBackgroundPerOrg); beyond, a 429.
	MaxBackground       int
	MaxBackgroundPerOrg int
}

// DefaultComputerIdle is Config.ComputerIdle's default: OpenAI's
// containers expire 20 minutes after their last activity.
const DefaultComputerIdle = 20 * time.Minute

// DefaultShellTaskGrace is Config.ShellTaskGrace's default: the seed's "a
// few minutes".
const DefaultShellTaskGrace = 5 * time.Minute

// UpstreamConfig is one upstream model server.
type UpstreamConfig struct {
	Name    string
	BaseURL string // OpenAI-compatible base URL (…/v1)
	Key     string // bearer token; empty: none is sent
	// API is APIChat (POST {base}/chat/completions, the default) or
	// APIResponses (POST {base}/responses).
	API string
	// Models are the model names this upstream serves: exact names or
	// path.Match patterns ("llama3*"). Exact names win over patterns.
	Models []string
	// Default serves the models no upstream names.
	Default bool
	// NoStream asks for whole answers instead of streamed ones (then text
	// reaches a streaming client in one delta per upstream answer).
	NoStream bool
}

// Upstream APIs.
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// Defaults of Config.
const (
	DefaultTimeout          = 300 * time.Second
	DefaultIdleTimeout      = 120 * time.Second
	DefaultMaxRounds        = 8
	DefaultMaxUpstreamBytes = 8 << 20
)

// Gateway runs Responses requests.
type Gateway struct {
	cfg    Config
	routes routes
	comp   Computers
	reg    *tools.Registry
	// files copies input_file items into the computer; nil: they are skipped.
	files Files
	// responses keeps finished responses (store: true); nil: nothing is kept.
	responses store.Responses
	// instance is Deps.Instance.
	instance string
	// pending are the response computers being deleted (Run.Close).
	pending pendingDeletes
	// bg are the background runs (background.go).
	bg backgroundRuns
	// data are the operator's datastore tools; nil: none.
	data Datastores
	// scripts are the organisations' scripts; nil: none.
	scripts Scripts
}

// Deps are what the gateway runs on, given at construction.
type Deps struct {
	// Computers run the tools.
	Computers Computers
	// Files copies a request's input_file items into the response's
	// computer and keeps its images as artifacts; nil: they are skipped.
	Files Files
	// Store keeps finished responses (request field store, default
	// true); nil: nothing is kept.
	Store store.Responses
	// Datastores are the operator's datastore tools; nil: none.
	Datastores Datastores
	// Instance is this server's instance id, recorded on a background
	// response while it runs: other replicas forward its polls and cancels
	// here, and fail it once this server's lease lapsed (docs/fleet.md).
	Instance string
	// Scripts are the organisations' own programs as tools; nil: none.
	Scripts Scripts
}

// New returns a gateway running its tools on deps.Computers. A bad
// upstream list (see UpstreamConfig) is an error naming the upstream.
func New(cfg Config, deps Deps) (*Gateway, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.MaxUpstreamBytes <= 0 {
		cfg.MaxUpstreamBytes = DefaultMaxUpstreamBytes
	}
	if cfg.MaxBackground <= 0 {
		cfg.MaxBackground = DefaultMaxBackground
	}
	if cfg.MaxBackgroundPerOrg <= 0 {
		cfg.MaxBackgroundPerOrg = DefaultMaxBackgroundPerOrg
	}
	if cfg.ShellTaskGrace <= 0 {
		cfg.ShellTaskGrace = DefaultShellTaskGrace
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	rt, err := newRoutes(cfg)
	if err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, routes: rt, comp: deps.Computers, files: deps.Files, responses: deps.Store, data: deps.Datastores, instance: deps.Instance, scripts: deps.Scripts, reg: tools.NewRegistry(tools.CodeInterpreterTool(), tools.ExecTool(),
		tools.WriteFileTool(), tools.ReadFileTool(), tools.PythonTool())}, nil
}
