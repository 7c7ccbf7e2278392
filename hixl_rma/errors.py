"""The exception hierarchy and the one table that maps HIXL status codes to it.

Every failure of the engine or of the Python layer surfaces as a
:class:`HixlError` subclass carrying ``.status`` (a HIXL code).
"""

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


class HixlError(Exception):
    """A HIXL call failed; ``.status`` is the HIXL status code."""

    default_status = FAILED

    def __init__(self, message="", status=None):
        super().__init__(message)
        self.status = self.default_status if status is None else int(status)

    @property
    def status_name(self):
        return STATUS_NAMES.get(self.status, str(self.status))


class ParamError(HixlError):
    """An argument is invalid (bad rank, freed object, wrong type)."""

    default_status = PARAM_INVALID


class BoundsError(ParamError):
    """A target range falls outside the window."""


class AccessError(ParamError):
    """The target's declared access mode forbids this operation."""


class DatatypeError(ParamError):
    """A datatype or op does not fit the buffers."""


class EpochError(HixlError):
    """Synchronization misused: an operation outside an epoch, a bad sync call."""

    default_status = FAILED


class HixlTimeoutError(HixlError, TimeoutError):
    """A blocking call ran out of time."""

    default_status = TIMEOUT


class NotConnectedError(HixlError):
    """No connection to that engine."""

    default_status = NOT_CONNECTED


class PeerFailure(HixlError):
    """The peer died or dropped its connection."""

    default_status = PEER_FAILURE


class UnsupportedError(HixlError):
    """This build or engine cannot do that."""

    default_status = UNSUPPORTED


class ResourceError(HixlError):
    """Out of memory, registrations or other resources."""

    default_status = RESOURCE_EXHAUSTED


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
