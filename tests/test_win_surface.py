"""hixl_rma.Win offers every name of mpi4py's MPI.Win; the few that cannot
apply raise UnsupportedError with a reason (never AttributeError)."""
import pytest
from mpi4py import MPI

import hixl_rma

pytestmark = pytest.mark.timeout(60)

UNSUPPORTED = ["Call_errhandler", "Create_errhandler", "Create_keyval", "Free_keyval", "Set_attr",
               "Delete_attr", "py2f", "f2py", "fromhandle", "toint", "fromint"]


def test_every_mpi4py_win_name_exists():
    missing = [n for n in dir(MPI.Win) if not n.startswith("_") and not hasattr(hixl_rma.Win, n)]
    assert missing == []


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_methods_say_why(name):
    hixl_rma.Init()
    with hixl_rma.Win.Allocate(8) as win:
        fn = getattr(win, name)
        args = {"Call_errhandler": (1,), "Create_errhandler": (print,), "Free_keyval": (1,),
                "Set_attr": (1, 2), "Delete_attr": (1,), "f2py": (1,), "fromhandle": (1,),
                "fromint": (1,)}.get(name, ())
        with pytest.raises(hixl_rma.UnsupportedError, match=name) as err:
            fn(*args)
        assert err.value.status == hixl_rma.UNSUPPORTED and len(str(err.value)) > len(name) + 20
        with pytest.raises(hixl_rma.UnsupportedError, match="handle"):
            win.handle
