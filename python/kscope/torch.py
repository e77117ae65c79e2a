"""Scopes for a PyTorch model's modules with one call, and the step of a generation loop.

    import kscope, kscope.torch
    kscope.enable_cupti()                              # every kernel attributed to its scope
    scopes = kscope.torch.instrument(model, max_depth=3, exclude=[torch.nn.Dropout])
    for _ in range(steps):
        with kscope.torch.step():                      # the "step" scope the diagnosis reads
            logits = model(tokens)                     # a scope per module call: TinyLM/blocks/layers.0/...
    print(kscope.report().text())
    scopes.remove()                                    # every hook gone again

instrument() places a forward pre-hook and a forward hook on each module it instruments;
the pre-hook opens a kscope scope on torch's current stream, the hook closes it. A scope
is named by the module's path below the module open around it (`layers.0`, then
`self_attn` inside it), so the scope tree mirrors the module tree and the report's paths
read `TinyLM/blocks/layers.0/self_attn`. Kernels are attributed by launch (CUPTI's
correlation id), so every kernel a module's forward launches lands in that module's scope.

Robustness (docs/python.md, "Module scopes"): the scopes of one thread are paired with a
per-thread stack, so re-entrant and shared modules nest correctly and a forward that
raises closes its scope (torch >= 2.1 calls the closing hook then: always_call; older
torch leaves it open until the next call of the instrumented root, or the closing hook of
a module around it, closes it). Inside a torch.compile'd region the hooks do nothing
(torch.compiler.is_compiling()): a compiled module is one scope at its boundary. During
CUDA-graph capture the scopes time the host only (a CUDA event recorded into a capture
cannot be timed); the captured kernels go to the scope that replays the graph, and the
report names the module scope that captured them (gpu_activity.graph_capture).

torch is never imported by this module: it is read from sys.modules (or imported) when
instrument() or step() is first called, so `import kscope.torch` costs nothing.
"""

from __future__ import annotations

import fnmatch
import sys
import threading
import weakref

from . import _native, _scope, _streams
from ._native import encode, warn_once

__all__ = ["instrument", "instrument_all", "ModuleScopes", "step"]


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: F811  (asked for torch's modules: torch is the program's)
    return torch


# ---- what each hook reads ------------------------------------------------------------


class _Stack(threading.local):
    """The module scopes open on this thread, innermost last: (info, handle) pairs. One
    stack for every handle, so modules instrumented by two calls still nest."""

    def __init__(self):
        self.entries = []


_local = _Stack()


def _never() -> bool:
    return False


def _compiling_check(torch):
    """torch's 'is dynamo tracing this' question, or a function answering False where the
    torch has no compiler. Dynamo folds the answer to True while it traces a hook, so the
    hook compiles to nothing; eager calls get False."""
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    if fn is None:
        dynamo = sys.modules.get("torch._dynamo")  # torch 2.0-2.2; not imported for this
        fn = getattr(dynamo, "is_compiling", None)
    return fn if callable(fn) else _never


def _capturing_check(torch):
    """Whether CUDA-graph capture is under way on torch's current stream (False, without
    making a CUDA context, where none exists)."""
    c = getattr(torch, "_C", None)
    fn = getattr(c, "_cuda_isCurrentStreamCapturing", None)
    if fn is None:
        fn = getattr(getattr(torch, "cuda", None), "is_current_stream_capturing", None)
    return fn if callable(fn) else _never


def _stream_source(torch, stream):
    """A function giving the stream handle for a scope opening now (None: host only), or
    None when every scope times the host only.

    "current" follows torch's current stream at each opening (torch.cuda.current_stream());
    without a CUDA device it is host only, quietly: a model on the CPU has no GPU time.
    While CUDA-graph capture is under way a scope records no event (host only): an event
    recorded into a capture is part of the graph's dependencies, not a timestamp, and
    cudaEventElapsedTime refuses it."""
    if stream is None or stream is False:
        return None
    if _streams.wants_current(stream):
        try:
            if not torch.cuda.is_available():
                return None
        except Exception:
            return None
        capturing = _capturing_check(torch)
        current = _streams.current_stream_handle

        def current_stream():
            return None if capturing() else current()
        return current_stream
    handle = _streams.stream_handle(stream)
    if handle is None:
        return None
    capturing = _capturing_check(torch)

    def fixed_stream():
        return None if capturing() else handle
    return fixed_stream


