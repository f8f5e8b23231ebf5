# Cubicle's kernel launcher (internal/agent/python_launch.go): ipykernel's own
# IPKernelApp, started as `python -m ipykernel_launcher` starts it, without
# ipykernel's debugger: debugpy is not imported (Cubicle's kernelspec says
# debugger: false), and a cell may still import it.
import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # this file's private directory; IPython adds the cwd back
sys.modules.setdefault("debugpy", None)
try:
    from ipykernel.kernelapp import IPKernelApp
finally:
    if "debugpy" in sys.modules and sys.modules["debugpy"] is None:
        del sys.modules["debugpy"]
IPKernelApp.launch_instance()
