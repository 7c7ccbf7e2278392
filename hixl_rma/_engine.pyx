# cython: language_level=3, boundscheck=False, wraparound=False, embedsignature=True
# distutils: language = c++
"""Cython binding of the C++ class ``hixl::Hixl`` (one binding, two engines).

Thin by design: each method parses its arguments into C values, makes one
engine call with the GIL released, and turns a non-SUCCESS status into the
matching :mod:`hixl_rma.ground.errors` exception.
"""

cimport cython
cimport numpy as cnp
from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release,
                             PyObject_GetBuffer)
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libcpp.map cimport map as cmap
from libcpp.string cimport string
from libcpp cimport bool as cpp_bool
from libcpp.utility cimport pair
from libcpp.vector cimport vector


import time

import numpy as np

cnp.import_array()

from .ground import config
from .ground.errors import FAILED, TIMEOUT, ParamError, error_for

cdef extern from "hixl/hixl.h" namespace "hixl" nogil:
    ctypedef uint32_t Status
    cdef cppclass AscendString:
        AscendString()
        AscendString(const char *)
        AscendString(const char *, size_t)
        const char *GetString()
        size_t GetLength()
    cdef enum MemType:
        MEM_DEVICE
        MEM_HOST
    cdef enum TransferOp:
        READ
        WRITE
    cdef struct MemDesc:
        uintptr_t addr
        size_t len
    ctypedef void *CMemHandle "hixl::MemHandle"
    cdef struct TransferOpDesc:
        uintptr_t local_addr
        uintptr_t remote_addr
        size_t len
    cdef struct TransferArgs:
        pass
    ctypedef void *TransferReq
    cdef enum class TransferStatus:
        WAITING
        COMPLETED
        TIMEOUT
        FAILED
    cdef struct NotifyDesc:
        AscendString name
        AscendString notify_msg
    cdef cppclass Hixl:
        Hixl() except +
        Status Initialize(const AscendString &, const cmap[AscendString, AscendString] &)
        void Finalize()
        Status RegisterMem(const MemDesc &, MemType, CMemHandle &)
        Status DeregisterMem(CMemHandle)
        Status Connect(const AscendString &, int32_t)
        Status Disconnect(const AscendString &, int32_t)
        Status TransferSync(const AscendString &, TransferOp, const vector[TransferOpDesc] &, int32_t)
        Status TransferAsync(const AscendString &, TransferOp, const vector[TransferOpDesc] &,
                             const TransferArgs &, TransferReq &)
        Status GetTransferStatus(const TransferReq &, TransferStatus &)
        Status SendNotify(const AscendString &, const NotifyDesc &, int32_t)
        Status GetNotifies(vector[NotifyDesc] &)

cdef extern from "_engine_compat.h" namespace "hixl::ext" nogil:
    cdef enum class AtomicOp "hixl::ext::AtomicOp":
        ADD
        AND
        OR
        XOR
        SWAP
        CSWAP
    cdef struct Stats:
        uint64_t bytes_written, bytes_read, transfer_ops, direct_ops, atomic_ops
        uint64_t notifies_sent, notifies_received, table_refreshes, regions, endpoints, accepted
        uint64_t vectored_ops, vectored_calls, peer_lookups, target_atomics_asked, target_atomics_served
        uint64_t target_moves_asked, target_writes_posted
    cdef struct PeerStats:
        uint64_t bytes_written, bytes_read, ops, answers_held, detached
        uint32_t bulk_lane, bulk_peak_kib
    cdef enum class Priority "hixl::ext::Priority":
        HIGH
        NORMAL
        BULK
    cdef struct TelemetryCounters:
        uint64_t write_bytes, read_bytes, write_ops, read_ops, write_requests, read_requests
        uint64_t notifies_sent, errors
    cdef struct TelemetryHistogram:
        uint64_t buckets[32]
        uint64_t count, sum_ns
    cdef cppclass PeerTelemetry:
        string address
        TelemetryCounters counters
        TelemetryHistogram post_time, completion_time
        uint64_t notifies_received
    cdef cppclass CTelemetry "hixl::ext::Telemetry":
        cpp_bool enabled
        TelemetryCounters total
        TelemetryHistogram post_time, completion_time
        uint64_t connects, connect_failures, accepts
        vector[pair[Status, uint64_t]] errors
        vector[PeerTelemetry] peers
    Status GetTelemetry(Hixl &, CTelemetry &)
    cdef enum class PeerState "hixl::ext::PeerState":
        CONNECTED
        DEAD
        NOT_CONNECTED
    cdef cppclass PeerRef
    uint64_t AtomicApply(AtomicOp op, uint64_t *word, uint64_t value, uint64_t compare)  # what each op does
    cdef struct Capabilities:
        uint64_t flags
    ctypedef uint64_t Capability
    Capability CAP_ALLOC_MEM, CAP_ATOMICS, CAP_POST, CAP_PEER_HANDLES, CAP_REMOTE_PTR, CAP_REFRESH_PEER
    Capability CAP_WAIT_NOTIFIES, CAP_PEER_STATE, CAP_STATS, CAP_TELEMETRY, CAP_ENGINE_ID, CAP_DOMAIN
    Capability CAP_LISTEN_ANY, CAP_OPTIONS, CAP_PRIORITY, CAP_DETACH, CAP_PATH_MAPPED, CAP_PATH_CMA, CAP_PATH_UCX
    Capability CAP_BULK_LANE

# The extension calls, declared once in src/include/hixl/hixl_ext_calls.h (setup.py generates this file).
include "_engine_ext.pxi"


cdef extern from "_engine_compat.h" nogil:
    const char *C_OPTION_JOB_TOKEN "hixl::ext::OPTION_JOB_TOKEN"
    const char *C_OPTION_TIMEOUT_MS "hixl::ext::OPTION_TIMEOUT_MS"
    const char *C_OPTION_ENGINE_ID "hixl::ext::OPTION_ENGINE_ID"
    const char *C_OPTION_DOMAIN "hixl::ext::OPTION_DOMAIN"

cdef extern from "_engine_compat.h" namespace "hixl_rma" nogil:
    Status WaitTransfer(Hixl &, TransferReq, int32_t, TransferStatus &)
    void FillDescs(vector[TransferOpDesc] &, const uint64_t *, size_t)


