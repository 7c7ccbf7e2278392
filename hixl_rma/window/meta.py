"""What each rank tells the others when a window is created: one fixed-size,
versioned record per rank, exchanged with one non-blocking allgather.

A rank whose part of the creation failed sends a failure record (its error's
class, status and message) instead, so the others raise too instead of
waiting for it.
"""
from dataclasses import dataclass

import numpy as np

from hixl_rma.ground import errors as _errors

VERSION = 2  # 2: acc_locked
RECORD_BYTES = 512
_MAGIC = 0x48584C574D455441  # "HXLWMETA"
_WORDS = 11                  # magic, version, ok, then eight fields or (status, error class)
_TEXT = 8 * _WORDS           # failure records: "ClassName\0message" from here


@dataclass(frozen=True)
class Meta:
    """One rank's part of a window."""

    base: int       # address of its window memory (0 if none)
    size: int       # bytes
    disp_unit: int
    ctrl: int       # address of its control block
    access: int     # constants.ACCESS_*
    mem_type: int   # MEM_HOST / MEM_DEVICE
    seq: int        # its window counter (rank 0's names the window)
    acc_locked: int = 0  # 1: accumulates on its memory go under its accumulate lock (accumulate.py)


def pack(meta):
    """The record of a successful part."""
    rec = np.zeros(RECORD_BYTES, np.uint8)
    rec[:_TEXT].view(np.uint64)[:] = [_MAGIC, VERSION, 1, meta.base, meta.size, meta.disp_unit,
                                      meta.ctrl, meta.access, meta.mem_type, meta.seq, meta.acc_locked]
    return rec


def pack_failure(exc):
    """The record of a part that failed with ``exc``."""
    rec = np.zeros(RECORD_BYTES, np.uint8)
    status = getattr(exc, "status", _errors.FAILED)
    error_class = int(exc) if isinstance(exc, _errors.HixlError) else 0
    rec[:_TEXT].view(np.uint64)[:5] = [_MAGIC, VERSION, 0, status, error_class]
    text = f"{type(exc).__name__}\0{exc}".encode(errors="replace")[:RECORD_BYTES - _TEXT]
    rec[_TEXT:_TEXT + len(text)] = np.frombuffer(text, np.uint8)
    return rec


def unpack(rec, rank):
    """A Meta, or the exception that rank's failure record describes."""
    words = rec[:_TEXT].view(np.uint64)
    if int(words[0]) != _MAGIC or int(words[1]) != VERSION:
        return _errors.HixlError(f"window creation: rank {rank} sent a window record of another "
                                 f"hixl_rma version ({int(words[1])}, this is {VERSION})")
    if int(words[2]) == 1:
        return Meta(*(int(w) for w in words[3:_WORDS]))
    name, _, msg = bytes(rec[_TEXT:]).rstrip(b"\0").decode(errors="replace").partition("\0")
    cls = getattr(_errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, _errors.HixlError)):
        cls = _errors.HixlError
    return cls(f"window creation failed at rank {rank} of the communicator: {msg}",
               int(words[3]), int(words[4]) or None)
