"""Reduction operations of accumulates: MPI's predefined ops as numpy ufuncs,
which dtypes each is defined for, and which map to native 64-bit atomics."""
import numpy as np
from mpi4py import MPI

from .errors import DatatypeError, ParamError, UnsupportedError


def _logical(fn):
    def apply(target, origin):
        return fn(target != 0, origin != 0).astype(target.dtype)
    return apply


class Op:
    """A predefined reduction: ``apply(target_values, origin_values) -> new``."""

    __slots__ = ("name", "apply", "kinds", "native")

    def __init__(self, name, apply, kinds, native=None):
        self.name = name
        self.apply = apply
        self.kinds = kinds    # numpy dtype kinds it is defined for
        self.native = native  # engine atomic for one 8-byte integer, if any

    def check(self, dtype, what):
        """Raise DatatypeError unless the op is defined for dtype."""
        if dtype is None or dtype.kind not in self.kinds or dtype.names is not None:
            raise DatatypeError(f"{what}: op {self.name} is not defined for datatype "
                                f"{'raw bytes' if dtype is None else dtype}")

    def __repr__(self):
        return f"<hixl_rma.Op {self.name}>"


_NUM, _INT = "iufcb", "iub"
SUM = Op("SUM", np.add, "iufc", "ADD")
PROD = Op("PROD", np.multiply, "iufc")
MAX = Op("MAX", np.maximum, "iuf")
MIN = Op("MIN", np.minimum, "iuf")
LAND = Op("LAND", _logical(np.logical_and), _INT)
LOR = Op("LOR", _logical(np.logical_or), _INT)
LXOR = Op("LXOR", _logical(np.logical_xor), _INT)
BAND = Op("BAND", np.bitwise_and, _INT, "AND")
BOR = Op("BOR", np.bitwise_or, _INT, "OR")
BXOR = Op("BXOR", np.bitwise_xor, _INT, "XOR")
REPLACE = Op("REPLACE", lambda target, origin: origin, _NUM + "V", "SWAP")
NO_OP = Op("NO_OP", lambda target, origin: target, _NUM + "V", "NOOP")

# MPI.Op is not hashable: a list of pairs.
_BY_MPI = [(MPI.SUM, SUM), (MPI.PROD, PROD), (MPI.MAX, MAX), (MPI.MIN, MIN), (MPI.LAND, LAND),
           (MPI.LOR, LOR), (MPI.LXOR, LXOR), (MPI.BAND, BAND), (MPI.BOR, BOR), (MPI.BXOR, BXOR),
           (MPI.REPLACE, REPLACE), (MPI.NO_OP, NO_OP)]


def as_op(op, what):
    """Our Op for a hixl_rma op or an mpi4py predefined MPI.Op."""
    if isinstance(op, Op):
        return op
    if isinstance(op, MPI.Op):
        for mpi_op, ours in _BY_MPI:
            if op == mpi_op:
                return ours
        raise UnsupportedError(f"{what}: only predefined ops are supported (user-defined MPI.Op "
                               f"cannot run as an element-wise atomic at the target)")
    raise ParamError(f"{what}: op must be a hixl_rma op (SUM, MAX, ...) or an mpi4py MPI.Op, "
                     f"got {type(op).__name__}")


def native_atomic(op, dtype):
    """Engine atomic name used for this op on this dtype, or None (locked path).

    Chosen by (op, dtype) alone, never by element count, so every accumulate
    with the same op on a location takes the same path (MPI's same_op_no_op).
    """
    if op.native is None or dtype is None or dtype.itemsize != 8 or dtype.kind not in "iu":
        return None
    return op.native


__all__ = ["Op", "SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
           "REPLACE", "NO_OP", "as_op", "native_atomic"]
