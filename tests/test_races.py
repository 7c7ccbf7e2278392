"""The race detector (hixl_rma.races): its activations, its reports, its
exit status, and the rules of its check.

Single-process tests: the multi-rank programs run under an mpiexec these
tests start (so they must not run under mpiexec themselves). The
RMARaceBench cases are scored by tools/ci/race_score.py (CI runs
``--check``); two of them run here as a smoke test of the scorer.
"""
import json
import pathlib
import subprocess
import sys

import pytest

from test_examples import _clean_env, _mpiexec

pytestmark = pytest.mark.timeout(240)

ROOT = pathlib.Path(__file__).resolve().parent.parent
RACY = ROOT / "examples" / "racy_halo.py"


def _run(args, n=2, env=None, timeout=120):
    e = _clean_env()
    e.pop("HIXL_RMA_CHECK", None)
    e.update(env or {})
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout)


def _line(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_check_races_reports_the_racy_example_and_exits_3():
    p = _run(["-m", "hixl_rma", "--check-races", str(RACY)])
    out = p.stdout + p.stderr
    assert p.returncode == 3, out
    put, load = _line(RACY, "win.Put(cells"), _line(RACY, "left_cell = ghost[0]  # the race")
    assert "RACE on window" in out and "rank 1's memory, bytes [0, 8)" in out, out
    assert f"Put by rank 0 at {RACY}:{put}" in out, out
    assert f"load by rank 1 at {RACY}:{load}" in out, out
    assert "unordered: rank 0's Put completed at event" in out and "(Fence)" in out, out
    assert "2 race(s), 0 warning(s)" in out, out  # each rank's ghost cell, each once


def test_fixed_example_is_silent():
    p = _run(["-m", "hixl_rma", "--check-races", str(RACY), "--fixed"])
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "0 race(s), 0 warning(s)" in out and "RACE" not in out, out


def test_json_report_keeps_going(tmp_path):
    report = tmp_path / "races.json"
    p = _run(["-m", "hixl_rma", "--check-races", "--races-json", str(report), str(RACY)])
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(report.read_text())
    assert rep["races"] == 2 and rep["warnings"] == 0
    r = rep["reports"][0]
    assert r["kind"] == "race" and r["scope"] == "target" and r["bytes"] == [0, 8]
    assert {r["a"]["call"], r["b"]["call"]} == {"Put", "load"}
    assert {r["a"]["rank"], r["b"]["rank"]} == {0, 1}


def test_environment_turns_it_on_for_a_plain_run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "from mpi4py import MPI\nimport numpy as np\nimport hixl_rma\n"
        "comm = MPI.COMM_WORLD\nbuf = np.zeros(4, np.int32)\n"
        "win = hixl_rma.Win.Create(buf, 4, comm=comm)\n"
        "print('checked' if type(win) is not hixl_rma.Win else 'plain')\n"
        "win.Fence()\nif comm.rank == 0:\n    win.Put(np.ones(1, np.int32), 1, 0)\n"
        "if comm.rank == 1:\n    buf[0] = 7\nwin.Fence()\nwin.Free()\n")
    p = _run([str(prog)], env={"HIXL_RMA_CHECK": "races"})
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "checked" in out and "store by rank 1 at" in out and "RACE" in out, out


def test_off_the_window_is_the_plain_class_and_nothing_is_reported(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "from mpi4py import MPI\nimport numpy as np\nimport hixl_rma, sys\n"
        "comm = MPI.COMM_WORLD\nbuf = np.zeros(4, np.int32)\n"
        "win = MPI.Win.Create(buf, 4, comm=comm)\n"
        "assert type(win) is hixl_rma.Win, type(win)\n"
        "assert type(MPI.COMM_WORLD) is MPI.Intracomm, type(MPI.COMM_WORLD)\n"
        "assert sys.gettrace() is None\n"
        "win.Fence()\nif comm.rank == 0:\n    win.Put(np.ones(1, np.int32), 1, 0)\n"
        "if comm.rank == 1:\n    buf[0] = 7\nwin.Fence()\nwin.Free()\nprint('ok')\n")
    p = _run(["-m", "hixl_rma", str(prog)])
    out = p.stdout + p.stderr
    assert p.returncode == 0 and out.count("ok") == 2 and "race" not in out, out


