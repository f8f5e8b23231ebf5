#!/usr/bin/python3
"""Where a kernel's start goes (issue 15 goal 3; docs/benchmarks.md).

    /usr/bin/python3 scripts/kernel_start.py [N [variant,variant...]]

Each sample, on the host (no computer): a fresh HOME (as a new computer's
/workspace), a kernel started as the agent starts it (stock: python3 -m
ipykernel_launcher; lean: internal/agent/python_launcher.py; zygote: forked
from a Python that imported everything, an experiment that is not shipped),
then the prelude (the default one, eager; or the lazy prelude's cell), then
the bench's first cell. Wall times from the client (jupyter_client); CPU
(user+sys of all the kernel's threads) from /proc/<kernel>/stat. Prints the
p50 of each."""
import json, os, queue, shutil, statistics, subprocess, sys, tempfile, time
from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

PY = "/usr/bin/python3"
WT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "internal", "agent")
PRELUDE = "import numpy as np\nimport pandas as pd\nimport matplotlib\nimport matplotlib.pyplot as plt\n%matplotlib inline\n"
FIRST = "import pandas as pd; df = pd.DataFrame({'a': range(100)}); df.describe()"
ZYGOTE = {}
TCK = os.sysconf("SC_CLK_TCK")
FLAGS = ["--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False"]


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK


def lazy_cell():
    items = [{"module": "numpy", "bind": "np"}, {"module": "pandas", "bind": "pd"},
             {"module": "matplotlib", "bind": "matplotlib", "plain": True},
             {"module": "matplotlib.pyplot", "bind": "plt"}, {"magic": True, "args": "inline"}]
    src = open(WT + "/python_lazy.py").read()
    return src + "\n_cubicle_lazy_prelude(" + json.dumps(json.dumps(items)) + ")\ndel _cubicle_lazy_prelude\n"


def await_kernel_info(kc, died, stderr, poll=0.02):
    """Waits for the reply to a kernel_info_request; died() says the kernel
    exited (its stderr's tail is then in the error)."""
    mid = kc.kernel_info()
    while True:
        try:
            m = kc.get_shell_msg(timeout=poll)
        except queue.Empty:
            if died():
                raise RuntimeError("kernel died: " + open(stderr).read()[-3000:])
            continue
        if m["parent_header"].get("msg_id") == mid:
            return


def stop(kc, p, d):
    """Closes the client, kills the kernel and removes its directory."""
    kc.stop_channels()
    p.kill()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)


def run(kc, code):
    t = time.monotonic()
    r = kc.execute_interactive(code, timeout=180, output_hook=lambda m: None)
    if r["content"]["status"] != "ok":
        raise RuntimeError(f"{code[:40]!r}: {r['content']}")
    return time.monotonic() - t


