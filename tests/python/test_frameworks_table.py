"""The one table of frameworks (safeweights._frameworks.FRAMEWORKS): every framework is a registered
Framework with its names, its public module and that module's API, the same for all of them.

Checked without the frameworks themselves (only numpy and torch are installed here): the public
modules through their stubs, and the save / save_file / load / load_file that
``_frameworks.public_functions`` makes for the modules that have nothing of their own.
"""

import ast
import inspect
import os

import pytest

import safeweights
import safeweights.numpy
from safeweights import _frameworks
from safeweights._frameworks import ALIASES, API, FRAMEWORKS, Framework

PACKAGE = os.path.dirname(safeweights.__file__)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_framework_class_is_registered_once():
    registered = [type(fw) for fw in FRAMEWORKS.values()]
    assert sorted(c.__name__ for c in registered) == sorted(c.__name__ for c in _subclasses(Framework))
    assert len(set(registered)) == len(registered)


@pytest.mark.parametrize("key", sorted(FRAMEWORKS))
def test_a_framework_has_its_table_entry(key):
    fw = FRAMEWORKS[key]
    assert fw.names and fw.names[0] == key
    assert fw.display and fw.module and fw.public_module and fw.value_kind
    for name in fw.names:
        assert ALIASES[name] == key
    assert os.path.exists(os.path.join(PACKAGE, f"{fw.public_module}.py")), fw.public_module
    assert os.path.exists(os.path.join(PACKAGE, f"{fw.public_module}.pyi")), fw.public_module


def test_no_name_selects_two_frameworks():
    names = [name for fw in FRAMEWORKS.values() for name in fw.names]
    assert len(names) == len(set(names)) == len(ALIASES)


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_each_name_opens_a_file_for_its_framework(tmp_path, name):
    # Opening imports no framework but torch (as the reference), so every name opens here.
    if ALIASES[name] == "pt":
        pytest.importorskip("torch")
    path = tmp_path / "x.safetensors"
    safeweights.numpy.save_file({}, path)
    with safeweights.safe_open(path, framework=name) as f:
        assert f"framework={ALIASES[name]} " in repr(f)


def _stub(fw):
    with open(os.path.join(PACKAGE, f"{fw.public_module}.pyi")) as f:
        return ast.parse(f.read())


def _stub_all(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    raise AssertionError("no __all__ in the stub")


def _stub_params(tree, name):
    """[(name, kind, default source)] of a function in a stub."""
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    a = fn.args
    positional = [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
    defaults = [None] * (len(a.args) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    out = [(p, k, d) for (p, k), d in zip(positional, defaults)]
    out += [(p.arg, "KEYWORD_ONLY", None if d is None else ast.unparse(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


def _params(function):
    return [
        (p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default))
        for p in inspect.signature(function).parameters.values()
    ]


@pytest.mark.parametrize("key", sorted(FRAMEWORKS))
def test_every_framework_module_exports_the_same_api(key):
    # torch's module adds its own (load_tensors, save_model, ...); the rest export exactly the API.
    stub_all = _stub_all(_stub(FRAMEWORKS[key]))
    assert set(API) <= set(stub_all)
    assert key == "pt" or stub_all == list(API)


def _made_by_public_functions(fw):
    with open(os.path.join(PACKAGE, f"{fw.public_module}.py")) as f:
        return f'public_functions("{fw.names[0]}")' in f.read()


@pytest.mark.parametrize("key", sorted(k for k, fw in FRAMEWORKS.items() if _made_by_public_functions(fw)))
def test_made_functions_match_the_module_stub(key):
    fw = FRAMEWORKS[key]
    tree = _stub(fw)
    functions = _frameworks.public_functions(key)
    assert [f.__name__ for f in functions] == ["save", "save_file", "load", "load_file"]
    for function in functions:
        assert function.__module__ == f"safeweights.{fw.public_module}"
        assert function.__doc__
        assert _params(function) == _stub_params(tree, function.__name__), function.__name__


@pytest.mark.parametrize("module_name", ["numpy", "torch"])
def test_numpy_and_torch_modules_match_their_stubs(module_name):
    module = pytest.importorskip(f"safeweights.{module_name}")
    tree = _stub(FRAMEWORKS[ALIASES[module_name]])
    assert module.__all__ == _stub_all(tree)
    for name in API[:4]:
        assert _params(getattr(module, name)) == _stub_params(tree, name), (module_name, name)
