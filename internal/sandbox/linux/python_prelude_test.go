package linux_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The cells below spell the prelude's module names in pieces ('num'+'py')
// where they must not count as naming them: a cell that names a deferred
// import imports it first.

// TestPythonLazyPrelude: a kernel started by a call imports the prelude's
// imports when a cell first needs them, with the prelude's behaviour intact
// (names bound, %matplotlib inline, failures, the rest of the prelude); a
// warm-up (what the pool runs) imports everything but matplotlib at once.
func TestPythonLazyPrelude(t *testing.T) {
	t.Parallel()
	sb := newComputer(t, newDriver(t), nil)
	loaded := "import sys; sorted(k for k in ('num'+'py', 'pan'+'das', 'matplot'+'lib', 'matplot'+'lib.pyplot') if k in sys.modules)"
	standIn := "type(globals()['n'+'p']).__name__, type(globals()['p'+'lt']).__name__"
	run := func(t *testing.T, req sandbox.PythonRequest) pyCall {
		t.Helper()
		c := pyRun(t, sb, req)
		if c.res.Status != "ok" {
			t.Fatalf("%s", c.summary())
		}
		return c
	}

	t.Run("DefaultPrelude", func(t *testing.T) {
		c := run(t, sandbox.PythonRequest{Reset: true, Prelude: config.DefaultPrelude, Cells: pyCells(
			loaded, standIn,
			"df = pd.DataFrame({'a': range(100)}); df.describe()",
			loaded,
			"import types; type(np) is types.ModuleType, np is sys.modules['num'+'py'], np.arange(3).sum()",
		)})
		if got := c.value(0); got != "[]" {
			t.Errorf("imported before any cell needed them: %s", got)
		}
		if got := c.value(1); got != "('LazyModule', 'LazyModule')" {
			t.Errorf("stand-ins: %s", got)
		}
		if got := c.value(2); !strings.Contains(got, "49.5") {
			t.Errorf("describe: %s", got)
		}
		if got := c.value(3); got != "['numpy', 'pandas']" {
			t.Errorf("after pandas: %s", got)
		}
		if got := c.value(4); got != "(True, True, 3)" {
			t.Errorf("np after pandas imported numpy: %s", got)
		}
		if got := pyOK(t, sb, "import gc; gc.isenabled()").value(0); got != "True" { // off only while it imported
			t.Errorf("the collector after deferred imports: enabled %s", got)
		}
		// Naming plt imports pyplot and runs %matplotlib inline: one image.
		c = run(t, sandbox.PythonRequest{Cells: pyCells(
			"fig = plt.figure(figsize=(3, 2)); plt.plot([1, 3, 2]); plt.show()",
			"matplotlib.get_backend(), type(plt).__name__")})
		var pngs int
		for _, o := range c.outs {
			if o.Cell == 0 && len(o.Output.PNG) > 0 {
				pngs++
			}
		}
		if pngs != 1 {
			t.Errorf("%d images: %s", pngs, c.summary())
		}
		if got := c.value(1); got != "('module://matplotlib_inline.backend_inline', 'module')" {
			t.Errorf("backend: %s", got)
		}
	})

	t.Run("IndirectUse", func(t *testing.T) {
		// Code that never names the stand-in imports it when it uses it.
		c := run(t, sandbox.PythonRequest{Reset: true, Prelude: config.DefaultPrelude, Cells: pyCells(
			"eval(''.join(['n', 'p', '.arange(4).sum()']))",
			"type(globals()['n'+'p']).__name__",
		)})
		if got := c.value(0); got != "6" {
			t.Errorf("eval through the stand-in: %s", got)
		}
		if got := c.value(1); got != "'module'" {
			t.Errorf("the stand-in was not replaced: %s", got)
		}
	})

	t.Run("WarmUpImportsAllButPlotting", func(t *testing.T) {
		run(t, sandbox.PythonRequest{Reset: true, Prelude: config.DefaultPrelude})
		// The warm-up's kernel kept its collector off for the prelude only
		// (python_launcher.py): it is on for the first cell of its user.
		// A cycle of the user's first cell is collectable (not frozen as the
		// prelude's objects were): the freeze happened once. numpy and
		// pandas are imported and bound; matplotlib waits for the first
		// plot, which shows inline.
		c := run(t, sandbox.PythonRequest{Cells: pyCells(loaded,
			"import gc, weakref\nclass C: pass\na = C(); a.me = a; r = weakref.ref(a)",
			"del a; gc.collect(); gc.isenabled(), r() is None",
			"import types; type(pd) is types.ModuleType, type(np) is types.ModuleType",
			"plt.figure(figsize=(2, 2)); plt.plot([1, 3, 2]); plt.show()",
			loaded)})
		if got := c.value(0); got != "['numpy', 'pandas']" {
			t.Errorf("after a warm-up: %s", got)
		}
		if got := c.value(2); got != "(True, True)" {
			t.Errorf("the collector after a warm-up: enabled, cycle collected %s", got)
		}
		if got := c.value(3); got != "(True, True)" {
			t.Errorf("numpy and pandas after a warm-up: modules %s", got)
		}
		if imgs := c.of(4, kernel.OutDisplay); len(imgs) != 1 || len(imgs[0].PNG) == 0 {
			t.Errorf("the first plot after a warm-up: %s", c.summary())
		}
		if got := c.value(5); got != "['matplotlib', 'matplotlib.pyplot', 'numpy', 'pandas']" {
			t.Errorf("after the first plot: %s", got)
		}
	})

	t.Run("RestAndGuards", func(t *testing.T) {
		// The rest of the prelude runs as before and imports what it names;
		// a guarded import of a missing module leaves its name unbound.
		prelude := "import json as j\ntry:\n    import no_such_module_here as nsm\nexcept Exception:\n    pass\n" +
			"try:\n    import colorsys\nexcept Exception:\n    pass\nP = j.dumps([1])\n"
		c := run(t, sandbox.PythonRequest{Mode: "per_call", Prelude: prelude, Cells: pyCells(
			"P, type(j).__name__, 'nsm' in globals(), type(globals()['colo'+'rsys']).__name__")})
		if got := c.value(0); got != "('[1]', 'module', False, 'LazyModule')" {
			t.Errorf("%s", got)
		}
		c = pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Prelude: "import json\nimport no_such_module_here\nX = 1", Cells: pyCells("1")})
		if c.res.Status != "error" || c.res.Message != "The prelude failed: ModuleNotFoundError: No module named 'no_such_module_here'." {
			t.Errorf("failing prelude: %s", c.summary())
		}
	})

	t.Run("InterruptedImport", func(t *testing.T) {
		// A timeout while a cell's deferred import runs interrupts the cell,
		// not the kernel; the import is tried again by the next cell.
		mustSucceed(t, sb, `rm -f /workspace/slow.done; printf '%s\n' 'import os, time' `+
			`'if not os.path.exists("/workspace/slow.done"):' '    open("/workspace/slow.done", "w").close()' '    time.sleep(60)' 'x = 42' > /workspace/slowmod.py`)
		c := pyRun(t, sb, sandbox.PythonRequest{Reset: true, Prelude: "import slowmod as s", Cells: pyCells("s.x"), Timeout: 2 * time.Second})
		if !c.res.TimedOut || c.res.Cells[0].Status != "cancelled" {
			t.Fatalf("%s", c.summary())
		}
		if e := c.of(0, kernel.OutError); len(e) != 1 || e[0].EName != "KeyboardInterrupt" {
			t.Errorf("the cell's error: %s", c.summary())
		}
		c = run(t, sandbox.PythonRequest{Cells: pyCells("s.x")})
		if got := c.value(0); got != "42" || c.res.KernelRestarted {
			t.Errorf("after the interrupt: %s", c.summary())
		}
	})

	t.Run("NoDebugger", func(t *testing.T) {
		// ipykernel's debugger is not started, and a cell may import debugpy.
		c := run(t, sandbox.PythonRequest{Reset: true, Cells: pyCells(
			"import sys; 'debug'+'py' in sys.modules, [p for p in sys.path if p.startswith('/tmp')], '' in sys.path",
			"import debugpy; debugpy.__name__")})
		if got := c.value(0); got != "(False, [], True)" {
			t.Errorf("debugpy before use, the launcher's directory on sys.path, the cwd on it: %s", got)
		}
		if got := c.value(1); got != "'debugpy'" {
			t.Errorf("import debugpy: %s", got)
		}
	})
}