def sample(variant, fontcache=None):
    d = tempfile.mkdtemp(prefix="pyk-")
    home = d + "/home"
    os.mkdir(home)
    if fontcache:
        shutil.copytree(fontcache, home + "/.cache")
    cf = d + "/kernel.json"
    write_connection_file(cf, ip="127.0.0.1")
    zyg = variant["launcher"] == "zygote"
    if zyg:
        argv = None
    elif variant["launcher"] == "stock":
        argv = [PY, "-m", "ipykernel_launcher", "-f", cf] + FLAGS
    else:
        shutil.copy(WT + "/python_launcher.py", d + "/launch.py")
        argv = [PY, d + "/launch.py", "-f", cf] + FLAGS
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", "IPYTHONDIR": d + "/ipython"}
    t0 = time.monotonic()
    if zyg:
        z = ZYGOTE["proc"]
        zc = cpu(z.pid)
        z.stdin.write(f"{cf} {home}\n"); z.stdin.flush()
        p = type("P", (), {})()
        p.pid = int(z.stdout.readline())
        p.kill = lambda: os.kill(p.pid, 9)
        p.wait = lambda: None
    else:
        p = subprocess.Popen(argv, env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(d + "/stderr", "w"))
    kc = BlockingKernelClient(connection_file=cf)
    kc.load_connection_file()
    kc.start_channels()
    try:
        await_kernel_info(kc, lambda: not zyg and p.poll() is not None, d + "/stderr")
        out = {"start": time.monotonic() - t0, "start_cpu": cpu(p.pid)}
        if zyg:
            out["zygote_cpu"] = cpu(z.pid) - zc
        prelude = {"eager": PRELUDE, "lazy": lazy_cell(), "none": None}[variant["prelude"]]
        out["prelude"] = run(kc, prelude) if prelude else 0.0
        out["prelude_cpu"] = cpu(p.pid) - out["start_cpu"]
        c = cpu(p.pid)
        out["cell"] = run(kc, FIRST) if variant.get("cell", True) else 0.0
        out["cell_cpu"] = cpu(p.pid) - c
        out["total"] = out["start"] + out["prelude"] + out["cell"]
        out["total_cpu"] = cpu(p.pid)
        return out
    finally:
        stop(kc, p, d)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    # A prebuilt matplotlib/fontconfig cache, as a HOME that already ran it.
    fc = tempfile.mkdtemp(prefix="pyk-fc-")
    subprocess.run([PY, "-c", "import matplotlib.pyplot"], env={"HOME": fc, "PATH": "/usr/bin:/bin"}, check=True,
                   stderr=subprocess.DEVNULL)
    zenv = {"PATH": "/usr/bin:/bin", "HOME": fc, "LANG": "C.UTF-8", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    variants = {
        "zygote+eager": {"launcher": "zygote", "prelude": "eager"},
        "stock+eager": {"launcher": "stock", "prelude": "eager"},
        "lean+eager": {"launcher": "lean", "prelude": "eager"},
        "lean+eager+fontcache": {"launcher": "lean", "prelude": "eager", "fontcache": fc + "/.cache"},
        "stock+lazy": {"launcher": "stock", "prelude": "lazy"},
        "lean+lazy": {"launcher": "lean", "prelude": "lazy"},
        "stock+none": {"launcher": "stock", "prelude": "none", "cell": False},
        "lean+none": {"launcher": "lean", "prelude": "none", "cell": False},
    }
    if names:
        variants = {k: v for k, v in variants.items() if k in names}
    res = {k: [] for k in variants}
    if "zygote+eager" in variants:
        t = time.monotonic()
        z = subprocess.Popen([PY, os.path.abspath(__file__), "--zygote"], env=zenv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ZYGOTE["proc"] = z
        z.stdin.write("ping\n"); z.stdin.flush(); z.stdout.readline()
        time.sleep(0.5)
        print(f"zygote: imports {time.monotonic() - t:.3f} s wall, {cpu(z.pid):.3f} s CPU, RSS", open(f"/proc/{z.pid}/status").read().split("VmRSS:")[1].split("\n")[0].strip(), file=sys.stderr)
    print("load", open("/proc/loadavg").read().split()[:3], file=sys.stderr)
    for i in range(n):
        for k, v in variants.items():
            res[k].append(sample(v, v.get("fontcache")))
        print(f"{i + 1}/{n}", file=sys.stderr)
    print("load", open("/proc/loadavg").read().split()[:3], file=sys.stderr)
    keys = ["zygote_cpu", "start", "start_cpu", "prelude", "prelude_cpu", "cell", "cell_cpu", "total", "total_cpu"]
    print(f"{'p50 (s), n=' + str(n):24}" + "".join(f"{k:>12}" for k in keys))
    for k, rs in res.items():
        print(f"{k:24}" + "".join(f"{statistics.median(r.get(x, 0) for r in rs):12.3f}" for x in keys))
    shutil.rmtree(fc, ignore_errors=True)


def zygote():
    # A pre-imported kernel image: per line of stdin "<connection file>
    # <home>", a kernel forked from it; its pid on stdout.
    import signal

    sys.modules.setdefault("debugpy", None)
    from ipykernel.kernelapp import IPKernelApp
    del sys.modules["debugpy"]
    import numpy, pandas, matplotlib, matplotlib.pyplot, matplotlib_inline.backend_inline  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        if line.strip() == "ping":
            print("pong", flush=True)
            continue
        cf, home = line.split()
        pid = os.fork()
        if pid:
            print(pid, flush=True)
            continue
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.chdir(home)
            os.environ.update(HOME=home, IPYTHONDIR=os.path.dirname(cf) + "/ipython")
            sys.argv = ["kernel", "-f", cf] + FLAGS
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0)
            os.dup2(fd, 1)
            IPKernelApp.launch_instance()
        finally:
            os._exit(0)

if __name__ == "__main__":
    zygote() if sys.argv[1:2] == ["--zygote"] else main()
