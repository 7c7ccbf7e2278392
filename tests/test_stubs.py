"""The hand-written type stub of the compiled binding (hixl_rma/_engine.pyi)
names what the module has, and nothing it lacks: a name added to or dropped
from the extension without its stub fails here; and mypy's stubtest holds
every signature of the stub to the module's (parameter names, kinds and
defaults), so a changed signature without its stub fails too."""
import ast
import inspect
import pathlib
import subprocess
import sys
import types

import pytest

import hixl_rma.ground.errors
from hixl_rma import _engine

STUB = pathlib.Path(_engine.__file__).with_name("_engine.pyi")
ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWLIST = pathlib.Path(__file__).with_name("stubtest_allowlist.txt")


def _stub_names():
    """{top-level name: None, or the set of a class's member names}."""
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for b in node.body:
                if isinstance(b, ast.FunctionDef):
                    members.add(b.name)
                elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    members.add(b.target.id)
            out[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = None
        elif isinstance(node, ast.Assign):
            out.update((t.id, None) for t in node.targets if isinstance(t, ast.Name))
    return out


def _own_public_names():
    """The module's public names, less what it imports (modules, and the
    names it takes from hixl_rma.ground.errors)."""
    imported = {k for k, v in vars(hixl_rma.ground.errors).items() if not k.startswith("_")}
    return {k for k, v in vars(_engine).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType) and k not in imported}


def test_stub_exists_and_is_packaged():
    assert STUB.is_file(), f"{STUB} is missing"


def test_stub_names_what_the_module_has():
    stub = _stub_names()
    missing = sorted(_own_public_names() - set(stub))
    assert not missing, f"in hixl_rma._engine but not in its stub: {missing}"
    # Type aliases of the stub (_Descs) are not module attributes.
    extra = sorted(k for k, v in stub.items() if not hasattr(_engine, k) and k != "_Descs")
    assert not extra, f"in the stub but not in hixl_rma._engine: {extra}"


@pytest.mark.parametrize("name", sorted(k for k, v in _stub_names().items() if v is not None))
def test_stub_class_members(name):
    cls = getattr(_engine, name)
    assert inspect.isclass(cls)
    members = _stub_names()[name]
    own = {k for k in vars(cls) if not k.startswith("_")}
    missing = sorted(own - members)
    assert not missing, f"{name}: members not in the stub: {missing}"
    extra = sorted(k for k in members if not hasattr(cls, k))
    assert not extra, f"{name}: stub members the class lacks: {extra}"


@pytest.mark.parametrize("name", ["Engine", "TransferRequest", "WindowState", "WinBase"])
def test_binding_methods_have_signatures(name):
    """stubtest can only compare what inspect reads: the methods of the
    binding carry their signatures (Cython's binding=True, its default since
    3.0), or the check below would pass having compared nothing."""
    cls = getattr(_engine, name)
    plain = sorted(k for k, v in vars(cls).items() if callable(v) and not k.startswith("__"))
    assert plain, f"{name} has no methods to check"
    for k in plain:
        try:
            inspect.signature(getattr(cls, k))
        except ValueError as e:
            pytest.fail(f"{name}.{k}: no signature ({e}); is the binding compiled with binding=False?")


@pytest.mark.timeout(300)
def test_stubtest_passes():
    """mypy's stubtest on the compiled module, with pyproject.toml's [tool.mypy]
    (the package's other modules are read, not checked) and the allowlist of
    what stubtest cannot know (Cython's own helpers, imported status codes)."""
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        pytest.fail("mypy is missing: it is in the [test] extra (pip install -e '.[test]')")
    cmd = [sys.executable, "-m", "mypy.stubtest", "hixl_rma._engine", "--allowlist", str(ALLOWLIST),
           "--mypy-config-file", str(ROOT / "pyproject.toml")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
