"""The race detector under deep recursion: a program that plain Python runs
(a pure-Python recursion 100,000 deep, the recursion limit raised) runs the
same under ``--check-races``, in the main thread and in threads, and the
line watch still sees its lines at any depth.

On 3.11 the line watch runs frames of unwatched code untraced through a
frame evaluation function, which makes each Python call a C call: without
a bound on that, such a recursion overflowed the C stack (SIGSEGV).
Single-process tests: the programs run under an mpiexec these tests start.
"""
import json

import pytest

from test_races import _line, _run

pytestmark = pytest.mark.timeout(300)

_DEPTH = 100_000

# down(): the program's own code, watched (its lines name n); lib_down():
# code the watch does not watch (as a library's), which 3.11 runs untraced.
_DEEP = """\
import sys
import threading
from mpi4py import MPI
import hixl_rma

sys.setrecursionlimit(120_000)
DEPTH = %d


def down(n):
    if n == 0:
        bottom.append(lt.hooked() if lt else None)
        return 0
    return down(n - 1) + 1


bottom = []
lib = {}
exec(compile("def lib_down(n):\\n    return lib_down(n - 1) + 1 if n else 0\\n", "<library>", "exec"), lib)
lib_down = lib["lib_down"]
win = hixl_rma.Win.Allocate(64, 8, comm=MPI.COMM_WORLD)
lt = None  # 3.11 under the detector: its frame hook
if sys.version_info[:2] == (3, 11) and getattr(sys.modules.get("hixl_rma.races"), "ACTIVE", None) is not None:
    from hixl_rma.races import _linetrace as lt


def both():
    return down(DEPTH), lib_down(DEPTH)


assert both() == (DEPTH, DEPTH)
print("main ok", flush=True)
for size in (0, 1 << 18):  # the default stack, and a small one (plain Python needs next to none)
    threading.stack_size(size)
    out = []
    t = threading.Thread(target=lambda: out.append(both()))
    t.start()
    t.join(120)
    assert out == [(DEPTH, DEPTH)], (size, out)
    print("thread ok", size, flush=True)
threading.stack_size(0)
# 3.11: the frame hook was set aside at each recursion's bottom, and is back now that they have unwound
assert bottom == [False if lt else None] * 3, bottom
assert lt is None or lt.hooked(), "the frame hook was not put back"
win.Free()
print("done", flush=True)
""" % _DEPTH  # noqa: UP031 (a program's text: %, so its braces stay as written)


def test_a_recursion_100000_deep_runs_as_in_plain_python(tmp_path):
    prog = tmp_path / "deep.py"
    prog.write_text(_DEEP)
    plain = _run([str(prog)], n=1, timeout=240)
    assert plain.returncode == 0 and "done" in plain.stdout, plain.stdout + plain.stderr
    p = _run(["-m", "hixl_rma", "--check-races", str(prog)], n=1, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "main ok" in out and "thread ok 0" in out and f"thread ok {1 << 18}" in out and "done" in out, out
    assert "0 race(s), 0 warning(s)" in out, out


# Loads of a Get's result buffer before its Flush, each a race: at the
# bottom of the program's own recursion (DEEP), in a callback at the bottom
# of a library's (LIB), after they have unwound (SHALLOW), and in a callback
# a library's loop in another thread calls while the main thread is at its
# deepest (THREAD: on 3.11 that loop ran untraced until then).
_RACY_DEEP = """\
import sys
import threading
import time
import numpy as np
from mpi4py import MPI
import hixl_rma

sys.setrecursionlimit(120_000)
DEPTH = %d
win = hixl_rma.Win.Allocate(64, 8, comm=MPI.COMM_WORLD)
dst = np.zeros(4, np.int64)
tdst = np.zeros(4, np.int64)
LIB = '''
def lib_down(n, f):
    return f() if n == 0 else lib_down(n - 1, f)

def poll_then_call(flag, f, deadline):
    # it polls (no Event.wait) so that this frame runs, not waits in a call, as the main thread goes deep
    while not flag and time.monotonic() < deadline:
        time.sleep(0.001)
    f()
'''
lib = {"time": time}
exec(compile(LIB, "<library>", "exec"), lib)
deep, done, failed = [], threading.Event(), []


def down(n):
    if n == 0:
        x = dst[1]  # DEEP
        deep.append(True)  # the thread's loop calls its callback now (whose Flush completes the Get above)
        assert done.wait(60), "the thread's callback did not run"
        return x
    return down(n - 1)


def at_bottom():
    return dst[2]  # LIB


def in_thread():
    try:
        win.Get(tdst, 0, 4)
        x = tdst[2]  # THREAD
        win.Flush(0)
    except BaseException as e:
        failed.append(e)
    done.set()


win.Lock_all()
t = threading.Thread(target=lib["poll_then_call"], args=(deep, in_thread, time.monotonic() + 60))
t.start()
win.Get(dst, 0, 0)
down(DEPTH)
win.Flush(0)
t.join(60)
assert not t.is_alive() and not failed, failed
win.Get(dst, 0, 0)
lib["lib_down"](DEPTH, at_bottom)
win.Flush(0)
win.Get(dst, 0, 0)
x = dst[3]  # SHALLOW
win.Flush(0)
win.Unlock_all()
win.Free()
print("done", flush=True)
""" % _DEPTH  # noqa: UP031 (a program's text: %, so its braces stay as written)


def test_a_racy_line_deep_in_a_recursion_is_found(tmp_path):
    prog = tmp_path / "racy_deep.py"
    prog.write_text(_RACY_DEEP)
    report = tmp_path / "races.json"
    p = _run(["-m", "hixl_rma", "--check-races", "--races-json", str(report), str(prog)], n=1, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "done" in out, out
    rep = json.loads(report.read_text())
    found = {(r["a"]["call"], r["b"]["call"], int(r["b"]["where"].rsplit(":", 1)[1])) for r in rep["reports"]
             if r["scope"] == "origin buffer"}
    assert found == {("Get", "load", _line(prog, f"# {mark}")) for mark in ("DEEP", "LIB", "THREAD", "SHALLOW")}, rep
    assert rep["races"] == 4, rep

