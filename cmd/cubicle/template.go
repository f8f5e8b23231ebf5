package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/template"
)

const templateUsage = `Usage: cubicle template import|pull|build|list|inspect|rm [flags]

Manages templates: read-only root filesystems imported from OCI images,
content-addressed and deduplicated in <data>/templates (docs/templates.md).
Computers are made from one with "template" on POST /v1/computers, a
key's capabilities.computer.template or template.default.

Examples:
  cubicle template import ./python.tar --name python
  cubicle template pull registry.example.com/team/python:3.12 --name python
  cubicle template build debian.json --name debian
  cubicle template list
  cubicle template inspect python --json
  cubicle template rm python

Run 'cubicle template <verb> --help' for a verb's flags.
`

var templateVerbs = map[string]struct {
	usage string
	run   func(ctx context.Context, st *template.Store, v *templateFlags, args []string) int
}{
	"import": {`Usage: cubicle template import ARCHIVE --name NAME [flags]

Imports an OCI image as a template: ARCHIVE is an OCI image layout (a
directory, or a tar of one) or a 'docker save' archive (uncompressed).
Layers already stored are not read again. Progress goes to stderr.

Example:
  docker save python:3.12-slim -o python.tar && cubicle template import python.tar --name python

Flags:
`, templateImport},
	"pull": {`Usage: cubicle template pull REF --name NAME [flags]

Pulls an image from an OCI registry (this host's platform of a multi-platform
image) and stores it as a template. Credentials come from the Docker config
(~/.docker/config.json, 'docker login'); otherwise the pull is anonymous.
Registries on localhost or 127.0.0.1 are reached over plain HTTP.

Example:
  cubicle template pull 127.0.0.1:5000/tools/python:3.12 --name python

Flags:
`, templateImport},
	"build": {`Usage: cubicle template build SPEC --name NAME [flags]

Builds a template and stores it. SPEC is a JSON file: a Debian release
made with mmdebstrap from an apt mirror ({"suite": "bookworm", "variant":
"minbase", "packages": ["python3-minimal"], "mirror":
"http://deb.debian.org/debian"}, all optional, these are the defaults
but packages; its tar is cached by digest in <data>/templates/cache, so
the same release builds once unless --refresh) or another template
({"base": "debian"}); then "files" ([{"src": "app", "dst": "/opt/app"}],
host paths relative to SPEC), "env" (["NAME=value"]) and "run" (shell
commands run one after another as root in a build computer of the data
directory, without network, each within "run_limits" {"timeout_seconds":
600, "memory_mb": 1024, "disk_mb": 2048}; each step's changes become a
layer; its output is printed as it comes). See docs/templates.md.

Example:
  echo '{"packages": ["python3-minimal"]}' > debian.json && cubicle template build debian.json --name debian
  echo '{"base": "debian", "run": ["mkdir -p /opt/app && echo hi > /opt/app/hi"]}' > app.json && cubicle template build app.json --name app

Flags:
`, templateImport},
	"list": {`Usage: cubicle template list [flags]

Lists the templates.

Example:
  cubicle template list --json

Flags:
`, templateList},
	"inspect": {`Usage: cubicle template inspect NAME [flags]

Shows a template: id, root directory, layers, source, size, defaults.

Example:
  cubicle template inspect python --json

Flags:
`, templateInspect},
	"rm": {`Usage: cubicle template rm NAME [flags]

Removes a template, then the layers and roots no other template uses. A
template that running or paused computers were made from (in the data
directory's database) is kept unless --force: with it, running ones keep
running on its image until they end, and paused ones cannot resume.

Example:
  cubicle template rm python

Flags:
`, templateRm},
}

// templateFlags are the flags of every template verb.
type templateFlags struct {
	verb     string
	data     *string
	config   *string
	asJSON   *bool
	name     *string
	replace  *bool
	defaults *string
	refresh  *bool
	force    *bool
	run      template.RunFunc // build: runs its run steps
}

func templateCmd(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Print(templateUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	verb, ok := templateVerbs[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "cubicle template: unknown verb %q (want import, pull, build, list, inspect or rm)\n", args[0])
		return 2
	}
	fs := newFlags("template "+args[0], verb.usage)
	v := &templateFlags{verb: args[0],
		data:   fs.String("data", "", "data directory (default from config: /var/lib/cubicle)"),
		config: fs.String("config", "", "TOML configuration file (template.max_bytes, template.max_files)"),
		asJSON: fs.Bool("json", false, "print the result as JSON"),
	}
	if args[0] == "import" || args[0] == "pull" || args[0] == "build" {
		v.name = fs.String("name", "", "name of the new template (required)")
		v.replace = fs.Bool("replace", false, "replace a template of the same name")
	}
	if args[0] == "import" || args[0] == "pull" {
		v.defaults = fs.String("defaults", "", `what the template asks of its computers, as JSON: {"memory_mb", "exec_timeout_seconds", "lifetime_seconds", "prelude", "network_policy"} (a build's are its spec's "defaults")`)
	}
	if args[0] == "build" {
		v.refresh = fs.Bool("refresh", false, "run mmdebstrap again even if the spec's build is cached")
	}
	if args[0] == "rm" {
		v.force = fs.Bool("force", false, "remove it even if running or paused computers were made from it")
	}
	pos, code, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return code
	}
	cfg, err := config.Load(*v.config, os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template %s: %v\n", v.verb, err)
		return 2
	}
	if *v.data == "" {
		*v.data = cfg.Server.Data
	}
	st, err := templateStore(cfg, *v.data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template %s: %v\n", v.verb, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if v.verb == "build" {
		var closeRun func()
		v.run, closeRun = buildRunner(cfg, *v.data)
		defer closeRun()
	}
	return verb.run(ctx, st, v, pos)
}