class _Info:
    """One instrumented module within one handle: its dotted path below the handle's root
    ("" for the root), and the scope name (as a registered site) it opens under each parent."""

    __slots__ = ("path", "group", "sites")

    def __init__(self, path, group):
        self.path = path
        self.group = group  # the _Group of its root: paths compare within one group
        self.sites = {}     # parent _Info (or None) -> site id (0: opens by name)

    def name_under(self, parent) -> str:
        """The root's name at the root; below an open module of the same root, the path
        below that module's (`self_attn` below `layers.0`); elsewhere (called from outside
        its root, or from a module of another root) the whole path (`layers.0`)."""
        path = self.path
        if not path:
            return self.group.name
        if parent is not None and parent.group is self.group:
            above = parent.path
            if not above:
                return path
            if path.startswith(above) and path[len(above):len(above) + 1] == ".":
                return path[len(above) + 1:]
        return path

    def site_under(self, parent) -> int:
        site = _scope._site_of(self.name_under(parent))
        self.sites[parent] = site
        return site


class _Group:
    """The modules of one root: its scope name, and the handle that owns them."""

    __slots__ = ("name", "__weakref__")

    def __init__(self, name):
        self.name = name


def _open_by_name(info, parent, stream) -> int:
    """The open of a scope whose name the library would not register (its site limit)."""
    data = encode(info.name_under(parent))
    handle = _scope._open_named(data, len(data), 0 if stream is None else 1, stream or 0)
    return handle if handle > 0 else 0


def _close_handle(handle) -> None:
    if handle:
        status = _scope._close(handle)
        if status:
            _scope._closed(status, handle)


def _unwind_to(stack, info) -> None:
    """The closing hook of `info` found something else on top: the scopes above it were
    left open by a forward that raised where torch does not call closing hooks then (an
    exception caught inside this module's forward). Closes them, innermost first, then
    `info`'s. Nothing when `info` is not open on this thread (its pre-hook did not run:
    instrumented while its forward ran, or another pre-hook raised first)."""
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] is info:
            while len(stack) > i:
                _close_handle(stack.pop()[1])
            return


def _drop_stale(stack, group) -> None:
    """The root of `group` opens while modules of its own group are open on this thread:
    those were left open by a call that did not finish (an exception with torch < 2.1, a
    KeyboardInterrupt), since a root is not called from inside itself. Closes them and
    everything above them."""
    for i, (info, _) in enumerate(stack):
        if info is not None and info.group is group:
            while len(stack) > i:
                _close_handle(stack.pop()[1])
            return


def _make_hooks(info, is_root, stream_now, compiling):
    """The pre-hook (opens) and hook (closes) of one module, in torch's signatures
    (module, args) and (module, args, output). The open pushes (info, handle) on this
    thread's stack, the close pops it. Every name they use is a closure cell: a module call
    costs the two hook calls, a thread-local read, a dict lookup and the C open and close
    (docs/python.md, "Module scopes", gives the cost)."""
    local = _local
    check = compiling is not _never
    sites = info.sites
    site_under = info.site_under
    group = info.group
    open_host, open_stream, close_scope, opened, closed = (_scope._open, _scope._open_stream, _scope._close,
                                                           _scope._opened, _scope._closed)

    def pre(module, args):
        if check and compiling():
            return None
        stack = local.entries
        parent = None
        if stack:
            if is_root:
                _drop_stale(stack, group)
            if stack:
                parent = stack[-1][0]
        site = sites.get(parent)
        if site is None:
            site = site_under(parent)
        stream = stream_now() if stream_now is not None else None
        if site:
            handle = open_host(site) if stream is None else open_stream(site, stream)
            if handle <= 0:
                handle = opened(handle, site, stream)
        else:
            handle = _open_by_name(info, parent, stream)
        stack.append((info, handle))
        return None

    def post(module, args, output):
        if check and compiling():
            return None
        stack = local.entries
        if stack and stack[-1][0] is info:
            handle = stack.pop()[1]
            if handle:
                status = close_scope(handle)
                if status:
                    closed(status, handle)
            return None
        _unwind_to(stack, info)
        return None

    return pre, post


# ---- choosing the modules ------------------------------------------------------------


def _matchers(spec, what):
    """include= / exclude= as a list of predicates (path, module) -> bool, or None."""
    if spec is None:
        return None
    if isinstance(spec, (str, type)) or callable(spec):
        spec = [spec]
    out = []
    for item in spec:
        if isinstance(item, str):
            out.append(lambda path, module, pattern=item: (fnmatch.fnmatchcase(path, pattern) or
                                                           fnmatch.fnmatchcase(type(module).__name__, pattern)))
        elif isinstance(item, type):
            out.append(lambda path, module, cls=item: isinstance(module, cls))
        elif callable(item):
            out.append(lambda path, module, fn=item: bool(fn(path, module)))
        else:
            raise TypeError(f"kscope.torch: {what} takes module path patterns (str), module types and "
                            f"callables (path, module) -> bool, not {type(item).__name__}")
    return out


