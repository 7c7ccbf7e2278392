"""The engine's C++ unit tests (tests/cpp, doctest): built from the engine's
sources against the same UCX as the package, run, and every test case
passing. Skipped, saying why, without a C++ compiler, without doctest's
header (Debian: ``apt-get install doctest-dev``; or ``DOCTEST_INCLUDE=dir``
holding ``doctest/doctest.h``) or without UCX's headers."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "cpp" / "engine_units.cc"
# The engine's parts the tests use, and what those parts need to link; not
# the planes, the facade or the options.
SOURCES = ["detached", "peer", "copy", "share", "status", "auth", "wire", "ucx_raii", "ucx_env", "telemetry",
           "cma", "fault_filter"]

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
    if not cxx or not (ROOT / "src" / "engine" / "detached.cc").is_file():
        pytest.skip("no C++ compiler on PATH, or no engine sources beside the tests")
    doctest = _doctest_dir()
    if doctest is None:
        pytest.skip("doctest.h not found (Debian: apt-get install doctest-dev; or set DOCTEST_INCLUDE)")
    ucx = _ucx_dirs()
    if ucx is None or not os.path.isfile(os.path.join(ucx[0], "ucp", "api", "ucp.h")):
        pytest.skip("UCX headers not found (the libucx wheel or UCX_HOME)")
    exe = tmp_path / "engine_units"
    cmd = [cxx, "-std=c++17", "-O1", "-g0", "-Wall", "-Werror", f"-I{ROOT / 'src' / 'engine'}",
           f"-I{ROOT / 'src' / 'include'}", f"-I{ucx[0]}", f"-I{doctest}", str(TESTS),
           *[str(ROOT / "src" / "engine" / f"{s}.cc") for s in SOURCES],
           f"-L{ucx[1]}", "-lucp", "-lucs", "-pthread", "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    assert build.returncode == 0, build.stderr[-6000:]
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [ucx[1], os.environ.get("LD_LIBRARY_PATH")])))
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    cases = len(re.findall(r"^TEST_CASE\(", TESTS.read_text(), re.M))
    m = re.search(r"test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed", out)
    assert m and int(m.group(1)) == int(m.group(2)) == cases and m.group(3) == "0", out[-3000:]
    assert "Status: SUCCESS" in out, out[-3000:]
