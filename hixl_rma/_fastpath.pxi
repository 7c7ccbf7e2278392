# The hot path of hixl_rma.Win (included by _engine.pyx).
#
# Put, Get and Flush of the common case -- a C-contiguous origin, a target
# that is None or an int displacement, an open epoch, a window whose target
# is already connected -- are parsed into C values here and done in one
# step: a memcpy into (or out of) a peer region mapped into this process, or
# one engine post. Anything else returns False and the Python layer
# (core.py and the parts) takes it, with its full checks and error messages.

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from cpython.exc cimport PyErr_Clear
from libc.string cimport memcpy, strchr
from libc.stdint cimport int64_t, uint8_t

cdef size_t _NOGIL_COPY = 1 << 16  # copies this large release the GIL
from mpi4py import MPI as _MPI
from mpi4py.util import dtlib as _dtlib
from .ground import constants as _constants
from .ground.errors import EpochError
cdef long _PROC_NULL = _MPI.PROC_NULL
# A target's declared access mode (constants.ACCESS_*), as its metadata carries it.
cdef uint8_t _READ_WRITE = _constants.ACCESS_READ_WRITE
cdef uint8_t _READ_ONLY = _constants.ACCESS_READ_ONLY
cdef uint8_t _WRITE_ONLY = _constants.ACCESS_WRITE_ONLY
cdef extern from "_engine_compat.h" namespace "hixl::ext" nogil:
    const size_t kShareMinBytes  # copies this large go to the engine, whose threads share them out
cdef size_t _SHARED_COPY = kShareMinBytes
from .window import ctrl as _ctrl
cdef uint64_t _CTRL_ACC = _ctrl.ACC
cdef uint64_t _CTRL_SIZE = _ctrl.SIZE
cdef Py_ssize_t _LOCK_WAITERS_WORD = _ctrl.LOCK_WAITERS // 8  # ranks of this node asleep on the lock word
# The passive-target lock word's encoding (epochs.py): writer bit, owner (window rank + 1), count.
cdef uint64_t _LOCK_EXCL = 1ULL << 62
cdef int _OWNER_SHIFT = 32
cdef uint64_t _OWNER_MASK = (1ULL << 30) - 1
cdef long _LOCK_EXCLUSIVE_C = _MPI.LOCK_EXCLUSIVE
cdef long _LOCK_SHARED_C = _MPI.LOCK_SHARED
cdef int _ACC_TRIES = 64  # tries at a taken accumulate lock before the Python layer waits for it
from .ground.errors import PEER_FAILURE as _PEER_FAILURE
cdef Status PEER_FAILURE_STATUS = _PEER_FAILURE


cdef inline Py_ssize_t _reader_word(Py_ssize_t comm_size, Py_ssize_t rank) noexcept nogil:
    """Index (in words) of ``rank``'s reader slot in a control block (ctrl.reader_offset)."""
    return (_CTRL_SIZE + 8 * comm_size + 8 * rank) // 8

cdef extern from "<mutex>" nogil:
    cdef cppclass cpp_mutex "std::mutex":
        void lock()
        void unlock()

cdef extern from "Python.h":
    # Plain status return: a refused buffer means "not the common case".
    int _get_buffer "PyObject_GetBuffer"(object, Py_buffer *, int) noexcept
    # -1 with an OverflowError set past Py_ssize_t (the caller clears it)
    Py_ssize_t _long_as_ssize "PyLong_AsSsize_t"(object) noexcept

cdef extern from *:
    bint _mul_overflow "__builtin_mul_overflow"(size_t, size_t, size_t *) noexcept nogil


cdef object _MPIDatatype = _MPI.Datatype


cdef inline long _kind_code(char kind, Py_ssize_t itemsize) noexcept:
    """A basic type as the hot path compares types (MPI's type matching):
    numpy's kind and item size; 0 for raw bytes (unsigned bytes: bytes,
    bytearray, MPI.BYTE, and uint8 / MPI.UNSIGNED_CHAR, which mpi4py cannot
    tell from bytes), which match any type."""
    if kind == b'u' and itemsize == 1:
        return 0
    return (<long>kind << 8) | (itemsize & 0xFF)


cdef inline long _format_code(const char *fmt, Py_ssize_t itemsize) noexcept:
    """The _kind_code of a buffer's elements by its format, or -1 for a
    format the hot path does not read (another byte order, several fields):
    the Python layer decides on those."""
    cdef char c
    if fmt == NULL:
        return 0  # bytes
    if fmt[0] in b"@=<":  # native ('<' too: the hosts are little-endian)
        fmt += 1
    if fmt[0] == b'Z' and fmt[1] != 0 and fmt[2] == 0 and fmt[1] in b"efdg":
        return _kind_code(b'c', itemsize)
    if fmt[0] == 0 or fmt[1] != 0:
        return -1
    c = fmt[0]
    if c == b'B':
        return 0
    if c in b"bhilqn":
        return _kind_code(b'i', itemsize)
    if c in b"HILQN":
        return _kind_code(b'u', itemsize)
    if c in b"efdg":
        return _kind_code(b'f', itemsize)
    if c == b'?':
        return _kind_code(b'b', itemsize)
    if c == b'c':
        return _kind_code(b'S', itemsize)
    return -1


cdef dict _basic_sizes():
    """Size and type of each named, contiguous basic datatype of MPI by
    handle, as ``size | _kind_code << 16`` (the code 0 where numpy has no
    such type: nothing to match): the target datatypes whose (disp, count,
    datatype) the hot path resolves itself (count elements of that size, no
    holes, of the origin's type)."""
    cdef dict sizes = {}
    cdef long code
    for name in ("BYTE", "CHAR", "SIGNED_CHAR", "UNSIGNED_CHAR", "WCHAR", "SHORT", "UNSIGNED_SHORT", "INT",
                 "UNSIGNED", "LONG", "UNSIGNED_LONG", "LONG_LONG", "UNSIGNED_LONG_LONG", "FLOAT", "DOUBLE",
                 "LONG_DOUBLE", "C_BOOL", "INT8_T", "INT16_T", "INT32_T", "INT64_T", "UINT8_T", "UINT16_T",
                 "UINT32_T", "UINT64_T", "C_FLOAT_COMPLEX", "C_DOUBLE_COMPLEX", "C_LONG_DOUBLE_COMPLEX",
                 "AINT", "OFFSET", "COUNT"):
        dt = getattr(_MPI, name, None)
        if dt is None or dt == _MPI.DATATYPE_NULL:
            continue
        try:
            size = dt.Get_size()
            lb, extent = dt.Get_extent()
        except _MPI.Exception:
            continue  # not in this MPI
        if size > 0 and lb == 0 and extent == size:
            try:
                npdt = _dtlib.to_numpy_dtype(dt)
                code = _kind_code(ord(npdt.kind), npdt.itemsize) if npdt.itemsize == size else 0
            except (ValueError, TypeError, KeyError):
                code = 0
            sizes[dt.handle] = size | (code << 16)
    return sizes


# Filled at the first (disp, count, datatype) a window sees: asking MPI at
# import would use MPI before a program that initializes it itself has.
cdef dict _BASIC_SIZES = None


cdef Py_ssize_t _basic_size(object datatype, const Py_buffer *view) except -1:
    """The element size of a target datatype the hot path resolves itself:
    a named, contiguous basic type (_basic_sizes) of the origin's element
    type or of raw bytes (MPI's type matching); 0 for any other (a derived
    type, a mismatch, an origin format not read here): the Python layer's."""
    global _BASIC_SIZES
    cdef object basic
    cdef long packed, code
    if type(datatype) is not _MPIDatatype:
        return 0
    if _BASIC_SIZES is None:
        _BASIC_SIZES = _basic_sizes()
    basic = _BASIC_SIZES.get(datatype.handle)
    if basic is None:
        return 0
    packed = basic
    code = packed >> 16
    if code != 0 and _format_code(view.format, view.itemsize) not in (0, code):
        return 0
    return packed & 0xFFFF