# Constants of the Python surface (statuses come from hixl_rma.ground.errors).
MEM_HOST_ = MEM_HOST
MEM_DEVICE_ = MEM_DEVICE
globals().update(MEM_HOST=int(MEM_HOST), MEM_DEVICE=int(MEM_DEVICE), READ=int(READ), WRITE=int(WRITE))
OPTION_JOB_TOKEN = C_OPTION_JOB_TOKEN.decode()
OPTION_TIMEOUT_MS = C_OPTION_TIMEOUT_MS.decode()
OPTION_ENGINE_ID = C_OPTION_ENGINE_ID.decode()
OPTION_DOMAIN = C_OPTION_DOMAIN.decode()
# Capabilities (hixl_ext_types.h's Capability bits) by name: the one way
# hixl_rma asks what an engine can do. Vendor HIXL has none of them.
CAPABILITY_BITS = {
    "alloc_mem": CAP_ALLOC_MEM, "atomics": CAP_ATOMICS, "post": CAP_POST, "peer_handles": CAP_PEER_HANDLES,
    "remote_ptr": CAP_REMOTE_PTR, "refresh_peer": CAP_REFRESH_PEER, "wait_notifies": CAP_WAIT_NOTIFIES,
    "peer_state": CAP_PEER_STATE, "stats": CAP_STATS, "telemetry": CAP_TELEMETRY, "engine_id": CAP_ENGINE_ID,
    "domain": CAP_DOMAIN, "listen_any": CAP_LISTEN_ANY, "options": CAP_OPTIONS, "priority": CAP_PRIORITY,
    "detach": CAP_DETACH, "path_mapped": CAP_PATH_MAPPED, "path_cma": CAP_PATH_CMA, "path_ucx": CAP_PATH_UCX,
    "bulk_lane": CAP_BULK_LANE,
}
cdef uint64_t _BUILD_CAPS = BuildCapabilities()
cdef bint _HAS_PEER_HANDLES = (_BUILD_CAPS & CAP_PEER_HANDLES) != 0
cdef bint _HAS_POST = (_BUILD_CAPS & CAP_POST) != 0


cdef frozenset _cap_names(uint64_t flags):
    return frozenset(name for name, bit in CAPABILITY_BITS.items() if flags & bit)


#: What this build's engine API has (names of CAPABILITY_BITS).
CAPABILITIES = _cap_names(_BUILD_CAPS)


def has(name):
    """Whether this build's engine API has capability `name` (a key of CAPABILITY_BITS; another name is a
    KeyError, so that a misspelt question fails instead of answering no)."""
    return (_BUILD_CAPS & CAPABILITY_BITS[name]) != 0
# TransferRequest.status(): a timeout is raised by wait(), never a status.
TRANSFER_WAITING, TRANSFER_COMPLETED, TRANSFER_FAILED = 0, 1, 3
del MEM_HOST_, MEM_DEVICE_


def default_timeout_ms():
    """Timeout of blocking calls: ``HIXL_RMA_TIMEOUT_MS`` or 30 000 ms (config.py)."""
    return config.timeout_ms()


# The default timeout, read from the environment once (a lookup per call
# would cost a microsecond on every transfer); the runtime may set it.
cdef int32_t default_timeout_ms_c = 0


def set_default_timeout(int32_t ms):
    """Timeout (ms) of engine calls that are given none."""
    global default_timeout_ms_c
    if ms <= 0:
        raise ParamError(f"timeout must be positive, got {ms}")
    default_timeout_ms_c = ms


cdef int32_t _timeout(object timeout_ms) except? -1:
    global default_timeout_ms_c
    if timeout_ms is None:
        if default_timeout_ms_c == 0:
            default_timeout_ms_c = default_timeout_ms()
        return default_timeout_ms_c
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, np.integer)):
        raise ParamError(f"timeout_ms must be an int, got {type(timeout_ms).__name__}")
    if timeout_ms < 0 or timeout_ms > 2**31 - 1:
        raise ParamError(f"timeout_ms out of range: {timeout_ms}")
    return <int32_t>timeout_ms


cdef AscendString _remote(object remote) except *:
    """An engine name ("ip:port") as the API's string type."""
    cdef bytes r = _b(remote, "remote")
    return AscendString(r, len(r))


cdef bytes _b(object s, str what):
    if isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return (<str>s).encode()
    raise ParamError(f"{what} must be str or bytes, got {type(s).__name__}")


cdef NotifyDesc _notify_desc(bytes name, bytes msg):
    """The engine's notify of (name, msg); the caller holds both for the call."""
    cdef NotifyDesc nd
    nd.name = AscendString(name, len(name))
    nd.notify_msg = AscendString(msg, len(msg))
    return nd


cdef inline int _check(Status st, str what) except -1:
    if st != 0:
        raise error_for(st, f"{what}: {LastError().decode(errors='replace')}")
    return 0


cdef uint64_t _u64(object v, str what) except? 0:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ParamError(f"{what} must be an int, got {type(v).__name__}")
    v = int(v)
    if v < -(1 << 63) or v >= (1 << 64):
        raise ParamError(f"{what} {v} does not fit in 64 bits")
    return <uint64_t>(v & 0xFFFFFFFFFFFFFFFF)


cdef uint64_t _uint(object v, str what) except? 0:
    # An unsigned integer argument (address, length): a wrong type or a
    # negative value is a ParamError, never a TypeError/OverflowError.
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ParamError(f"{what} must be an int, got {type(v).__name__}")
    v = int(v)
    if v < 0 or v >= (1 << 64):
        raise ParamError(f"{what} {v} is out of range (0 to 2**64-1)")
    return <uint64_t>v


cdef int _int_arg(object v, str what) except? -1:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ParamError(f"{what} must be an int, got {type(v).__name__}")
    v = int(v)
    if v < -(1 << 31) or v >= (1 << 31):
        raise ParamError(f"{what} {v} is out of range")
    return <int>v


cdef int _opcode(object op) except -1:
    if isinstance(op, bool) or not isinstance(op, (int, np.integer)) or (op != READ and op != WRITE):
        raise ParamError(f"op must be READ or WRITE, got {op!r}")
    return <int>int(op)


