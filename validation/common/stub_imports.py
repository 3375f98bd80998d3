"""Importing a peer whose optional dependencies the image lacks (FlashInfer's cuDNN frontend,
CuTe DSL, NCCL helpers...): each missing module is replaced by an inert stub, one failed
import at a time, until the peer and the names asked for import.

Owns: the stub modules and finder, `import_with_stubs(package, names)` -> (module, stubbed).
Deliberately does not check: that a stubbed module is never called (a peer path that calls
one fails loudly at that call, which the caller reports as the peer being unavailable).
"""
import importlib
import importlib.abc
import importlib.machinery
import sys
import types


class _Anything:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __getitem__(self, k):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self.prefixes = set()

    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def import_with_stubs(package, names=(), max_tries=40):
    """(module, stubbed names) once `import package` and `from package<.sub> import name` for
    every (sub, name) in `names` succeed; ImportError when the package itself is missing or
    the imports do not converge."""
    finder = _StubFinder()
    sys.meta_path.append(finder)
    stubbed = []
    for _ in range(max_tries):
        try:
            mod = importlib.import_module(package)
            for sub, name in names:
                getattr(importlib.import_module(package + sub), name)
            return mod, stubbed
        except ModuleNotFoundError as e:
            if not e.name or e.name in finder.prefixes or e.name == package:
                raise
            finder.prefixes.add(e.name)
            stubbed.append(e.name)
            for k in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
                del sys.modules[k]
            importlib.invalidate_caches()
    raise ImportError(f"{package}: importing with stubs did not converge")
