"""The exception hierarchy and the one table that maps HIXL status codes to it.

Every failure of the engine or of the Python layer surfaces as a
:class:`HixlError` subclass carrying ``.status`` (a HIXL code). Each is also
what mpi4py raises in the same case, so code ported from ``MPI.Win`` keeps
its ``except`` clauses: every ``HixlError`` is an ``MPI.Exception`` whose
``Get_error_class()`` is the MPI error class of the case (``ERR_RMA_RANGE``,
``ERR_RMA_SYNC``, ``ERR_RANK``, ...), and :func:`also` makes the variants
that are also a ``ValueError``, ``TypeError`` or ``BufferError`` where
mpi4py raises those.
"""
from mpi4py import MPI

SUCCESS = 0
PARAM_INVALID = 103900
TIMEOUT = 103901
NOT_CONNECTED = 103902
ALREADY_CONNECTED = 103903
NOTIFY_FAILED = 103904
UNSUPPORTED = 103905
RESOURCE_EXHAUSTED = 203900
FAILED = 503900
#: Our engine's extension code: the peer died or dropped its control connection.
PEER_FAILURE = 503901


class HixlError(MPI.Exception):
    """A HIXL call failed; ``.status`` is the HIXL status code, and
    ``Get_error_class()`` the MPI error class of the case."""

    default_status = FAILED
    default_error_class = MPI.ERR_OTHER

    def __init__(self, message="", status=None, error_class=None):
        code = self.default_error_class if error_class is None else int(error_class)
        super().__init__(code)
        self.message = str(message)
        self.status = self.default_status if status is None else int(status)

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):
        return (_rebuild, (_family(type(self)), self.message, self.status, int(self)))

    @property
    def status_name(self):
        return STATUS_NAMES.get(self.status, str(self.status))

    def again(self, message):
        """The same error (class, status, MPI error class) with another message."""
        return type(self)(message, self.status, int(self))


class ParamError(HixlError):
    """An argument is invalid (bad rank, freed object, wrong type)."""

    default_status = PARAM_INVALID
    default_error_class = MPI.ERR_ARG


class BoundsError(ParamError):
    """A target range falls outside the window."""

    default_error_class = MPI.ERR_RMA_RANGE


class AccessError(ParamError):
    """The target's declared access mode forbids this operation."""

    default_error_class = MPI.ERR_ACCESS


class DatatypeError(ParamError):
    """A datatype or op does not fit the buffers."""

    default_error_class = MPI.ERR_TYPE


class EpochError(HixlError):
    """Synchronization misused: an operation outside an epoch, a bad sync call."""

    default_status = FAILED
    default_error_class = MPI.ERR_RMA_SYNC


class HixlTimeoutError(HixlError, TimeoutError):
    """A blocking call ran out of time."""

    default_status = TIMEOUT


class NotConnectedError(HixlError):
    """No connection to that engine."""

    default_status = NOT_CONNECTED


class PeerFailure(HixlError):
    """The peer died or dropped its connection."""

    default_status = PEER_FAILURE
    default_error_class = MPI.ERR_PROC_FAILED


class UnsupportedError(HixlError, NotImplementedError):
    """This build or engine cannot do that."""

    default_status = UNSUPPORTED
    default_error_class = MPI.ERR_UNSUPPORTED_OPERATION


class ResourceError(HixlError):
    """Out of memory, registrations or other resources."""

    default_status = RESOURCE_EXHAUSTED
    default_error_class = MPI.ERR_NO_MEM


_ALSO = {}
_BUILTINS = (ValueError, TypeError, BufferError)


def also(cls, builtin):
    """``cls`` that is also the built-in ``builtin`` (ValueError, TypeError or
    BufferError), for the cases where mpi4py raises that: e.g.
    ``also(DatatypeError, ValueError)("...")``. One class per pair, named as
    ``cls``, so messages and tracebacks read the same."""
    key = (cls, builtin)
    made = _ALSO.get(key)
    if made is None:
        if builtin not in _BUILTINS or not issubclass(cls, HixlError):
            raise TypeError(f"also({cls.__name__}, {builtin.__name__}): not a HixlError and one of "
                            f"{', '.join(b.__name__ for b in _BUILTINS)}")
        made = type(cls.__name__, (cls, builtin), {"__module__": cls.__module__,
                                                  "__qualname__": cls.__qualname__, "_family": cls})
        _ALSO[key] = made
    return made


def kind(error):
    """The named hixl_rma class of an error or error class (ParamError, ...),
    whether or not it is also a built-in (``also``)."""
    cls = error if isinstance(error, type) else type(error)
    return cls.__dict__.get("_family", cls)


def _family(cls):
    """The named class of ``cls`` and the built-in it is also, as ``also`` keys them."""
    base = cls.__dict__.get("_family")
    if base is None:
        return (cls, None)
    return (base, next(b for b in cls.__bases__ if b in _BUILTINS))


def _rebuild(family, message, status, error_class):
    cls, builtin = family
    return (also(cls, builtin) if builtin is not None else cls)(message, status, error_class)


# status -> (name, class): the single place that relates the three.
_STATUS_TABLE = {
    SUCCESS: ("SUCCESS", None),
    PARAM_INVALID: ("PARAM_INVALID", ParamError),
    TIMEOUT: ("TIMEOUT", HixlTimeoutError),
    NOT_CONNECTED: ("NOT_CONNECTED", NotConnectedError),
    ALREADY_CONNECTED: ("ALREADY_CONNECTED", HixlError),
    NOTIFY_FAILED: ("NOTIFY_FAILED", HixlError),
    UNSUPPORTED: ("UNSUPPORTED", UnsupportedError),
    RESOURCE_EXHAUSTED: ("RESOURCE_EXHAUSTED", ResourceError),
    FAILED: ("FAILED", HixlError),
    PEER_FAILURE: ("PEER_FAILURE", PeerFailure),
}
STATUS_NAMES = {code: name for code, (name, _) in _STATUS_TABLE.items()}


def error_for(status, message):
    """The exception instance for a non-SUCCESS status."""
    name, cls = _STATUS_TABLE.get(status, (str(status), HixlError))
    return (cls or HixlError)(f"{message} [{name}]", status)
