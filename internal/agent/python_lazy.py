def _cubicle_lazy_prelude(spec):
    # Cubicle's lazy prelude (internal/agent/python_prelude.go). Each import
    # of the prelude's top is bound now to a stand-in module and imported
    # before the first cell whose text names it (its name or its top-level
    # module), before any cell once something else imported it, or when the
    # stand-in is used (code that names it only indirectly). A %matplotlib
    # magic runs with matplotlib's first use. An interrupt during such an
    # import interrupts the cell. An item marked "now" (a warm-up's) is
    # imported at once.
    import ast, contextlib, gc, importlib, importlib.util, io, json, re, sys, threading, types

    ip = get_ipython()
    ns = ip.user_ns
    lock = threading.RLock()
    state = {"interrupted": False}
    items, missing = [], None
    for it in json.loads(spec):
        it["done"] = False
        if it.get("magic"):
            it["words"] = {"matplotlib"}
            items.append(it)
            continue
        top = it["module"].split(".")[0]
        it["top"], it["words"] = top, {it["bind"], top}
        if top not in sys.modules:
            try:
                found = importlib.util.find_spec(top) is not None
            except Exception:
                found = True  # the import will say what is wrong
            if not found:
                if it.get("guarded"):
                    continue
                missing = top
                break
        items.append(it)
    for it in items:
        if it.get("magic"):
            it["words"] |= {o["bind"] for o in items if o.get("top") == "matplotlib"}

    def load(it):
        # Imports it once and binds its name, unless the name was rebound.
        # What it prints is dropped, as an eager prelude's output is.
        with lock, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if it["done"]:
                return it.get("value")
            if it.get("magic"):
                it["done"] = True
                ip.run_line_magic("matplotlib", it.get("args", ""))
                return None
            collecting = gc.isenabled()
            gc.disable()  # an import's objects outlive it: no passes over them meanwhile
            try:
                mod = importlib.import_module(it["module"])
            except Exception:
                if not it.get("guarded"):
                    raise
                it["done"] = True
                if ns.get(it["bind"]) is it["proxy"]:
                    del ns[it["bind"]]
                return None
            finally:
                if collecting:
                    gc.enable()
            value = sys.modules[it["top"]] if it.get("plain") else mod
            it["value"], it["done"] = value, True
            if ns.get(it["bind"]) is it["proxy"]:
                ns[it["bind"]] = value
            return value

    class LazyModule(types.ModuleType):
        # A prelude import not imported yet: any use imports it.
        def _cubicle_load(self):
            it = self.__dict__["_cubicle_item"]
            value = load(it)
            if value is None:
                raise NameError("name %r is not defined" % it["bind"])
            return value

        def __getattr__(self, name):
            return getattr(self._cubicle_load(), name)

        def __dir__(self):
            return dir(self._cubicle_load())

        def __repr__(self):
            return "<module %r (imported on first use)>" % self.__dict__["_cubicle_item"]["module"]

    for it in items:
        if not it.get("magic"):
            it["proxy"] = LazyModule(it["module"])
            it["proxy"].__dict__["_cubicle_item"] = it
            ns[it["bind"]] = it["proxy"]
            if it["module"] in sys.modules or it.get("now"):
                load(it)  # already imported, or a warm-up's: nothing to defer

    words = set().union(*(it["words"] for it in items)) if items else set()
    names_rx = re.compile(r"\b(?:%s)\b" % "|".join(sorted(map(re.escape, words)))) if words else None

    def imported(it):
        if it.get("magic"):
            return "matplotlib.pyplot" in sys.modules
        return it["module"] in sys.modules

    def settled(it):
        return it["done"] or it.get("failed", False)

    def pre_execute():
        state["interrupted"] = False

    def pre_run_cell(info=None):
        raw = getattr(info, "raw_cell", None) or ""
        names = set(names_rx.findall(raw)) if names_rx else set()
        try:
            for named in (True, False):
                for it in items:
                    if settled(it) or not ((named and it["words"] & names) or imported(it)):
                        continue
                    try:
                        load(it)
                    except Exception as e:
                        what = "%matplotlib " + it.get("args", "") if it.get("magic") else "import " + it["module"]
                        print("The prelude's %s failed: %s: %s" % (what, type(e).__name__, e), file=sys.stderr)
                        it["failed"] = True  # its stand-in still tries, and raises, when used
        except KeyboardInterrupt:
            state["interrupted"] = True
        if not state["interrupted"] and all(settled(it) for it in items):
            uninstall()

    class InterruptCell(ast.NodeTransformer):
        # Turns the cell whose pre_run_cell import was interrupted into a
        # KeyboardInterrupt (IPython's callbacks cannot stop the cell).
        def visit_Module(self, node):
            if not state["interrupted"]:
                return node
            state["interrupted"] = False
            exc = ast.Raise(exc=ast.Name(id="KeyboardInterrupt", ctx=ast.Load()), cause=None)
            if node.body:
                ast.copy_location(exc, node.body[0])
            return ast.Module(body=[exc], type_ignores=[])

    transformer = InterruptCell()

    def uninstall():
        for event, f in (("pre_execute", pre_execute), ("pre_run_cell", pre_run_cell)):
            try:
                ip.events.unregister(event, f)
            except ValueError:
                pass
        if transformer in ip.ast_transformers:
            ip.ast_transformers.remove(transformer)

    if items:
        ip.events.register("pre_execute", pre_execute)
        ip.events.register("pre_run_cell", pre_run_cell)
        ip.ast_transformers.append(transformer)
    if missing is not None:
        raise ModuleNotFoundError("No module named %r" % missing, name=missing)