def _any(matchers, path, module) -> bool:
    return any(m(path, module) for m in matchers)


def _is_compiled_wrapper(module) -> bool:
    """torch.compile(module)'s OptimizedModule: its own hooks run outside the compiled
    region, its _orig_mod's inside."""
    return type(module).__name__ == "OptimizedModule" and getattr(module, "_modules", {}).get("_orig_mod") is not None


def _compiled_in_place(module) -> bool:
    """module.compile() (torch >= 2.2): its calls go to a compiled _call_impl, hooks and all."""
    return getattr(module, "__dict__", {}).get("_compiled_call_impl") is not None


def _display_name(module) -> str:
    if _is_compiled_wrapper(module):
        module = module._modules["_orig_mod"]
    return type(module).__name__


def _walk(root, max_depth, include, exclude):
    """(path, module, opaque) of the modules to instrument, depth first in module order (as
    named_modules gives them; a module reached twice is taken at its first path). `opaque`:
    a compiled module, instrumented at its boundary and not below. An excluded module is
    left out with everything below it; include= picks modules to instrument and still looks
    below the others; max_depth counts from the root (0: the root alone)."""
    chosen = []
    seen = set()
    todo = [("", root, 0)]
    while todo:
        path, module, depth = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if path and exclude is not None and _any(exclude, path, module):
            continue
        opaque = _is_compiled_wrapper(module) or _compiled_in_place(module)
        if not path or include is None or _any(include, path, module):
            chosen.append((path, module, opaque))
        if opaque or (max_depth is not None and depth >= max_depth):
            continue
        children = list(module.named_children())
        for name, child in reversed(children):
            if child is not None:
                todo.append((f"{path}.{name}" if path else name, child, depth + 1))
    return chosen


# ---- placing the hooks ---------------------------------------------------------------


def _register(module, pre, post):
    """Registers the pair with the richest signature this torch has: the pre-hook first
    among pre-hooks (prepend, torch >= 2.0), the closing hook called even when the forward
    raises (always_call, torch >= 2.1). Returns (handles, closes_on_exception)."""
    try:
        first = module.register_forward_pre_hook(pre, prepend=True)
    except TypeError:
        first = module.register_forward_pre_hook(pre)
    try:
        return [first, module.register_forward_hook(post, always_call=True)], True
    except TypeError:
        return [first, module.register_forward_hook(post)], False


class _CompiledCallScope:
    """The boundary scope of a module compiled in place (module.compile()): torch calls its
    compiled _call_impl, hooks included, so the hooks never run eagerly; the scope is
    opened around that call instead, and remove() puts the call back."""

    def __init__(self, module, pre, post):
        self.module = module
        self.original = module.__dict__["_compiled_call_impl"]
        original = self.original

        def compiled_call(*args, **kwargs):
            pre(module, args)
            try:
                return original(*args, **kwargs)
            finally:
                post(module, args, None)
        self.wrapper = compiled_call
        object.__setattr__(module, "_compiled_call_impl", compiled_call)

    def remove(self):
        if self.module.__dict__.get("_compiled_call_impl") is self.wrapper:
            object.__setattr__(self.module, "_compiled_call_impl", self.original)


class ModuleScopes:
    """The hooks instrument() placed, and what they cover.

        scopes = kscope.torch.instrument(model)
        scopes.paths          # ('', 'embed', 'blocks', 'blocks.layers.0', ...): the instrumented modules
        scopes.remove()       # every hook removed (also on leaving `with instrument(model):`)

    closes_on_exception: whether torch calls the closing hooks when a forward raises
    (torch >= 2.1: always_call); without it, a scope left open by a raising forward is
    closed by the next call of the root module on the same thread, or by the closing hook
    of an instrumented module around it. compiled: the paths of compiled modules, one
    scope each at their boundary.
    """

    def __init__(self, name, groups, paths, handles, closes_on_exception, compiled):
        self.name = name
        self.paths = tuple(paths)
        self.closes_on_exception = closes_on_exception
        self.compiled = tuple(compiled)
        self._groups = groups  # the _Groups whose scopes remove() closes on this thread
        self._handles = handles
        self._removed = False

    def remove(self) -> None:
        """Removes every hook (idempotent). Scopes of these modules open on this thread
        (remove() called inside a forward) are closed now; one open on another thread at
        that moment stays open there, so remove from outside the forwards."""
        if self._removed:
            return
        self._removed = True
        handles, self._handles = self._handles, []
        for h in handles:
            try:
                h.remove()
            except Exception as e:  # a handle torch already dropped: nothing left to remove
                warn_once(f"kscope.torch: removing a hook failed ({e})")
        stack = _local.entries
        for group in list(self._groups):
            _drop_stale(stack, group)

    @property
    def active(self) -> bool:
        return not self._removed

    def __len__(self) -> int:
        return len(self.paths)

    def __enter__(self) -> "ModuleScopes":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.remove()
        return False

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<kscope.torch.ModuleScopes {self.name!r}: {len(self.paths)} modules, {state}>"


