"""The detector's record in C (``_record.pyx``), or None where it is not
built or ``HIXL_RMA_RACE_PURE=1`` asks for the Python one (the tests
compare the two)."""
from .settings import race_pure

record = None
if not race_pure():
    try:
        from . import _record as record
    except ImportError:  # a build without it: the Python record
        record = None


def storage(name, slots):
    """(base class, ``__slots__``) of a hot class: the C storage ``name``
    (its fields C members), or object and ``slots``."""
    if record is None:
        return object, slots
    return getattr(record, name), ()
