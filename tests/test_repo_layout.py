"""The repository's layout (DESIGN.md, "Layout"): tools/ holds the build,
CI and measuring scripts, tests/support the tests' helpers, and every path
into them that the README, CI, the docs, the tools and the tests name
exists, so that a command copied from them runs.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: a path into the old drawer, the tools or the tests' helpers: ``scripts/x.py``,
#: ``tools/ci/run_tests.sh``, ``tests/support/simhosts.py``
_PATH = re.compile(r"(?<![\w.-])((?:scripts|tools|tests/support)/[\w.*/-]*[\w*])")
#: a shell script's way to its repository: ``$(dirname "$0")/../..``
_UP = re.compile(r"""\$\(dirname "\$0"\)/((?:\.\./?)+)""")


def _named_in():
    """The files whose named paths must exist."""
    files = [ROOT / name for name in ("README.md", ".ci/run", "setup.py", "MANIFEST.in", "pyproject.toml",
                                      "hixl_rma_pytest.py")]
    files += [p for p in sorted((ROOT / "docs").rglob("*.md")) if "_build" not in p.parts]
    for top in ("tools", "tests", "hixl_rma", "examples", "src"):
        files += [p for p in sorted((ROOT / top).rglob("*")) if p.is_file() and p.name != "test_repo_layout.py"
                  and p.suffix in (".py", ".sh", ".md", ".pyx", ".pxi", ".pyi", ".h", ".cc")]
    return files


def missing_paths(files):
    """(file, line number, path) of each path named in ``files`` that does not exist."""
    out = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in _PATH.finditer(line):
                path = m.group(1).rstrip("/")
                if not any(ROOT.glob(path)):
                    out.append((str(f.relative_to(ROOT)) if ROOT in f.parents else f.name, n, path))
    return out


def test_every_named_tools_path_exists():
    gone = missing_paths(_named_in())
    assert not gone, "named but not there:\n" + "\n".join(f"  {f}:{n}: {p}" for f, n, p in gone)


def test_a_wrong_path_is_found(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("Run `bash tools/ci/run_tests.sh`, then `python scripts/race_score.py` and\n"
                   "`python tools/measure/no_such_tool.py`; `tests/support/simhosts.py` makes hosts.\n")
    assert [(n, p) for _, n, p in missing_paths([doc])] == [(1, "scripts/race_score.py"),
                                                          (2, "tools/measure/no_such_tool.py")]


def test_the_old_drawer_is_gone():
    assert not (ROOT / "scripts").exists()
    assert {p.name for p in (ROOT / "tools").iterdir() if p.is_dir()} == {"build", "ci", "measure"}


def test_ci_runs_the_readme_test_command():
    """.ci/run ends in the test command the README gives."""
    readme = (ROOT / "README.md").read_text()
    commands = set(re.findall(r"bash (tools/ci/run_tests\.sh)", readme))
    assert commands == {"tools/ci/run_tests.sh"}
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == "bash tools/ci/run_tests.sh"


def test_shell_tools_find_the_repository_root():
    """A tool's ``cd "$(dirname "$0")/.."`` climbs as deep as its folder is."""
    scripts = sorted((ROOT / "tools").rglob("*.sh"))
    assert scripts
    for script in scripts:
        for up in _UP.findall(script.read_text()):
            top = (script.parent / up).resolve()
            assert (top / "pyproject.toml").exists(), f"{script.relative_to(ROOT)}: {up} is {top}"


def test_python_tools_find_the_repository_root():
    import runpy
    for rel in ("tools/build/ext_decls.py", "tools/ci/race_score.py"):
        ns = runpy.run_path(str(ROOT / rel), run_name="layout_check")
        assert (pathlib.Path(ns["ROOT"]) / "pyproject.toml").exists(), f"{rel}: ROOT is {ns['ROOT']}"