def test_pytest_plugin_fails_a_racy_session(tmp_path):
    test = tmp_path / "test_racy.py"
    test.write_text(
        "import numpy as np, pytest\nfrom mpi4py import MPI\nimport hixl_rma\n\n"
        "@pytest.mark.mpi(min_size=2)\ndef test_racy():\n"
        "    comm = MPI.COMM_WORLD\n    buf = np.zeros(4, np.int32)\n"
        "    win = hixl_rma.Win.Create(buf, 4, comm=comm)\n    win.Fence()\n"
        "    if comm.rank == 0:\n        win.Get(np.zeros(1, np.int32), 1, 0)\n"
        "    if comm.rank == 1:\n        buf[0] = 7\n    win.Fence()\n    win.Free()\n")
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--with-mpi", "--hixl-races", str(test)]
    racy = _run(args)
    out = racy.stdout + racy.stderr
    assert racy.returncode != 0, out
    assert "1 passed" in out and "RACE on window" in out and "Get by rank 0" in out, out
    plain = _run([*args[:-2], str(test)])
    assert plain.returncode == 0, plain.stdout + plain.stderr


def test_scorer_smoke():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "ci" / "race_score.py"), "--jobs", "1", "--check",
                        "--only", r"conflict/00[12]_"], cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
                       timeout=200)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "conflict/001_put_load_local_no" in out and " TN " in out and " TP " in out, out
    assert "all            2    1    1    0    0    0     1.000   1.000    1.000" in out, out


# ------------------------------------------------------------ the check's rules

def _rec(call, rank=0, op=None, dtype=None, blocks=((0, 4),), snap=(1, 1), done=None, actor=None):
    actor = rank * 8 if actor is None else actor
    return {"call": call, "rank": rank, "op": op, "dtype": dtype, "blocks": blocks, "snap": snap,
            "done": done, "done_actor": actor, "thread": actor, "file": "f.py", "line": 1, "done_call": None,
            "win": "w", "target": 1}


@pytest.fixture
def check():
    from hixl_rma.races import check as c
    c.THREADS = 8
    return c


def _snap(n=16, **known):
    s = [0] * n
    for k, v in known.items():
        s[int(k[1:])] = v
    return tuple(s)


def test_rules_accumulates(check):
    a = _rec("Accumulate", 0, "SUM", "<i4", snap=_snap())
    b = _rec("Accumulate", 2, "SUM", "<i4", snap=_snap())
    assert not check.conflicting(a, b)                                   # same op, same type: atomic
    assert check.conflicting(a, dict(b, dtype="<f4"))                    # different basic type
    assert check.conflicting(a, dict(b, op="MAX"))                       # different op
    assert not check.conflicting(a, dict(b, call="Get_accumulate", op="NO_OP"))  # same_op_no_op
    assert check.conflicting(dict(a, blocks=((0, 16),)), dict(b, blocks=((1, 17),)))  # unaligned ints


def test_rules_reads_and_order(check):
    get = _rec("Get", 0, snap=_snap(), done=3, actor=0)
    assert not check.conflicting(get, _rec("load", 1, snap=_snap()))      # two reads
    put = _rec("Put", 0, snap=_snap(), done=3, actor=0)
    load_after = _rec("load", 1, snap=_snap(s0=3), done=5, actor=8)
    load_before = _rec("load", 1, snap=_snap(s0=2), done=5, actor=8)
    assert not check.conflicting(put, load_after)                        # the load knew the Put's completion
    assert check.conflicting(put, load_before)
    assert check.conflicting(dict(put, done=None), load_after)           # never completed: precedes nothing


def test_races_reports_once_with_the_overlap(check):
    put = _rec("Put", 0, blocks=((0, 8),), snap=_snap(), done=3, actor=0)
    loads = [_rec("load", 1, blocks=((4, 12),), snap=_snap(), done=5 + i, actor=8) for i in range(3)]
    out = check.races([put, *loads], {"w": "win"})
    assert len(out) == 1
    r = out[0]
    assert r["bytes"] == [4, 8] and r["window"] == "win" and r["target"] == 1
    assert r["kind"] == "polling"  # one site's repeated loads racing a write


# ------------------------------------------- the record in C and in Python

