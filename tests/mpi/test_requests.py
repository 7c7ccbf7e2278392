"""RMA requests have every name of mpi4py's ``MPI.Request`` that applies to
them, the lowercase forms included (``req.wait()``, ``Request.waitall``),
with mpi4py's return shapes; the list forms take hixl_rma's requests and
mpi4py's own mixed, also through the drop-in's ``MPI.Request``.
"""
import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import Request, Win, dropin
from hixl_rma.ground.errors import UnsupportedError

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=1), pytest.mark.timeout(60)]

# What mpi4py's Request has that hixl_rma's need not: nothing. (Prequest's
# Start is a subclass's, not Request's.)
NOT_APPLICABLE = set()


def _public(cls):
    return {n for n in dir(cls) if not n.startswith("_")}


def test_every_name_of_mpi4py_request_is_there():
    missing = _public(dropin.original("Request")) - _public(Request) - NOT_APPLICABLE
    assert not missing, f"hixl_rma.Request lacks {sorted(missing)}"


def test_the_drop_in_request_class_has_every_list_form():
    """Every classmethod of mpi4py's Request taking a list is a list form the
    drop-in replaces (a new one in a later mpi4py shows here)."""
    base = dropin.original("Request")
    list_forms = {n for n in _public(base) if n.lower().startswith(("wait", "test", "get_status_"))
                  and n.lower() not in ("wait", "test")}
    assert list_forms == set(dropin.LIST_FORMS)


def _window(comm):
    buf = np.zeros(16, np.int64)
    return Win.Create(buf, 8, comm=comm), buf


@pytest.mark.core
def test_lowercase_methods_return_what_mpi4py_returns(comm, rank, left, right):
    win, buf = _window(comm)
    win.Lock_all()
    req = win.Rput(pattern(1, rank), right, 0)
    assert req.wait() is None and not req
    assert req.test() == (True, None)
    st = MPI.Status()
    req = win.Rget(np.zeros(1, np.int64), right, 0)
    flag, obj = req.test(st)
    while not flag:
        flag, obj = req.test(st)
    assert obj is None and st.Get_source() == MPI.ANY_SOURCE and st.Get_tag() == MPI.ANY_TAG
    assert st.Get_count(MPI.BYTE) == 0
    assert req.get_status() is True and req.Get_status() is True
    reqs = [win.Rput(pattern(1, rank, salt=i), right, 1 + i) for i in range(3)]
    assert Request.waitall(reqs) == [None, None, None] and not any(reqs)
    assert Request.testall(reqs) == (True, [None, None, None])
    assert Request.waitany(reqs) == (MPI.UNDEFINED, None)           # none pending
    assert Request.testany(reqs) == (MPI.UNDEFINED, True, None)
    assert Request.waitsome(reqs) == (None, None)
    assert Request.testsome(reqs) == (None, None)
    assert Request.get_status_all(reqs) is True
    assert Request.get_status_any(reqs) == (MPI.UNDEFINED, True)
    assert Request.get_status_some(reqs) is None
    reqs = [win.Rput(pattern(1, rank, salt=4 + i), right, 4 + i) for i in range(3)]
    done = set()
    while len(done) < 3:
        got, objs = Request.waitsome(reqs)
        assert got and objs == [None] * len(got) and not set(got) & done
        done |= set(got)
    index, obj = Request.waitany([win.Rget(np.zeros(1, np.int64), right, 0)])
    assert (index, obj) == (0, None)
    req = win.Raccumulate(np.ones(1, np.int64), right, 8, hixl_rma.SUM)
    req.free()
    req.cancel()
    win.Unlock_all()
    barrier(comm)
    got = buf.copy()
    win.Free()
    expect = [pattern(1, left)[0]] + [pattern(1, left, salt=i)[0] for i in (0, 1, 2, 4, 5, 6)] + [0]
    np.testing.assert_array_equal(got[:8], expect)
    assert got[8] == 1


def test_mixed_lists_and_the_drop_in_class(comm, rank, right):
    """mpi4py's point-to-point requests and ours in one list, through
    hixl_rma.Request and through the drop-in's MPI.Request."""
    win, _ = _window(comm)
    win.Lock_all()
    dropin.install()
    try:
        mixed_cls = MPI.Request
        for cls in (Request, mixed_cls):
            out, inn = np.ones(1), np.zeros(1)
            recv = comm.Irecv(inn, source=rank, tag=7)
            send = comm.Isend(out, dest=rank, tag=7)
            reqs = [win.Rput(pattern(1, rank), right, 0), send, recv]
            assert cls.waitall(reqs) == [None, None, None]
            assert inn[0] == 1.0
            recv = comm.Irecv(inn, source=rank, tag=8)
            send = comm.Isend(out, dest=rank, tag=8)
            assert sorted(cls.Waitsome([win.Rget(np.zeros(1, np.int64), right, 1), send, recv]) or []) != []
            cls.Waitall([send, recv])
            assert isinstance(win.Rput(pattern(1, rank), right, 2), mixed_cls)
        # lists of mpi4py's requests alone keep mpi4py's answers
        assert mixed_cls.testany([MPI.REQUEST_NULL]) == MPI.Request.testany([MPI.REQUEST_NULL])
    finally:
        dropin.uninstall()
    win.Unlock_all()
    win.Free()


def test_handles_are_refused_as_for_windows():
    req = Request.completed()
    for call in (req.py2f, req.toint, lambda: req.handle, lambda: Request.f2py(0),
                 lambda: Request.fromhandle(0), lambda: Request.fromint(0)):
        with pytest.raises(UnsupportedError, match="RMA request"):
            call()
    with pytest.raises(TypeError, match="sequence of requests"):
        Request.waitall(5)
