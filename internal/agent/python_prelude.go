package agent

import (
	_ "embed"
	"encoding/json"
	"regexp"
	"strings"
)

// A lazy prelude: the imports at the top of a prelude are bound at once to
// stand-ins and imported when a cell first names them (python_lazy.py), so a
// kernel started for a call does not import numpy, pandas and matplotlib
// before a cell that needs none of them, and one that needs pandas does not
// import matplotlib. A warm-up (a call without cells, what the warm pool
// runs) imports everything but matplotlib at once (warmUpItems): it is
// ahead of time, and its first cell must find numpy and pandas ready.

// preludeItem is a statement of a prelude's top that a kernel defers: an
// import (Module, bound to Bind) or a %matplotlib magic (Magic set; its
// arguments in Args). Guarded: it was wrapped in try/except Exception
// (computer.Manager's prelude for a template), so a module that is not there
// leaves the name unbound instead of failing the prelude.
type preludeItem struct {
	Module  string `json:"module,omitempty"`
	Bind    string `json:"bind,omitempty"`
	Plain   bool   `json:"plain,omitempty"` // import a.b without as: binds a
	Magic   bool   `json:"magic,omitempty"`
	Args    string `json:"args,omitempty"`
	Guarded bool   `json:"guarded,omitempty"`
	// Now: imported by the prelude's cell itself, not deferred (a
	// warm-up's imports but plotting: warmUpItems).
	Now bool `json:"now,omitempty"`
}

// warmUpItems marks what a warm-up imports at once: every item but
// matplotlib's imports and the %matplotlib magic, which a kernel imports
// with its first use of them (a plot, ~0.5 s once). A pool kernel is
// started for every computer the pool hands out and most never plot:
// importing matplotlib ahead of time was a quarter of a refill's CPU
// (issue 15 goal 3), while numpy and pandas stay ready (goal 2).
func warmUpItems(items []preludeItem) []preludeItem {
	for i := range items {
		top, _, _ := strings.Cut(items[i].Module, ".")
		items[i].Now = !items[i].Magic && top != "matplotlib"
	}
	return items
}

var (
	// One module per line, with an optional alias and comment; nothing
	// that could continue on the next line.
	importLine = regexp.MustCompile(`^import[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:[ \t]+as[ \t]+([A-Za-z_][A-Za-z0-9_]*))?[ \t]*(?:#.*)?$`)
	// %matplotlib with at most one backend argument and no comment (the
	// magic would take it for an argument).
	matplotlibLine = regexp.MustCompile(`^%matplotlib(?:[ \t]+([A-Za-z0-9_.:/\-]+))?[ \t]*$`)
)

// pythonKeywords cannot be module or alias names: such a line is left to
// Python, which rejects it.
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

// splitPrelude returns the deferrable statements at the top of prelude (up
// to its first other statement; blank and comment lines are skipped) and
// the rest, which runs as before. Only whole lines that cannot be part of
// a longer statement are deferred; everything after the first line that is
// not one runs unchanged, so a multi-line string or a statement that uses
// an import keeps its order.
func splitPrelude(prelude string) (items []preludeItem, rest string) {
	lines := strings.Split(prelude, "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	i := 0
	for i < len(lines) {
		l := lines[i]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			i++
			continue
		}
		if it, ok := deferrable(l); ok {
			items = append(items, it)
			i++
			continue
		}
		// computer.Manager's guarded form: try:, one indented statement,
		// except Exception:, pass.
		if l == "try:" && i+3 < len(lines) && lines[i+2] == "except Exception:" && lines[i+3] == "    pass" &&
			strings.HasPrefix(lines[i+1], "    ") {
			if it, ok := deferrable(lines[i+1][4:]); ok {
				it.Guarded = true
				items = append(items, it)
				i += 4
				continue
			}
		}
		break
	}
	rest = strings.Join(lines[i:], "\n")
	if strings.TrimSpace(rest) == "" {
		rest = ""
	}
	return items, rest
}

// deferrable parses one line that a kernel may defer.
func deferrable(l string) (preludeItem, bool) {
	if m := importLine.FindStringSubmatch(l); m != nil {
		for _, part := range strings.Split(m[1], ".") {
			if pythonKeywords[part] {
				return preludeItem{}, false
			}
		}
		if pythonKeywords[m[2]] {
			return preludeItem{}, false
		}
		it := preludeItem{Module: m[1], Bind: m[2]}
		if it.Bind == "" {
			it.Bind, _, _ = strings.Cut(m[1], ".")
			it.Plain = true
		}
		return it, true
	}
	if m := matplotlibLine.FindStringSubmatch(l); m != nil {
		return preludeItem{Magic: true, Args: m[1]}, true
	}
	return preludeItem{}, false
}

//go:embed python_lazy.py
var lazyPreludeSource string

// lazyPreludeCell is the cell that binds items' stand-ins and installs the
// hooks that import them; it leaves no name of its own behind.
func lazyPreludeCell(items []preludeItem) string {
	spec, _ := json.Marshal(items)
	// A JSON string is a valid Python string literal (Go escapes no
	// character outside the BMP).
	lit, _ := json.Marshal(string(spec))
	return lazyPreludeSource + "\n_cubicle_lazy_prelude(" + string(lit) + ")\ndel _cubicle_lazy_prelude\n"
}