# Put, Get and Flush of ndarrays (the record _record.pyx makes in C), in a
# loop, with one origin buffer stored into before its Flush, two Gets into one
# result buffer, and a Put racing a load at the target; ``--fixed``: flushed
# and ordered by barriers.
_RECORDED = """\
import sys
import numpy as np
from mpi4py import MPI
import hixl_rma

comm = MPI.COMM_WORLD
fixed = "--fixed" in sys.argv
mem = np.zeros(1024, np.uint8)
win = hixl_rma.Win.Create(mem, 1, comm=comm)
src = np.arange(16, dtype=np.uint8)
dst = np.zeros(8, np.uint8)
big = np.arange(512, dtype=np.uint8)
comm.Barrier()
if comm.rank == 0:
    win.Lock(1)
    for i in range(5):
        win.Put(src[:8], 1, 8 * (i % 2))
        if i == 4:
            win.Put(big, 1, 512)
        if fixed:
            win.Flush(1)
        src[0] = i
        big[3] = i
        win.Get(dst, 1, 32)
        if fixed:
            win.Flush(1)
        win.Get(dst, 1, 40)
        win.Flush(1)
    win.Unlock(1)
if fixed:
    comm.Barrier()
if comm.rank == 1:
    x = mem[3]
if not fixed:
    comm.Barrier()
win.Free()
"""


def _report(tmp_path, pure, fixed, program=None, name="recorded"):
    """The JSON report of ``program`` (_RECORDED) under the detector, the C
    record (pure "0") or the Python one ("1"), without addresses."""
    prog = tmp_path / f"{name}.py"
    prog.write_text(program or _RECORDED)
    out = tmp_path / f"{name}-{pure}-{fixed}.json"
    args = ["-m", "hixl_rma", "--check-races", "--races-json", str(out), str(prog)] + (["--fixed"] if fixed else [])
    p = _run(args, env={"HIXL_RMA_RACE_PURE": pure})
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    for r in rep["reports"]:
        r.pop("address", None)  # an origin buffer's: this process's
    return rep


# Fence epochs and atomics (recorded in C since the Fence and the atomics
# moved there), a Put at a (disp, count, datatype) target, a loop whose
# record grows over intervals. Only rank 0 issues atomics, so what each
# rank's clock learns, and so how its records grow, is the same in every
# run. Racy: a Put and a Get of the same bytes in one fence epoch, a Put
# and an Accumulate of the same bytes before a Flush, one result buffer of
# two Fetch_and_ops before a Flush; ``--fixed``: none.
_SYNCED = """\
import sys
import numpy as np
from mpi4py import MPI
import hixl_rma

comm = MPI.COMM_WORLD
fixed = "--fixed" in sys.argv
mem = np.zeros(64, np.int64)
win = hixl_rma.Win.Create(mem, 8, comm=comm)
one = np.ones(1, np.int64)
res = np.zeros(1, np.int64)
res2 = np.zeros(1, np.int64)
cmp_ = np.zeros(1, np.int64)
buf = np.arange(4, dtype=np.int64)
win.Fence()
if comm.rank == 0:
    win.Put(buf, 1, (0, 4, MPI.INT64_T))
    if not fixed:
        win.Get(res2, 1, 2)
win.Fence()
win.Lock_all()
if comm.rank == 0:
    for i in range(3):
        win.Fetch_and_op(one, res, 1, 8, MPI.SUM)
        win.Flush(1)
    win.Accumulate(one, 1, 9, MPI.SUM)
    if fixed:
        win.Flush(1)
    win.Put(buf[:1], 1, 9)
    win.Compare_and_swap(one, cmp_, res, 1, 10)
    win.Get_accumulate(one, res2, 1, 11, MPI.NO_OP)
    win.Flush(1)
    win.Fetch_and_op(one, res, 1, 12, MPI.SUM)
    if fixed:
        win.Flush(1)
    win.Fetch_and_op(one, res, 1, 13, MPI.SUM)
    win.Flush(1)
win.Unlock_all()
comm.Barrier()
win.Free()
"""


def _expect_recorded(c, fixed):
    if fixed:
        return
    scopes = {(r["scope"], r["a"]["call"], r["b"]["call"]) for r in c["reports"]}
    assert ("origin buffer", "Put", "store") in scopes, c    # src[0] = i, big[3] = i before the Flush
    assert ("origin buffer", "Get", "Get") in scopes, c      # two Gets into dst
    assert ("target", "Put", "load") in scopes, c            # the Put and rank 1's load
    # src's and big's stores, each seen by the line watch and by the checksum at the Flush
    assert sum(s[0] == "origin buffer" and s[2] == "store" for s in
               ((r["scope"], r["a"]["call"], r["b"]["call"]) for r in c["reports"])) == 4, c