cdef class MemHandle:
    """A registered (or engine-allocated) region; keeps its buffer alive.

    Engine-allocated regions export their memory through the buffer
    protocol (``np.frombuffer(handle, ...)``).
    """
    cdef CMemHandle _h
    cdef Py_buffer _view
    cdef bint _has_view
    cdef readonly Engine engine
    cdef readonly uintptr_t addr
    cdef readonly size_t length
    cdef readonly int mem_type
    cdef readonly bint allocated
    cdef readonly object owner
    cdef int _exports
    cdef void *_keep  # withdrawn engine memory kept mapped for live views
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]
    cdef object __weakref__

    def __cinit__(self):
        self._h = NULL
        self._keep = NULL
        self._has_view = False
        self._exports = 0

    @property
    def registered(self):
        """True until deregistered (or the engine finalized)."""
        return self._h != NULL

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if self._h == NULL:
            raise ParamError("memory handle is deregistered")
        self._shape[0] = <Py_ssize_t>self.length
        self._strides[0] = 1
        buffer.buf = <void *>self.addr
        buffer.obj = self
        buffer.len = <Py_ssize_t>self.length
        buffer.readonly = 0
        buffer.itemsize = 1
        buffer.format = "B"
        buffer.ndim = 1
        buffer.shape = self._shape
        buffer.strides = self._strides
        buffer.suboffsets = NULL
        buffer.internal = NULL
        self._exports += 1

    def __releasebuffer__(self, Py_buffer *buffer):
        self._exports -= 1
        if self._exports == 0 and self._h == NULL:
            self._drop_memory()

    cdef _drop_memory(self):
        # No view and no registration is left: the memory may go.
        if self._keep != NULL:
            ReleaseWithdrawn(self._keep)
            self._keep = NULL
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False
        self.owner = None

    cdef Status _deregister(self) except? 1:
        """Peers lose access now; the memory stays while local views exist."""
        cdef Status st = 0
        cdef void *keep = NULL
        if self._exports > 0 and self.allocated:
            self.engine._calls += 1
            with nogil:
                st = WithdrawMem(self.engine._h[0], self._h, keep)
            self.engine._calls -= 1
            self._keep = keep
        else:
            self.engine._calls += 1
            with nogil:
                st = self.engine._h.DeregisterMem(self._h)
            self.engine._calls -= 1
        if st == TIMEOUT:
            # A peer has not acknowledged: the engine keeps the region mapped
            # (out of every table), so its buffer stays too; deregistering
            # again waits for the rest.
            return st
        self._h = NULL
        if self._exports == 0:
            self._drop_memory()
        return st

    cdef _forget(self):
        # The engine finalized: its regions are gone with it.
        self._h = NULL
        if self._exports == 0:
            self._drop_memory()

    def __dealloc__(self):
        if self._keep != NULL:
            ReleaseWithdrawn(self._keep)
        if self._has_view:
            PyBuffer_Release(&self._view)

    def __repr__(self):
        state = "registered" if self.registered else "deregistered"
        kind = "allocated" if self.allocated else "registered"
        return f"<hixl_rma.MemHandle {kind} addr={self.addr} length={self.length} {state}>"


cdef class RemotePin:
    """A peer's range mapped into this process, kept mapped while this
    object lives (Engine.pin_remote): its buffer (writable bytes) and
    ``addr`` stay valid whatever happens to the peer, so views and cached
    pointers into it never fault."""
    cdef void *_pin
    cdef readonly uintptr_t addr
    cdef readonly size_t length

    def __dealloc__(self):
        ReleasePin(self._pin)

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, <void *>self.addr, <Py_ssize_t>self.length, 0, flags)

    def __repr__(self):
        return f"<RemotePin {self.length} bytes at {self.addr:#x}>"


cdef class TransferRequest:
    """An asynchronous transfer; ``status()`` polls, ``wait()`` blocks."""
    cdef TransferReq _req
    cdef readonly Engine engine
    cdef object _keep
    cdef int _final
    # Per-transfer timing (ns, CLOCK_MONOTONIC): when it was posted, how long
    # the post took, and when it was first seen finished (0: not yet).
    cdef int64_t _t0, _post_ns, _done_ns

    def __cinit__(self):
        self._req = NULL
        self._final = TRANSFER_WAITING
        self._t0 = self._post_ns = self._done_ns = 0

    def timing(self):
        """``{"post_us": ..., "completion_us": ...}``: how long posting took, and the time from the post
        until this request was first seen finished (None while it is not)."""
        return dict(post_us=self._post_ns / 1000.0,
                    completion_us=self._done_ns / 1000.0 if self._done_ns else None)

    def status(self):
        """TRANSFER_WAITING, TRANSFER_COMPLETED or TRANSFER_FAILED (non-blocking)."""
        cdef TransferStatus ts
        cdef Status st
        if self._req == NULL:
            return self._final
        self.engine._alive()
        self.engine._calls += 1
        with nogil:
            st = self.engine._h.GetTransferStatus(self._req, ts)
        self.engine._calls -= 1
        _check(st, "transfer status")
        return self._settle(ts)

    cdef int _settle(self, TransferStatus ts) except -1:
        if ts != TransferStatus.WAITING:
            if self._t0 and not self._done_ns:
                self._done_ns = max(time.monotonic_ns() - self._t0, 1)
            self._req = NULL  # the engine released it
            self._keep = None
            self._final = TRANSFER_COMPLETED if ts == TransferStatus.COMPLETED else TRANSFER_FAILED
            return self._final
        return TRANSFER_WAITING

    def wait(self, timeout_ms=None):
        """Block until the transfer completed; raise if it failed or timed out."""
        cdef TransferStatus ts = TransferStatus.WAITING
        cdef Status st = 0
        cdef int32_t t = _timeout(timeout_ms)
        if self._req != NULL:
            self.engine._alive()
            self.engine._calls += 1
            with nogil:
                st = WaitTransfer(self.engine._h[0], self._req, t, ts)
            self.engine._calls -= 1
            if st == TIMEOUT:
                raise error_for(TIMEOUT, f"transfer did not complete within {t} ms")
            _check(st, "transfer wait")
            self._settle(ts)
        if self._final == TRANSFER_FAILED:
            raise error_for(FAILED, f"transfer failed: {LastError().decode(errors='replace')}")
        return None

    @property
    def done(self):
        return self._req == NULL

    def __dealloc__(self):
        # Dropped before it finished (MPI_Request_free): the engine still owns
        # the transfer, and its buffers must outlive it. Hand both to the
        # engine, which completes them later (or at finalize).
        cdef TransferStatus ts = TransferStatus.WAITING
        if self._req == NULL or self.engine is None or self.engine._h == NULL:
            return
        if self.engine._h.GetTransferStatus(self._req, ts) == 0 and ts == TransferStatus.WAITING:
            self.engine._orphans.append((<uintptr_t>self._req, self._keep))
        self._req = NULL


