package template

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Template is a stored template: meta/<name>.json.
type Template struct {
	Name string `json:"name"`
	// ID is the digest of the image's config ("sha256:…"), which covers
	// its layers and its defaults.
	ID string `json:"id"`
	// Root is the OCI chain id of the layers: the root directory is
	// roots/<hex>/rootfs (Store.RootDir).
	Root string `json:"root"`
	// Layers are the layers' diff_ids, lowest first.
	Layers  []string  `json:"layers"`
	Source  Source    `json:"source"`
	Created time.Time `json:"created"`
	// Size is the bytes of the root's regular files (each inode once).
	Size int64 `json:"size_bytes"`
	// Files is the number of entries in the root (files, directories, links).
	Files    int64    `json:"files"`
	Defaults Defaults `json:"defaults"`
	// Python is the path (inside the root) of the first python3 found on
	// the image's PATH, empty if none.
	Python string `json:"python,omitempty"`
	// Kernel says whether that Python has ipykernel (its launcher is in
	// the image's packages): only then do its computers run Python cells
	// and have a kernel spec of their own.
	Kernel  bool    `json:"kernel,omitempty"`
	Skipped Skipped `json:"skipped"`
	// Computer is what the template asks of its computers (limits,
	// prelude, network policy): a spec's defaults, or an import's.
	Computer ComputerDefaults `json:"computer_defaults,omitzero"`
}

// Source says where a template came from.
type Source struct {
	// Kind is "oci-layout", "docker-archive", "registry" or "build".
	Kind string `json:"kind"`
	// Ref is the archive's absolute path or the registry reference.
	Ref string `json:"ref"`
	// Digest is the image manifest's digest when the source has one.
	Digest string `json:"digest,omitempty"`
}

// Defaults are what the image's config asks of a process.
type Defaults struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Skipped counts the entries an import left out on purpose.
type Skipped struct {
	Devices int64 `json:"devices"`
	FIFOs   int64 `json:"fifos"`
}

func (s *Skipped) add(o Skipped) { s.Devices += o.Devices; s.FIFOs += o.FIFOs }

// Limits bound one import: the uncompressed bytes of its layers (tar
// streams, summed) and the entries they hold.
type Limits struct {
	MaxBytes int64
	MaxFiles int64
}

// Options are an import's or pull's.
type Options struct {
	Name string
	// Replace lets the import replace a template of the same name.
	Replace bool
	// Progress, when set, receives the steps of the import as they happen.
	Progress func(Progress)
	// Run runs a build's run steps; nil refuses a spec that has some.
	Run RunFunc
	// Computer is the template's defaults for its computers (checked
	// with Computer.Check); a build's are its spec's, over its base's.
	Computer ComputerDefaults
	// Network says Run can give run steps the network their spec's
	// network_policy asks for (a server with internet); without it such
	// a spec is refused before anything is built.
	Network bool
}

// Progress is one step of an import.
type Progress struct {
	// Step is "build" (mmdebstrap running, or State "present": cached),
	// "layer" (Layer of Layers, Digest), "root" (Digest is the chain id),
	// "image" (the root's image: State "writing", then "done" with its
	// Bytes) or "run" (run step Layer of Layers: State "running" with a
	// line of its output as Message, the first one its command; then
	// "done" with the entries it changed as Files).
	Step   string `json:"step"`
	Layer  int    `json:"layer,omitempty"`
	Layers int    `json:"layers,omitempty"`
	Digest string `json:"digest"`
	// State is "unpacking" (repeated while Bytes grow), "writing", "done", or
	// "present" (already in the store, nothing read).
	State string `json:"state"`
	Bytes int64  `json:"bytes"`
	Files int64  `json:"files"`
	// Message is a line of mmdebstrap's output (Step "build") or of a
	// run step's (Step "run").
	Message string `json:"message,omitempty"`
}

// Error kinds, for errors.Is; the error's text says what happened and what to do.
var (
	ErrNotFound = errors.New("no such template")
	ErrExists   = errors.New("template exists")
	ErrInvalid  = errors.New("invalid request")
	ErrLimit    = errors.New("over the template limits")
	ErrCorrupt  = errors.New("corrupted image")
	ErrUnsafe   = errors.New("unsafe image content")
)

// Error is an error of one of the kinds above, with its own message.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func errf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// defaultPath is the PATH of an image whose config sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// CheckName says whether name may name a template: 1 to 64 of a-z 0-9 . _ -,
// starting with a letter or digit; "host" is the host's own template.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return errf(ErrInvalid, "template name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", name)
	}
	if name == "host" {
		return errf(ErrInvalid, "template name \"host\" is the host's own template; choose another")
	}
	return nil
}

// short is a digest shortened for messages: sha256:0123456789ab.
func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// within prefixes err's message, keeping its kind.
func within(err error, format string, args ...any) error {
	prefix := fmt.Sprintf(format, args...)
	var e *Error
	if errors.As(err, &e) {
		return &Error{Kind: e.Kind, Msg: prefix + ": " + e.Msg}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
