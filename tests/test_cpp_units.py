"""The engine's C++ unit tests (tests/cpp, doctest): built from the engine's
sources against the same UCX as the package, run, and every test case
passing. Skipped, saying why, without a C++ compiler, without doctest's
header (Debian: ``apt-get install doctest-dev``; or ``DOCTEST_INCLUDE=dir``
holding ``doctest/doctest.h``) or without UCX's headers."""
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = sorted((ROOT / "tests" / "cpp").glob("*.cc"))
# The engine's parts up to the control plane (not the data plane or the
# facade, which the Python suites drive).
NOT_LINKED = {"hixl.cc", "engine_impl.cc", "data_plane.cc"}

pytestmark = pytest.mark.timeout(600)


def _doctest_dir():
    for d in (os.environ.get("DOCTEST_INCLUDE"), "/usr/include", "/usr/local/include"):
        if d and (pathlib.Path(d) / "doctest" / "doctest.h").is_file():
            return d
    return None


def _ucx_dirs():
    """(include, lib) of the UCX the package is built on: UCX_HOME, else the libucx wheel."""
    home = os.environ.get("UCX_HOME")
    if home:
        return os.path.join(home, "include"), os.path.join(home, "lib")
    try:
        import libucx
    except ImportError:
        return None
    root = os.path.dirname(libucx.__file__)
    return os.path.join(root, "include"), os.path.join(root, "lib")


def test_engine_units(tmp_path):
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx or not (ROOT / "src" / "engine" / "control" / "control_plane.cc").is_file():
        pytest.skip("no C++ compiler on PATH, or no engine sources beside the tests")
    doctest = _doctest_dir()
    if doctest is None:
        pytest.skip("doctest.h not found (Debian: apt-get install doctest-dev; or set DOCTEST_INCLUDE)")
    ucx = _ucx_dirs()
    if ucx is None or not os.path.isfile(os.path.join(ucx[0], "ucp", "api", "ucp.h")):
        pytest.skip("UCX headers not found (the libucx wheel or UCX_HOME)")
    flags = ["-std=c++17", "-O1", "-g0", "-Wall", "-Werror", f"-I{ROOT / 'src' / 'engine'}",
             f"-I{ROOT / 'src' / 'include'}", f"-I{ucx[0]}", f"-I{doctest}"]
    sources = TESTS + sorted(p for p in (ROOT / "src" / "engine").glob("*/*.cc") if p.name not in NOT_LINKED)

    def compile_one(src):
        obj = tmp_path / f"{src.parent.name}_{src.stem}.o"
        return obj, subprocess.run([cxx, *flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True,
                                   timeout=500)
    with concurrent.futures.ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0)))) as pool:
        built = list(pool.map(compile_one, sources))
    for (_obj, r), src in zip(built, sources, strict=True):
        assert r.returncode == 0, f"{src}:\n{r.stderr[-6000:]}"
    exe = tmp_path / "engine_units"
    link = subprocess.run([cxx, *[str(o) for o, _ in built], f"-L{ucx[1]}", "-lucp", "-lucs", "-pthread", "-o",
                           str(exe)], capture_output=True, text=True, timeout=300)
    assert link.returncode == 0, link.stderr[-6000:]
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [ucx[1], os.environ.get("LD_LIBRARY_PATH")])))
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    cases = sum(len(re.findall(r"^TEST_CASE\(", t.read_text(), re.M)) for t in TESTS)
    m = re.search(r"test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed", out)
    assert m and int(m.group(1)) == int(m.group(2)) == cases and m.group(3) == "0", out[-3000:]
    assert "Status: SUCCESS" in out, out[-3000:]