cdef class Engine:
    """One HIXL engine: ``Engine(local_engine="127.0.0.1:0", options=None)``.

    Listens on ``local_engine`` (port 0 picks a free port; see ``address``).
    """
    cdef Hixl *_h
    # Calls running without the GIL in any thread (each bracket of ``with
    # nogil`` that uses _h counts itself, with the GIL held, so a plain int
    # will do), and whether finalize has begun: finalize refuses new calls,
    # waits for these (bounded), and only then frees the engine.
    cdef int _calls
    cdef bint _closing
    cdef readonly str address
    cdef object _handles
    cdef list _orphans  # (request, buffers) of dropped, unfinished TransferRequests
    cdef object __weakref__

    def __cinit__(self, local_engine="127.0.0.1:0", options=None):
        self._h = NULL
        self._orphans = []
        # Strong references: a registered region's buffer must stay alive
        # (peers may write into it) until deregister_mem or finalize.
        self._handles = {}
        cdef cmap[AscendString, AscendString] opts
        cdef bytes local = _b(local_engine, "local_engine")
        cdef bytes k, v
        if options is not None and not isinstance(options, dict):
            raise ParamError(f"options must be a dict, got {type(options).__name__}")
        if _BUILD_CAPS & CAP_OPTIONS:
            # The built-in engine's settings (config.py), under what the caller gave.
            options = {**config.engine_options(), **(options or {})}
        if options is not None:
            for key, value in options.items():
                k = _b(key, "option name")
                v = _b(str(value) if isinstance(value, int) else value, "option value")
                opts[AscendString(k, len(k))] = AscendString(v, len(v))
        self._h = new Hixl()
        cdef Status st
        cdef AscendString cl = AscendString(local, len(local))
        with nogil:
            st = self._h.Initialize(cl, opts)
        if st != 0:
            msg = LastError().decode(errors="replace")
            self._h.Finalize()
            del self._h
            self._h = NULL
            raise error_for(st, f"Initialize({local_engine!r}): {msg}")
        cdef string addr
        if GetListenAddress(self._h[0], addr) == 0:
            self.address = addr.decode()
        else:
            self.address = local.decode()

    def __dealloc__(self):
        # No call can be in flight here: every call holds a reference to
        # this object (its own, or its window state's). Were one counted anyway,
        # the engine is left alive rather than freed under it.
        if self._h != NULL and self._calls == 0:
            # Finalize is local (no collective, no waiting on peers beyond a
            # bounded flush), so a forgotten engine is still torn down.
            self._h.Finalize()
            del self._h
            self._h = NULL

    cdef int _alive(self) except -1:
        if self._h == NULL:
            raise ParamError("engine is finalized")
        if self._closing:
            raise ParamError("engine is being finalized")
        return 0

    cdef inline bint _usable(self) noexcept:
        """The hot path's check: not finalized, nor being finalized."""
        return self._h != NULL and not self._closing

    @property
    def finalized(self):
        return self._h == NULL

    cdef _reap_orphans(self):
        """Forget the dropped requests that have finished since."""
        cdef TransferStatus ts
        keep = []
        for req, buffers in self._orphans:
            ts = TransferStatus.WAITING
            if self._h.GetTransferStatus(<TransferReq><uintptr_t>req, ts) == 0 and ts == TransferStatus.WAITING:
                keep.append((req, buffers))
        self._orphans = keep

    def finalize(self, timeout_ms=None):
        """Release every resource; idempotent. Calls other threads are making
        finish first (new ones raise ParamError): HixlTimeoutError, the engine
        left as it was, if some still run after ``timeout_ms`` (default: the
        engine calls' timeout)."""
        if self._h == NULL or self._closing:
            return  # finalized, or being finalized by another thread
        cdef int32_t t = _timeout(timeout_ms)
        cdef double deadline = hixl_now_s() + t / 1000.0
        self._closing = True
        while self._calls > 0:
            if hixl_now_s() > deadline:
                self._closing = False
                raise error_for(TIMEOUT, f"finalize: {self._calls} engine call(s) still running in other threads "
                                         f"after {t} ms; the engine is left as it was")
            with nogil:
                hixl_pause_ms(1)
        handles = list(self._handles.values())
        self._handles.clear()
        for h in handles:  # engine memory that local views still use outlives Finalize
            if (<MemHandle>h)._exports > 0 and (<MemHandle>h).allocated:
                (<MemHandle>h)._deregister()
        with nogil:
            self._h.Finalize()
        self._orphans = []  # the engine dropped their transfers with its worker
        for h in handles:  # buffers are released once nothing can reach them
            (<MemHandle>h)._forget()
        del self._h
        self._h = NULL
        self._closing = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()

    def __repr__(self):
        return f"<hixl_rma.Engine {self.address}{' finalized' if self._h == NULL else ''}>"

    cdef MemHandle _new_handle(self, CMemHandle h, uintptr_t addr, size_t length, int mem_type, bint allocated):
        cdef MemHandle mh = MemHandle.__new__(MemHandle)
        mh._h = h
        mh.engine = self
        mh.addr = addr
        mh.length = length
        mh.mem_type = mem_type
        mh.allocated = allocated
        self._handles[<uintptr_t>h] = mh
        return mh

    cdef MemHandle _register(self, uintptr_t addr, size_t length, int mem_type):
        cdef MemDesc desc
        desc.addr = addr
        desc.len = length
        cdef CMemHandle h = NULL
        cdef Status st
        if mem_type != MEM_HOST and mem_type != MEM_DEVICE:
            raise ParamError(f"mem_type must be MEM_HOST or MEM_DEVICE, got {mem_type}")
        self._calls += 1
        with nogil:
            st = self._h.RegisterMem(desc, <MemType>mem_type, h)
        self._calls -= 1
        _check(st, f"RegisterMem(addr={addr}, length={length})")
        return self._new_handle(h, addr, length, mem_type, False)

    def register_mem(self, buffer, mem_type=MEM_HOST):
        """Register a writable buffer-protocol object; the handle keeps it alive."""
        self._alive()
        cdef int mt = _int_arg(mem_type, "mem_type")
        cdef Py_buffer view
        try:
            PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)
        except (TypeError, BufferError, ValueError) as exc:  # numpy: ValueError when read-only
            raise ParamError(f"register_mem needs a writable contiguous buffer, got "
                             f"{type(buffer).__name__}: {exc}") from None
        cdef MemHandle mh
        try:
            mh = self._register(<uintptr_t>view.buf, <size_t>view.len, mt)
        except BaseException:
            PyBuffer_Release(&view)
            raise
        mh._view = view
        mh._has_view = True
        mh.owner = buffer
        return mh

    def register_mem_addr(self, addr, length, mem_type=MEM_HOST):
        """Register raw memory; the caller keeps it alive until deregistered."""
        self._alive()
        return self._register(_uint(addr, "addr"), _uint(length, "length"), _int_arg(mem_type, "mem_type"))

    def alloc_mem(self, length):
        """Allocate and register engine-owned memory that same-node peers can map."""
        self._alive()
        cdef size_t n = _uint(length, "length")
        cdef CMemHandle h = NULL
        cdef void *addr = NULL
        cdef Status st
        self._calls += 1
        with nogil:
            st = AllocMem(self._h[0], n, MEM_HOST, h, addr)
        self._calls -= 1
        _check(st, f"AllocMem(length={n})")
        return self._new_handle(h, <uintptr_t>addr, n, MEM_HOST, True)

    def deregister_mem(self, MemHandle handle not None):
        """Withdraw a region; peers lose access before this returns."""
        self._alive()
        if handle.engine is not self:
            raise ParamError("memory handle belongs to another engine")
        if handle._h == NULL:
            raise ParamError(f"memory handle at addr={handle.addr} is already deregistered")
        key = <uintptr_t>handle._h
        self._handles.pop(key, None)
        st = handle._deregister()
        if handle._h != NULL:
            self._handles[key] = handle  # still registered: finalize releases it
        _check(st, "DeregisterMem")

    def connect(self, remote, timeout_ms=None, expect=None):
        """Handshake with a listening engine (job token checked). ``expect``:
        the engine id (option EngineId) the engine there must prove, else the
        connect is refused (FAILED) and another address may be tried; vendor
        HIXL has no engine ids, and connects as without."""
        self._alive()
        cdef AscendString cr = _remote(remote)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st
        cdef bytes e
        cdef AscendString ce
        if expect is None:
            self._calls += 1
            with nogil:
                st = self._h.Connect(cr, t)
            self._calls -= 1
        else:
            e = _b(expect, "expect")
            ce = AscendString(e, len(e))
            self._calls += 1
            with nogil:
                st = ConnectTo(self._h[0], cr, ce, t)
            self._calls -= 1
            if st == 103905U:  # UNSUPPORTED (vendor HIXL)
                self._calls += 1
                with nogil:
                    st = self._h.Connect(cr, t)
                self._calls -= 1
        _check(st, f"Connect({remote!r})")

    def disconnect(self, remote, timeout_ms=None):
        """Flush and drop the connection to ``remote``."""
        self._alive()
        cdef AscendString cr = _remote(remote)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st
        self._calls += 1
        with nogil:
            st = self._h.Disconnect(cr, t)
        self._calls -= 1
        _check(st, f"Disconnect({remote!r})")

    def transfer_sync(self, remote, op, descs, timeout_ms=None):
        """Move a batch of (local_addr, remote_addr, length) blocks; wait for remote completion."""
        self._alive()
        cdef vector[TransferOpDesc] v
        _descs(descs, v)
        cdef AscendString cr = _remote(remote)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st
        cdef int cop = _opcode(op)
        self._calls += 1
        with nogil:
            st = self._h.TransferSync(cr, <TransferOp>cop, v, t)
        self._calls -= 1
        _check(st, f"TransferSync({remote!r}, {'READ' if cop == READ else 'WRITE'}, {v.size()} blocks)")

    def post(self, remote, op, descs, bint local_device=False):
        """Start a batch without waiting; ``flush(remote)`` completes it.
        ``local_device``: the local buffers are device memory."""
        self._alive()
        cdef vector[TransferOpDesc] v
        _descs(descs, v)
        _post(self, remote, op, v, local_device)

    def post1(self, remote, op, local_addr, remote_addr, length, bint local_device=False):
        """``post`` of one block, without building a descriptor array."""
        self._alive()
        cdef vector[TransferOpDesc] v
        v.resize(1)
        v[0].local_addr = _uint(local_addr, "local_addr")
        v[0].remote_addr = _uint(remote_addr, "remote_addr")
        v[0].len = _uint(length, "length")
        _post(self, remote, op, v, local_device)

    def transfer_async(self, remote, op, descs, keep=None):
        """Post a batch; returns a TransferRequest (``keep`` is held until it completes)."""
        self._alive()
        cdef vector[TransferOpDesc] v
        _descs(descs, v)
        cdef AscendString cr = _remote(remote)
        cdef TransferArgs args
        cdef TransferReq req = NULL
        cdef Status st
        cdef int cop = _opcode(op)
        cdef int64_t t0 = time.monotonic_ns()
        self._calls += 1
        with nogil:
            st = self._h.TransferAsync(cr, <TransferOp>cop, v, args, req)
        self._calls -= 1
        cdef int64_t t1 = time.monotonic_ns()
        _check(st, f"TransferAsync({remote!r}, {v.size()} blocks)")
        if self._orphans:
            self._reap_orphans()
        cdef TransferRequest tr = TransferRequest.__new__(TransferRequest)
        tr._req = req
        tr.engine = self
        tr._keep = keep
        tr._t0 = t0
        tr._post_ns = t1 - t0
        return tr

    def send_notify(self, remote, name, msg=b"", timeout_ms=None):
        """Deliver (name, msg) to ``remote`` after all earlier transfers to it completed."""
        self._alive()
        cdef bytes n = _b(name, "name"), m = _b(msg, "msg")  # held for the call
        cdef AscendString cr = _remote(remote)
        cdef NotifyDesc nd = _notify_desc(n, m)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st
        self._calls += 1
        with nogil:
            st = self._h.SendNotify(cr, nd, t)
        self._calls -= 1
        _check(st, f"SendNotify({remote!r})")

    def post_notify(self, remote, name, msg=b"", timeout_ms=None):
        """send_notify, or -- while the engine's copy thread still has this
        rank's detached copies to ``remote`` to make -- queued behind them
        (True is returned then; a failure is the next flush's)."""
        self._alive()
        cdef bytes n = _b(name, "name"), m = _b(msg, "msg")  # held for the call
        cdef AscendString cr = _remote(remote)
        cdef NotifyDesc nd = _notify_desc(n, m)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st
        cdef cpp_bool queued = False
        self._calls += 1
        with nogil:
            st = PostNotify(self._h[0], cr, nd, t, queued)
        self._calls -= 1
        if st == 103905U:  # UNSUPPORTED (vendor HIXL): there is nothing to queue behind
            self.send_notify(remote, name, msg, timeout_ms)
            return False
        _check(st, f"PostNotify({remote!r})")
        return queued

    def get_notifies(self):
        """Take the notifications received so far: a list of (name: str, msg: bytes)."""
        self._alive()
        cdef vector[NotifyDesc] v
        cdef Status st
        self._calls += 1
        with nogil:
            st = self._h.GetNotifies(v)
        self._calls -= 1
        _check(st, "GetNotifies")
        out = []
        for i in range(v.size()):
            out.append((v[i].name.GetString()[:v[i].name.GetLength()].decode(errors="surrogateescape"),
                        v[i].notify_msg.GetString()[:v[i].notify_msg.GetLength()]))
        return out

    cdef uint64_t _atomic(self, remote, AtomicOp op, object remote_addr, uint64_t value, uint64_t compare,
                          bint fetch, object timeout_ms) except? 0:
        self._alive()
        cdef uintptr_t addr = _uint(remote_addr, "remote_addr")
        cdef AscendString cr = _remote(remote)
        cdef int32_t t = _timeout(timeout_ms)
        cdef uint64_t result = 0
        cdef Status st
        self._calls += 1
        with nogil:
            st = Atomic(self._h[0], cr, op, addr, value, compare, &result if fetch else NULL, t)
        self._calls -= 1
        _check(st, f"atomic at {remote!r} addr={addr}")
        return result

    def atomic_fetch_add(self, remote, remote_addr, value, timeout_ms=None):
        """Atomically add ``value`` (mod 2**64) to the uint64 at remote_addr; return the old value."""
        return self._atomic(remote, AtomicOp.ADD, remote_addr, _u64(value, "value"), 0, True, timeout_ms)

    def atomic_cas(self, remote, remote_addr, compare, value, timeout_ms=None):
        """Store ``value`` if the uint64 at remote_addr equals ``compare``; return the old value."""
        return self._atomic(remote, AtomicOp.CSWAP, remote_addr, _u64(value, "value"),
                            _u64(compare, "compare"), True, timeout_ms)

    def atomic_swap(self, remote, remote_addr, value, timeout_ms=None):
        """Store ``value`` at remote_addr; return the old value."""
        return self._atomic(remote, AtomicOp.SWAP, remote_addr, _u64(value, "value"), 0, True, timeout_ms)

    def atomic_fetch_op(self, remote, remote_addr, op, value, timeout_ms=None):
        """Fetching ADD/AND/OR/XOR/SWAP on a remote uint64; returns the old value."""
        return self._atomic(remote, _atomic_op(op), remote_addr, _u64(value, "value"), 0, True, timeout_ms)

    def atomic_post(self, remote, remote_addr, op, value):
        """Non-fetching ADD/AND/OR/XOR; completes with the next flush."""
        cdef AtomicOp aop = _atomic_op(op)
        if aop == AtomicOp.SWAP or aop == AtomicOp.CSWAP:
            raise ParamError(f"atomic_post supports ADD, AND, OR, XOR, not {op}")
        self._atomic(remote, aop, remote_addr, _u64(value, "value"), 0, False, None)

    def atomic_many(self, remote, str op, addrs, values, bint fetch, timeout_ms=None):
        """One atomic per (addr, value) pair (uint64 arrays); returns the old
        values as a uint64 array when ``fetch``, else posts them (complete at flush)."""
        self._alive()
        cdef AtomicOp aop = _atomic_op(op)
        if not fetch and (aop == AtomicOp.SWAP or aop == AtomicOp.CSWAP):
            raise ParamError(f"atomic_many: {op} must fetch")
        cdef const uint64_t[::1] a = np.ascontiguousarray(addrs, dtype=np.uint64)
        cdef const uint64_t[::1] v = np.ascontiguousarray(values, dtype=np.uint64)
        if a.shape[0] != v.shape[0]:
            raise ParamError(f"atomic_many: {a.shape[0]} addresses but {v.shape[0]} values")
        out = np.zeros(a.shape[0] if fetch else 0, np.uint64)
        cdef uint64_t[::1] o = out
        cdef AscendString cr = _remote(remote)
        cdef int32_t t = _timeout(timeout_ms)
        cdef Status st = 0
        cdef Py_ssize_t i, n = a.shape[0]
        self._calls += 1
        with nogil:
            for i in range(n):
                st = Atomic(self._h[0], cr, aop, a[i], v[i], 0, &o[i] if fetch else NULL, t)
                if st != 0:
                    break
        self._calls -= 1
        _check(st, f"atomic {op} at {remote!r} ({n} elements)")
        return out if fetch else None

    def flush(self, remote, timeout_ms=None):
        """Remote completion of all work posted so far to ``remote``."""
        _peer_call(self, Flush, remote, timeout_ms, "Flush")

    def remote_ptr(self, remote, remote_addr, length):
        """Address in this process of a peer's mapped region (UnsupportedError if not mapped)."""
        self._alive()
        cdef uintptr_t raddr = _uint(remote_addr, "remote_addr")
        cdef size_t n = _uint(length, "length")
        cdef AscendString cr = _remote(remote)
        cdef void *p = NULL
        cdef Status st
        self._calls += 1
        with nogil:
            st = RemotePtr(self._h[0], cr, raddr, n, p)
        self._calls -= 1
        _check(st, f"RemotePtr({remote!r}, addr={remote_addr}, length={length})")
        return <uintptr_t>p

    def pin_remote(self, remote, remote_addr, length):
        """remote_ptr, as a RemotePin that keeps the mapping until it goes
        (UnsupportedError if not mapped)."""
        self._alive()
        cdef uintptr_t raddr = _uint(remote_addr, "remote_addr")
        cdef size_t n = _uint(length, "length")
        cdef AscendString cr = _remote(remote)
        cdef void *p = NULL
        cdef void *pin = NULL
        cdef Status st
        self._calls += 1
        with nogil:
            st = PinRemote(self._h[0], cr, raddr, n, p, pin)
        self._calls -= 1
        _check(st, f"PinRemote({remote!r}, addr={remote_addr}, length={length})")
        cdef RemotePin out = RemotePin.__new__(RemotePin)
        out._pin, out.addr, out.length = pin, <uintptr_t>p, n
        return out

    def refresh(self, remote, timeout_ms=None):
        """Fetch a connected peer's memory table again now (RefreshPeer)."""
        _peer_call(self, RefreshPeer, remote, timeout_ms, "RefreshPeer")

    def wake_progress(self):
        """This thread is about to sleep on something else than the engine
        (WakeProgress): peers' requests are served meanwhile by the progress
        thread, not at its next park step."""
        if self._usable():
            WakeProgress(self._h[0])

    def wait_notifies(self, timeout_ms):
        """Sleep (GIL released) until a notification is waiting for
        get_notifies or timeout_ms passed. False where the engine cannot
        (vendor HIXL): the caller then polls."""
        self._alive()
        cdef int32_t tmo = _timeout(timeout_ms)
        cdef Status st
        self._calls += 1
        with nogil:
            st = WaitNotifies(self._h[0], tmo)
        self._calls -= 1
        if st == 103905U:  # UNSUPPORTED
            return False
        _check(st, "WaitNotifies")
        return True

    def mapping_generation(self):
        """The engine's mapping generation: it changes whenever a pointer
        from remote_ptr may have gone stale (read it before the pointer)."""
        self._alive()
        return MappingGeneration(self._h[0])

    def capabilities(self):
        """What this engine does, as names of CAPABILITY_BITS: this build's CAPABILITIES less the paths
        and features its options switched off (none on vendor HIXL)."""
        self._alive()
        cdef Capabilities caps
        caps.flags = 0
        if not _BUILD_CAPS:
            return frozenset()
        _check(GetCapabilities(self._h[0], caps), "GetCapabilities")
        return _cap_names(caps.flags)

    def stats(self):
        """Engine counters as a dict."""
        self._alive()
        cdef Stats s
        _check(GetStats(self._h[0], s), "GetStats")
        return dict(bytes_written=s.bytes_written, bytes_read=s.bytes_read, transfer_ops=s.transfer_ops,
                    direct_ops=s.direct_ops, atomic_ops=s.atomic_ops, notifies_sent=s.notifies_sent,
                    notifies_received=s.notifies_received, table_refreshes=s.table_refreshes,
                    regions=s.regions, endpoints=s.endpoints, accepted=s.accepted,
                    vectored_ops=s.vectored_ops, vectored_calls=s.vectored_calls, peer_lookups=s.peer_lookups,
                    target_atomics_asked=s.target_atomics_asked, target_atomics_served=s.target_atomics_served,
                    target_moves_asked=s.target_moves_asked, target_writes_posted=s.target_writes_posted)

    def telemetry(self):
        """The engine's telemetry (option Telemetry) as a dict: ``enabled``, ``total`` and ``peers``
        (engine address -> counters, with that peer's ``post_time``, ``completion_time`` and
        ``notifies_received``), ``post_time`` and ``completion_time`` (``buckets``: counts per
        log2 bucket of microseconds, bucket i under 2**i us; ``count``; ``sum_us``), ``connects``,
        ``connect_failures``, ``accepts``, ``errors`` (status -> failed calls). UnsupportedError on
        vendor HIXL."""
        self._alive()
        cdef CTelemetry t
        _check(GetTelemetry(self._h[0], t), "GetTelemetry")
        peers = {}
        for i in range(t.peers.size()):
            c = _counters(t.peers[i].counters)
            c.update(post_time=_histogram(t.peers[i].post_time), completion_time=_histogram(t.peers[i].completion_time),
                     notifies_received=None if t.peers[i].notifies_received == <uint64_t>-1
                     else t.peers[i].notifies_received)
            peers[t.peers[i].address.decode(errors="replace")] = c
        return dict(enabled=bool(t.enabled), total=_counters(t.total), peers=peers,
                    post_time=_histogram(t.post_time), completion_time=_histogram(t.completion_time),
                    connects=t.connects, connect_failures=t.connect_failures, accepts=t.accepts,
                    errors={int(t.errors[i].first): int(t.errors[i].second) for i in range(t.errors.size())})

    def peer_dead(self, remote):
        """True once the engine knows ``remote`` died (its connection lost,
        or on this host its process gone); False while it looks alive or is
        not connected. Asks nothing of the peer and consumes nothing: the
        failure a later flush is to report stays for it (a liveness probe
        asks this, not an empty flush). UnsupportedError on vendor HIXL."""
        self._alive()
        cdef AscendString cr = _remote(remote)
        cdef PeerState state = PeerState.NOT_CONNECTED
        cdef Status st
        self._calls += 1
        with nogil:
            st = GetPeerState(self._h[0], cr, state)
        self._calls -= 1
        _check(st, f"GetPeerState({remote!r})")
        return state == PeerState.DEAD

    def peer_stats(self, remote):
        """Counters of one peer as a dict."""
        self._alive()
        cdef PeerStats s
        _check(GetPeerStats(self._h[0], _remote(remote), s), f"GetPeerStats({remote!r})")
        return dict(bytes_written=s.bytes_written, bytes_read=s.bytes_read, ops=s.ops,
                    answers_held=s.answers_held, detached=s.detached, bulk_lane=bool(s.bulk_lane),
                    bulk_peak_bytes=s.bulk_peak_kib << 10)