def _check_depth(max_depth, what):
    if max_depth is not None and (not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 0):
        raise ValueError(f"kscope.torch.{what}: max_depth must be None or an integer >= 0, not {max_depth!r}")


def instrument(model, *, name=None, max_depth=None, include=None, exclude=None, stream="current") -> ModuleScopes:
    """A kscope scope around every call of `model` and its submodules, named by module path.

        with kscope.torch.instrument(model, max_depth=2):
            model(x)                      # scopes TinyLM, TinyLM/embed, TinyLM/blocks, TinyLM/blocks/layers.0

    name: the root's scope name (default: the model's class name; the original module's
      for a torch.compile'd one).
    max_depth: how deep below the root to instrument (0: the root alone; None: every module).
    include: only these modules get scopes (the root always does); exclude: these and
      everything below them get none. Each is a pattern, a type, a callable
      (path, module) -> bool, or a list of them. A pattern (fnmatch: `*`, `?`, `[...]`)
      matches the module's dotted path (`layers.*.self_attn`) or its class name
      (`Dropout`, `*Norm`); a type matches its instances.
    stream: "current" (torch's current stream at each call: GPU time from CUDA events;
      host time only where torch has no CUDA device), None (host time only), or a stream.

    A compiled module (torch.compile(m), m.compile()) is one scope at its boundary: the
    hooks inside a compiled region do nothing, and its kernels are attributed to that
    scope. Returns a ModuleScopes: remove() (or leaving a `with` block) removes every hook.
    """
    torch = _torch()
    _check_depth(max_depth, "instrument")
    if not hasattr(model, "register_forward_pre_hook") or not hasattr(model, "named_children"):
        raise TypeError(f"kscope.torch.instrument: {type(model).__name__} is not a torch.nn.Module")
    include_m = _matchers(include, "include")
    exclude_m = _matchers(exclude, "exclude")
    root_name = str(name) if name is not None else _display_name(model)
    group = _Group(root_name)
    stream_now = _stream_source(torch, stream)
    compiling = _compiling_check(torch)

    handles = []
    paths = []
    compiled = []
    closes = True
    try:
        for path, module, opaque in _walk(model, max_depth, include_m, exclude_m):
            pre, post = _make_hooks(_Info(path, group), not path, stream_now, compiling)
            paths.append(path)
            if opaque:
                compiled.append(path)
            if _compiled_in_place(module):
                handles.append(_CompiledCallScope(module, pre, post))
                continue
            placed, always = _register(module, pre, post)
            handles.extend(placed)
            closes = closes and always
    except BaseException:
        for h in handles:
            h.remove()
        raise
    return ModuleScopes(root_name, (group,), paths, handles, closes, compiled)


# ---- every module: global hooks ------------------------------------------------------