def _expect_synced(c, fixed):
    if not fixed:
        pairs = {(r["scope"], r["a"]["call"], r["b"]["call"]) for r in c["reports"]}
        assert ("target", "Put", "Get") in pairs, c                                    # one fence epoch
        assert {("target", "Put", "Accumulate"), ("target", "Accumulate", "Put")} & pairs, c
        assert ("origin buffer", "Fetch_and_op", "Fetch_and_op") in pairs, c          # res twice, unflushed
        assert c["races"] == 3, c
    assert c["records"] == 8 + (not fixed), c  # the loop's three Fetch_and_ops: one record, grown


_PROGRAMS = {"puts": (_RECORDED, _expect_recorded), "fences_atomics": (_SYNCED, _expect_synced)}


@pytest.mark.parametrize("fixed", [False, True], ids=["racy", "race-free"])
@pytest.mark.parametrize("which", sorted(_PROGRAMS))
def test_c_and_python_records_report_the_same(tmp_path, which, fixed):
    pytest.importorskip("hixl_rma.races._record")
    program, expect = _PROGRAMS[which]
    c, py = _report(tmp_path, "0", fixed, program, which), _report(tmp_path, "1", fixed, program, which)
    assert c == py
    if fixed:
        assert c["races"] == 0 and c["warnings"] == 0, c
    expect(c, fixed)


def _race_free_on_own_window(tmp_path, pure, body):
    """The report of ``body`` run by each rank on a window of its own (``win``
    over ``mem``, four int64), which must find nothing."""
    prog = tmp_path / "own.py"
    prog.write_text("import numpy as np\nfrom mpi4py import MPI\nimport hixl_rma\n"
                    "comm = MPI.COMM_WORLD\nsub = comm.Split(comm.rank, 0)\n"
                    "mem = np.zeros(4, np.int64)\nwin = hixl_rma.Win.Create(mem, 8, comm=sub)\n"
                    + body + "win.Free()\n")
    out = tmp_path / "own.json"
    p = _run(["-m", "hixl_rma", "--check-races", "--races-json", str(out), str(prog)],
             env={"HIXL_RMA_RACE_PURE": pure})
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    assert rep["races"] == 0 and rep["warnings"] == 0, rep
    return rep


@pytest.mark.parametrize("pure", ["0", "1"], ids=["C", "Python"])
def test_a_record_does_not_grow_over_the_loads_between_its_accesses(tmp_path, pure):
    """A Put per fence epoch, its target read between them: the Put's
    record may not grow into one interval over those loads (it did, and the
    loads looked unordered with it); a Put+Flush loop's record does grow."""
    rep = _race_free_on_own_window(tmp_path, pure, "win.Fence()\n"
                                   "for e in range(5):\n    win.Put(np.full(4, e, np.int64), 0)\n    win.Fence()\n"
                                   "    assert mem[0] == e\n    win.Fence()\n"
                                   "win.Lock(0)\nsrc = np.ones(4, np.int64)\n"
                                   "for e in range(50):\n    win.Put(src, 0)\n    win.Flush(0)\n"
                                   "win.Unlock(0)\n")
    # per rank: 5 Put records and 5 loads (mem[0] == e), and the loop's 50 Puts in one record
    assert rep["records"] == 2 * (5 + 5 + 1), rep


_LOCALS = """\
import numpy as np
from mpi4py import MPI
import hixl_rma

comm = MPI.COMM_WORLD
win = hixl_rma.Win.Allocate(64, 8, comm=comm)


def outer():
    src = np.arange(4, dtype=np.int64)
    dst = np.zeros(2, np.int64)
    x = None

    def step(i):
        win.Put(src, 1, 0)
        src[0] = i  # CLOSURE: a store through a free variable before the Flush
        win.Flush(1)

    win.Lock_all()
    if comm.rank == 0:
        for i in range(3):
            step(i)
        win.Get(dst, 1, 4)
        x = dst[1]  # FAST: a load through a local before the Flush
        win.Flush(1)
        k = 1
        win.Get(dst, 1, 4)
        x = dst[k]  # BY NAME: a load of an element by a variable index
        win.Flush(1)
        win.Put(src, 1, 0)
        src[k] += 1  # AUGMENTED: a load and a store
        win.Flush(1)
        for i in range(3):
            win.Put(dst, 1, 6)
            if i == 1:
                np.copyto(dst, 7)  # UNSEEN: no name the watch reads; the checksum at the Flush sees it
            win.Flush(1)
    win.Unlock_all()
    return x


outer()
comm.Barrier()
win.Free()
"""