cdef dict _counters(const TelemetryCounters &c):
    return dict(write_bytes=c.write_bytes, read_bytes=c.read_bytes, write_ops=c.write_ops, read_ops=c.read_ops,
                write_requests=c.write_requests, read_requests=c.read_requests, notifies_sent=c.notifies_sent,
                errors=c.errors)


cdef dict _histogram(const TelemetryHistogram &h):
    return dict(buckets=[h.buckets[i] for i in range(32)], count=h.count, sum_us=h.sum_ns / 1000.0)


ctypedef Status (*_PeerCall)(Hixl &, const AscendString &, int32_t) nogil


cdef int _peer_call(Engine eng, _PeerCall call, remote, timeout_ms, str what) except -1:
    """An extension call that takes a peer and a timeout (Flush, RefreshPeer),
    the GIL released while it waits."""
    eng._alive()
    cdef AscendString cr = _remote(remote)
    cdef int32_t t = _timeout(timeout_ms)
    cdef Status st
    eng._calls += 1
    with nogil:
        st = call(eng._h[0], cr, t)
    eng._calls -= 1
    return _check(st, f"{what}({remote!r})")


cdef int _post(Engine self, remote, object op, vector[TransferOpDesc] &v, bint local_device, bint detach_writes=False,
               int priority=1) except -1:
    """TransferPost of ``v``; ``detach_writes``: a WRITE's large copies into
    mapped memory go to the copy thread, queued at ``priority``."""
    cdef AscendString cr = _remote(remote)
    cdef Status st
    cdef int cop = _opcode(op)
    cdef bint detach = detach_writes and cop == WRITE
    self._calls += 1
    with nogil:
        st = TransferPost(self._h[0], cr, <TransferOp>cop, v, MEM_DEVICE if local_device else MEM_HOST, detach,
                          <Priority>priority)
    self._calls -= 1
    _check(st, f"TransferPost({remote!r}, {v.size()} blocks)")
    return 0


