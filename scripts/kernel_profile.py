#!/usr/bin/python3
"""Where a kernel's start goes, in CPU seconds (issue 15 goal 3; docs/benchmarks.md).

    /usr/bin/python3 scripts/kernel_profile.py imports [N [LAUNCHER]]
    /usr/bin/python3 scripts/kernel_profile.py phases [N [LAUNCHER,LAUNCHER... [lazy|eager]]]
    /usr/bin/python3 scripts/kernel_profile.py cprofile [LAUNCHER [OUT.prof]]

imports: CPU (time.process_time) of each module the launcher's import of
ipykernel.kernelapp loads, inclusive, the minimum over N fresh
interpreters; the top-level packages and the 40 costliest modules.

phases: N kernels per launcher, interleaved, each in a fresh HOME and
IPYTHONDIR as the agent starts one (its argv and environment); the
kernel's own CPU (process_time, all threads) at: interpreter start (before
the launcher's first line), the launcher's imports, IPKernelApp.initialize,
the start until the first kernel_info reply, the lazy prelude's cell (or
the default prelude, eager: a pool kernel's) and a first cell of 1+1; the
cyclic garbage collector's share of the imports, the initialization and
the prelude; and the wall time from the spawn to the kernel_info
reply. p50 of each. LAUNCHER defaults to internal/agent/python_launcher.py.

cprofile: one kernel under cProfile with a process_time clock (the main
thread only), from the launcher's first line to the end of the first 1+1
cell; prints the 45 costliest functions by inclusive time.

Meant for a quiet machine; under load, compare CPU, not wall.
"""
import json, os, queue, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_start import PRELUDE as EAGER, await_kernel_info, cpu as cpu_proc, lazy_cell, run, stop  # noqa: E402

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.join(HERE, "..", "internal", "agent")
LAUNCHER = os.path.join(AGENT, "python_launcher.py")
FLAGS = ["--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False"]

# The child: runs the launcher as `python3 launch.py -f ...` would, with
# the clock read at each phase; the parent reads them from a cell.
CHILD = r"""
import gc, sys, time
_t = {"interp": time.process_time()}
_gc = {"t": 0.0, "n": [0, 0, 0], "at": 0.0}
def _gc_cb(phase, info):
    # The CPU of the cyclic collector's passes, and how many per generation.
    if phase == "start":
        _gc["at"] = time.process_time()
    else:
        _gc["t"] += time.process_time() - _gc["at"]
        _gc["n"][info["generation"]] += 1
gc.callbacks.append(_gc_cb)
src = open(sys.argv[1]).read()
sys.argv = sys.argv[1:]
# main's launcher ends with IPKernelApp.launch_instance(); a newer one has
# main() under `if __name__ == "__main__":`.
head, sep, tail = src.rpartition("IPKernelApp.launch_instance()")
if not sep:
    head, sep, tail = src.rpartition('if __name__ == "__main__":')
assert sep, "the launcher starts its kernel in neither known way"
prof = None
if _PROFILE:
    import cProfile
    prof = cProfile.Profile(time.process_time)
    prof.enable()
g = {"__name__": "launcher", "__file__": sys.argv[0]}
exec(compile(head, sys.argv[0], "exec"), g)
_t["imports"] = time.process_time()
_t["gc_imports"] = _gc["t"]
App = g["IPKernelApp"]
_init = App.initialize
def initialize(self, argv=None):
    _init(self, argv)
    _t["initialize"] = time.process_time()
    _t["gc_initialize"] = _gc["t"]
    _t["gc"] = _gc
    self.shell.user_ns["_cubicle_phases"] = _t
    self.shell.user_ns["_cubicle_prof"] = prof
App.initialize = initialize
(g["main"] if "main" in g else App.launch_instance)()
"""


CLOCK = "(__import__('time').process_time(), _cubicle_phases['gc']['t'])"