def _origin_buffer_races(tmp_path, name, text, pure):
    """(the program, its JSON report, {(call, local access, line)} of its
    origin-buffer races) of ``text`` run at -n 2 under --check-races."""
    prog = tmp_path / f"{name}.py"
    prog.write_text(text)
    out = tmp_path / f"{name}.json"
    p = _run(["-m", "hixl_rma", "--check-races", "--races-json", str(out), str(prog)],
             env={"HIXL_RMA_RACE_PURE": pure})
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    found = {(r["a"]["call"], r["b"]["call"], int(r["b"]["where"].rsplit(":", 1)[1])) for r in rep["reports"]
             if r["scope"] == "origin buffer"}
    return prog, rep, found


# Origins changed before their Flush by code the line watch does not watch,
# so that only the checksum can tell: sizes whose checksum the C record keeps
# in the use itself (the bytes up to 24, the packed word sum past 256), ones
# it keeps as a bytes object (25..256), a dtype it does not sum word by word
# (complex), each changed or not, one case per line; and one completed by
# Flush_local.
_BEHIND_SIZES = (8, 24, 25, 256, 257, 4096, 4099)
_BEHIND_PUTS = "\n".join(f"    win.Put(bufs[{i}], 1, 0); {f'poke(bufs[{i}])' if ch else 'pass'}; win.Flush(1)"
                         for ch in (False, True) for i in range(len(_BEHIND_SIZES) + 1))
_CHANGED_BEHIND = """\
import numpy as np
from mpi4py import MPI
import hixl_rma

comm = MPI.COMM_WORLD
win = hixl_rma.Win.Allocate(1 << 16, 1, comm=comm)
lib = {}
exec(compile("def poke(a):\\n    a.view(np.uint8)[-1] ^= 1\\n", "<library>", "exec"), {"np": np}, lib)
poke = lib["poke"]
bufs = [np.ones(n, np.uint8) for n in %r] + [np.ones(40, np.complex128)]
win.Lock_all()
if comm.rank == 0:
%s
    win.Put(bufs[5], 1, 0); poke(bufs[5]); win.Flush_local(1); win.Flush(1)
win.Unlock_all()
comm.Barrier()
win.Free()
""" % (_BEHIND_SIZES, _BEHIND_PUTS)  # noqa: UP031 (a program's text: %, so its braces stay as written)


@pytest.mark.parametrize("pure", ["0", "1"], ids=["C", "Python"])
def test_an_origin_changed_behind_the_line_watch_is_caught_by_its_checksum(tmp_path, pure):
    prog, rep, found = _origin_buffer_races(tmp_path, "behind", _CHANGED_BEHIND, pure)
    lines = prog.read_text().splitlines()
    changed = {i for i, t in enumerate(lines, 1) if "poke(bufs[" in t}
    assert len(changed) == len(_BEHIND_SIZES) + 2
    # each changed origin once, at its own line, seen by its checksum at its Flush (Flush_local for the last)
    assert sorted(line for _, _, line in found) == sorted(changed), (found, changed)
    assert {(a, b) for a, b, _ in found} == {("Put", "store")}, found
    whys = sorted(r["why"] for r in rep["reports"])
    assert all("seen by its checksum" in w for w in whys), whys
    assert sum("before Flush_local completed" in w for w in whys) == 1, whys
    assert rep["races"] == len(changed), rep


@pytest.mark.parametrize("pure", ["0", "1"], ids=["C", "Python"])
def test_the_line_watch_reads_a_function_s_locals_and_free_variables(tmp_path, pure):
    """The watch reads a function's locals and its closure's variables from
    the frame (the C trace function from their slots); the Put loop's buffer
    in use, taken again in each interval by the C record, still has its
    checksum taken at each Put."""
    prog, rep, found = _origin_buffer_races(tmp_path, "locals", _LOCALS, pure)
    assert ("Put", "store", _line(prog, "# CLOSURE")) in found, rep
    assert ("Get", "load", _line(prog, "# FAST")) in found, rep
    assert ("Get", "load", _line(prog, "# BY NAME")) in found, rep
    assert ("Put", "store", _line(prog, "# AUGMENTED")) in found, rep
    changed = [r for r in rep["reports"] if "seen by its checksum" in r["why"] and r["a"]["call"] == "Put"
               and r["a"]["where"].endswith(f":{_line(prog, 'win.Put(dst, 1, 6)')}")]
    assert len(changed) == 1, rep


