"""Transfer priorities: the info key ``priority`` of a window and the
``qos=`` of the HIXL face's TransferAsync, checked once and turned into the
engine's number (HIXL's qos_level: 0 high, 1 normal, 2 bulk; lower first)."""
from .errors import ParamError

NAMES = {"high": 0, "normal": 1, "bulk": 2}
DEFAULT = "normal"


class PriorityError(ParamError, ValueError):
    """An unknown priority (a ValueError too, as for any bad value)."""


def level(value, what):
    """The engine's number of ``value`` (a name of NAMES); ``what`` names the
    setting in the error: ``info priority of window w0.3``, ``TransferAsync qos``."""
    if isinstance(value, str) and value.strip().lower() in NAMES:
        return NAMES[value.strip().lower()]
    raise PriorityError(f"{what} must be one of {', '.join(repr(n) for n in NAMES)}, got {value!r}")


def from_info(info, label):
    """A window's priority from its info dict (default normal)."""
    return level(info.get("priority", DEFAULT), f"info priority of window {label}")
