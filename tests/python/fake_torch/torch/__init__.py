"""A stand-in for PyTorch in kscope's CPU tests: nn.Module with torch's forward-hook
semantics, and nothing else kscope.torch needs.

What it copies from torch 2.x's torch/nn/modules/module.py (Module._call_impl):
  - forward pre-hooks (global ones first, then the module's; prepend=True puts one first),
    then forward, then forward hooks; with no hook at all the forward is called directly;
  - a hook registered with always_call=True is called even when a pre-hook, the forward
    or an earlier hook raises an Exception (not a BaseException such as
    KeyboardInterrupt): with (module, args, None), its own exception warned and dropped,
    and the first exception raised again;
  - global hooks (nn.modules.module.register_module_forward_pre_hook / _forward_hook);
  - torch.compile(m) gives an OptimizedModule whose own hooks run eagerly and whose
    _orig_mod runs "compiled": torch.compiler.is_compiling() answers True inside it, as it
    does for code dynamo traces, so hooks that ask do nothing there; m.compile() routes
    the module's calls through _compiled_call_impl, hooks and all;
  - LEGACY = True gives torch 1.13's registration: no prepend, with_kwargs or always_call
    (a TypeError), so a forward that raises leaves the closing hooks uncalled.

torch.cuda.is_available() is False unless a test sets cuda.AVAILABLE; capture is
cuda.CAPTURING.
"""

import itertools
import sys
import types
import warnings
from collections import OrderedDict

__version__ = "0.0+fake"
FAKE = True
LEGACY = False  # torch 1.13's hook registration

_next_id = itertools.count()


class _State:
    compiling = 0


_state = _State()

# ---- torch.cuda / torch._C / torch.compiler -------------------------------------------

cuda = types.ModuleType("torch.cuda")
cuda.AVAILABLE = False
cuda.CAPTURING = False
cuda.STREAM = 0x5000
cuda.is_available = lambda: cuda.AVAILABLE
cuda.is_current_stream_capturing = lambda: cuda.CAPTURING

_C = types.ModuleType("torch._C")
_C._cuda_isCurrentStreamCapturing = lambda: cuda.CAPTURING

compiler = types.ModuleType("torch.compiler")
compiler.is_compiling = lambda: _state.compiling > 0


# ---- hooks ------------------------------------------------------------------------------


class RemovableHandle:
    def __init__(self, *dicts):
        self.id = next(_next_id)
        self._dicts = dicts

    def remove(self):
        for d in self._dicts:
            if self.id in d:
                del d[self.id]


_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()


def register_module_forward_pre_hook(hook):
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    if LEGACY and (with_kwargs or always_call):
        raise TypeError("register_module_forward_hook() got an unexpected keyword argument")
    handle = RemovableHandle(_global_forward_hooks, _global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def _prepend(d, key, value):
    d[key] = value
    d.move_to_end(key, last=False)


class Module:
    def __init__(self):
        d = self.__dict__
        d["_modules"] = OrderedDict()
        d["training"] = True
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_compiled_call_impl"] = None

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.__dict__.pop(name, None)
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def add_module(self, name, module):
        self._modules[name] = module

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix=""):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        if LEGACY and (prepend or with_kwargs):
            raise TypeError("register_forward_pre_hook() got an unexpected keyword argument")
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            _prepend(self._forward_pre_hooks, handle.id, hook)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        if LEGACY and (prepend or with_kwargs or always_call):
            raise TypeError("register_forward_hook() got an unexpected keyword argument")
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            _prepend(self._forward_hooks, handle.id, hook)
        return handle

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        forward_call = self.forward
        if not (self._forward_hooks or self._forward_pre_hooks or _global_forward_hooks or
                _global_forward_pre_hooks):
            return forward_call(*args, **kwargs)
        result = None
        called_always = set()
        try:
            for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    r = hook(self, args, kwargs)
                    if r is not None:
                        args, kwargs = r
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
            result = forward_call(*args, **kwargs)
            for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                    called_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
            return result
        except Exception:
            if not LEGACY:
                for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                    if hook_id in called_always:
                        continue
                    if hook_id not in self._forward_hooks_always_called and \
                            hook_id not in _global_forward_hooks_always_called:
                        continue
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            r = hook(self, args, kwargs, result)
                        else:
                            r = hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception as e:
                        warnings.warn(f"forward hook with always_call=True raised: {e}")
            raise

    def compile(self, *args, **kwargs):
        """In place, as torch >= 2.2: calls go to a compiled _call_impl, hooks and all."""
        call_impl = self._call_impl

        def compiled_call_impl(*a, **k):
            _state.compiling += 1
            try:
                return call_impl(*a, **k)
            finally:
                _state.compiling -= 1
        object.__setattr__(self, "_compiled_call_impl", compiled_call_impl)

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __setitem__(self, i, module):
        self._modules[str(i)] = module

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class OptimizedModule(Module):
    """What torch.compile(module) returns: its own hooks run eagerly, the original module
    runs as compiled code (its hooks see is_compiling() True)."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        _state.compiling += 1
        try:
            return self._orig_mod(*args, **kwargs)
        finally:
            _state.compiling -= 1


def compile(model, **kwargs):  # noqa: A001 (torch's name)
    return OptimizedModule(model)


# ---- the module tree torch has ------------------------------------------------------------

nn = types.ModuleType("torch.nn")
nn.Module = Module
nn.ModuleList = ModuleList
nn.Sequential = Sequential
nn.modules = types.ModuleType("torch.nn.modules")
nn.modules.module = types.ModuleType("torch.nn.modules.module")
nn.modules.module.Module = Module
nn.modules.module.register_module_forward_pre_hook = register_module_forward_pre_hook
nn.modules.module.register_module_forward_hook = register_module_forward_hook

for _name, _mod in (("torch.cuda", cuda), ("torch._C", _C), ("torch.compiler", compiler), ("torch.nn", nn),
                    ("torch.nn.modules", nn.modules), ("torch.nn.modules.module", nn.modules.module)):
    sys.modules[_name] = _mod
