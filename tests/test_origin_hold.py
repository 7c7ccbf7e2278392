"""A Put's origin stays exported exactly as long as the engine may read it,
on both same-node engine paths: through UCX (HIXL_RMA_CMA=0) the export is
held until the Flush (a bytearray origin refuses to resize), through the
engine's own cma the Put is complete when it returns (nothing is held, the
target has the bytes before any Flush). numpy's own arrays, taken
without an export, are held (referenced) instead."""
import json
import sys
import textwrap

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(120)

PROG = textwrap.dedent(r'''
    import json, sys
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    mem = np.zeros(1 << 16, np.uint8)
    win = hixl_rma.Win.Create(mem, comm=comm)
    out = {}
    if rank == 0:
        origin = bytearray(b"\x07" * (1 << 16))
        win.Lock(1)
        win.Put(bytes(1), 1)
        win.Flush(1)
        # numpy's own arrays, which the hot path reads without an export: a
        # temporary one stays alive until the Flush (the arrays made meanwhile
        # would take its memory), one the engine reads refuses to resize
        win.Put(np.full(1 << 16, 9, np.uint8), 1)
        out["np_in_flight"] = win._core.is_dirty(1)
        junk = [np.full(1 << 16, 1, np.uint8) for _ in range(8)]
        win.Flush(1)
        del junk
        check = np.zeros(1 << 16, np.uint8)
        win.Get(check, 1)
        win.Flush(1)
        out["np_delivered"] = bool((check == 9).all())
        a = np.full(1 << 16, 9, np.uint8)
        win.Put(a, 1)
        try:
            a.resize(1 << 17)
            out["np_resized"] = True
        except ValueError:
            out["np_resized"] = False
        win.Flush(1)
        a.resize(1 << 17)  # completed: nothing refers to it any more
        for hot in (True, False):
            # the hot path's Put (a bytearray), then the slow path's (a memoryview slice of it)
            win.Put(origin if hot else memoryview(origin)[: 1 << 16], 1)
            key = "hot" if hot else "slow"
            out[key + "_in_flight"] = win._core.is_dirty(1)
            try:
                origin.extend(b"\x01")
                del origin[-1:]
                out[key + "_resized"] = True
            except BufferError:
                out[key + "_resized"] = False
            win.Flush(1)
        win.Unlock(1)
    comm.Barrier()
    if rank == 1:
        out["target_ok"] = bool((mem == 7).all())
    win.Free()
    with open(f"{sys.argv[1]}/r{rank}.json", "w") as f:
        json.dump(out, f)
''')


@pytest.mark.parametrize("cma", ["0", "1"])
def test_origin_export_follows_the_engine_path(tmp_path, cma):
    prog = tmp_path / "prog.py"
    prog.write_text(PROG)
    env = dict(__import__("os").environ, HIXL_RMA_CMA=cma)
    rc, out = procutil.run(["mpiexec", "-n", "2", sys.executable, str(prog), str(tmp_path)], env, 90)
    assert rc == 0, out
    r0 = json.loads((tmp_path / "r0.json").read_text())
    r1 = json.loads((tmp_path / "r1.json").read_text())
    assert r1["target_ok"], (r1, out)
    assert r0["np_delivered"], r0
    assert r0["np_in_flight"] is (cma == "0") and r0["np_resized"] is (cma == "1"), r0
    for path in ("hot", "slow"):
        if cma == "0":
            # UCX reads the origin until the Flush: the export is held.
            assert r0[f"{path}_in_flight"] and not r0[f"{path}_resized"], r0
        else:
            # The engine's cma call completed the Put: nothing is held.
            assert not r0[f"{path}_in_flight"] and r0[f"{path}_resized"], r0
