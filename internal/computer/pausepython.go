package computer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A paused computer's session kernel is gone; what of its variables can
// be pickled is kept in the workspace (pythonStateFile) at the pause and
// loaded into the new kernel at the resume, best effort: modules are
// imported again, functions and classes defined in the session are
// defined again from their source, every other variable is unpickled;
// what cannot be is named, with why. The cells run in the user's own
// kernel, as the user, on the user's own files: nothing crosses a
// boundary, and what they print is only a report (bounded, checked).

// pythonStateFile holds the kernel's variables while the computer is
// paused; the resume removes it.
const pythonStateFile = "/workspace/.cubicle-python-state"

// pythonStateMax bounds the pickled variables kept (the rest are named as
// not kept).
const pythonStateMax = 256 << 20

// pythonStateTimeout bounds the save and the restore cells.
const pythonStateTimeout = 2 * time.Minute

// PythonVariables says which of a kernel's variables a pause kept or a
// resume restored, and which not, with why.
type PythonVariables struct {
	Kept []string
	Lost map[string]string
	// Error says why none could be kept or restored (the cell failed).
	Error string
}

// pythonReportMarker starts the line the cells print their report on.
const pythonReportMarker = "\x1ecubicle-python-state "

const pythonSaveCell = `def _cubicle_save():
    import ast, inspect, json, linecache, os, pickle, types
    def source(value):
        if isinstance(value, types.FunctionType):
            return inspect.getsource(value)
        # A class of a cell: found in its cell by a method's code.
        for member in vars(value).values():
            code = getattr(getattr(member, "__func__", member), "__code__", None)
            if code is None:
                continue
            text = "".join(linecache.getlines(code.co_filename))
            for node in ast.parse(text).body:
                if isinstance(node, ast.ClassDef) and node.name == value.__name__:
                    return ast.get_source_segment(text, node)
        raise OSError("no method to find it by")
    ip = get_ipython()
    skip = set(ip.user_ns_hidden) | {"In", "Out", "get_ipython", "exit", "quit"}
    modules, sources, values, lost = {}, {}, {}, {}
    total = 0
    for name, value in list(ip.user_ns.items()):
        if name.startswith("_") or name in skip:
            continue
        if isinstance(value, types.ModuleType):
            if "_cubicle_item" not in value.__dict__:  # a lazy prelude's stand-in comes back with the prelude
                modules[name] = value.__name__
            continue
        if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == "__main__":
            try:
                sources[name] = source(value)
            except Exception as e:
                lost[name] = "its source is not known (%s)" % type(e).__name__
            continue
        try:
            b = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            lost[name] = ("cannot be pickled: %s: %s" % (type(e).__name__, e))[:300]
            continue
        if total + len(b) > LIMIT:
            lost[name] = "too large to keep (%d bytes; at most %d in all)" % (len(b), LIMIT)
            continue
        total += len(b)
        values[name] = b
    tmp = PATH + ".tmp"
    try:
        with open(tmp, "wb") as f:
            pickle.dump({"version": 1, "modules": modules, "sources": sources, "values": values, "lost": lost}, f)
        os.replace(tmp, PATH)
        kept = sorted(list(modules) + list(sources) + list(values))
    except Exception as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        kept = []
        for name in list(modules) + list(sources) + list(values):
            lost[name] = ("the state could not be written: %s: %s" % (type(e).__name__, e))[:300]
    print(MARKER + json.dumps({"kept": kept, "lost": lost}))
_cubicle_save()
del _cubicle_save
`

const pythonRestoreCell = `def _cubicle_restore():
    import importlib, json, os, pickle
    ns = get_ipython().user_ns
    with open(PATH, "rb") as f:
        state = pickle.load(f)
    os.remove(PATH)
    kept, lost = [], dict(state.get("lost", {}))
    for name, module in state.get("modules", {}).items():
        try:
            ns[name] = importlib.import_module(module)
            kept.append(name)
        except Exception as e:
            lost[name] = ("import %s failed: %s: %s" % (module, type(e).__name__, e))[:300]
    for name, source in state.get("sources", {}).items():
        try:
            exec(compile(source, "<restored %s>" % name, "exec"), ns)
            kept.append(name)
        except Exception as e:
            lost[name] = ("its definition failed: %s: %s" % (type(e).__name__, e))[:300]
    for name, b in state.get("values", {}).items():
        try:
            ns[name] = pickle.loads(b)
            kept.append(name)
        except Exception as e:
            lost[name] = ("cannot be unpickled: %s: %s" % (type(e).__name__, e))[:300]
    print(MARKER + json.dumps({"kept": sorted(kept), "lost": lost}))
_cubicle_restore()
del _cubicle_restore
`

// pythonCell is one of the cells above with its constants filled in.
func pythonCell(code string) string {
	r := strings.NewReplacer("LIMIT", strconv.Itoa(pythonStateMax), "PATH", `"`+pythonStateFile+`"`,
		"MARKER", `"\x1ecubicle-python-state "`)
	return r.Replace(code)
}

// runStateCell runs a save or restore cell in sb's session kernel and
// returns its report, with Error set when the cell failed or did not
// report (the kernel was busy past the timeout, the user's code broke
// printing).
func (m *Manager) runStateCell(ctx context.Context, sb sandbox.Sandbox, code string) *PythonVariables {
	var out strings.Builder
	res, err := sb.Python(ctx, sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: pythonCell(code)}},
		Timeout: pythonStateTimeout, Mode: sandbox.ModeSession, Prelude: m.preludeFor(sb.Spec()), MaxOutput: 1 << 20},
		func(o sandbox.PythonOutput) {
			if o.Output.Type == kernel.OutStream && o.Output.Name == "stdout" && out.Len() < 1<<20 {
				out.WriteString(o.Output.Text)
			}
		})
	if err == nil && res.Status != sandbox.CellOK {
		err = errors.New(res.Message)
	}
	if err != nil {
		log.From(ctx).WarnContext(ctx, "keep the Python kernel's variables", "computer", sb.ID(), "err", err)
		return &PythonVariables{Error: fmt.Sprintf("the session kernel's variables could not be kept or restored: %v", err)}
	}
	_, report, ok := strings.Cut(out.String(), pythonReportMarker)
	if !ok {
		return &PythonVariables{Error: "the session kernel did not report which variables it kept or restored"}
	}
	report, _, _ = strings.Cut(report, "\n")
	var v struct {
		Kept []string          `json:"kept"`
		Lost map[string]string `json:"lost"`
	}
	if json.Unmarshal([]byte(report), &v) != nil || len(v.Kept)+len(v.Lost) > 10000 {
		return &PythonVariables{Error: "the session kernel's report of its variables was not readable"}
	}
	return &PythonVariables{Kept: v.Kept, Lost: v.Lost}
}
