"""hixl_rma's log: Python's :mod:`logging` under the logger ``hixl_rma``
(and its children, e.g. ``hixl_rma.runtime``, ``hixl_rma.races``), silent
unless ``HIXL_RMA_LOG_LEVEL`` asks, as UCX_LOG_LEVEL and NIXL_LOG_LEVEL do
for theirs. The engine writes its own lines to stderr at the same level
(its option LogLevel, from config.engine_options)."""
import logging

from . import config

LOGGER = logging.getLogger("hixl_rma")
LOGGER.addHandler(logging.NullHandler())  # a library's default: the program's logging decides

_FORMAT = "hixl_rma[%(process)d] %(levelname)s %(name)s: %(message)s"


class _Handler(logging.StreamHandler):
    """The handler HIXL_RMA_LOG_LEVEL adds (stderr), known by its class."""


def configure():
    """Apply HIXL_RMA_LOG_LEVEL to the ``hixl_rma`` logger (once; unset or
    off leaves logging to the program)."""
    level = config.log_level()
    if not level or any(isinstance(h, _Handler) for h in LOGGER.handlers):
        return
    handler = _Handler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level.upper())
    LOGGER.propagate = False  # the line once, not again by a root handler the program set up


def get(name):
    """The logger of hixl_rma module ``name`` (``hixl_rma.<last part>``)."""
    return logging.getLogger("hixl_rma." + name.rsplit(".", 1)[-1])