class _Learned:
    """What the global hooks know about each module they met: id(module) -> (weak
    reference, (pre, post) hooks of its own or None when it is left alone: excluded, too
    deep, inside a compiled module), learned for a module's whole tree when the module is
    first called (it is then a root); an entry goes when its module does."""

    def __init__(self, max_depth, include, exclude, stream_now, compiling):
        self.max_depth, self.include, self.exclude = max_depth, include, exclude
        self.stream_now, self.compiling = stream_now, compiling
        self.known = {}
        self.groups = set()  # every root's group: remove() closes what they left open
        self.lock = threading.Lock()

    def hooks_of(self, module):
        entry = self.known.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        return self.learn(module)

    def forget(self, key, ref):
        entry = self.known.get(key)
        if entry is not None and entry[0] is ref:
            del self.known[key]

    def remember(self, module, path, group):
        hooks = None if path is None else _make_hooks(_Info(path, group), not path, self.stream_now,
                                                      self.compiling)
        key = id(module)
        try:
            ref = weakref.ref(module, lambda r, key=key: self.forget(key, r))
        except TypeError:  # cannot be weakly referenced: kept while it is known
            ref = lambda m=module: m  # noqa: E731
        self.known[key] = (ref, hooks)
        return hooks

    def learn(self, root):
        """`root`, never met, is called: it is a root, named by its class, and every module
        below it is learned with its path from it (or as left alone)."""
        with self.lock:
            entry = self.known.get(id(root))
            if entry is not None and entry[0]() is root:  # learned by another thread meanwhile
                return entry[1]
            group = _Group(_display_name(root))
            self.groups.add(group)
            chosen = {id(m): path for path, m, _ in _walk(root, self.max_depth, self.include, self.exclude)}
            try:
                everything = list(root.named_modules())
            except Exception:
                everything = []
            for _, module in everything:
                entry = self.known.get(id(module))
                if module is root or (entry is not None and entry[0]() is module):
                    continue  # the root below; a module learned from another root first
                self.remember(module, chosen.get(id(module)), group)
            return self.remember(root, "", group)


def instrument_all(*, max_depth=None, include=None, exclude=None, stream="current") -> ModuleScopes:
    """A scope around every call of every torch.nn.Module in the process, through torch's
    global forward hooks (torch.nn.modules.module.register_module_forward_pre_hook):
    `python -m kscope run --modules` uses it on a program left as it is.

    A module first called is a root, named by its class, and the modules below it are named
    by their paths from it, as with instrument(); max_depth, include and exclude apply below
    each root. Every module call in the program pays torch's hook dispatch (torch skips it
    only while no hook at all is registered), so this costs more than instrument() on one
    model. A module compiled in place (m.compile()) gets no scope: torch runs global hooks
    inside its compiled call. remove() removes the global hooks."""
    torch = _torch()
    try:
        hooks_module = torch.nn.modules.module
        register_pre = hooks_module.register_module_forward_pre_hook
        register_post = hooks_module.register_module_forward_hook
    except AttributeError as e:
        raise _native.KscopeError(f"kscope.torch.instrument_all: this torch has no global module hooks ({e})")
    _check_depth(max_depth, "instrument_all")
    compiling = _compiling_check(torch)
    check = compiling is not _never
    learned = _Learned(max_depth, _matchers(include, "include"), _matchers(exclude, "exclude"),
                       _stream_source(torch, stream), compiling)
    known = learned.known

    def pre(module, args):
        if check and compiling():  # before anything dynamo would have to trace
            return None
        entry = known.get(id(module))
        hooks = entry[1] if entry is not None and entry[0]() is module else learned.hooks_of(module)
        if hooks is not None:
            hooks[0](module, args)
        return None

    def post(module, args, output):
        if check and compiling():
            return None
        entry = known.get(id(module))
        if entry is not None and entry[1] is not None and entry[0]() is module:
            entry[1][1](module, args, output)
        return None

    handles = [register_pre(pre)]
    try:
        handles.append(register_post(post, always_call=True))
        closes = True
    except TypeError:
        handles.append(register_post(post))
        closes = False
    return ModuleScopes("(all modules)", learned.groups, (), handles, closes, ())


# ---- a generation loop's step --------------------------------------------------------


_default_stream = None  # "current" once torch answered with a CUDA device, else None


def _step_stream():
    global _default_stream
    if _default_stream is None:
        torch = sys.modules.get("torch")
        try:
            _default_stream = "current" if torch is not None and torch.cuda.is_available() else False
        except Exception:
            _default_stream = False
    return _default_stream or None


def step(name="step", *, stream="auto", tags=None):
    """The scope of one step of a generation (or training) loop: a context manager and a
    decorator.

        for _ in range(tokens):
            with kscope.torch.step():          # or @kscope.torch.step above the step function
                logits = model(tok)

    The diagnosis (kscope.diagnose) reads the scope named "step" as the loop's step: time
    per step, GPU busy share and idle gaps per step, the host's share. Another name works
    when it is also given to diagnose(step_names=...). stream: "auto" (torch's current
    stream where torch has a CUDA device, else host time only), or what kscope.scope takes.
    """
    if callable(name) and not isinstance(name, str):  # @kscope.torch.step without parentheses
        return step()(name)
    if isinstance(stream, str) and stream == "auto":
        stream = _step_stream()
    return _scope.scope(name, stream=stream, tags=tags)