def value(kc, expr):
    out = []

    def hook(m):
        if m["msg_type"] == "execute_result":
            out.append(m["content"]["data"]["text/plain"])
    r = kc.execute_interactive(expr, timeout=60, output_hook=hook, store_history=False)
    if r["content"]["status"] != "ok" or not out:
        raise RuntimeError(f"{expr!r}: {r['content']}")
    return eval(out[0])




def kernel(launcher, profile=None, prelude="lazy"):
    """Starts a kernel as the agent does, runs the lazy prelude and 1+1;
    returns the phases (CPU seconds each, and the wall time to ready)."""
    from jupyter_client import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    d = tempfile.mkdtemp(prefix="pyk3-")
    home = d + "/home"
    os.mkdir(home)
    cf = d + "/kernel.json"
    write_connection_file(cf, ip="127.0.0.1")
    shutil.copy(launcher, d + "/launch.py")
    child = d + "/child.py"
    open(child, "w").write(f"_PROFILE = {bool(profile)!r}\n" + CHILD)
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "USER": "user",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", "IPYTHONDIR": d + "/ipython"}
    t0 = time.monotonic()
    # A warm-up's argv (the agent's, python_launch.go) where the launcher knows it.
    warm = ["--freeze-after-first-cell"] if prelude == "eager" and "--freeze-after-first-cell" in open(launcher).read() else []
    p = subprocess.Popen([PY, child, d + "/launch.py", "-f", cf] + FLAGS + warm, env=env, cwd=home,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(d + "/stderr", "w"))
    kc = BlockingKernelClient(connection_file=cf)
    kc.load_connection_file()
    kc.start_channels()
    try:
        await_kernel_info(kc, lambda: p.poll() is not None, d + "/stderr", poll=0.005)
        ready = time.monotonic() - t0
        # iopub may subscribe after the reply (a cell's idle would be lost):
        # ask again until a status arrives there.
        while True:
            try:
                if kc.get_iopub_msg(timeout=0.2)["msg_type"] == "status":
                    break
            except queue.Empty:
                kc.kernel_info()
        # The kernel's clock and the collector's total as a cell reads them
        # (CLOCK: a cell of its own, whose cost, probe, is measured and
        # taken off each phase).
        if warm:
            # The prelude must be the first cell (the launcher's collector
            # waits for its end): its phase includes the start's remainder.
            run(kc, EAGER)
        t_ready, _ = value(kc, CLOCK)
        a, _ = value(kc, CLOCK)
        b, _ = value(kc, CLOCK)
        probe = b - a
        t0c, gc0 = value(kc, CLOCK)
        if not warm:
            run(kc, lazy_cell() if prelude == "lazy" else EAGER)
        t_prelude, gc1 = value(kc, CLOCK)
        if warm:  # the prelude's phase: from the initialization's end, less the probes since
            t_init = value(kc, "_cubicle_phases['initialize']")
            gc0 = value(kc, "_cubicle_phases['gc_initialize']")
            t0c, t_ready = t_init + 4 * probe, t_init + probe
        run(kc, "1+1")
        t_cell, gct = value(kc, CLOCK)
        ph = value(kc, "_cubicle_phases")
        if profile:
            run(kc, f"_cubicle_prof.disable(); _cubicle_prof.dump_stats({profile!r})")
        out = {"interp": ph["interp"], "imports": ph["imports"] - ph["interp"],
               "initialize": ph["initialize"] - ph["imports"],
               "start+info": t_ready - ph["initialize"] - probe,
               "prelude": t_prelude - t0c - probe, "1+1": t_cell - t_prelude - probe}
        # process_time counts from the process's start; less the probes.
        out["total"] = t_cell - 5 * probe
        # The collector's share (main thread: where the imports run).
        out["gc_imp"] = ph["gc_imports"]
        out["gc_init"] = ph["gc_initialize"] - ph["gc_imports"]
        out["gc_prel"] = gc1 - gc0
        out["gc_all"] = gct
        out["wall_ready"] = ready
        out["proc_total"] = cpu_proc(p.pid)
        return out
    finally:
        stop(kc, p, d)


