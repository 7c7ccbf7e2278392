"""What a window says about itself: predefined and user attributes (keyvals),
info hints, its name and its error handler, as mpi4py's ``MPI.Win``."""
from mpi4py import MPI

from . import constants as C
from .errors import ParamError, UnsupportedError, also

# keyval -> delete_fn (or None) of the user keyvals made by Create_keyval.
# The keyvals themselves come from MPI, so they never collide with MPI's own.
_keyvals = {}


def _predefined(win):
    me = win._me
    return {MPI.WIN_BASE: me.base, MPI.WIN_SIZE: me.size, MPI.WIN_DISP_UNIT: me.disp_unit,
            MPI.WIN_CREATE_FLAVOR: win._flavor, MPI.WIN_MODEL: C.WIN_UNIFIED}


def _user_keyval(keyval, what):
    if keyval not in _keyvals:
        raise ParamError(f"{what}: keyval {keyval!r} was not made by Win.Create_keyval (or was freed)",
                         error_class=MPI.ERR_KEYVAL)
    return keyval


class AttributeMixin:
    """Attributes, info, name and error handler of Win."""

    def _init_attributes(self):
        self._attrs = {}                         # user keyval -> value
        self._errhandler = MPI.ERRORS_RETURN

    def _delete_attributes(self):
        """MPI deletes a window's attributes when it is freed (delete_fn runs)."""
        attrs, self._attrs = self._attrs, {}
        for keyval, value in attrs.items():
            fn = _keyvals.get(keyval)
            if fn is not None:
                fn(self, keyval, value)

    # -------------------------------------------------------------- keyvals

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """A new attribute key for windows; ``delete_fn(win, keyval, value)``
        runs when the attribute is deleted or its window freed."""
        if delete_fn is not None and not callable(delete_fn):
            raise also(ParamError, TypeError)("Create_keyval: delete_fn must be callable")
        from . import dropin
        keyval = dropin.original("Win").Create_keyval()
        _keyvals[keyval] = delete_fn
        return keyval

    @classmethod
    def Free_keyval(cls, keyval):
        """Free a key made by Create_keyval; returns KEYVAL_INVALID."""
        _user_keyval(keyval, "Free_keyval")
        del _keyvals[keyval]
        from . import dropin
        return dropin.original("Win").Free_keyval(keyval)

    def Get_attr(self, keyval):
        """The value of an attribute: WIN_BASE, WIN_SIZE, WIN_DISP_UNIT,
        WIN_CREATE_FLAVOR, WIN_MODEL, or a user keyval's (None if unset)."""
        self._check_live("Get_attr")
        table = _predefined(self)
        if keyval in table:
            return table[keyval]
        return self._attrs.get(_user_keyval(keyval, "Get_attr"))

    def Set_attr(self, keyval, attrval):
        """Set a user attribute (an old value is deleted first, as in MPI)."""
        self._check_live("Set_attr")
        if keyval in _predefined(self):
            raise ParamError(f"Set_attr: keyval {keyval} is predefined and read-only",
                             error_class=MPI.ERR_KEYVAL)
        _user_keyval(keyval, "Set_attr")
        if keyval in self._attrs:
            self.Delete_attr(keyval)
        self._attrs[keyval] = attrval

    def Delete_attr(self, keyval):
        """Delete a user attribute (its keyval's delete_fn runs)."""
        self._check_live("Delete_attr")
        _user_keyval(keyval, "Delete_attr")
        if keyval not in self._attrs:
            raise ParamError(f"Delete_attr: window {self._label()} has no attribute for keyval {keyval}",
                             error_class=MPI.ERR_KEYVAL)
        value = self._attrs.pop(keyval)
        fn = _keyvals.get(keyval)
        if fn is not None:
            fn(self, keyval, value)

    @property
    def attrs(self):
        """(base address, size, disp_unit) of the local window, as mpi4py."""
        self._check_live("attrs")
        me = self._me
        return (me.base, me.size, me.disp_unit)

    @property
    def flavor(self):
        """How the window was created (WIN_FLAVOR_*)."""
        self._check_live("flavor")
        return self._flavor

    @property
    def model(self):
        """The memory model: always WIN_UNIFIED."""
        self._check_live("model")
        return C.WIN_UNIFIED

    # ----------------------------------------------------------------- info

    def Get_info(self):
        """The window's info hints, as a new ``MPI.Info`` (the caller frees it)."""
        self._check_live("Get_info")
        info = MPI.Info.Create()
        for key, value in self._info.items():
            info.Set(key, value)
        return info

    def Set_info(self, info):
        """Set info hints (keys not given keep their values)."""
        self._check_live("Set_info")
        from .win import _info_dict
        self._info.update(_info_dict(info))

    @property
    def info(self):
        """The info hints (``MPI.Info``); settable."""
        return self.Get_info()

    @info.setter
    def info(self, info):
        self.Set_info(info)

    # ----------------------------------------------------------------- name

    def Get_name(self):
        """The window's name ("" until set; MPI_WIN_NULL for the null window)."""
        return self._name or ("MPI_WIN_NULL" if self._key == "MPI_WIN_NULL" else "")

    def Set_name(self, name):
        """Name the window (errors name it)."""
        self._check_live("Set_name")
        if not isinstance(name, str):
            raise also(ParamError, TypeError)(f"window name must be a str, got {type(name).__name__}")
        self._name = name
        self._fast.label = self._label()  # the hot path's errors name the window too

    @property
    def name(self):
        """The window's name; settable."""
        return self.Get_name()

    @name.setter
    def name(self, value):
        self.Set_name(value)

    # ----------------------------------------------------------- errhandler

    def Set_errhandler(self, errhandler):
        """Record the error handler. Errors raise exceptions whichever it is
        (ERRORS_ARE_FATAL does not abort the job)."""
        self._check_live("Set_errhandler")
        if not isinstance(errhandler, MPI.Errhandler) or errhandler == MPI.ERRHANDLER_NULL:
            raise also(ParamError, TypeError)(f"Set_errhandler needs an MPI.Errhandler, got {errhandler!r}",
                                              error_class=MPI.ERR_ERRHANDLER)
        self._errhandler = MPI.Errhandler(errhandler)

    def Get_errhandler(self):
        """The error handler last set (ERRORS_RETURN by default), as a new handle."""
        self._check_live("Get_errhandler")
        return MPI.Errhandler(self._errhandler)

    def Call_errhandler(self, errorcode):
        """Raise the MPI error ``errorcode`` as this window's error handler
        would (hixl_rma reports errors as exceptions)."""
        raise MPI.Exception(errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        raise UnsupportedError("Create_errhandler: errors are Python exceptions (HixlError); catch them instead")