def test_the_line_table_reads_subscripts_by_a_name_augmented_stores_and_slices():
    """What lines._table makes of a line (3.11's bytecode and 3.12+'s:
    BINARY_SLICE, 3.13's two-name superinstructions): an element by a
    variable index, a store to it, ``x[i] +=`` (a store), constant slices."""
    from hixl_rma.races import lines

    def f(a, i, v):
        x = a[i]
        a[i] = v
        a[i] += 1
        y = a[1:3]
        a[:2] = 0
        return x, y

    t = lines._table(f.__code__)
    first = f.__code__.co_firstlineno

    def entries(k):
        return {(e[0], e[2], e[3]) for e in t.get(first + k, ())}

    assert ("a", ("LOAD_FAST", "i"), False) in entries(1), t
    assert ("a", ("LOAD_FAST", "i"), True) in entries(2), t
    assert ("a", ("LOAD_FAST", "i"), True) in entries(3), t
    assert ("a", ("SLICE", (1, 3)), False) in entries(4), t
    assert ("a", ("SLICE", (None, 2)), True) in entries(5), t


_CALLED_FROM_LIBRARY = """\
import numpy as np
from mpi4py import MPI
import hixl_rma

comm = MPI.COMM_WORLD
win = hixl_rma.Win.Allocate(64, 8, comm=comm)
# code the watch does not watch (as hixl_rma's, numpy's or the standard library's)
LIB = '''
def each(f, n):
    for i in range(n):
        f(i)

def get(win, buf):
    win.Get(buf, 1, 0)

def drive(gen):
    for _ in gen:
        pass
'''
lib = {}
exec(compile(LIB, "<library>", "exec"), lib)
dst = np.zeros(4, np.int64)


def callback(i):
    if i == 150:
        win.Get(dst, 1, 0)
        x = dst[1]  # CALLBACK: a load before the Flush, in a callee of unwatched code
        win.Flush(1)


def steps():
    win.Get(dst, 1, 0)
    yield
    x = dst[3]  # GENERATOR: resumed by unwatched code
    yield
    win.Flush(1)


win.Lock_all()
if comm.rank == 0:
    lib["each"](callback, 200)
    lib["get"](win, dst)
    x = dst[2]  # RETURNED: the Get was an unwatched function's
    win.Flush(1)
    lib["drive"](steps())
win.Unlock_all()
win.Free()
"""


@pytest.mark.parametrize("pure", ["0", "1"], ids=["C", "Python"])
def test_watched_code_called_from_unwatched_code_is_watched(tmp_path, pure):
    """On 3.11 frames of code with nothing to watch run untraced (a frame
    evaluation function sets each frame's tracing): a watched function
    called from an unwatched loop (after the loop's call is specialized), a
    watched frame an unwatched call returned to, and a watched generator
    resumed by unwatched code are each still watched."""
    prog, rep, found = _origin_buffer_races(tmp_path, "called", _CALLED_FROM_LIBRARY, pure)
    for mark in ("# CALLBACK", "# RETURNED", "# GENERATOR"):
        assert ("Get", "load", _line(prog, mark)) in found, (mark, rep)


def test_the_frame_hook_is_on_where_it_can_be():
    """CPython 3.11 runs the frames of unwatched code untraced; other versions trace every frame."""
    lt = pytest.importorskip("hixl_rma.races._linetrace")
    assert lt.hooks() == (sys.version_info[:2] == (3, 11))


@pytest.mark.parametrize("pure", ["0", "1"], ids=["C", "Python"])
def test_a_record_grows_over_other_records_of_other_bytes_only(tmp_path, pure):
    """Two Puts of other bytes in each interval: each one's record grows
    over the other's accesses (one record each, not one per interval); a
    Put and a Get of the same bytes, each flushed: the Get's access between
    two of the Put's ends the Put's record, and the other way round."""
    rep = _race_free_on_own_window(
        tmp_path, pure, "a, b, c = np.ones(1, np.int64), np.full(1, 2, np.int64), np.zeros(1, np.int64)\n"
        "win.Lock(0)\n"
        "for e in range(20):\n    win.Put(a, 0, 0)\n    win.Put(b, 0, 1)\n    win.Flush(0)\n"
        "for e in range(20):\n    win.Put(a, 0, 2)\n    win.Flush(0)\n    win.Get(c, 0, 2)\n    win.Flush(0)\n"
        "win.Unlock(0)\nassert list(mem[:3]) == [1, 2, 1]\n")
    # per rank: the first loop's two records, grown; the second loop's 20 Puts and 20 Gets; the load at the end
    assert rep["records"] == 2 * (2 + 20 + 20 + 1), rep


