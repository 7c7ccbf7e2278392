"""Reduction operations of accumulates: MPI's predefined ops as numpy ufuncs,
which dtypes each is defined for, and which map to native 64-bit atomics."""
import numpy as np
from mpi4py import MPI

from hixl_rma.ground.errors import DatatypeError, ParamError, UnsupportedError


def _logical(fn):
    def apply(target, origin):
        return fn(target != 0, origin != 0).astype(target.dtype)
    return apply


def _loc(better):
    """MAXLOC / MINLOC on (value, index) pairs: the better value, and on a tie
    the smaller index (MPI's rule)."""
    def apply(target, origin):
        ov, tv = origin["value"], target["value"]
        take = better(ov, tv) | ((ov == tv) & (origin["index"] < target["index"]))
        return np.where(take, origin, target)
    return apply


def is_pair(dtype):
    """A (value, index) pair type: MPI.DOUBLE_INT and its kin, or a numpy
    structured dtype with those two fields, the index an integer."""
    return (dtype is not None and dtype.names == ("value", "index")
            and dtype["index"].kind in "iu" and dtype["value"].kind in "iuf")


class Op:
    """A predefined reduction: ``apply(target_values, origin_values) -> new``."""

    __slots__ = ("apply", "kinds", "name", "native", "pairs")

    def __init__(self, name, apply, kinds, native=None, pairs=False):
        self.name = name
        self.apply = apply
        self.kinds = kinds    # numpy dtype kinds it is defined for
        self.native = native  # engine atomic for one 8-byte integer, if any
        self.pairs = pairs    # defined for (value, index) pair types only (MAXLOC, MINLOC)

    def check(self, dtype, what):
        """Raise DatatypeError unless the op is defined for dtype."""
        if self.pairs:
            ok = is_pair(dtype)
        elif "V" in self.kinds:  # REPLACE, NO_OP: any element, moved as bytes
            ok = dtype is not None
        else:
            ok = dtype is not None and dtype.kind in self.kinds and dtype.names is None
        if not ok:
            raise DatatypeError(f"{what}: op {self.name} is not defined for datatype "
                                f"{'raw bytes' if dtype is None else dtype}"
                                + (" (it takes (value, index) pair types such as MPI.DOUBLE_INT)"
                                   if self.pairs else ""))

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
MAXLOC = Op("MAXLOC", _loc(np.greater), "iuf", pairs=True)
MINLOC = Op("MINLOC", _loc(np.less), "iuf", pairs=True)

# MPI.Op is not hashable: a list of pairs.
_BY_MPI = [(MPI.SUM, SUM), (MPI.PROD, PROD), (MPI.MAX, MAX), (MPI.MIN, MIN), (MPI.LAND, LAND),
           (MPI.LOR, LOR), (MPI.LXOR, LXOR), (MPI.BAND, BAND), (MPI.BOR, BOR), (MPI.BXOR, BXOR),
           (MPI.REPLACE, REPLACE), (MPI.NO_OP, NO_OP), (MPI.MAXLOC, MAXLOC), (MPI.MINLOC, MINLOC)]


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


__all__ = [
    "BAND",
    "BOR",
    "BXOR",
    "LAND",
    "LOR",
    "LXOR",
    "MAX",
    "MAXLOC",
    "MIN",
    "MINLOC",
    "NO_OP",
    "PROD",
    "REPLACE",
    "SUM",
    "Op",
    "as_op",
    "is_pair",
    "native_atomic",
]
