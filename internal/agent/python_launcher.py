# Cubicle's kernel launcher (internal/agent/python_launch.go): ipykernel's own
# IPKernelApp, started as `python -m ipykernel_launcher` starts it, without
# importing what a kernel does not use:
# - ipykernel's debugger (debugpy and pydevd): Cubicle's kernelspec says
#   debugger: false; a cell may still import debugpy;
# - IPython's terminal (prompt_toolkit), which `import IPython` loads only
#   for IPython.embed(): IPython.embed imports it when called.
import logging
import os
import sys
import types

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # this file's private directory; IPython adds the cwd back


class _Later(types.ModuleType):
    # IPython.terminal.embed until someone needs more than embed.
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        import importlib

        return getattr(importlib.import_module(self.__name__), name)


def _embed(**kwargs):
    from IPython.terminal.embed import embed

    return embed(**kwargs)


_embed.__doc__ = "IPython.embed, imported when called."
_stubs = {"debugpy": None, "IPython.terminal.embed": _Later("IPython.terminal.embed")}
_stubs["IPython.terminal.embed"].embed = _embed
for _name, _stub in _stubs.items():
    sys.modules.setdefault(_name, _stub)
try:
    from ipykernel.kernelapp import IPKernelApp
finally:
    for _name, _stub in _stubs.items():
        if _name in sys.modules and sys.modules[_name] is _stub:
            del sys.modules[_name]
del _name, _stub, _stubs


class _NoDebuggerNote(logging.Filter):
    # ipykernel warns at every start that it has no debugger: it would be
    # the last line of a kernel's stderr, which explains a failed start.
    def filter(self, record):
        return "debugpy_stream undefined" not in record.getMessage()


logging.getLogger(IPKernelApp.__name__).addFilter(_NoDebuggerNote())
IPKernelApp.launch_instance()
