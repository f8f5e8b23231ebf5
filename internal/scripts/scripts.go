package scripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Bounds of a script and of an organisation's scripts.
const (
	// MaxScripts is how many scripts one organisation may have.
	MaxScripts = 100
	// MaxNameLen keeps script__<name> within a tool name's 64 characters.
	MaxNameLen        = 64 - len(ToolPrefix)
	MaxDescription    = 4096
	MaxSourceBytes    = 256 << 10
	MaxInterpreter    = 16   // words
	MaxInterpreterArg = 1024 // bytes of one word
	// MaxTimeoutSeconds bounds a script's own timeout (the computer's
	// exec limit bounds it further at each call).
	MaxTimeoutSeconds = 3600
)

// ToolPrefix starts every script's tool name.
const ToolPrefix = "script__"

// ReservedProperty is the top-level argument a script's schema may not
// declare: MCP's script tools take the computer's id in it (internal/mcp).
const ReservedProperty = "computer_id"

// DefaultInterpreter runs a script that names none.
var DefaultInterpreter = []string{"/bin/sh"}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Errors, classified for the transports; each names its field
// (ErrorParam, which errhttp reads).
var (
	ErrInvalid  = errdefs.New(errdefs.InvalidArgument, "", "invalid script")
	ErrNotFound = errdefs.New(errdefs.NotFound, "", "no such script")
	ErrExists   = errdefs.New(errdefs.Conflict, "script_exists", "a script of that name exists")
	ErrTooMany  = errdefs.New(errdefs.Conflict, "too_many_scripts", fmt.Sprintf("the organisation has %d scripts, the limit", MaxScripts))
)

// fieldError is an error about one field of the request.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string      { return e.err.Error() }
func (e *fieldError) Unwrap() error      { return e.err }
func (e *fieldError) ErrorParam() string { return e.field }

func invalid(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))}
}

// Spec is what a registration gives of a script (its name aside).
type Spec struct {
	Description    string
	InputSchema    json.RawMessage
	Interpreter    []string // nil: DefaultInterpreter
	Source         string
	TimeoutSeconds int // 0: the computer's exec limit
}

// Service registers scripts and offers them as tools.
type Service struct {
	st  store.Store
	gov *governance.Service
	now func() time.Time
}

// New returns the scripts service on st; registrations are audited
// through gov.
func New(st store.Store, gov *governance.Service) *Service {
	return &Service{st: st, gov: gov, now: time.Now}
}

// CheckName says what is wrong with a script's name ("" when nothing).
func CheckName(name string) string {
	switch {
	case name == "":
		return "name is required"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("name is %d characters; the limit is %d (the tool %s<name> has at most 64)", len(name), MaxNameLen, ToolPrefix)
	case !nameRE.MatchString(name):
		return fmt.Sprintf("name must be lowercase letters, digits, _ and -, starting with a letter or digit, got %q", name)
	}
	return ""
}

// check validates a registration and returns the script to store.
func (s *Service) check(p governance.Principal, name string, spec Spec) (store.Script, error) {
	if msg := CheckName(name); msg != "" {
		return store.Script{}, invalid("name", "%s", msg)
	}
	switch d := spec.Description; {
	case strings.TrimSpace(d) == "":
		return store.Script{}, invalid("description", "description is required: it tells the model what the script does")
	case len(d) > MaxDescription:
		return store.Script{}, invalid("description", "description is %d bytes; the limit is %d", len(d), MaxDescription)
	}
	cs, err := compileSchema(spec.InputSchema, true)
	if err != nil {
		return store.Script{}, invalid("input_schema", "%v", err)
	}
	schema := cs.schema
	interp := spec.Interpreter
	if interp == nil {
		interp = DefaultInterpreter
	}
	if err := checkInterpreter(interp); err != nil {
		return store.Script{}, err
	}
	switch src := spec.Source; {
	case src == "":
		return store.Script{}, invalid("source", "source is required: the program's text")
	case len(src) > MaxSourceBytes:
		return store.Script{}, invalid("source", "source is %d bytes; the limit is %d", len(src), MaxSourceBytes)
	case strings.IndexByte(src, 0) >= 0 || !utf8.ValidString(src):
		return store.Script{}, invalid("source", "source must be UTF-8 text without NUL bytes")
	}
	if t := spec.TimeoutSeconds; t < 0 || t > MaxTimeoutSeconds {
		return store.Script{}, invalid("timeout_seconds", "timeout_seconds must be 1 to %d (or null: the computer's exec limit), got %d", MaxTimeoutSeconds, t)
	}
	now := s.now()
	return store.Script{OrgID: p.Org.ID, Name: name, Description: spec.Description, InputSchema: schema,
		Interpreter: interp, Source: spec.Source, TimeoutSeconds: spec.TimeoutSeconds, KeyID: p.Key.ID,
		CreatedAt: now, UpdatedAt: now}, nil
}

