"""The package's import graph, function-level imports included (DESIGN.md,
"Layers"): no circle anywhere, and nothing below the faces imports a tool.

import-linter (``lint-imports``, the test command) checks the layers from
the imports it finds; this walks every module's syntax tree for ``import``
and ``from ... import`` wherever they are, inside functions too, which is
where today's circles hid.
"""
import ast
import itertools
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "hixl_rma"
#: the faces and the tools: the only modules that may import a tool
TOOLS = ("hixl_rma.races", "hixl_rma.bench", "hixl_rma.telemetry")
FACES = ("hixl_rma", "hixl_rma.__main__", "hixl_rma.win", "hixl_rma.hixl_api", "hixl_rma.dropin", "hixl_rma.nixl",
         "hixl_rma.telemetry")


def _modules():
    """module name -> its .py file (None for a compiled one: .pyx)."""
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    for path in PKG.rglob("*.pyx"):
        mods[".".join(path.relative_to(PKG.parent).with_suffix("").parts)] = None
    return mods


def _imported(name, path, node, mods):
    """The package's modules an Import/ImportFrom node of module ``name`` imports."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            base = name.split(".")
            if path.name != "__init__.py":
                base.pop()
            base = base[:len(base) - (node.level - 1)]
            where = ".".join(base + ([node.module] if node.module else []))
        else:
            where = node.module
        # a private name not in the tree is a module the build makes
        # (_build_config, a compiled extension): a leaf, not the package
        targets = [f"{where}.{a.name}" if f"{where}.{a.name}" in mods or a.name.startswith("_") else where
                   for a in node.names]
    out = set()
    for t in targets:
        if t.rpartition(".")[2].startswith("_") and t.startswith("hixl_rma."):
            mods.setdefault(t, None)
        while t and t not in mods:
            t = t.rpartition(".")[0]
        if t and t != name and t.split(".")[0] == "hixl_rma":
            out.add(t)
    return out


def graph():
    """module -> {module it imports: [line, ...]}, every import in the file."""
    mods = _modules()
    g = {}
    for name, path in list(mods.items()):
        edges = g[name] = {}
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _imported(name, path, node, mods):
                    edges.setdefault(t, []).append(node.lineno)
    for name in mods:
        g.setdefault(name, {})  # the leaves found on the way
    return g


def _cycle(g):
    """A circle of imports as [a, b, ..., a], or None."""
    color, stack = {}, []

    def visit(m):
        color[m] = 1
        stack.append(m)
        for n in g[m]:
            if color.get(n) == 1:
                return [*stack[stack.index(n):], n]
            if n not in color:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        color[m] = 2
        return None

    for m in sorted(g):
        if m not in color:
            found = visit(m)
            if found:
                return found
    return None


def test_the_import_graph_has_no_circle():
    g = graph()
    found = _cycle({m: set(e) for m, e in g.items()})
    where = "" if not found else "\n".join(f"  {a} -> {b} (line {g[a][b]})" for a, b in itertools.pairwise(found))
    assert found is None, f"import circle (function-level imports count):\n{where}"


def test_nothing_below_the_faces_imports_a_tool():
    g = graph()
    bad = [f"{m} imports {t} (line {lines})" for m, edges in sorted(g.items()) for t, lines in edges.items()
           if m not in FACES and not m.startswith(TOOLS) and t.startswith(TOOLS)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("tool", TOOLS)
def test_no_module_below_the_faces_names_a_tool_in_an_import(tool):
    """The grep of "Done means": no import of a tool, by any spelling, below the faces."""
    short = tool.rpartition(".")[2]
    bad = []
    for path in PKG.rglob("*.py"):
        name = ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        if name in FACES or name.startswith(TOOLS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (short in [a.name for a in node.names]
                                                     or (node.module or "").split(".")[-1] == short):
                bad.append(f"{name}: line {node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith(tool) for a in node.names):
                bad.append(f"{name}: line {node.lineno}")
    assert not bad, f"{tool} imported below the faces:\n" + "\n".join(bad)
