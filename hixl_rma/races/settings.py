"""The race detector's settings (``HIXL_RMA_RACE_*``), read here, by the tool.

``hixl_rma.ground.config.SETTINGS`` lists them with their defaults for the docs'
settings table (one table for the library and its tools); the library
itself never reads them.
"""
from hixl_rma.ground import config

NAMES = ("HIXL_RMA_RACE_KEEP", "HIXL_RMA_RACE_JSON", "HIXL_RMA_RACE_PURE")


def race_keep():
    """``HIXL_RMA_RACE_KEEP`` as a positive int (ParamError otherwise)."""
    value = config.setting("HIXL_RMA_RACE_KEEP")
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise config.ParamError(f"HIXL_RMA_RACE_KEEP must be a positive integer, got {value!r}")
    return n


def race_pure():
    """``HIXL_RMA_RACE_PURE`` set to anything but 0."""
    return config.setting("HIXL_RMA_RACE_PURE") not in ("", "0")


def race_json():
    """``HIXL_RMA_RACE_JSON``, or None."""
    return config.setting("HIXL_RMA_RACE_JSON") or None