// checkInterpreter: 1 to MaxInterpreter words, the first an absolute
// path, none empty, over MaxInterpreterArg or holding a NUL byte.
func checkInterpreter(words []string) error {
	if len(words) == 0 || len(words) > MaxInterpreter {
		return invalid("interpreter", "interpreter must hold 1 to %d words (the program and its options, e.g. [\"/usr/bin/python3\"]), got %d", MaxInterpreter, len(words))
	}
	for i, w := range words {
		field := fmt.Sprintf("interpreter[%d]", i)
		switch {
		case w == "":
			return invalid(field, "%s must not be empty", field)
		case len(w) > MaxInterpreterArg:
			return invalid(field, "%s is %d bytes; the limit is %d", field, len(w), MaxInterpreterArg)
		case strings.IndexByte(w, 0) >= 0:
			return invalid(field, "%s contains a NUL byte", field)
		case i == 0 && !path.IsAbs(w):
			return invalid(field, "interpreter[0] must be an absolute path in the computer, e.g. /usr/bin/python3, got %q", w)
		}
	}
	return nil
}

// notFound is ErrNotFound about name (param "name").
func notFound(name string) error {
	return &fieldError{field: "name", err: fmt.Errorf("%w: %q", ErrNotFound, name)}
}

// storeError maps the store's sentinels to the service's.
func storeError(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(name)
	case errors.Is(err, store.ErrConflict):
		return &fieldError{field: "name", err: fmt.Errorf("%w: %q (replace it with PUT /v1/scripts/%s)", ErrExists, name, name)}
	case errors.Is(err, store.ErrTooMany):
		return &fieldError{field: "name", err: fmt.Errorf("%w: delete one first", ErrTooMany)}
	}
	return err
}

// Create registers a script of p's organisation.
func (s *Service) Create(ctx context.Context, p governance.Principal, name string, spec Spec) (store.Script, error) {
	sc, err := s.check(p, name, spec)
	if err != nil {
		return store.Script{}, err
	}
	if err := s.st.Scripts().Create(ctx, sc, MaxScripts); err != nil {
		return store.Script{}, storeError(name, fmt.Errorf("scripts: create %s: %w", name, err))
	}
	sc.Version = 1
	s.gov.Record(ctx, p, "script.created", "", map[string]any{"name": name, "version": 1})
	return sc, nil
}

// Replace replaces everything of a script of p's organisation but its
// name and creation time.
func (s *Service) Replace(ctx context.Context, p governance.Principal, name string, spec Spec) (store.Script, error) {
	sc, err := s.check(p, name, spec)
	if err != nil {
		return store.Script{}, err
	}
	sc, err = s.st.Scripts().Replace(ctx, sc)
	if err != nil {
		return store.Script{}, storeError(name, fmt.Errorf("scripts: replace %s: %w", name, err))
	}
	s.gov.Record(ctx, p, "script.replaced", "", map[string]any{"name": name, "version": sc.Version})
	return sc, nil
}

// Get returns a script of p's organisation (another organisation's is
// not found).
func (s *Service) Get(ctx context.Context, p governance.Principal, name string) (store.Script, error) {
	sc, err := s.st.Scripts().Get(ctx, p.Org.ID, name)
	if err != nil {
		return store.Script{}, storeError(name, fmt.Errorf("scripts: get %s: %w", name, err))
	}
	return sc, nil
}

// List returns p's organisation's scripts by name, without their source.
func (s *Service) List(ctx context.Context, p governance.Principal) ([]store.Script, error) {
	list, err := s.st.Scripts().List(ctx, p.Org.ID)
	if err != nil {
		return nil, fmt.Errorf("scripts: list: %w", err)
	}
	return list, nil
}

// Delete removes a script of p's organisation.
func (s *Service) Delete(ctx context.Context, p governance.Principal, name string) error {
	if err := s.st.Scripts().Delete(ctx, p.Org.ID, name); err != nil {
		return storeError(name, fmt.Errorf("scripts: delete %s: %w", name, err))
	}
	s.gov.Record(ctx, p, "script.deleted", "", map[string]any{"name": name})
	return nil
}
