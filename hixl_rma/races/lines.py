"""The line watch: loads and stores of window memory and of RMA buffers by
the program's own lines (not hixl_rma's, not the standard library's or
site-packages').

Python gives a library no way to see a load of an ndarray element, so the
watch reads the program: for each line about to run, the names its
bytecode loads (each code object's lines are analysed once), resolved in
the running frame; a name bound to an ndarray, memoryview, ``MPI.buffer``
or bytearray is an access of its memory -- a store when the line stores
into it by subscript (``buf[i] = v``, ``buf[:] = ...``, ``buf[i] += v``),
else a load. It is exact for one element of a one-dimensional array (a
constant or variable index) and a constant slice of one; otherwise the
bytes are not known, and the access (of the whole object) counts only
against origin and result buffers in use, not as an access of window
memory: a fancy index or a whole array passed to a function would
otherwise make every concurrent Put to another part of the window a race. A line that
calls a window method (``win.Put(buf, ...)``) is the RMA call's, not a load.

It sees what a line names; it misses memory reached without a name on the
line (a helper function's loads are seen in the helper only if it is the
program's own code; C extensions, ``np.frombuffer`` views made and used on
one line, other processes). Threads started after the detector are
watched too (``threading.settrace``).

How lines reach it (``_linetrace``): on 3.12+ a ``sys.monitoring`` tool,
with LINE events only in code objects that have a line to watch and each
line with nothing to watch disabled after its first run; on 3.11 a C trace
function, with the frames of code that has no line to watch run untraced
(a frame evaluation function, set aside while a thread's C stack is deep,
so that a recursion as deep as plain Python allows still runs); without
the extension, ``sys.settrace``.
The bytecode is read as each version writes it: 3.12's BINARY_SLICE and
STORE_SLICE, 3.13's two-name superinstructions (LOAD_FAST_LOAD_FAST ...).
"""
import dis
import os
import sys
import sysconfig
import threading

import numpy as np
from mpi4py import MPI

from .detector import _PKG

_NAMES = frozenset(("LOAD_NAME", "LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF"))
_INDEX = frozenset(("LOAD_CONST", "LOAD_NAME", "LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF"))
_CALLS = frozenset(("Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap", "Rput",
                    "Rget", "Raccumulate", "Rget_accumulate", "Put_notify", "Rput_notify", "Put_batch",
                    "Get_batch", "Fence", "Lock", "Unlock", "Lock_all", "Unlock_all", "Flush", "Flush_all",
                    "Flush_local", "Flush_local_all", "Start", "Complete", "Post", "Wait", "Test", "Free",
                    "Send", "Recv", "send", "recv", "Isend", "Irecv", "Sendrecv", "Create", "Allocate",
                    "Allocate_shared", "Shared_query", "tomemory"))
# what follows a name that reads no memory: aliasing, returning, packing, metadata
_NOT_ACCESS = frozenset(("RETURN_VALUE", "STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF", "STORE_ATTR",
                         "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_SET", "POP_TOP"))
_METADATA = frozenset(("dtype", "shape", "size", "nbytes", "itemsize", "ndim", "strides", "flags", "base", "ctypes",
                       "address", "data", "T", "__class__", "view", "reshape", "transpose", "swapaxes", "squeeze",
                       "cast", "obj", "__array_interface__"))
# what follows a name that reads its memory (besides a subscript or a method)
_USES = frozenset(("BINARY_OP", "COMPARE_OP", "CONTAINS_OP", "GET_ITER", "UNARY_NEGATIVE", "UNARY_INVERT",
                   "UNARY_NOT", "FORMAT_VALUE"))
# calls that keep a reference and read nothing
_KEEPERS = frozenset(("append", "extend", "insert", "add", "setdefault", "update", "put_nowait", "appendleft"))
_STORE_METHODS = frozenset(("fill", "put", "itemset", "sort", "partition", "setfield", "resize", "byteswap"))
_ARRAYS = (np.ndarray, memoryview, MPI.buffer, bytearray)

_SKIP = tuple(p for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("purelib"),
                          sysconfig.get_paths().get("platlib"), _PKG, os.path.dirname(np.__file__)} if p)

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # numpy < 2
    _byte_bounds = np.byte_bounds

try:
    from . import _linetrace  # the trace function in C
except ImportError:  # a build without it: the Python one below
    _linetrace = None

_det = None
# code -> {lineno: ((name, opname, index, store, slot), ...)} for the program's code
# that has a line to watch; None for the rest
_watch = {}


def _is_user(code):
    fn = code.co_filename
    return not (fn.startswith("<") or fn.startswith(_SKIP) or "site-packages" in fn)


class _Ins:
    """One instruction as _table reads it: dis's, with 3.13's two-name
    superinstructions split in two and 3.12's LOAD_FAST_CHECK read as
    LOAD_FAST."""
    __slots__ = ("arg", "argval", "opname", "positions")

    def __init__(self, opname, argval, arg, positions):
        self.opname, self.argval, self.arg, self.positions = opname, argval, arg, positions