cdef inline bint _one_char_format(const char *fmt) noexcept:
    """True for a buffer format of one basic element ("d", "<i", "=q"...)."""
    if fmt == NULL:
        return True  # bytes: unsigned bytes
    if fmt[0] in b"<>=!@":
        fmt += 1
    return fmt[0] != 0 and fmt[1] == 0 and strchr(b"bBhHiIlLqQnNefdg?c", fmt[0]) != NULL


@cython.freelist(64)
cdef class _Export:
    """A buffer export held until the flush that completes the operation
    reading or writing it: while it is held, the exporter cannot move its
    memory (a bytearray or array.array refuses to resize), as the slow
    path's buffers also hold theirs."""
    cdef Py_buffer view
    cdef bint held

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef class Target


cdef class WindowState:
    """All of one window's state that calls read per operation: the table
    of its targets (what each rank told the others at creation, and what
    this rank learnt of each since: connected, mapped, dirty), the origin's
    access epochs and Fence's barrier. ``core.WindowCore`` derives from it
    and adds what only the Python layer reads (communicator, memory,
    registrations, info): one object, one state.

    The hot path either completes an operation or raises: when the engine
    refuses or fails it, the error is raised here, naming the call, the
    rank, the window and the bytes; nothing is handed on to be done again.
    ``False``/``0`` from a method means only "not the common case, nothing
    done"."""
    cdef public Engine engine
    cdef object connector    # world rank -> engine address, connecting on first use (the runtime's)
    cdef public str key      # the window's id ("w<world rank of rank 0>.<seq>"), or MPI_WIN_NULL
    cdef public str name     # its name (Set_name), "" until set
    cdef public bint freed
    # the window's transfer priority (info key priority: 0 high, 1 normal, 2
    # bulk), set before its first post: its peer handles, batches and
    # notifications carry it into the engine's queues
    cdef public int priority
    cdef public list targets  # Target views, one per rank of the window
    cdef public object me     # targets[this rank]
    cdef Py_ssize_t n
    # The per-target table: one entry per rank, the only copy. size is the
    # real size; the hot path stays off dynamic windows (absolute addresses).
    cdef bint dynamic
    cdef vector[uint64_t] base, size, unit, ctrl_addr
    cdef vector[int64_t] world
    cdef vector[uint8_t] access, mem_type, acc_locked
    cdef vector[uintptr_t] mapped
    cdef vector[uint8_t] epoch, passive, dirty, ready
    # Notifications held back for a batch (notify.py decides when): per
    # rank, the tags, in order; pending work of the target, sent by the
    # synchronization that completes the rest (Flush, Fence, Unlock) or by
    # notify.py. notify_mu orders the sends of all threads (the pacer's
    # too): whoever holds it takes the tags, so batches leave in order.
    cdef vector[vector[int64_t]] held
    cdef Py_ssize_t held_n       # ranks with held notifications
    cdef vector[uint64_t] sent   # notifications sent to each rank (notify.py's credit counts them)
    cdef bytes notify_name       # "<key>:n/<this world rank>": what the target's queue is keyed by
    cdef public object notify_late  # a failure of a send nobody waited for (the pacer's): the next sync's
    cdef cpp_mutex notify_mu
    cdef vector[string] addr     # the engine address each rank is connected at ("" until then)
    # per rank: the engine's handle of that connection (AcquirePeer), taken at
    # the first post, so that posts and flushes name no address; NULL until
    # then, after a failed call (the next one resolves the address again),
    # or where the engine has no handles (the vendor build)
    cdef vector[PeerRef *] peer_ref
    # handles dropped while another thread's call may still use them
    # (without the GIL): released with the window state, never before
    cdef vector[PeerRef *] peer_retired
    cdef vector[uint64_t] generation  # per rank: the engine's mapping generation when mapped[r] was taken
    cdef list pins         # per rank: the RemotePin that keeps mapped[r] mapped, or None
    cdef list pending
    cdef list posted       # per rank: the op of non-fetching atomics posted since its last flush, or None
    # The origin side of the epoch state machine, owned here (epochs.py
    # changes it only through the methods below, so the hot path reads the
    # one truth): epoch[r] / passive[r] say an access epoch is open to r.
    cdef bint open_all           # Lock_all or the HIXL face: every target, passive
    cdef public bint fence_open  # a fence epoch: every target, active
    cdef dict _locks             # rank -> (lock_type, acquired) of Lock
    cdef object _access          # the PSCW access group (a frozenset) after Start, else None
    cdef object _lock_all        # False, or (True, acquired) inside Lock_all
    cdef bint _always_open       # the HIXL-style face: no epochs to open
    cdef public bint fence_used
    # Fence's barrier when every rank's control block is mapped here: each
    # rank's fence counter (fence_word[rank]), raised by one per Fence.
    cdef vector[uint64_t *] fence_word
    cdef uint64_t fence_seq
    cdef object fence_stalled  # fence_stalled(missing ranks, timed_out): raises
    cdef object fence_pins     # what keeps the peers' fence counters mapped
    cdef long fence_modes  # the assertions Fence takes here (all but MODE_NOSUCCEED)
    # Each rank's control block where it is mapped here (its lock words:
    # ctrl.py's layout), or NULL; what keeps it mapped.
    cdef vector[uint64_t *] ctrl_word
    cdef vector[uint64_t] ctrl_gen   # the mapping generation when ctrl_word[r] was taken
    cdef list ctrl_pins
    cdef Py_ssize_t comm_rank
    cdef uint64_t acc_owner  # this rank's accumulate-lock value: world rank + 1

    def __cinit__(self, *args, **kwargs):
        # A null window until set_targets fills the table in.
        self.key = "MPI_WIN_NULL"
        self.name = ""
        self.priority = 1
        self.freed = True
        self.targets = []
        self.pins = []
        self.pending = []
        self.posted = []
        self.ctrl_pins = []
        self._locks = {}
        self._access = None
        self._lock_all = False

    def __dealloc__(self):
        self._release_peers()

    cdef void _release_peers(self):
        """At the end of the window state, when no call can be using them
        (a call holds the state alive while it runs)."""
        cdef size_t i
        for i in range(self.peer_ref.size()):
            ReleasePeer(self.peer_ref[i])
        for i in range(self.peer_retired.size()):
            ReleasePeer(self.peer_retired[i])
        self.peer_ref.clear()
        self.peer_retired.clear()

    cdef PeerRef *_peer(self, Py_ssize_t r):
        """r's connection handle (after _connect), or NULL: post by name."""
        cdef PeerRef *p = self.peer_ref[r]
        if p == NULL and _HAS_PEER_HANDLES:
            if AcquirePeer(self.engine._h[0], AscendString(self.addr[r].c_str(), self.addr[r].size()), p,
                           <Priority>self.priority) != 0:
                p = NULL
            self.peer_ref[r] = p
        return p

    cdef void _drop_peer(self, Py_ssize_t r):
        """The next call resolves r's address again; this handle may still be
        in another thread's call, so it is retired, not released."""
        if self.peer_ref[r] != NULL:
            self.peer_retired.push_back(self.peer_ref[r])
            self.peer_ref[r] = NULL

    def set_targets(self, Engine engine, object connector, metas, world_ranks, Py_ssize_t comm_rank,
                    uint64_t acc_owner, bint dynamic):
        """Fill the table from every rank's creation record (winmeta.Meta),
        the ranks' world ranks and this rank's place; ``connector(world
        rank)`` connects to a rank and gives its engine address."""
        cdef Py_ssize_t i
        self.engine = engine
        self.connector = connector
        self.n = len(metas)
        self.dynamic = dynamic
        self.comm_rank, self.acc_owner = comm_rank, acc_owner
        for i in range(self.n):
            m = metas[i]
            self.base.push_back(m.base)
            self.size.push_back(m.size)
            self.unit.push_back(m.disp_unit)
            self.ctrl_addr.push_back(m.ctrl)
            self.access.push_back(m.access)
            self.mem_type.push_back(m.mem_type)
            self.acc_locked.push_back(m.acc_locked)
            self.world.push_back(world_ranks[i])
        self.mapped.resize(self.n, 0)
        self.generation.resize(self.n, 0)
        self.pins = [None] * self.n
        self.epoch.resize(self.n, 0)
        self.passive.resize(self.n, 0)
        self.dirty.resize(self.n, 0)
        self.ready.resize(self.n, 0)
        self.held.resize(self.n)
        self.sent.resize(self.n, 0)
        self.notify_name = f"{self.key}:n/{acc_owner - 1}".encode()
        self.addr.resize(self.n)
        self.peer_ref.resize(self.n, NULL)
        self.pending = [[] for _ in range(self.n)]
        self.posted = [None] * self.n
        self.ctrl_word.resize(self.n, NULL)
        self.ctrl_gen.resize(self.n, 0)
        self.ctrl_pins = [None] * self.n
        self.targets = [Target.view(self, i) for i in range(self.n)]
        self.me = self.targets[comm_rank]
        self.freed = False

    def label(self):
        """The window's name in messages: its name, else its key."""
        return self.name or self.key

    cdef inline int _enter(self) except -1:
        """Count a call into the engine made without the GIL (Engine.finalize
        waits for them); ParamError once the engine is finalized or closing."""
        if self.engine is None or not self.engine._usable():
            raise ParamError(f"window {self.label()}: its engine is finalized")
        self.engine._calls += 1
        return 0

    cdef inline bint _live(self):
        return self.n > 0 and self.engine is not None and self.engine._usable()

    def set_ctrl(self, Py_ssize_t rank, uintptr_t addr, keep=None, uint64_t generation=0):
        """rank's control block is mapped here at ``addr`` (``keep`` keeps
        it so; ``generation``: the engine's mapping generation read before
        the pointer, as for set_ready): its lock words are taken with CPU
        atomics."""
        if 0 <= rank < self.n:
            self.ctrl_word[rank] = <uint64_t *>addr
            self.ctrl_pins[rank] = keep
            self.ctrl_gen[rank] = generation

    cdef inline uint64_t *_ctrl(self, Py_ssize_t r):
        """rank r's control block mapped here, or NULL. A mapping older than
        the engine's mapping generation (a region withdrawn, a peer dead or
        dropped) is not used: the Python layer takes the call, which finds
        out, and maps it again (r is made ready again)."""
        if self.ctrl_word[r] == NULL or r == self.comm_rank:
            return self.ctrl_word[r]
        if MappingGeneration(self.engine._h[0]) != self.ctrl_gen[r]:
            self.ctrl_word[r] = NULL
            self.ctrl_pins[r] = None
            self.ready[r] = 0
            return NULL
        return self.ctrl_word[r]

    def has_ctrl(self, Py_ssize_t rank):
        return 0 <= rank < self.n and self.ctrl_word[rank] != NULL

    def set_ready(self, Py_ssize_t rank, uintptr_t mapped=0, keep=None, uint64_t generation=0):
        """Target rank is connected, and mapped here at ``mapped`` (or 0);
        ``keep`` (a RemotePin, or the shared segment's owner) keeps that
        mapping while it is cached; ``generation`` is the engine's mapping
        generation read before the pointer was taken, so that a change in
        between shows as stale."""
        self.pins[rank] = keep
        self.mapped[rank] = mapped
        self.generation[rank] = generation
        self.ready[rank] = not self.dynamic

    cdef int _connect(self, Py_ssize_t r) except -1:
        """Connect to target r on first use (its engine address in addr[r])."""
        if self.addr[r].empty():
            self.addr[r] = (<str>self.connector(self.world[r])).encode()
        return 0

    # ------------------------------------------------------------ epochs

    cdef inline bint _access_ok(self, Py_ssize_t r):
        """An access epoch is open to r (a fence epoch counts as used)."""
        if self.open_all or self.epoch[r]:
            return True
        if self.fence_open:
            self.fence_used = True
            return True
        return False

    def check_access(self, Py_ssize_t rank, str what):
        """Raise EpochError unless an access epoch is open to ``rank``: the
        one rule every path (the hot one in C) applies."""
        if not self._access_ok(rank):
            raise EpochError(f"{what} to rank {rank} of window {self.label()}: no access epoch is open "
                             f"to that rank (call Fence, Start, Lock or Lock_all first)")

    def in_passive(self, Py_ssize_t rank):
        """A passive-target epoch (or the HIXL face's) is open to ``rank``."""
        return self.open_all or self.passive[rank]

    @property
    def locks(self):
        """rank -> (lock_type, acquired) of the Lock epochs open (read only)."""
        return dict(self._locks)

    def is_locked(self, Py_ssize_t rank):
        return rank in self._locks

    @property
    def access(self):
        """The PSCW access group (a frozenset of ranks) after Start, or None."""
        return self._access

    @property
    def lock_all(self):
        """False, or (True, acquired) inside Lock_all."""
        return self._lock_all

    @property
    def always_open(self):
        """The HIXL-style face: every target is always accessible, passively."""
        return self._always_open

    def add_lock(self, Py_ssize_t rank, lock_type, bint acquired):
        self._locks[rank] = (lock_type, acquired)
        self._set_bits(rank)

    def pop_lock(self, Py_ssize_t rank):
        out = self._locks.pop(rank)
        self._set_bits(rank)
        return out

    def set_access(self, ranks):
        old, self._access = self._access, (None if ranks is None else frozenset(ranks))
        for r in set(old or ()) | set(self._access or ()):
            self._set_bits(r)

    def set_lock_all(self, value):
        self._lock_all = value
        self.open_all = bool(value) or self._always_open

    def set_always_open(self, bint value):
        self._always_open = value
        self.open_all = bool(self._lock_all) or value

    cdef void _set_bits(self, Py_ssize_t r):
        cdef bint locked = r in self._locks
        self.passive[r] = locked
        self.epoch[r] = locked or (self._access is not None and r in self._access)

    def is_ready(self, Py_ssize_t rank):
        return 0 <= rank < self.n and self.ready[rank] == 1

    def disable(self):
        """The window is freed: nothing goes through here any more."""
        self.n = 0
        self.ctrl_word.clear()
        self.ctrl_pins = None
        self.fence_open = False
        self.fence_word.clear()
        self.fence_stalled = None
        self.fence_pins = None
        self.pins = None

    def mark_dirty(self, Py_ssize_t rank, keep=None):
        """Engine operations to rank were posted; ``keep`` lives until the
        flush that completes them."""
        self._connect(rank)
        self.dirty[rank] = 1
        if keep is not None:
            (<list>self.pending[rank]).append(keep)

    def hold(self, Py_ssize_t rank, int64_t tag):
        """Hold a notification for rank's next batch; how many are held now."""
        if not 0 <= rank < self.n:
            raise ParamError(f"hold: rank {rank} out of range")
        if self.held[rank].empty():
            self.held_n += 1
        self.held[rank].push_back(tag)
        return self.held[rank].size()

    def held_count(self, Py_ssize_t rank):
        return self.held[rank].size() if 0 <= rank < self.n else 0

    def sent_count(self, Py_ssize_t rank):
        """Notifications sent to rank so far."""
        return self.sent[rank]

    def held_ranks(self, rank=None):
        """The ranks with held notifications, ascending (of ``rank`` only,
        when given: [rank] or [])."""
        cdef Py_ssize_t r
        if self.held_n == 0:
            return []
        if rank is not None:
            return [rank] if type(rank) is int and 0 <= rank < self.n and not self.held[rank].empty() else []
        return [r for r in range(self.n) if not self.held[r].empty()]

    def send_held(self, Py_ssize_t rank, str what, bint in_order=True):
        """Send the notifications held for rank as one message (it leaves
        after every earlier operation to rank completed there). ``in_order``:
        called in the program's thread, so that what the engine flushed first
        is everything the program posted to rank (another thread may run
        beside a post: it leaves the target's completion state alone)."""
        self._send_held(rank, what, in_order)

    cdef int _send_held(self, Py_ssize_t r, str what, bint in_order) except -1:
        cdef vector[int64_t] tags
        cdef bytes msg
        cdef NotifyDesc nd
        cdef Status st
        cdef cpp_bool queued = False
        cdef int32_t tmo = _timeout(None)
        cdef Py_ssize_t count
        with nogil:
            self.notify_mu.lock()  # (without the GIL: a sender in PostNotify may need it)
        try:
            tags.swap(self.held[r])
            count = tags.size()
            if count == 0:
                return 0
            self.held_n -= 1
            msg = (<char *>tags.data())[:8 * count]  # little-endian int64s (x86, aarch64)
            self._connect(r)
            nd = _notify_desc(self.notify_name, msg)
            self._enter()
            with nogil:
                if _HAS_POST:
                    st = PostNotify(self.engine._h[0], AscendString(self.addr[r].c_str(), self.addr[r].size()),
                                    nd, tmo, queued, <Priority>self.priority)
                else:  # vendor HIXL: its own SendNotify (transfers there complete within their call)
                    st = self.engine._h[0].SendNotify(AscendString(self.addr[r].c_str(), self.addr[r].size()),
                                                      nd, tmo)
            self.engine._calls -= 1
        finally:
            self.notify_mu.unlock()
        if st != 0:
            if count == 1:
                self._raise(st, what, r, " (a notification)")
            self._raise(st, what, r, f": a batch of {count} notifications was not delivered")
        self.sent[r] += count
        if not queued and in_order:
            self._completed(r)  # it flushed everything before it
        return 0

    cdef int _send_all_held(self, str what) except -1:
        cdef Py_ssize_t r
        if self.held_n:
            for r in range(self.n):
                if not self.held[r].empty():
                    self._send_held(r, what, True)
        return 0

    cdef int _raise_late(self) except -1:
        """Raise what a send nobody waited for failed with (once)."""
        late, self.notify_late = self.notify_late, None
        if late is not None:
            raise late
        return 0

    def is_dirty(self, Py_ssize_t rank):
        return 0 <= rank < self.n and self.dirty[rank] == 1

    def take_dirty(self, Py_ssize_t rank):
        """True (and cleared) when engine operations to rank await a flush."""
        if rank >= self.n or not self.dirty[rank]:
            return False
        self._completed(rank)
        return True

    cdef inline void _completed(self, Py_ssize_t r):
        self.dirty[r] = 0
        del self.pending[r][:]
        self.posted[r] = None

    def posted_atomic(self, Py_ssize_t rank):
        """The op of the non-fetching atomics posted to rank and not yet
        flushed (None if none): an atomic of another op must flush first."""
        return self.posted[rank] if self.dirty[rank] else None

    def note_posted_atomic(self, Py_ssize_t rank, op):
        """Non-fetching atomics of ``op`` were posted to rank."""
        self.mark_dirty(rank)
        self.posted[rank] = op

    cdef inline bint _target_ok(self, object target_rank, Py_ssize_t *r, bint write):
        if type(target_rank) is not int:
            return False
        r[0] = <Py_ssize_t>target_rank
        if r[0] < 0 or r[0] >= self.n or not self.ready[r[0]] or not self._access_ok(r[0]):
            return False
        return self.access[r[0]] != (_READ_ONLY if write else _WRITE_ONLY)

    cdef inline bint _offset(self, object target, Py_ssize_t r, size_t nbytes, uint64_t *off):
        cdef long long d
        if target is None:
            d = 0
        elif type(target) is int:
            # Past the window (or past 64 bits, where d * unit would wrap
            # around to a valid offset): the slow path raises BoundsError.
            if target < 0 or target > self.size[r] // self.unit[r]:
                return False
            d = target
        else:
            return False
        off[0] = <uint64_t>d * self.unit[r]
        return off[0] + nbytes <= self.size[r] and off[0] <= self.size[r]

    cdef inline bint _target_offset(self, object target, Py_ssize_t r, const Py_buffer *view, uint64_t *off):
        """_offset for every target spec the hot path takes: also (disp,),
        (disp, count) and (disp, count, basic datatype) as a tuple or list,
        where the target describes exactly the origin's bytes. Anything else
        (a derived or unknown datatype, a count the origin does not fill, a
        wrong type) is the Python layer's, which parses and checks it."""
        cdef Py_ssize_t n, count
        cdef size_t size, described
        cdef size_t nbytes = <size_t>view.len
        if target is None or type(target) is int:
            return self._offset(target, r, nbytes, off)
        if type(target) is not tuple and type(target) is not list:
            return False
        n = len(target)
        if n == 0 or n > 3:
            return False
        if n >= 2:
            if type(target[1]) is not int:
                return False
            if n == 3:
                size = _basic_size(target[2], view)
                if size == 0:
                    return False
            elif _one_char_format(view.format):
                # (disp, count) counts the origin's elements, as the Python
                # layer reads a buffer of one basic element.
                size = <size_t>view.itemsize
            else:
                return False
            count = _long_as_ssize(target[1])
            if count < 0:
                PyErr_Clear()  # (past Py_ssize_t: set an OverflowError)
                return False  # negative or huge: the Python layer's to refuse
            if _mul_overflow(<size_t>count, size, &described) or described != nbytes:
                return False
        return self._offset(target[0], r, nbytes, off)

    cdef inline char *_direct(self, Py_ssize_t r):
        if self.mapped[r] == 0:
            return NULL
        if MappingGeneration(self.engine._h[0]) != self.generation[r]:
            self.mapped[r] = 0  # stale: the Python layer looks it up again
            self.pins[r] = None
            self.ready[r] = 0
            return NULL
        return <char *>self.mapped[r]

    cdef int _post(self, Py_ssize_t r, int op, const TransferOpDesc *d, size_t count, MemType local, bint detach,
                   object keep, str what) except -1:
        """Post ``count`` blocks at d to r: the one way an operation reaches
        the engine, hot path or not. 1: work is left for r's next flush
        (r is dirty, ``keep`` held until then); 0: every block is complete
        at the target already (a same-node system call or copy), nothing is
        kept. A refusal is raised here, before anything is marked."""
        cdef Status st
        cdef cpp_bool in_flight = True
        cdef PeerRef *p
        cdef vector[TransferOpDesc] v
        self._connect(r)
        p = self._peer(r)
        self._enter()
        if p != NULL:
            with nogil:
                st = PostTo(self.engine._h[0], p, <TransferOp>op, d, count, local, detach, in_flight)
        else:
            v.assign(d, d + count)
            with nogil:
                st = TransferPost(self.engine._h[0], AscendString(self.addr[r].c_str(), self.addr[r].size()),
                                  <TransferOp>op, v, local, detach, <Priority>self.priority)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                self._drop_peer(r)  # the next call resolves r's address again
            if what is not None:
                self._raise(st, what, r, f" ({count} block(s))" if count != 1 else
                            f" ({d[0].len} bytes at target offset {d[0].remote_addr - self.base[r]})")
            _check(st, f"TransferPost({self.addr[r].decode()!r}, {count} blocks)")
        if not in_flight:
            return 0
        self.dirty[r] = 1
        if keep is not None:
            (<list>self.pending[r]).append(keep)
        return 1

    def post(self, Py_ssize_t rank, object op, object descs, object keep=None, bint local_device=False):
        """Post engine descriptors ((n, 3) local, remote, length) to rank,
        as the hot path posts its own; ``keep`` lives until the flush."""
        cdef vector[TransferOpDesc] v
        _descs(descs, v)
        self._post(rank, _opcode(op), v.data(), v.size(), MEM_DEVICE if local_device else MEM_HOST, False, keep,
                   None)

    cdef int _move(self, object origin, object target_rank, object target, bint write) except -1:
        """1 when done here, 0 when the Python layer must take it."""
        cdef Py_ssize_t r
        cdef uint64_t off
        cdef Py_buffer view
        cdef char *direct
        cdef TransferOpDesc one
        cdef _Export export = None
        if type(target_rank) is int and target_rank == _PROC_NULL and self.n:
            return 1  # MPI.PROC_NULL: nothing moves, the origin is not looked at
        if not self._live() or not self._target_ok(target_rank, &r, write):
            return 0
        if _get_buffer(origin, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (0 if write else PyBUF_WRITABLE)) != 0:
            PyErr_Clear()
            return 0
        try:
            if view.format != NULL and strchr(view.format, b'O') != NULL:
                return 0  # Python objects: the Python layer refuses them
            if not self._target_offset(target, r, &view, &off):
                return 0
            if view.len == 0:
                return 1
            direct = self._direct(r)
            if direct != NULL and <size_t>view.len < _SHARED_COPY:
                if <size_t>view.len >= _NOGIL_COPY:
                    with nogil:
                        _copy(direct + off, <char *>view.buf, <size_t>view.len, write)
                else:
                    _copy(direct + off, <char *>view.buf, <size_t>view.len, write)
                return 1
            one.local_addr = <uintptr_t>view.buf
            one.remote_addr = self.base[r] + off
            one.len = <size_t>view.len
            if self._post(r, WRITE if write else READ, &one, 1, MEM_HOST, False, None, "Put" if write else "Get"):
                # The engine still reads (or fills) the origin: the export
                # moves into what r's flush releases, not released here.
                export = _Export.__new__(_Export)
                export.view = view
                export.held = True
                (<list>self.pending[r]).append(export)
            return 1
        finally:
            if export is None:
                PyBuffer_Release(&view)

    cpdef bint atomic(self, object origin, object compare, object result, object target_rank,
                      object target_disp, int code) except *:
        """One 8-byte integer atomic (Fetch_and_op, Compare_and_swap, or a
        one-element Accumulate when result is None) when the common case
        applies: every buffer is exactly one 8-byte integer. False leaves it
        to the Python layer. code: FAST_ADD ..."""
        cdef Py_ssize_t r
        cdef uint64_t off, value = 0, cmp = 0, old = 0
        cdef char *direct
        cdef Status st
        cdef AtomicOp aop
        cdef int32_t tmo
        cdef bint unsigned = False, other = False
        if not self._live() or not self._target_ok(target_rank, &r, True):
            return False
        if self.access[r] != _READ_WRITE or self.mem_type[r] != MEM_HOST or (self.posted[r] is not None and self.dirty[r]):
            return False  # posted atomics first: this origin's accumulates stay ordered
        # int64 and uint64 are two types: a mix is the Python layer's to refuse.
        if not _int64_scalar(origin, &value, &unsigned):
            return False
        if compare is not None and not (_int64_scalar(compare, &cmp, &other) and other == unsigned):
            return False
        if result is not None and not (_int64_out(result, &other) and other == unsigned):
            return False
        if not self._offset(target_disp, r, 8, &off) or (self.base[r] + off) % 8:
            return False
        if self.acc_locked[r]:
            if self._ctrl(r) == NULL or not self._locked_atomic(r, off, code, value, cmp, &old):
                return False
            if result is not None:
                _int64_store(result, old)
            return True
        direct = self._direct(r)
        if direct != NULL:
            old = AtomicApply(_FAST_OPS[code], <uint64_t *>(direct + off), 0 if code == C_NOOP else value, cmp)
        else:
            aop = _FAST_OPS[code]
            tmo = _timeout(None)
            self._enter()
            with nogil:
                st = Atomic(self.engine._h[0], AscendString(self.addr[r].c_str(), self.addr[r].size()), aop,
                            self.base[r] + off, 0 if code == C_NOOP else value, cmp, &old, tmo)
            self.engine._calls -= 1
            if st != 0:
                # Raised, never redone: the atomic may have reached the target.
                self._raise(st, "Compare_and_swap" if code == C_CSWAP else "Fetch_and_op" if result is not None
                            else "Accumulate", r, f" (8 bytes at target offset {off})")
        if result is not None:
            _int64_store(result, old)
        return True

    cdef bint _locked_atomic(self, Py_ssize_t r, uint64_t off, int code, uint64_t value, uint64_t cmp,
                             uint64_t *old) except? 0:
        """One 8-byte atomic on r's memory under r's accumulate lock (mapped
        here): get, op, put, without r's CPU. False, with nothing done, when
        the lock is taken (the Python layer waits for it, breaking the holds
        of ranks known dead)."""
        cdef uint64_t *lock = self.ctrl_word[r] + _CTRL_ACC // 8
        cdef uint64_t expected, cur = 0, new
        cdef vector[TransferOpDesc] v
        cdef Status st = 0
        cdef int tries
        cdef int32_t tmo = _timeout(None)
        cdef bint local = r == self.comm_rank
        for tries in range(_ACC_TRIES):
            expected = 0
            if __atomic_compare_exchange_n(lock, &expected, self.acc_owner, False, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED):
                break
            hixl_relax(tries)
        else:
            return False
        try:
            if local:
                cur = (<uint64_t *><uintptr_t>(self.base[r] + off))[0]
            else:
                v.resize(1)
                v[0].local_addr = <uintptr_t>&cur
                v[0].remote_addr = self.base[r] + off
                v[0].len = 8
                self._enter()
                with nogil:
                    st = self.engine._h.TransferSync(AscendString(self.addr[r].c_str(), self.addr[r].size()),
                                                  READ, v, tmo)
                self.engine._calls -= 1
                if st != 0:
                    self._raise(st, "accumulate (get under the target's accumulate lock)", r,
                                f" (8 bytes at target offset {off})")
            old[0] = cur
            if code == C_ADD:
                new = cur + value
            elif code == C_AND:
                new = cur & value
            elif code == C_OR:
                new = cur | value
            elif code == C_XOR:
                new = cur ^ value
            elif code == C_SWAP:
                new = value
            elif code == C_CSWAP:
                new = value if cur == cmp else cur
            else:
                new = cur
            if new != cur or code == C_SWAP:
                if local:
                    (<uint64_t *><uintptr_t>(self.base[r] + off))[0] = new
                else:
                    v[0].local_addr = <uintptr_t>&new
                    self._enter()
                    with nogil:
                        st = self.engine._h.TransferSync(AscendString(self.addr[r].c_str(), self.addr[r].size()),
                                                      WRITE, v, tmo)
                    self.engine._calls -= 1
                    if st != 0:
                        # Raised, never redone: the put may have reached the target.
                        self._raise(st, "accumulate (put under the target's accumulate lock)", r,
                                    f" (8 bytes at target offset {off})")
        finally:
            expected = self.acc_owner
            if not __atomic_compare_exchange_n(lock, &expected, 0, False, __ATOMIC_RELEASE, __ATOMIC_RELAXED):
                raise error_for(PEER_FAILURE_STATUS,
                                f"accumulate lock of rank {r} of window {self.label()} was not this rank's any "
                                f"more (another rank broke it, believing this rank dead); the accumulate may "
                                f"have been interleaved with another")
        return True

    cdef bint try_lock_word(self, Py_ssize_t r, bint exclusive):
        """One attempt at r's passive-target lock word (mapped here), as
        epochs.Sync._acquire makes it: exclusive CAS 0 -> LOCK_EXCL | owner,
        shared fetch-add 1 (backed out while a writer holds it) and this
        rank's reader slot set. False: taken by another, nothing held."""
        cdef uint64_t *w = self.ctrl_word[r]
        cdef uint64_t mine = _LOCK_EXCL | (<uint64_t>(self.comm_rank + 1)) << _OWNER_SHIFT
        cdef uint64_t expected = 0
        if exclusive:
            if __atomic_compare_exchange_n(w, &expected, mine, False, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED):
                return True
            return expected == mine  # (a CAS of the Python path that timed out but landed)
        if __atomic_fetch_add(w, 1, __ATOMIC_ACQUIRE) & _LOCK_EXCL:
            __atomic_fetch_add(w, <uint64_t>-1, __ATOMIC_RELEASE)
            return False
        __atomic_exchange_n(w + _reader_word(self.n, self.comm_rank), 1, __ATOMIC_SEQ_CST)
        return True

    def try_lock(self, Py_ssize_t r, bint exclusive):
        """One try at r's lock word where it is mapped here (try_lock_word): 1 taken, 0 held by another,
        -1 not mapped here (the engine's atomics take it)."""
        if r < 0 or r >= self.n or self._ctrl(r) == NULL:
            return -1
        return 1 if self.try_lock_word(r, exclusive) else 0

    def wait_lock_free(self, Py_ssize_t r, bint exclusive, double seconds):
        """Wait without the GIL, and without spinning a core for long, until r's lock word (mapped here)
        looks free to take or ``seconds`` passed: True. False where it is not mapped here (the caller
        backs off instead). Taking it is try_lock's: another rank may be faster."""
        if r < 0 or r >= self.n:
            return False
        cdef uint64_t *w = self._ctrl(r)
        if w == NULL:
            return False
        cdef uint64_t mine = _LOCK_EXCL | (<uint64_t>(self.comm_rank + 1)) << _OWNER_SHIFT
        cdef long long budget = <long long>(max(seconds, 0.0) * 1e9)
        keep = self.ctrl_pins[r]  # holds the mapping while this thread reads it without the GIL
        with nogil:
            hixl_lock_wait(w, w + _LOCK_WAITERS_WORD, exclusive, mine, _LOCK_EXCL, budget)
        del keep
        return True

    def wake_lock_waiters(self, Py_ssize_t r):
        """After the Python layer released r's lock word: wake this node's ranks sleeping on it, where it
        is mapped here (a released word mapped nowhere here has no sleepers here to wake)."""
        if 0 <= r < self.n:
            w = self._ctrl(r)
            if w != NULL:
                hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)

    cdef int release_lock_word(self, Py_ssize_t r, bint exclusive) except -1:
        """Give r's lock word back, taking only this rank's own bits."""
        cdef uint64_t *w = self.ctrl_word[r]
        cdef uint64_t mine = _LOCK_EXCL | (<uint64_t>(self.comm_rank + 1)) << _OWNER_SHIFT
        cdef uint64_t word = mine
        cdef uint64_t one = 1
        if not exclusive:
            # Only the one who clears the slot takes the count back.
            if __atomic_compare_exchange_n(w + _reader_word(self.n, self.comm_rank), &one, 0, False,
                                           __ATOMIC_SEQ_CST, __ATOMIC_RELAXED):
                __atomic_fetch_add(w, <uint64_t>-1, __ATOMIC_RELEASE)
                hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)
            return 0
        while not __atomic_compare_exchange_n(w, &word, word - mine, False, __ATOMIC_RELEASE, __ATOMIC_RELAXED):
            if not word & _LOCK_EXCL or ((word >> _OWNER_SHIFT) & _OWNER_MASK) != <uint64_t>(self.comm_rank + 1):
                raise error_for(PEER_FAILURE_STATUS,
                                f"Unlock: the exclusive lock of rank {r} of window {self.label()} was not this "
                                f"rank's any more (another rank broke it, believing this rank dead); nothing "
                                f"was released")
        hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)
        return 0

    cpdef bint lock(self, object target_rank, object lock_type, object assertion) except *:
        """Lock of the common case: a mapped lock word taken at the first
        try, no other epoch in the way. False leaves it to the Python layer
        (every check, the waiting), having done nothing."""
        cdef Py_ssize_t r
        cdef bint exclusive
        if (type(target_rank) is not int or type(assertion) is not int or assertion != 0
                or type(lock_type) is not int or self._lock_all or self._always_open or self._access is not None
                or (self.fence_open and self.fence_used)):
            return False
        r = <Py_ssize_t>target_rank
        if r < 0 or r >= self.n or r in self._locks or self._ctrl(r) == NULL:
            return False
        if lock_type == _LOCK_EXCLUSIVE_C:
            exclusive = True
        elif lock_type == _LOCK_SHARED_C:
            exclusive = False
        else:
            return False
        if not self.try_lock_word(r, exclusive):
            return False
        self.fence_open = False
        self._locks[r] = (lock_type, True)
        self._set_bits(r)
        return True

    cpdef bint unlock(self, object target_rank) except *:
        """Unlock of the common case: r locked here with its lock word taken
        (mapped), nothing held for a batch. The epoch ends even where the
        flush fails (a dead target), as in the Python layer."""
        cdef Py_ssize_t r
        if type(target_rank) is not int or not self._live():
            return False
        r = <Py_ssize_t>target_rank
        if r < 0 or r >= self.n or self._ctrl(r) == NULL:
            return False
        entry = self._locks.get(r)
        if entry is None or not entry[1]:
            return False
        try:
            if not self.held[r].empty():
                self._send_held(r, "Unlock", True)
            if self.dirty[r]:
                if self.addr[r].empty():
                    return False
                self._flush_dirty(r, _timeout(None), "Unlock")
        finally:
            if r < self.n and r in self._locks:
                del self._locks[r]
                self._set_bits(r)
                self.release_lock_word(r, entry[0] == _LOCK_EXCLUSIVE_C)
        self._raise_late()
        return True

    cpdef bint flush(self, object target_rank) except *:
        """Flush in a passive epoch; False leaves it to the Python layer."""
        cdef Py_ssize_t r
        if not self._live() or type(target_rank) is not int:
            return False
        r = <Py_ssize_t>target_rank
        if r == _PROC_NULL and self.n:
            return True
        if r < 0 or r >= self.n or not (self.open_all or self.passive[r]):
            return False
        if not self.held[r].empty():
            self._send_held(r, "Flush", True)
        if self.dirty[r]:
            if self.addr[r].empty():
                return False
            self._flush_dirty(r, _timeout(None), "Flush")
        self._raise_late()
        return True

    cdef int _flush_dirty(self, Py_ssize_t r, int32_t tmo, str what) except -1:
        """Complete the engine operations posted to r, or raise (the
        operations stay pending: a later flush may still complete them)."""
        cdef Status st
        cdef PeerRef *p = self._peer(r)
        self._enter()
        if p != NULL:
            with nogil:
                st = FlushPeer(self.engine._h[0], p, tmo)
        else:
            with nogil:
                st = Flush(self.engine._h[0], AscendString(self.addr[r].c_str(), self.addr[r].size()), tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                self._drop_peer(r)
            self._raise(st, what, r, "")
        self._completed(r)
        return 0

    cdef int _raise(self, Status st, str what, Py_ssize_t r, str detail) except -1:
        raise error_for(st, f"{what} to rank {r} of window {self.label()}{detail}: "
                            f"{LastError().decode(errors='replace')}")

    def set_fence_barrier(self, Py_ssize_t me, words, stalled, long modes, keep=None):
        """Fence synchronizes through the mapped counters ``words`` (one
        address per rank, ``me`` this rank's) instead of an MPI barrier, and
        takes the assertions in ``modes`` in C. ``stalled(missing,
        timed_out)`` is called every 0.1 s of waiting and raises when a
        missing rank is dead or the timeout has passed."""
        self.fence_modes = modes
        self.fence_word.clear()
        for w in words:
            self.fence_word.push_back(<uint64_t *><uintptr_t>w)
        self.fence_stalled = stalled
        self.fence_pins = keep  # the RemotePins under words: they stay mapped while Fence reads them

    cpdef bint fence(self, object assertion) except *:
        """Fence inside a run of fence epochs (the common case: the previous
        Fence opened one, its barrier is the mapped counters): complete this
        rank's RMA and meet the other ranks. False leaves it to the Python
        layer, which opens and closes fence epochs and raises the errors."""
        cdef Py_ssize_t r
        cdef int32_t tmo
        if (not self._live() or not self.fence_open or self.fence_word.empty()
                or type(assertion) is not int or not 0 <= assertion <= self.fence_modes
                or <long>assertion & ~self.fence_modes):
            return False
        tmo = _timeout(None)
        self._send_all_held("Fence")
        for r in range(self.n):
            if self.dirty[r]:
                self._flush_dirty(r, tmo, "Fence")
        self.fence_barrier()
        self.fence_used = False
        self._raise_late()
        return True

    cpdef fence_barrier(self):
        """Raise this rank's counter (release: its stores and completed RMA
        before it) and wait until every rank's counter has reached it."""
        cdef uint64_t seq
        cdef Py_ssize_t missing
        cdef double deadline
        self.fence_seq += 1
        seq = self.fence_seq
        __atomic_store_n(self.fence_word[self.comm_rank], seq, __ATOMIC_RELEASE)
        missing = hixl_fence_wait(self.fence_word.data(), self.fence_word.size(), seq, 0)
        if missing < 0:
            return
        deadline = hixl_now_s() + _timeout(None) / 1000.0
        while True:
            with nogil:
                missing = hixl_fence_wait(self.fence_word.data(), self.fence_word.size(), seq, 100000000)
            if missing < 0:
                return
            self.fence_stalled(hixl_fence_missing(self.fence_word.data(), self.fence_word.size(), seq),
                               hixl_now_s() > deadline)


cdef class Target:
    """What the origin knows of one rank of the window: a view of its entry
    in the window's table (WindowState), which is the only copy."""
    cdef readonly WindowState core
    cdef readonly Py_ssize_t rank

    @staticmethod
    cdef Target view(WindowState core, Py_ssize_t rank):
        cdef Target t = Target.__new__(Target)
        t.core, t.rank = core, rank
        return t

    @property
    def world(self):
        """Its world rank."""
        return self.core.world[self.rank]

    @property
    def base(self):
        """The address of its window memory (0 if none)."""
        return self.core.base[self.rank]

    @property
    def size(self):
        """Its window's size in bytes."""
        return self.core.size[self.rank]

    @property
    def disp_unit(self):
        return self.core.unit[self.rank]

    @property
    def ctrl(self):
        """The address of its control block (ctrl.py)."""
        return self.core.ctrl_addr[self.rank]

    @property
    def access(self):
        """Its declared access mode (constants.ACCESS_*)."""
        return self.core.access[self.rank]

    @property
    def mem_type(self):
        return self.core.mem_type[self.rank]

    @property
    def acc_locked(self):
        """Accumulates on its memory go under its accumulate lock (accumulate.py)."""
        return bool(self.core.acc_locked[self.rank])

    @property
    def addr(self):
        """Its engine address; connects on first use."""
        self.core._connect(self.rank)
        return self.core.addr[self.rank].decode()

    def __repr__(self):
        return f"<Target rank {self.rank} (world {self.world}) of window {self.core.label()}>"


cdef extern from *:
    """
    #include <limits.h>
    #include <linux/futex.h>
    #include <sched.h>
    #include <sys/syscall.h>
    #include <time.h>
    #include <unistd.h>

    static inline double hixl_now_s(void) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }

    /* Between tries at a lock word another rank holds for a few
       microseconds: spin, then give the core away (the holder may need it). */
    static inline void hixl_relax(int tries) {
      if (tries < 16) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
      } else {
        sched_yield();
      }
    }

    /* Index of a rank whose fence counter is below seq after waiting up to
       budget_ns, or -1 once all have reached it. A barrier of same-node
       ranks ends within microseconds, so it spins first; a longer wait
       yields, then sleeps, so that a late rank gets the core it needs. */
    static inline Py_ssize_t hixl_fence_wait(uint64_t **words, size_t n, uint64_t seq, long long budget_ns) {
      double end = hixl_now_s() + 1e-9 * (double)budget_ns;
      for (unsigned idle = 0;; ++idle) {
        size_t i = 0;
        while (i < n && __atomic_load_n(words[i], __ATOMIC_ACQUIRE) >= seq) ++i;
        if (i == n) return -1;
        if (idle < 256) continue;
        if ((idle & 63) == 0 && hixl_now_s() > end) return (Py_ssize_t)i;
        if (idle < 4096) {
          sched_yield();
        } else {
          struct timespec ts = {0, idle < 8192 ? 50000L : 500000L};
          nanosleep(&ts, NULL);
        }
      }
    }

    /* A lock word's halves as futex words (the kernel waits on 32 bits):
       the owner's half changes when a writer lets go, the count's half
       when a reader does. */
    static inline uint32_t *hixl_lock_half(uint64_t *word, int writer_half) {
    #if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return (uint32_t *)word + (writer_half ? 1 : 0);
    #else
      return (uint32_t *)word + (writer_half ? 0 : 1);
    #endif
    }

    /* Until a passive-target lock word looks free to take (exclusive: 0,
       or already this rank's `mine`; shared: no writer bit), or budget_ns
       passed. Loads only, so the holder's cache line is not fought over.
       A brief spin and a few yields catch a holder that lets go within
       microseconds; then the waiter sleeps in the kernel on the half of
       the word that a release changes, counted in `waiters` so that a
       release on this node wakes it at once (hixl_lock_wake). A release
       by a rank that does not map the word wakes nobody: the sleep is cut
       at 1 ms. The counter is bumped before the word is read again and the
       releaser reads the counter after its release (both sequentially
       consistent), so a waiter either sees the release or is woken by it.
       1: it looks free; 0: the budget ran out. */
    static inline int hixl_lock_wait(uint64_t *word, uint64_t *waiters, int exclusive, uint64_t mine,
                                     uint64_t writer, long long budget_ns) {
      double end = hixl_now_s() + 1e-9 * (double)budget_ns;
      for (unsigned idle = 0;; ++idle) {
        uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (exclusive ? (w == 0 || w == mine) : !(w & writer)) return 1;
        if (idle < 64) {
          hixl_relax(0);
          continue;
        }
        double left = end - hixl_now_s();
        if (left <= 0) return 0;
        if (idle < 128) {
          sched_yield();
          continue;
        }
        __atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
        w = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        if (!(exclusive ? (w == 0 || w == mine) : !(w & writer))) {
          int writer_half = (w & writer) != 0;
          uint32_t seen = writer_half ? (uint32_t)(w >> 32) : (uint32_t)w;
          long ns = left < 1e-3 ? (long)(left * 1e9) + 1 : 1000000L;
          struct timespec ts = {0, ns};
          syscall(SYS_futex, hixl_lock_half(word, writer_half), FUTEX_WAIT, seen, &ts, NULL, 0);
        }
        __atomic_fetch_sub(waiters, 1, __ATOMIC_SEQ_CST);
      }
    }

    /* After a release of a lock word mapped here: wake its sleepers (a
       load, and system calls only where some sleep). */
    static inline void hixl_lock_wake(uint64_t *word, uint64_t *waiters) {
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      if (__atomic_load_n(waiters, __ATOMIC_SEQ_CST) == 0) return;
      syscall(SYS_futex, hixl_lock_half(word, 1), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
      syscall(SYS_futex, hixl_lock_half(word, 0), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }

    static inline void hixl_pause_ms(int ms) {
      struct timespec ts = {0, ms * 1000000L};
      nanosleep(&ts, NULL);
    }
    """
    double hixl_now_s() nogil
    void hixl_pause_ms(int ms) nogil
    Py_ssize_t hixl_fence_wait(uint64_t **words, size_t n, uint64_t seq, long long budget_ns) nogil
    void hixl_relax(int tries) nogil
    int hixl_lock_wait(uint64_t *word, uint64_t *waiters, int exclusive, uint64_t mine, uint64_t writer,
                       long long budget_ns) nogil
    void hixl_lock_wake(uint64_t *word, uint64_t *waiters) nogil


cdef list hixl_fence_missing(uint64_t **words, size_t n, uint64_t seq):
    return [i for i in range(n) if __atomic_load_n(words[i], __ATOMIC_ACQUIRE) < seq]


cdef extern from *:
    """
    """
    uint64_t __atomic_fetch_add(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_and(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_or(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_xor(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_exchange_n(uint64_t *, uint64_t, int) nogil
    bint __atomic_compare_exchange_n(uint64_t *, uint64_t *, uint64_t, bint, int, int) nogil
    uint64_t __atomic_load_n(uint64_t *, int) nogil
    void __atomic_store_n(uint64_t *, uint64_t, int) nogil
    int __ATOMIC_SEQ_CST
    int __ATOMIC_ACQUIRE
    int __ATOMIC_RELEASE
    int __ATOMIC_RELAXED

cdef enum:
    C_ADD, C_AND, C_OR, C_XOR, C_SWAP, C_CSWAP, C_NOOP
FAST_ADD, FAST_AND, FAST_OR, FAST_XOR, FAST_SWAP, FAST_CSWAP, FAST_NOOP = (
    C_ADD, C_AND, C_OR, C_XOR, C_SWAP, C_CSWAP, C_NOOP)
cdef AtomicOp _FAST_OPS[7]
_FAST_OPS[:] = [AtomicOp.ADD, AtomicOp.AND, AtomicOp.OR, AtomicOp.XOR, AtomicOp.SWAP, AtomicOp.CSWAP,
                AtomicOp.ADD]


cdef inline char *_int64_ptr(object a, bint writable, bint *unsigned=NULL):
    """Address of a buffer of exactly one 8-byte integer, or NULL;
    ``unsigned`` tells its signedness (MPI's type matching tells them apart)."""
    cdef Py_buffer view
    cdef char *p = NULL
    cdef const char *fmt
    if _get_buffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                          (PyBUF_WRITABLE if writable else 0)) != 0:
        PyErr_Clear()
        return NULL
    fmt = view.format
    if fmt != NULL and fmt[0] in b"@=<":
        fmt += 1
    if (view.itemsize == 8 and view.len == 8 and fmt != NULL and fmt[1] == 0
            and fmt[0] in b"lqLQ"):
        p = <char *>view.buf
        if unsigned != NULL:
            unsigned[0] = fmt[0] in b"LQ"
    # The caller holds a reference to ``a``, which keeps the memory alive.
    PyBuffer_Release(&view)
    return p


cdef inline bint _int64_scalar(object a, uint64_t *out, bint *unsigned):
    cdef char *p = _int64_ptr(a, False, unsigned)
    if p == NULL:
        return False
    out[0] = (<uint64_t *>p)[0]
    return True


cdef inline bint _int64_out(object a, bint *unsigned):
    return _int64_ptr(a, True, unsigned) != NULL


cdef inline void _int64_store(object a, uint64_t v):
    (<uint64_t *>_int64_ptr(a, True))[0] = v


cdef inline void _copy(char *remote, char *local, size_t n, bint write) noexcept nogil:
    if write:
        memcpy(remote, local, n)
    else:
        memcpy(local, remote, n)


cdef inline bint _int64_array(object a, int ndim):
    """A C-contiguous int64 numpy array of ``ndim`` dimensions (pairs when 2)."""
    return (type(a) is np.ndarray and (<object>a).dtype == np.int64 and (<object>a).ndim == ndim
            and (<object>a).flags.c_contiguous and (ndim == 1 or (<object>a).shape[1] == 2))


def post_at(Engine eng, remote, object op, object descs, int priority):
    """Post (n, 3) uint64 descriptors to ``remote`` at ``priority``; a WRITE's
    large copies into mapped memory go to the copy thread, queued at that
    priority. Complete with ``flush_at`` of the same priority."""
    cdef vector[TransferOpDesc] v
    _descs(descs, v)
    if not eng._usable():
        raise ParamError(f"TransferPost({remote!r}): the engine is finalized")
    _post(eng, remote, op, v, False, True, priority)


def flush_at(Engine eng, remote, int priority, timeout_ms=None):
    """Complete what was posted to ``remote`` at ``priority`` (0 high, 1
    normal, 2 bulk) or higher: a flush on a peer handle of that priority,
    which does not wait for less urgent detached work (the HIXL face's
    TransferAsync requests)."""
    cdef AscendString cr = _remote(remote)
    cdef int32_t tmo = _timeout(timeout_ms)
    cdef PeerRef *p = NULL
    cdef Status st
    if not eng._usable():
        raise ParamError(f"Flush({remote!r}): the engine is finalized")
    eng._calls += 1
    with nogil:
        st = AcquirePeer(eng._h[0], cr, p, <Priority>priority)
        if st == 0:
            st = FlushPeer(eng._h[0], p, tmo)
            ReleasePeer(p)
    eng._calls -= 1
    _check(st, f"Flush({remote!r})")


def post_batch(Engine eng, remote, object op, object origin, object offsets, object disps, uint64_t unit,
               uint64_t base, uint64_t size, int priority=1):
    """Put_batch / Get_batch of the common case: a contiguous origin buffer
    with (n, 2) int64 (offset, length) rows and n int64 target displacements,
    every block inside the origin and the window. Checked and posted in one
    C loop without the GIL (no per-block Python work). Posted, it returns the
    origin's buffer export, which the caller keeps until the flush that
    completes the batch (the engine reads or writes the origin until then:
    its copy thread, UCX's zero-copy lanes; held, a bytearray cannot resize
    under them). False, with nothing moved, for anything else: the Python
    layer then raises the precise error."""
    cdef Py_buffer view
    cdef const int64_t[:, ::1] offs
    cdef const int64_t[::1] d
    cdef vector[TransferOpDesc] v
    cdef Py_ssize_t i, n
    cdef int64_t o, ln
    cdef uint64_t toff, max_disp
    cdef bint ok = True
    cdef Status st = 0
    cdef AscendString cr
    cdef int cop = _opcode(op)
    cdef _Export export = None
    if not eng._usable() or unit == 0 or not (_int64_array(offsets, 2) and _int64_array(disps, 1)):
        return False
    offs = offsets
    d = disps
    n = offs.shape[0]
    if n == 0 or d.shape[0] != n:
        return False
    if _get_buffer(origin, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (PyBUF_WRITABLE if cop == READ else 0)) != 0:
        PyErr_Clear()
        return False
    try:
        cr = _remote(remote)
        if view.format != NULL and strchr(view.format, b'O') != NULL:
            return False
        max_disp = size // unit
        eng._calls += 1
        with nogil:
            v.resize(n)
            for i in range(n):
                o = offs[i, 0]
                ln = offs[i, 1]
                # Every bound is compared before any product or sum is formed: nothing wraps.
                if (o < 0 or ln < 0 or o > view.len or ln > view.len - o or d[i] < 0
                        or <uint64_t>d[i] > max_disp):
                    ok = False
                    break
                toff = <uint64_t>d[i] * unit
                if <uint64_t>ln > size - toff:
                    ok = False
                    break
                v[i].local_addr = <uintptr_t>view.buf + <uintptr_t>o
                v[i].remote_addr = base + toff
                v[i].len = <size_t>ln
            if ok:
                # A Put_batch is posted (complete at the flush): its large
                # copies into mapped memory go to the engine's copy thread.
                st = TransferPost(eng._h[0], cr, <TransferOp>cop, v, MEM_HOST, cop == WRITE, <Priority>priority)
        eng._calls -= 1
        if not ok:
            return False
        _check(st, f"TransferPost({remote!r}, {n} blocks)")
        export = _Export.__new__(_Export)
        export.view = view  # the export moves into it: released at completion, not here
        export.held = True
        return export
    finally:
        if export is None:
            PyBuffer_Release(&view)
