"""The type stubs: _strata.pyi names exactly what the built extension defines, and mypy (Debian's)
accepts the package and the example in strict mode."""

import ast
import importlib.util
import inspect
import subprocess
import sys

import pytest

from conftest import PACKAGE_DIR, REPO
from strata import _strata


def stub_names():
    tree = ast.parse((PACKAGE_DIR / "strata" / "_strata.pyi").read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)
                                and (not n.name.startswith("_") or n.name == "__init__")}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
    return names


def test_the_stub_names_every_class_function_and_method_of_the_extension():
    stubs = stub_names()
    runtime = {name for name in dir(_strata) if not name.startswith("_")}
    assert set(stubs) == runtime
    for name, methods in stubs.items():
        obj = getattr(_strata, name)
        if methods is None:
            assert callable(obj)
            continue
        members = {m for m in vars(obj) if not m.startswith("_")}
        assert methods - {"__init__"} == members, name


def test_stub_signatures_take_the_extension_argument_names():
    # pybind11 docstrings start with the signature: check each stub's parameter names against it.
    tree = ast.parse((PACKAGE_DIR / "strata" / "_strata.pyi").read_text())
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
                continue
            doc = getattr(getattr(_strata, node.name), fn.name).__doc__.splitlines()[0]
            params = [a.arg for a in fn.args.args if a.arg != "self"]
            for p in params:
                assert f"{p}:" in doc, f"{node.name}.{fn.name}: {p} not in {doc}"


def test_mypy_strict_accepts_the_package_and_the_example():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed for this interpreter (Debian package mypy)")
    # sidecar_client.py imports the sidecar's generated gRPC stubs, which carry no type stubs.
    examples = [str(p) for p in sorted((REPO / "examples" / "python").glob("*.py"))
                if p.name != "sidecar_client.py"]
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          "strata", *examples],
                         cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout


def test_mypy_catches_a_wrong_call(tmp_path):
    # The check above could not pass if the stubs typed nothing: a wrong call must be an error.
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed for this interpreter (Debian package mypy)")
    bad = tmp_path / "bad.py"
    bad.write_text("import strata\n"
                   "n: str = strata.Tokenizer.from_spec('estimate').count('x')\n"
                   "strata._strata.Agent.create(42)\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(bad)],
                         cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1
    assert "bad.py:2" in out.stdout and "bad.py:3" in out.stdout