def phases(n, launchers, prelude="lazy"):
    print("load", open("/proc/loadavg").read().split()[:3], file=sys.stderr)
    res = {l: [] for l in launchers}
    for i in range(n):
        for l in launchers:
            res[l].append(kernel(l, prelude=prelude))
        print(f"{i + 1}/{n}", file=sys.stderr)
    print("load", open("/proc/loadavg").read().split()[:3], file=sys.stderr)
    keys = list(next(iter(res.values()))[0])
    print(f"{'p50 s, n=' + str(n):28}" + "".join(f"{k:>11}" for k in keys))
    for l, rs in res.items():
        print(f"{os.path.relpath(l)[-28:]:28}" + "".join(f"{statistics.median(r[k] for r in rs):11.3f}" for k in keys))


IMPORTS = r"""
import importlib._bootstrap as b, sys, time, json
orig = b._find_and_load
stack, incl = [], {}
def wrapped(name, import_):
    t = time.process_time()
    stack.append(name)
    try:
        return orig(name, import_)
    finally:
        stack.pop()
        if name not in incl:
            incl[name] = (time.process_time() - t, stack[-1] if stack else None)
b._find_and_load = wrapped
src = open(sys.argv[1]).read()
head, sep, _ = src.rpartition("IPKernelApp.launch_instance()")
if not sep:
    head = src.rpartition('if __name__ == "__main__":')[0]
t0 = time.process_time()
exec(compile(head, sys.argv[1], "exec"), {"__name__": "launcher", "__file__": sys.argv[1]})
incl["<all>"] = (time.process_time() - t0, None)
print(json.dumps(incl))
"""


def imports(n, launcher):
    runs = []
    for _ in range(n):
        out = subprocess.run([PY, "-c", IMPORTS, launcher], capture_output=True, text=True, check=True,
                             env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()})
        runs.append(json.loads(out.stdout))
    best = {}
    for r in runs:
        for k, (t, parent) in r.items():
            if k not in best or t < best[k][0]:
                best[k] = (t, parent)
    print(f"import CPU of {os.path.relpath(launcher)} (min of {n}): {best['<all>'][0] * 1000:.0f} ms")
    print("imported at the top (by the launcher or the import machinery itself):")
    tops = sorted(((t, k) for k, (t, parent) in best.items() if parent is None and k != "<all>"), reverse=True)
    for t, k in tops[:30]:
        print(f"  {t * 1000:7.1f} ms  {k}")
    print("costliest modules (inclusive), with the module that imported them:")
    for t, k in sorted(((t, k) for k, (t, p) in best.items() if k != "<all>"), reverse=True)[:40]:
        print(f"  {t * 1000:7.1f} ms  {k:45} <- {best[k][1]}")


def cprofile(launcher, out):
    import pstats

    ph = kernel(launcher, profile=out)
    print("phases (s):", {k: round(v, 3) for k, v in ph.items()})
    pstats.Stats(out).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "phases"
    if mode == "imports":
        imports(int(sys.argv[2]) if len(sys.argv) > 2 else 5, sys.argv[3] if len(sys.argv) > 3 else LAUNCHER)
    elif mode == "phases":
        ls = sys.argv[3].split(",") if len(sys.argv) > 3 else [LAUNCHER]
        phases(int(sys.argv[2]) if len(sys.argv) > 2 else 5, [os.path.abspath(l) for l in ls],
               sys.argv[4] if len(sys.argv) > 4 else "lazy")
    elif mode == "cprofile":
        cprofile(os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else LAUNCHER,
                 sys.argv[3] if len(sys.argv) > 3 else "/tmp/kernel.prof")
    else:
        sys.exit(__doc__)