class _Rec:
    """What Log.touched reads of a record."""

    def __init__(self, win, target, blocks):
        self.win, self.target, self.blocks, self.touched = win, target, blocks, 0


def _touched_kinds():
    from hixl_rma.races import log
    kinds = [pytest.param((log._PyTouched, _Rec), id="Python")]
    try:
        from hixl_rma.races import _record
    except ImportError:
        return kinds

    def make(win, target, blocks):
        r = _record.AccessFields()
        r.win, r.target, r.blocks = win, target, blocks
        return r
    return [*kinds, pytest.param((_record.Touched, make), id="C")]


@pytest.mark.parametrize("kind", _touched_kinds())
def test_touched_tells_whether_other_records_took_a_record_s_bytes(kind):
    cls, make = kind
    t = cls()
    a, b = make("w", 1, ((0, 8),)), make("w", 1, ((8, 16),))
    big, other = make("w", 1, ((0, 1 << 25),)), make("w", 2, ((0, 8),))
    t.touch(a)
    t.touch(b)
    t.touch(other)
    assert t.last is other and not t.since(a) and not t.since(b)  # other bytes, another target
    t.touch(big)
    assert t.since(a) and t.since(b) and not t.since(big)  # a window-long block over both
    t.touch(a)
    assert not t.since(a) and t.since(big) and t.since(b)
    # many small blocks beside a long one: each tells its own news only
    smalls = [make("w", 1, ((8192 * i, 8192 * i + 4096),)) for i in range(64)]
    for r in smalls:
        t.touch(r)
    assert not any(t.since(r) for r in smalls)
    t.touch(make("w", 1, ((8192 * 10 + 4000, 8192 * 10 + 4100),)))
    assert [i for i, r in enumerate(smalls) if t.since(r)] == [10]
    t.forget("w")
    assert not t.since(a) and not t.since(big) and not t.since(other)