// parseInterspersed parses flags wherever they are among the positional
// arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if code, ok := parse(fs, args); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// buildRunner runs a build's run steps in computers of a Linux driver on
// the data directory data (with the configured host uids), made at the
// first step; done closes it.
func buildRunner(cfg config.Config, data string) (run template.RunFunc, done func()) {
	var drv *linux.Driver
	var runner template.RunFunc
	run = func(ctx context.Context, step template.RunStep) (template.RunResult, error) {
		if drv == nil {
			uidStart, uidCount, _ := cfg.Computers.UIDs() // validated by config.Load
			d, err := linux.New(linux.Config{StateDir: data, UIDStart: uidStart, UIDCount: uidCount})
			if err != nil {
				return template.RunResult{}, err
			}
			drv, runner = d, computer.TemplateRunner(d, nil)
		}
		return runner(ctx, step)
	}
	return run, func() {
		if drv != nil {
			drv.Close(context.Background())
		}
	}
}

// templateStore opens the template store of the data directory data with
// the configured limits.
func templateStore(cfg config.Config, data string) (*template.Store, error) {
	return template.Open(filepath.Join(data, "templates"),
		template.Limits{MaxBytes: int64(cfg.Template.MaxBytes), MaxFiles: cfg.Template.MaxFiles})
}

// oneArg checks that exactly one positional argument was given.
func oneArg(v *templateFlags, pos []string, what string) bool {
	if len(pos) != 1 {
		fmt.Fprintf(os.Stderr, "cubicle template %s: give exactly one %s (see 'cubicle template %s --help')\n", v.verb, what, v.verb)
		return false
	}
	return true
}

func templateImport(ctx context.Context, st *template.Store, v *templateFlags, pos []string) int {
	what := map[string]string{"import": "ARCHIVE", "pull": "REF", "build": "SPEC"}[v.verb]
	if !oneArg(v, pos, what) {
		return 2
	}
	if *v.name == "" {
		fmt.Fprintf(os.Stderr, "cubicle template %s: --name is required\n", v.verb)
		return 2
	}
	opts := template.Options{Name: *v.name, Replace: *v.replace, Progress: printTemplateProgress, Run: v.run}
	var t template.Template
	var err error
	if v.defaults != nil && *v.defaults != "" {
		if opts.Computer, err = template.ParseComputer(ctx, []byte(*v.defaults)); err != nil {
			fmt.Fprintf(os.Stderr, "cubicle template %s: --defaults: %v\n", v.verb, err)
			return 2
		}
	}
	switch v.verb {
	case "pull":
		fmt.Fprintf(os.Stderr, "pulling %s\n", pos[0])
		t, err = st.Pull(ctx, pos[0], opts)
	case "build":
		t, err = st.Build(ctx, pos[0], *v.refresh, opts)
	default:
		t, err = st.Import(ctx, pos[0], opts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template %s: %v\n", v.verb, err)
		return 1
	}
	text := fmt.Sprintf("imported %s (%s): %d layers, %s in %d entries, python %s\n", t.Name, shortID(t.ID),
		len(t.Layers), humanBytes(t.Size), t.Files, orNone(t.Python))
	switch {
	case t.Python == "":
		text += "no python3 on the image's PATH: Python cells, kernels and the code interpreter refuse this template\n"
	case !t.Kernel:
		text += fmt.Sprintf("no kernel: %s has no ipykernel (Debian's python3-ipykernel): Python cells, kernels and the code interpreter refuse this template\n", t.Python)
	}
	if sk := t.Skipped; sk.Devices+sk.FIFOs > 0 {
		text += fmt.Sprintf("skipped %d device nodes and %d FIFOs (a computer has its own /dev)\n", sk.Devices, sk.FIFOs)
	}
	printOut(*v.asJSON, withRoot(st, t), text)
	return 0
}

func printTemplateProgress(p template.Progress) {
	switch {
	case p.Step == "build" && p.State == "present":
		fmt.Fprintf(os.Stderr, "build %s: cached (--refresh builds again)\n", shortID(p.Digest))
		return
	case p.Step == "build":
		fmt.Fprintf(os.Stderr, "mmdebstrap: %s\n", p.Message)
		return
	case p.Step == "run":
		fmt.Fprintf(os.Stderr, "run %d/%d: %s\n", p.Layer, p.Layers, p.Message)
		return
	}
	if p.Step == "image" {
		if p.State == "done" {
			fmt.Fprintf(os.Stderr, "image %s: written (%s)\n", shortID(p.Digest), humanBytes(p.Bytes))
		}
		return
	}
	if p.Step == "root" {
		state := map[string]string{"done": "flattened", "present": "already stored"}[p.State]
		fmt.Fprintf(os.Stderr, "root %s: %s (%s in %d entries)\n", shortID(p.Digest), state, humanBytes(p.Bytes), p.Files)
		return
	}
	layer := fmt.Sprintf("layer %d/%d %s", p.Layer, p.Layers, shortID(p.Digest))
	switch p.State {
	case "unpacking":
		fmt.Fprintf(os.Stderr, "%s: %s read, %d entries\n", layer, humanBytes(p.Bytes), p.Files)
	case "done":
		fmt.Fprintf(os.Stderr, "%s: unpacked %s, %d entries\n", layer, humanBytes(p.Bytes), p.Files)
	case "present":
		fmt.Fprintf(os.Stderr, "%s: already stored\n", layer)
	}
}

// templateJSON is a template as the CLI prints it: with its root directory.
type templateJSON struct {
	template.Template
	RootDir string `json:"root_dir"`
}

func withRoot(st *template.Store, t template.Template) templateJSON {
	return templateJSON{Template: t, RootDir: st.RootDir(t)}
}

func templateList(ctx context.Context, st *template.Store, v *templateFlags, pos []string) int {
	if len(pos) != 0 {
		fmt.Fprintf(os.Stderr, "cubicle template list: unexpected argument %q\n", pos[0])
		return 2
	}
	ts, err := st.List(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template list: %v\n", err)
		return 1
	}
	out := make([]templateJSON, len(ts))
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSIZE\tENTRIES\tPYTHON\tSOURCE")
	for i, t := range ts {
		out[i] = withRoot(st, t)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, shortID(t.ID), humanBytes(t.Size), t.Files, orNone(t.Python), t.Source.Ref)
	}
	tw.Flush()
	printOut(*v.asJSON, out, b.String())
	return 0
}