cdef AtomicOp _atomic_op(object op) except *:
    ops = {"ADD": AtomicOp.ADD, "AND": AtomicOp.AND, "OR": AtomicOp.OR, "XOR": AtomicOp.XOR,
           "SWAP": AtomicOp.SWAP}
    if not isinstance(op, str):
        raise ParamError(f"atomic op must be a str (ADD, AND, OR, XOR, SWAP), got {type(op).__name__}")
    try:
        return ops[op.upper()]
    except KeyError:
        raise ParamError(f"unknown atomic op {op!r}") from None


cdef int _descs(object descs, vector[TransferOpDesc] &v) except -1:
    cdef const uint64_t[:, ::1] a
    if isinstance(descs, np.ndarray):
        arr = descs
        if arr.dtype != np.uint64:
            if arr.dtype.kind not in "iu":
                raise ParamError(f"descs must be an integer (n, 3) array, got dtype {arr.dtype}")
            if arr.size and arr.min() < 0:
                raise ParamError("descs hold a negative address or length")
            arr = arr.astype(np.uint64)
        arr = np.ascontiguousarray(arr)
    else:
        try:
            arr = np.asarray(descs, dtype=np.uint64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ParamError(f"descs must be (local_addr, remote_addr, length) triples: {exc}") from None
    if arr.size == 0:
        arr = arr.reshape(0, 3)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ParamError(f"descs must have shape (n, 3), got {arr.shape}")
    a = arr
    with nogil:
        FillDescs(v, &a[0, 0] if a.shape[0] else NULL, a.shape[0])
    return 0
# A window's state, in parts by MPI chapter, composed by WindowState (state.pxi).
include "_window_state/base.pxi"
include "_window_state/buffers.pxi"
include "_window_state/table.pxi"
include "_window_state/epochs.pxi"
include "_window_state/locks.pxi"
include "_window_state/accumulate.pxi"
include "_window_state/notify.pxi"
include "_window_state/fence.pxi"
include "_window_state/state.pxi"
include "_window_state/posts.pxi"
include "_winbase.pxi"


# ------------------------------------------------------------ DLPack dtype

cdef extern from *:
    """
    #include <stdint.h>
    typedef struct { int32_t device_type; int32_t device_id; } hixl_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } hixl_DLDataType;
    typedef struct {
      void *data; hixl_DLDevice device; int32_t ndim; hixl_DLDataType dtype;
      int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } hixl_DLTensor;
    typedef struct { hixl_DLTensor dl_tensor; void *manager_ctx; void (*deleter)(void *); } hixl_DLManaged;
    typedef struct {
      uint32_t major, minor; void *manager_ctx; void (*deleter)(void *); uint64_t flags;
      hixl_DLTensor dl_tensor;
    } hixl_DLManagedVersioned;
    """
    ctypedef struct hixl_DLDevice:
        int32_t device_type
    ctypedef struct hixl_DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct hixl_DLTensor:
        hixl_DLDevice device
        hixl_DLDataType dtype
    ctypedef struct hixl_DLManaged:
        hixl_DLTensor dl_tensor
    ctypedef struct hixl_DLManagedVersioned:
        hixl_DLTensor dl_tensor

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid


def dlpack_dtype(capsule):
    """(device_type, code, bits, lanes) of an unconsumed DLPack capsule
    (versioned or not); the capsule stays the producer's to delete."""
    cdef hixl_DLTensor *t
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        t = &(<hixl_DLManagedVersioned *>PyCapsule_GetPointer(capsule, b"dltensor_versioned")).dl_tensor
    elif PyCapsule_IsValid(capsule, b"dltensor"):
        t = &(<hixl_DLManaged *>PyCapsule_GetPointer(capsule, b"dltensor")).dl_tensor
    else:
        raise ParamError(f"not an unconsumed DLPack capsule: {capsule!r}")
    return t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes


cdef extern from *:
    """
    static inline void hixl_memory_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
    """
    void hixl_memory_fence() nogil


def memory_fence():
    """A full memory barrier (MPI_Win_sync): loads after it see the stores
    that peers' one-sided writes made visible before it."""
    hixl_memory_fence()