_PAIRS = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"), "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
          "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}
_SUBSCR = frozenset(("BINARY_SUBSCR", "STORE_SUBSCR"))
_SLICE = frozenset(("BINARY_SLICE", "STORE_SLICE"))  # 3.12+: a two-bound slice without BUILD_SLICE
_STORES = frozenset(("STORE_SUBSCR", "STORE_SLICE"))
_LOADS = frozenset(("BINARY_SUBSCR", "BINARY_SLICE"))


def _instructions(code):
    out = []
    for i in dis.get_instructions(code):
        pair = _PAIRS.get(i.opname)
        if pair is not None:  # oparg: the first local's index in the high four bits, the second's in the low
            out.append(_Ins(pair[0], i.argval[0], i.arg >> 4, i.positions))
            out.append(_Ins(pair[1], i.argval[1], i.arg & 15, i.positions))
        elif i.opname == "LOAD_FAST_CHECK":
            out.append(_Ins("LOAD_FAST", i.argval, i.arg, i.positions))
        else:
            out.append(_Ins(i.opname, i.argval, i.arg, i.positions))
    return out


def _index(ins, k):
    """(index, how it is subscripted) of the name loaded at k: index is
    (how the index is loaded, its value) for one element by a constant or
    a name, ("SLICE", (a, b)) for a constant slice, else None; how is the
    subscript's op (STORE_SUBSCR, BINARY_SUBSCR, ...; "AUG" for ``x[i] +=``),
    or None where the name is not subscripted so."""
    n = len(ins)
    if k + 2 < n and ins[k + 1].opname in _INDEX:
        op = ins[k + 2].opname
        if op in _SUBSCR:
            return (ins[k + 1].opname, ins[k + 1].argval), op
        if (op == "COPY" and k + 4 < n and ins[k + 3].opname == "COPY"
                and ins[k + 4].opname == "BINARY_SUBSCR"):
            return (ins[k + 1].opname, ins[k + 1].argval), "AUG"  # x[i] op= v: a load, then a store
    if k + 3 < n and ins[k + 1].opname == "LOAD_CONST" and ins[k + 2].opname == "LOAD_CONST":
        bounds = ("SLICE", (ins[k + 1].argval, ins[k + 2].argval))
        if ins[k + 3].opname in _SLICE:
            return bounds, ins[k + 3].opname
        if (k + 4 < n and ins[k + 3].opname == "BUILD_SLICE" and ins[k + 3].argval == 2
                and ins[k + 4].opname in _SUBSCR):
            return bounds, ins[k + 4].opname
    return None, None


def _table(code):
    ins = _instructions(code)
    lines = {}
    skip = set()
    for i in ins:
        ln = i.positions.lineno if i.positions else None
        if ln is None:
            continue
        if i.opname in ("LOAD_METHOD", "LOAD_ATTR") and i.argval in _CALLS:
            skip.add(ln)
    for k, i in enumerate(ins):
        if i.opname not in _NAMES:
            continue
        ln = i.positions.lineno if i.positions else None
        if ln is None or ln in skip:
            continue
        store = False
        nxt = ins[k + 1] if k + 1 < len(ins) else None
        if nxt is None or nxt.opname in _NOT_ACCESS or (nxt.opname in ("LOAD_METHOD", "LOAD_ATTR")
                                                        and nxt.argval in _METADATA):
            continue
        index, sub = _index(ins, k)
        if sub is None and not _subscripted(ins, k) and not (
                nxt.opname in _USES or (nxt.opname in _INDEX and k + 2 < len(ins) and ins[k + 2].opname in _USES)
                or (nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval not in _METADATA)
                or (nxt.opname in ("PRECALL", "CALL") and not _keeps(ins, k))):
            continue  # named, not read: packed into a tuple, an argument among others, ...
        if sub is not None:
            store = sub in _STORES or sub == "AUG"
        elif nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval in _STORE_METHODS:
            store = True
        else:
            for m in range(k + 1, min(k + 9, len(ins))):
                op = ins[m].opname
                if op in _STORES:
                    store = True
                    break
                if op in _LOADS:
                    break
                if (op in _NAMES and m > k + 1) or op.startswith("CALL") or op.startswith("STORE_"):
                    break
        # the slot: where the C trace function reads a local without the frame's locals dict
        slot = i.arg if i.opname in ("LOAD_FAST", "LOAD_DEREF") else -1
        lines.setdefault(ln, []).append((i.argval, i.opname, index, store, slot))
    return {ln: tuple(v) for ln, v in lines.items()}


