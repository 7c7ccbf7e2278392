"""Every ```python block of the docs' guide runs, as the page says to run it.

The block's first lines say how (docs/contributing.md, "Marking code examples"):

- ``# ranks: N``: a program, run with ``mpiexec -n N python`` (N = 1: plain
  ``python``); it must exit 0;
- ``# pytest ranks: N`` and ``# expect: passed|failed``: a pytest file, run
  with ``mpiexec -n N python -m pytest --with-mpi``; the outcome must be the
  one stated (a page may show a test failing on purpose);
- ``# fragment``: not runnable alone; skipped, saying so.

A block with none of these fails, so no example is left out unnoticed.

A single-process test: it launches mpiexec itself, so it must not run under
mpiexec (the launcher's environment is stripped from the child's).
"""
import pathlib
import re
import sys

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(200)

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = [DOCS / "install.md", *sorted((DOCS / "guide").glob("*.md"))]
TIMEOUT_S = 120

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_RANKS = re.compile(r"^# ranks: (\d+)$")
_PYTEST = re.compile(r"^# pytest ranks: (\d+)$")
_EXPECT = re.compile(r"^# expect: (passed|failed)$")


def blocks(text):
    """(line number, code) of each ```python block of a Markdown page."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _FENCE.finditer(text)]


def how(code):
    """("run", ranks, None), ("pytest", ranks, expected outcome), ("fragment", 0, None) or
    ("unmarked", 0, None), from the block's first lines."""
    lines = code.splitlines() or [""]
    first = lines[0].strip()
    if first.startswith("# fragment"):
        return "fragment", 0, None
    m = _RANKS.match(first)
    if m:
        return "run", int(m.group(1)), None
    m = _PYTEST.match(first)
    if m:
        expect = _EXPECT.match(lines[1].strip()) if len(lines) > 1 else None
        return "pytest", int(m.group(1)), expect.group(1) if expect else None
    return "unmarked", 0, None


def _examples():
    found = []
    for page in PAGES:
        for line, code in blocks(page.read_text()):
            found.append(pytest.param(code, id=f"{page.relative_to(DOCS)}:{line}"))
    return found


_mpiexec = procutil.mpiexec
_clean_env = procutil.clean_env


def _command(ranks, argv):
    return argv if ranks == 1 else [_mpiexec(), "-n", str(ranks), *argv]


def test_the_guide_has_examples():
    assert len(_examples()) >= 8, [p.id for p in _examples()]


@pytest.mark.parametrize("code", _examples())
def test_example_runs(code, tmp_path):
    kind, ranks, expect = how(code)
    if kind == "fragment":
        pytest.skip("marked '# fragment': not runnable on its own")
    assert kind != "unmarked", ("a ```python block must start with '# ranks: N', '# pytest ranks: N' "
                                "or '# fragment' (docs/contributing.md):\n" + code)
    assert ranks >= 1, code
    if kind == "run":
        script = tmp_path / "example.py"
        script.write_text(code)
        cmd = _command(ranks, [sys.executable, str(script)])
        rc, out = procutil.run(cmd, env=_clean_env(), timeout=TIMEOUT_S, cwd=tmp_path)
        assert rc == 0, f"{' '.join(cmd)} exited {rc}:\n{out}"
        return
    assert expect in ("passed", "failed"), "a '# pytest ranks: N' block needs '# expect: passed|failed' next"
    script = tmp_path / "test_example.py"
    script.write_text(code)
    cmd = _command(ranks, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--with-mpi",
                           str(script)])
    rc, out = procutil.run(cmd, env=_clean_env(), timeout=TIMEOUT_S, cwd=tmp_path)
    if expect == "passed":
        assert rc == 0, f"{' '.join(cmd)} exited {rc}:\n{out}"
        assert re.search(r"\b1 passed\b", out), out
    else:
        assert rc != 0, f"{' '.join(cmd)} was to fail, and passed:\n{out}"
        assert re.search(r"\b1 failed\b", out), out


def test_unmarked_and_fragment_blocks_are_told_apart():
    page = "text\n```python\nprint(1)\n```\n\n```python\n# fragment: needs a peer\nx\n```\n"
    found = blocks(page)
    assert [line for line, _ in found] == [3, 7]
    assert how(found[0][1]) == ("unmarked", 0, None)
    assert how(found[1][1]) == ("fragment", 0, None)
    assert how("# pytest ranks: 2\n# expect: failed\n") == ("pytest", 2, "failed")
    assert how("# ranks: 3\nimport x\n") == ("run", 3, None)
