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
# frozen (gc.freeze): no collection walks it again; for a warm-up, until
# its prelude has run (main).
import gc

gc.disable()

import copy
import importlib.util
import logging
import os
import re
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
        if self.__dict__.get("_applied"):
            return
        import jedi.api.classes
        import jedi.api.helpers  # noqa: F401

        for k, v in vars(self.__dict__["settings"]).items():
            setattr(mod.settings, k, v)
        self.__dict__["_applied"] = True  # once: a cell may change jedi.settings later


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


class _LazyParser:
    # The argparse parser of a named script magic (%%bash, %%sh, ...), built
    # if ever used: the magic runs %%script's own parser, and IPython replaces
    # the help text the parser's construction writes into its docstring.
    def __init__(self, construct, func):
        self._construct, self._func = construct, func

    def __getattr__(self, name):
        doc = self._func.__doc__
        parser = self._construct(self._func)
        self._func.__doc__, self._func.parser = doc, parser
        return getattr(parser, name)


class _Start:
    # What the kernel's initialization does many times over, done once while
    # it lasts: traitlets lists a class's members (dir() and getattr of each)
    # at every configurable's creation and for the command line; IPython
    # builds eight argparse parsers and their help texts that no one reads.
    def __enter__(self):
        import IPython.core.magic_arguments as ma
        import traitlets.traitlets as tt

        self._undo = [(tt, "getmembers", tt.getmembers), (ma, "construct_parser", ma.construct_parser)]
        members, construct, cache = tt.getmembers, ma.construct_parser, {}

        def getmembers(obj, predicate=None):
            if predicate is not None or not isinstance(obj, type):
                return members(obj, predicate)
            if obj not in cache:
                cache[obj] = members(obj)
            return cache[obj]

        def construct_parser(func):
            if func.__name__ == "named_script_magic":  # IPython's ScriptMagics._make_script_magic
                return _LazyParser(construct, func)
            return construct(func)

        tt.getmembers, ma.construct_parser = getmembers, construct_parser

    def __exit__(self, *exc):
        for mod, name, value in self._undo:
            setattr(mod, name, value)


_KV = re.compile(r"--([A-Z]\w*)\.([A-Za-z_]\w*)=(.*)", re.S)


def _argv_config(argv):
    # The agent's argv (python_launch.go: -f FILE, --Class.trait=value) as
    # traitlets' command line loads it, without building its parser of every
    # configurable trait; None for any other argv (traitlets parses it).
    from traitlets.config import Config
    from traitlets.config.loader import DeferredConfigString

    cfg, i = Config(), 0
    while i < len(argv):
        if argv[i] == "-f" and i + 1 < len(argv):
            cfg.IPKernelApp.connection_file = argv[i + 1]
            i += 2
            continue
        m = _KV.fullmatch(argv[i])
        if m is None:
            return None
        cfg[m[1]][m[2]] = DeferredConfigString(m[3])
        i += 1
    return cfg


def main():
    # IPKernelApp.launch_instance, with the agent's argv read here and the
    # collector back on before the kernel serves; with
    # --freeze-after-first-cell (a warm-up: its first cell is the whole
    # prelude, which imports the scientific stack) after that cell, and
    # what it imported frozen too.
    warm_up = "--freeze-after-first-cell" in sys.argv
    if warm_up:
        sys.argv.remove("--freeze-after-first-cell")
    with _Start():
        app = IPKernelApp.instance()
        cfg = _argv_config(sys.argv[1:])
        if cfg is not None:

            def parse_command_line(argv=None):
                app.argv, app.extra_args = sys.argv[1:], []
                app.cli_config = copy.deepcopy(cfg)
                app.update_config(cfg)

            app.parse_command_line = parse_command_line
        app.initialize()
    gc.freeze()
    if warm_up:

        def thaw(result=None):
            app.shell.events.unregister("post_run_cell", thaw)
            gc.freeze()
            gc.enable()

        app.shell.events.register("post_run_cell", thaw)
    else:
        gc.enable()
    app.start()


if __name__ == "__main__":
    main()
