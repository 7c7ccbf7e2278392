"""What a window says about itself: predefined and user attributes (keyvals),
info hints, its name and its error handler, as mpi4py's ``MPI.Win``."""
from mpi4py import MPI

from hixl_rma.ground import constants as C
from hixl_rma.ground.errors import ParamError, also

from .core import NULL_KEY, info_dict

# keyval -> delete_fn (or None) of the user keyvals made by Create_keyval.
# The keyvals themselves come from MPI, so they never collide with MPI's own.
_keyvals = {}
# mpi4py's own window class, which makes them: this module is imported
# before the drop-in can put hixl_rma's Win in its place (dropin imports
# win, and so this, first).
_MPI_WIN = MPI.Win


def create_keyval(copy_fn=None, delete_fn=None, nopython=False):
    """A new attribute key for windows; ``delete_fn(win, keyval, value)``
    runs when the attribute is deleted or its window freed."""
    if delete_fn is not None and not callable(delete_fn):
        raise also(ParamError, TypeError)("Create_keyval: delete_fn must be callable")
    keyval = _MPI_WIN.Create_keyval()
    _keyvals[keyval] = delete_fn
    return keyval


def free_keyval(keyval):
    """Free a key made by create_keyval; returns KEYVAL_INVALID."""
    _user_keyval(keyval, "Free_keyval")
    del _keyvals[keyval]
    return _MPI_WIN.Free_keyval(keyval)


def _user_keyval(keyval, what):
    if keyval not in _keyvals:
        raise ParamError(f"{what}: keyval {keyval!r} was not made by Win.Create_keyval (or was freed)",
                         error_class=MPI.ERR_KEYVAL)
    return keyval


class Attributes:
    """Attributes, info, name and error handler of a window (a part of its
    core; the info dict and the name are the core's, since every message
    and the accumulate ordering read them). Its own state: the user
    attributes and the error handler."""

    __slots__ = ("attrs", "errhandler", "w")

    def __init__(self, core):
        self.w = core
        self.attrs = {}                    # user keyval -> value
        self.errhandler = MPI.ERRORS_RETURN

    def _predefined(self):
        w = self.w
        me = w.me
        return {MPI.WIN_BASE: me.base, MPI.WIN_SIZE: me.size, MPI.WIN_DISP_UNIT: me.disp_unit,
                MPI.WIN_CREATE_FLAVOR: w.flavor, MPI.WIN_MODEL: C.WIN_UNIFIED}

    def delete_all(self, win):
        """MPI deletes a window's attributes when it is freed (delete_fn runs
        with ``win``, the handle being freed)."""
        attrs, self.attrs = self.attrs, {}
        for keyval, value in attrs.items():
            fn = _keyvals.get(keyval)
            if fn is not None:
                fn(win, keyval, value)

    def get(self, keyval):
        self.w.check_live("Get_attr")
        table = self._predefined()
        if keyval in table:
            return table[keyval]
        return self.attrs.get(_user_keyval(keyval, "Get_attr"))

    def set(self, win, keyval, attrval):
        self.w.check_live("Set_attr")
        if keyval in self._predefined():
            raise ParamError(f"Set_attr: keyval {keyval} is predefined and read-only",
                             error_class=MPI.ERR_KEYVAL)
        _user_keyval(keyval, "Set_attr")
        if keyval in self.attrs:
            self.delete(win, keyval)
        self.attrs[keyval] = attrval

    def delete(self, win, keyval):
        w = self.w
        w.check_live("Delete_attr")
        _user_keyval(keyval, "Delete_attr")
        if keyval not in self.attrs:
            raise ParamError(f"Delete_attr: window {w.label()} has no attribute for keyval {keyval}",
                             error_class=MPI.ERR_KEYVAL)
        value = self.attrs.pop(keyval)
        fn = _keyvals.get(keyval)
        if fn is not None:
            fn(win, keyval, value)

    def local(self):
        """(base address, size, disp_unit) of the local window, as mpi4py."""
        self.w.check_live("attrs")
        me = self.w.me
        return (me.base, me.size, me.disp_unit)

    # ----------------------------------------------------------------- info

    def get_info(self):
        """The window's info hints, as a new ``MPI.Info`` (the caller frees it)."""
        self.w.check_live("Get_info")
        info = MPI.Info.Create()
        for key, value in self.w.info.items():
            info.Set(key, value)
        return info

    def set_info(self, info):
        """Set info hints (keys not given keep their values)."""
        self.w.check_live("Set_info")
        self.w.info.update(info_dict(info))

    # ----------------------------------------------------------------- name

    def get_name(self):
        w = self.w
        return w.name or ("MPI_WIN_NULL" if w.key == NULL_KEY else "")

    def set_name(self, name):
        w = self.w
        w.check_live("Set_name")
        if not isinstance(name, str):
            raise also(ParamError, TypeError)(f"window name must be a str, got {type(name).__name__}")
        w.name = name

    # ----------------------------------------------------------- errhandler

    def set_errhandler(self, errhandler):
        self.w.check_live("Set_errhandler")
        if not isinstance(errhandler, MPI.Errhandler) or errhandler == MPI.ERRHANDLER_NULL:
            raise also(ParamError, TypeError)(f"Set_errhandler needs an MPI.Errhandler, got {errhandler!r}",
                                              error_class=MPI.ERR_ERRHANDLER)
        self.errhandler = MPI.Errhandler(errhandler)

    def get_errhandler(self):
        self.w.check_live("Get_errhandler")
        return MPI.Errhandler(self.errhandler)