func templateInspect(ctx context.Context, st *template.Store, v *templateFlags, pos []string) int {
	if !oneArg(v, pos, "NAME") {
		return 2
	}
	t, err := st.Get(ctx, pos[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template inspect: %v\n", err)
		return 1
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-12s %s\n", k+":", v) }
	line("name", t.Name)
	line("id", t.ID)
	line("root", st.RootDir(t))
	line("layers", strings.Join(t.Layers, "\n             "))
	line("source", t.Source.Kind+" "+t.Source.Ref+" "+t.Source.Digest)
	line("created", t.Created.Format("2006-01-02 15:04:05 UTC"))
	line("size", fmt.Sprintf("%s in %d entries", humanBytes(t.Size), t.Files))
	line("python", orNone(t.Python))
	line("env", strings.Join(t.Defaults.Env, " "))
	line("workdir", t.Defaults.WorkingDir)
	line("user", t.Defaults.User)
	line("command", strings.TrimSpace(strings.Join(t.Defaults.Entrypoint, " ")+" "+strings.Join(t.Defaults.Cmd, " ")))
	line("skipped", fmt.Sprintf("%d device nodes, %d FIFOs", t.Skipped.Devices, t.Skipped.FIFOs))
	if t.Computer != (template.ComputerDefaults{}) {
		b, _ := json.Marshal(t.Computer)
		line("defaults", string(b))
	}
	printOut(*v.asJSON, withRoot(st, t), b.String())
	return 0
}

func templateRm(ctx context.Context, st *template.Store, v *templateFlags, pos []string) int {
	if !oneArg(v, pos, "NAME") {
		return 2
	}
	if !*v.force {
		users, err := templateUsers(ctx, filepath.Dir(st.Dir()), pos[0])
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle template rm: %v\n", err)
			return 1
		}
		if len(users) > 0 {
			fmt.Fprintf(os.Stderr, "cubicle template rm: computers made from %s exist: %s; delete them first, or pass --force (running ones keep running until they end; paused ones cannot resume)\n", pos[0], computer.UsersSentence(users))
			return 1
		}
	}
	rep, err := st.Remove(ctx, pos[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle template rm: %v\n", err)
		return 1
	}
	printOut(*v.asJSON, map[string]any{"removed": pos[0], "gc": rep},
		fmt.Sprintf("removed %s (collected %d layers, %d roots)\n", pos[0], rep.Layers, rep.Roots))
	return 0
}

func shortID(d string) string {
	if _, h, ok := strings.Cut(d, ":"); ok && len(h) > 12 {
		return h[:12]
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// humanBytes writes a size for people: 512 B, 3.2 KiB, 45.0 MiB, 1.3 GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}

// templateUsers lists the running and paused computers made from the
// template name in the database of the data directory data, or of
// CUBICLE_STORE_URL (none when there is none).
func templateUsers(ctx context.Context, data, name string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(data, "cubicle.db")); errors.Is(err, fs.ErrNotExist) && os.Getenv("CUBICLE_STORE_URL") == "" {
		return nil, nil
	}
	st, err := openCLIStore(ctx, data)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return computer.TemplateUsers(ctx, st, name)
}
