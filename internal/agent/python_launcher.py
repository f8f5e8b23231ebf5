# Cubicle's kernel launcher (internal/agent/python_launch.go): ipykernel's own
# IPKernelApp, started as `python -m ipykernel_launcher` starts it, without
# importing what a kernel does not use until asked:
# - ipykernel's debugger (debugpy and pydevd): Cubicle's kernelspec says
#   debugger: false; a cell may still import debugpy;
# - IPython's terminal (prompt_toolkit), which `import IPython` loads only
#   for IPython.embed(): IPython.embed imports it when called;
# - jedi, which IPython's completer uses only to complete: imported with the
#   first completion request.
# The cyclic garbage collector is off while the kernel starts (what the
# start allocates lives as long as the kernel) and what exists then is
# frozen (gc.freeze): no collection walks it again.
import gc

gc.disable()

import importlib.util
import logging
import os
import sys
import types

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # this file's private directory; IPython adds the cwd back


class _Later(types.ModuleType):
    # A module imported when first used (an attribute it does not have).
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        mod = importlib.import_module(self.__name__)
        self._loaded(mod)
        return getattr(mod, name)

    def _loaded(self, mod):
        pass


class _Jedi(_Later):
    # jedi for IPython's completer, which sets jedi.settings at its import
    # (kept here, applied to jedi's own) and imports jedi.api.helpers and
    # jedi.api.classes (stand-ins while it imports).
    def _loaded(self, mod):
        import jedi.api.classes
        import jedi.api.helpers  # noqa: F401

        for k, v in vars(self.__dict__["settings"]).items():
            setattr(mod.settings, k, v)


def _embed(**kwargs):
    from IPython.terminal.embed import embed

    return embed(**kwargs)


_embed.__doc__ = "IPython.embed, imported when called."
_stubs = {"debugpy": None, "IPython.terminal.embed": _Later("IPython.terminal.embed")}
_stubs["IPython.terminal.embed"].embed = _embed
if importlib.util.find_spec("jedi") is not None:  # else the completer does without, as before
    _stubs["jedi"] = _Jedi("jedi")
    _stubs["jedi"].settings = types.SimpleNamespace()
    for _name in ("jedi.api", "jedi.api.helpers", "jedi.api.classes"):
        _stubs[_name] = types.ModuleType(_name)
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


def main():
    # IPKernelApp.launch_instance, with the collector back on before the
    # kernel serves.
    app = IPKernelApp.instance()
    app.initialize()
    gc.freeze()
    gc.enable()
    app.start()


if __name__ == "__main__":
    main()