def _subscripted(ins, k):
    for m in range(k + 1, min(k + 9, len(ins))):
        op = ins[m].opname
        if op in _SUBSCR or op in _SLICE:
            return True
        if op in _NAMES or op.startswith("CALL") or op.startswith("STORE_") or op == "PRECALL":
            return False
    return False


def _keeps(ins, k):
    """The call this name is the last argument of keeps it (list.append ...)."""
    line = ins[k].positions.lineno
    for m in range(k - 1, max(k - 12, -1), -1):
        if ins[m].positions is None or ins[m].positions.lineno != line:
            return False
        if ins[m].opname in ("LOAD_METHOD", "LOAD_ATTR"):
            return ins[m].argval in _KEEPERS
    return False


def _resolve(frame, name, how):
    if how == "LOAD_GLOBAL":
        g = frame.f_globals
        return g[name] if name in g else None
    loc = frame.f_locals
    if name in loc:
        return loc[name]
    return frame.f_globals.get(name) if how == "LOAD_NAME" else None


def _span(obj, index, frame):
    if isinstance(obj, np.ndarray):
        arr = obj
    else:
        try:
            arr = np.frombuffer(obj, np.uint8) if not isinstance(obj, memoryview) or obj.ndim == 1 else None
            if arr is not None and isinstance(obj, memoryview) and obj.itemsize > 1:
                arr = np.frombuffer(obj, np.dtype(f"V{obj.itemsize}"))
        except (TypeError, ValueError, BufferError):
            return None
        if arr is None:
            return None
    if arr.size == 0:
        return None
    if index is not None and arr.ndim == 1 and index[0] == "SLICE":
        a, b = index[1]
        if (a is None or type(a) is int) and (b is None or type(b) is int):
            start, stop, _ = slice(a, b).indices(arr.shape[0])
            lo = arr.__array_interface__["data"][0] + start * arr.strides[0]
            return (lo, lo + max(stop - start, 0) * arr.itemsize, True) if arr.strides[0] == arr.itemsize else \
                (*_byte_bounds(arr), False)
    if index is not None and arr.ndim == 1 and index[0] != "SLICE":
        how, val = index
        k = val if how == "LOAD_CONST" else _resolve(frame, val, how)
        if type(k) is int and -arr.shape[0] <= k < arr.shape[0]:
            if k < 0:
                k += arr.shape[0]
            lo = arr.__array_interface__["data"][0] + k * arr.strides[0]
            return lo, lo + arr.itemsize, True
    lo, hi = _byte_bounds(arr)
    return lo, hi, False


def _classify(code):
    """_watch[code], filled in (the C trace function asks once per code object, and keeps the answer)."""
    table = _watch[code] = (_table(code) if _is_user(code) else None) or None
    return table


def _on_line(frame):
    det = _det
    if det is None or not (det.local or det.ranges):
        return
    code = frame.f_code
    if code not in _watch:
        _classify(code)
    t = _watch[code]
    entries = t.get(frame.f_lineno) if t is not None else None
    if not entries:
        return
    for name, how, index, store, _ in entries:
        obj = _resolve(frame, name, how)
        if obj is None or not isinstance(obj, _ARRAYS):
            continue
        span = _span(obj, index, frame)
        if span is not None:
            det.touch(span[0], span[1], store, (code, frame.f_lineno), f"{'store to' if store else 'load of'} "
                                                                       f"'{name}'", span[2])


def _local(frame, event, arg):
    if event == "line":
        _on_line(frame)
    return _local


def _global(frame, event, arg):
    code = frame.f_code
    if code not in _watch:
        _classify(code)  # line-trace only the program's code objects that have a line to watch
    return _local if _watch[code] is not None else None


def _thread_start(frame, event, arg):
    """A thread started after the detector: its first event puts the C trace function in its place."""
    _linetrace.install()


def start(det):
    """Watch the program's lines from now on (this thread's running frames too)."""
    global _det
    _det = det
    if _linetrace is not None:
        _linetrace.configure(_classify, _on_line, _ARRAYS)
        # 3.12+: a sys.monitoring tool, LINE events only where there is a line to watch
        if _linetrace.monitoring() and _linetrace.start_monitoring(_running_frames()):
            return
        # Every frame's lines reach the C function, the running ones' too.
        threading.settrace(_thread_start)
        _linetrace.install()
        return
    threading.settrace(_global)
    sys.settrace(_global)
    f = sys._getframe(1)
    while f is not None:
        if _global(f, "call", None) is not None:
            f.f_trace = _local
            f.f_trace_lines = True
        f = f.f_back


def _running_frames():
    """Every thread's running frames (no PY_START event comes for them)."""
    out = []
    for f in sys._current_frames().values():
        while f is not None:
            out.append(f)
            f = f.f_back
    return out


def stop():
    global _det
    _det = None
    sys.settrace(None)  # also takes the C function away from this thread
    threading.settrace(None)
    if _linetrace is not None:
        _linetrace.stop_monitoring()
        _linetrace.unhook()
