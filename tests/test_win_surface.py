"""hixl_rma.Win offers every name of mpi4py's MPI.Win; the few that cannot
apply raise UnsupportedError (also a NotImplementedError) with a reason,
never AttributeError."""
import pickle

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma.win import WIN_NULL

pytestmark = pytest.mark.timeout(60)

UNSUPPORTED = ["Create_errhandler", "py2f", "f2py", "fromhandle", "toint", "fromint"]


def test_every_mpi4py_win_name_exists():
    missing = [n for n in dir(MPI.Win) if not n.startswith("_") and not hasattr(hixl_rma.Win, n)]
    assert missing == []


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_methods_say_why(name):
    hixl_rma.Init()
    with hixl_rma.Win.Allocate(8) as win:
        fn = getattr(win, name)
        args = {"Create_errhandler": (print,), "f2py": (1,), "fromhandle": (1,), "fromint": (1,)}.get(name, ())
        with pytest.raises(hixl_rma.UnsupportedError, match=name) as err:
            fn(*args)
        assert err.value.status == hixl_rma.UNSUPPORTED and len(str(err.value)) > len(name) + 20
        assert isinstance(err.value, NotImplementedError)
        assert err.value.Get_error_class() == MPI.ERR_UNSUPPORTED_OPERATION
        with pytest.raises(hixl_rma.UnsupportedError, match="handle"):
            _ = win.handle


def test_user_attributes_and_delete_callback():
    hixl_rma.Init()
    deleted = []
    key = hixl_rma.Win.Create_keyval(delete_fn=lambda w, k, v: deleted.append((k, v)))
    win = hixl_rma.Win.Allocate(16, 8)
    other = hixl_rma.Win.Allocate(8)
    try:
        assert win.Get_attr(key) is None  # unset, as mpi4py
        win.Set_attr(key, "first")
        assert win.Get_attr(key) == "first" and other.Get_attr(key) is None
        win.Set_attr(key, "second")  # the old value is deleted first
        assert deleted == [(key, "first")] and win.Get_attr(key) == "second"
        win.Delete_attr(key)
        assert deleted[-1] == (key, "second") and win.Get_attr(key) is None
        with pytest.raises(hixl_rma.ParamError, match="no attribute") as err:
            win.Delete_attr(key)
        assert err.value.Get_error_class() == MPI.ERR_KEYVAL
        win.Set_attr(key, 3)
        assert win.Get_attr(MPI.WIN_SIZE) == 16 and win.Get_attr(MPI.WIN_DISP_UNIT) == 8
        with pytest.raises(hixl_rma.ParamError, match="predefined"):
            win.Set_attr(MPI.WIN_SIZE, 1)
    finally:
        win.Free()
        other.Free()
    assert deleted[-1] == (key, 3)  # Free deletes the attributes
    assert hixl_rma.Win.Free_keyval(key) == MPI.KEYVAL_INVALID
    with pytest.raises(hixl_rma.ParamError, match=r"not made by Win\.Create_keyval"):
        hixl_rma.Win.Free_keyval(key)


def test_null_windows_aliases_and_pickling():
    hixl_rma.Init()
    null = hixl_rma.Win()
    assert not null and null == WIN_NULL and null is not WIN_NULL
    assert WIN_NULL.Get_name() == "MPI_WIN_NULL" and memoryview(null).nbytes == 0
    with pytest.raises(TypeError):
        hixl_rma.Win((1, 2, 3))
    win = hixl_rma.Win.Allocate(8)
    alias = hixl_rma.Win(win)
    assert alias == win and alias is not win and win != WIN_NULL and bool(alias)
    memoryview(alias)[:] = b"abcdefgh"  # one window: the same memory
    assert bytes(win.tomemory()) == b"abcdefgh"
    with pytest.raises(ValueError):
        pickle.dumps(win)
    alias.Free()
    assert not win and win == WIN_NULL  # freed through the alias
    with pytest.raises(hixl_rma.ParamError, match="has been freed") as err:
        win.Free()
    assert isinstance(err.value, MPI.Exception) and err.value.Get_error_class() == MPI.ERR_WIN
    win.free()  # mpi4py's free: only if not null


def test_one_core_per_window_shared_by_aliases():
    """A window's state has one owner (its core); the parts are composed, not
    mixed in, and an alias reaches the same core and parts, so a lock or an
    exposure epoch opened through one handle is seen through the other."""
    from hixl_rma.window import core
    assert hixl_rma.Win.__mro__ == (hixl_rma.Win, hixl_rma._engine.WinBase, object)
    hixl_rma.Init()
    win = hixl_rma.Win.Allocate(8)
    alias = hixl_rma.Win(win)
    assert isinstance(win._core, core.WindowCore) and alias._core is win._core
    assert all(getattr(alias, p) is getattr(win, p) for p in ("_sync", "_acc", "_ntf", "_batch", "_attr"))
    assert all(getattr(win, p).w is win._core for p in ("_sync", "_acc", "_ntf", "_batch", "_attr"))
    alias.Lock(0)
    with pytest.raises(hixl_rma.EpochError, match="already locked"):
        win.Lock(0)
    win.Put(np.arange(8, dtype=np.uint8), 0)
    alias.Unlock(0)
    assert bytes(win.tomemory()) == bytes(range(8))
    with pytest.raises(hixl_rma.EpochError, match="not locked"):
        win.Unlock(0)
    win.Free()
    assert not alias and alias._core.freed and alias._core not in hixl_rma.runtime.runtime().windows


def test_buffer_protocol_and_tomemory():
    hixl_rma.Init()
    buf = np.zeros(4, np.int32)
    win = hixl_rma.Win.Create(buf, True, MPI.INFO_NULL, MPI.COMM_SELF)  # disp_unit True is 1
    try:
        assert win.Get_attr(MPI.WIN_DISP_UNIT) == 1
        view = memoryview(win)
        assert view.format == "B" and view.nbytes == 16 and not view.readonly
        view.cast("i")[2] = 7
        assert buf[2] == 7
        mem = win.tomemory()
        assert type(mem) is MPI.buffer and mem.address == buf.ctypes.data and mem.nbytes == 16
        mem[:] = 0  # slice assignment of an int, as mpi4py's buffer
        assert not buf.any()
    finally:
        win.Free()
    with hixl_rma.Win.Create_dynamic() as dyn:
        assert memoryview(dyn).nbytes == 0 and dyn.tomemory().address == 0


def test_creation_arguments_as_mpi4py_takes_them():
    hixl_rma.Init()
    with pytest.raises(TypeError):
        hixl_rma.Win.Create(5)  # not a buffer: TypeError, not an allocation
    with pytest.raises(TypeError):
        hixl_rma.Win.Create(bytearray(8), 2.5)
    with pytest.raises(hixl_rma.ParamError) as err:
        hixl_rma.Win.Create(bytearray(8), 0)
    assert err.value.Get_error_class() == MPI.ERR_DISP
    with hixl_rma.Win.Create(MPI.BOTTOM) as win:
        assert win.attrs == (0, 0, 1)
    with hixl_rma.Win.Allocate(np.int64(8), disp_unit=np.int32(4)) as win:
        assert win.attrs[1:] == (8, 4)
        info = win.Get_info()
        assert type(info) is MPI.Info
        info.Free()
        win.info = {"accumulate_ordering": "none"}
        got = win.info
        assert got.Get("accumulate_ordering") == "none"
        got.Free()