def test_a_block_s_place_answers_as_the_walk_from_the_root():
    rec = pytest.importorskip("hixl_rma.races._record")
    import random
    rng = random.Random(3)
    touches = []
    for _ in range(400):
        size = rng.choice((1, 8, 64, 4096, 5000, 1 << 20))
        lo = rng.randrange(0, 1 << 21)
        touches.append((lo, lo + size))
    touches += touches[:50]  # the same blocks again, later
    touches += [(8192 * i, 8192 * i + 4096) for i in range(100)]  # a loop over blocks
    queries = [(i, seq) for i in range(len(touches)) for seq in (0, i, i + 1, len(touches) // 2, len(touches))]
    answers = rec._since_both(touches, queries)
    assert all(a == b for a, b in answers), [q for q, (a, b) in zip(queries, answers, strict=True) if a != b][:5]
    assert any(a for a, _ in answers) and not all(a for a, _ in answers)


def test_uses_find_the_overlapping_buffers_in_any_order():
    rec = pytest.importorskip("hixl_rma.races._record")
    import random

    from hixl_rma.races.detector import LocalUse

    def use(lo, hi):
        return LocalUse("w", 1, lo, hi, False, None, None, None, "Put", None)

    def brute(items, a, b):
        return [u for u in items if u.lo < b and a < u.hi]

    rng = random.Random(7)
    u = rec.Uses()
    # a loop over blocks in address order: every next one past the hull, no index made
    items = [use(8192 * i, 8192 * i + 4096) for i in range(40)]
    for x in items:
        assert u.overlapping(x.lo, x.hi) == []
        u.append(x)
    # queries inside the hull (the index is made then), then appends in any order
    for a, b in ((0, 1), (4095, 4097), (4096, 8192), (8191, 8193), (100, 300000), (8192 * 39 + 4095, 1 << 40)):
        assert u.overlapping(a, b) == brute(items, a, b), (a, b)
    for _ in range(200):
        lo = rng.randrange(0, 8192 * 45)
        x = use(lo, lo + rng.choice((1, 8, 4096, 20000)))
        assert u.overlapping(x.lo, x.hi) == brute(items, x.lo, x.hi), (x.lo, x.hi)
        u.append(x)
        items.append(x)
    assert list(u) == items
    # a few, looked through; then none
    u.replace(items[:5])
    assert u.overlapping(0, 1 << 40) == items[:5] and u.overlapping(8192 * 2 + 4096, 8192 * 3) == []
    u.replace([])
    assert not u and u.overlapping(0, 1 << 40) == []


def test_an_atomic_with_a_bad_rank_names_the_window_not_the_clocks(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text(
        "import numpy as np\nfrom mpi4py import MPI\nimport hixl_rma\n"
        "win = hixl_rma.Win.Allocate(64, 8, comm=MPI.COMM_WORLD)\n"
        "one, res = np.ones(1, np.int64), np.zeros(1, np.int64)\nwin.Lock_all()\n"
        "for rank in (5, -3):\n"
        "    try:\n        win.Fetch_and_op(one, res, rank, 0)\n    except MPI.Exception as e:\n"
        "        print('error:', e)\n"
        "win.Unlock_all()\nwin.Free()\n"
        "try:\n    win.Fence()\nexcept MPI.Exception as e:\n    print('error:', e)\n")
    for pure in ("0", "1"):
        p = _run(["-m", "hixl_rma", "--check-races", str(prog)], n=1, env={"HIXL_RMA_RACE_PURE": pure})
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert "error: Fetch_and_op on window w0.0: rank 5 is out of range" in out, out
        assert "error: Fetch_and_op on window w0.0: rank -3 is out of range" in out, out
        assert "error: Fence: window w0.0 has been freed" in out, out
        assert "w1.0" not in out, out  # the clock window


def test_c_record_is_the_one_used_when_built(tmp_path):
    rec = pytest.importorskip("hixl_rma.races._record")
    prog = tmp_path / "which.py"
    prog.write_text(
        "import os\nfrom mpi4py import MPI\nimport numpy as np\nimport hixl_rma\n"
        "from hixl_rma.races import _ext, log, clock, detector\n"
        "win = hixl_rma.Win.Create(np.zeros(8, np.uint8), 1, comm=MPI.COMM_WORLD)\n"
        "c = _ext.record is not None\n"
        "assert c == (os.environ['HIXL_RMA_RACE_PURE'] == '0')\n"
        "assert issubclass(log.Access, _ext.record.AccessFields) if c else log.Access.__bases__ == (object,)\n"
        "assert (clock.Clock is _ext.record.Clock) if c else clock.Clock is clock._PyClock\n"
        "assert (type(win).Put.__module__ == 'hixl_rma.races._record') == c, type(win).Put\n"
        "print('C' if c else 'Python')\nwin.Free()\n")
    for pure, which in (("0", "C"), ("1", "Python")):
        p = _run(["-m", "hixl_rma", "--check-races", str(prog)], n=1, env={"HIXL_RMA_RACE_PURE": pure})
        assert p.returncode == 0 and which in p.stdout, p.stdout + p.stderr
    assert rec.__file__.endswith(".so")


def test_c_checksum_is_detector_checksum():
    rec = pytest.importorskip("hixl_rma.races._record")
    import numpy as np

    from hixl_rma.races.detector import checksum
    rng = np.random.default_rng(1)
    for obj in (np.zeros(0, np.uint8), np.arange(8, dtype=np.uint8), rng.random(32), rng.random(33),
                rng.random((10, 10))[:, ::2], np.zeros(300, "M8[s]"), np.zeros(100, ">i4"), rng.random(100) + 1j,
                np.zeros(100, [("a", "i4"), ("b", "f8")]), np.asfortranarray(rng.random((20, 20))),
                rng.random(1001)[1:], bytearray(300), np.zeros(100, np.float16), np.arange(3, dtype=np.uint8),
                np.array([1.5]), np.arange(4, dtype=np.uint8)[::2], bytearray(b"\x01\x02\x03\x04\x05")):
        assert rec._checksum_of(obj) == checksum(obj), obj
    # up to 256 bytes the checksum is the bytes: any change of one shows
    small = np.arange(256, dtype=np.uint8)
    seen = {checksum(small)}
    for i in range(256):
        small[i] ^= 0x80
        seen.add(checksum(small))
        assert rec._checksum_of(small) == checksum(small)
    assert len(seen) == 257 and checksum(np.array([0x0102], "<u2")) == b"\x02\x01"
    # past 256 bytes: the vector word sum's blocks of 16 words, its leftover words and the crc32 tail
    for n in (257, 264, 384, 1000, 4096, 4096 + 8 * 15 + 7, 65536 + 3):
        obj = rng.integers(0, 256, n, dtype=np.uint8)
        assert rec._checksum_of(obj) == checksum(obj), n
        assert rec.fast_checksum(obj, None) == checksum(obj), n  # the C path: no slow function to call
        obj[n // 2] ^= 1
        assert rec._checksum_of(obj) == checksum(obj), n
