"""Synchronization of hixl_rma.Win: the epoch state machine (fence, PSCW,
passive target), checked by every sync call and every RMA call.

Passive target uses a reader-writer lock word in each rank's control block,
driven by remote atomics (the foMPI design): exclusive = CAS 0 -> LOCK_EXCL,
shared = fetch-add 1 and back off while LOCK_EXCL is set. PSCW and fence
completion are engine notifies and a barrier.
"""

from . import _engine
from . import config
from . import constants as C
from . import ctrl as CTRL
from . import runtime as _rt
from .errors import EpochError, HixlError, HixlTimeoutError, ParamError, UnsupportedError

LOCK_EXCL = 1 << 62
_MASK = (1 << 64) - 1
# What Fence's C path accepts: every assertion but MODE_NOSUCCEED (which
# closes the run of fence epochs, a change of state the Python layer makes).
_FENCE_MODES = C.MODE_NOCHECK | C.MODE_NOSTORE | C.MODE_NOPUT | C.MODE_NOPRECEDE


class EpochMixin:
    """Epoch state and synchronization calls of Win."""

    # The origin's access epochs (fence, PSCW access group, locks, Lock_all,
    # the HIXL face's always-open) are owned by the hot path's FastWin, which
    # the properties below read; this class changes them through FastWin's
    # methods. The exposure epoch (target side) and Fence's barrier kind are
    # not the hot path's business and live here.

    def _init_epochs(self):
        self._fence_mode = None   # Fence's barrier: None (first Fence decides), "shared" or "mpi"
        self._exposure = None     # PSCW exposure group (list of ranks) after Post

    @property
    def _fence(self):
        return self._fast.fence_open

    @property
    def _access(self):
        return self._fast.access

    @property
    def _locks(self):
        return self._fast.locks

    @property
    def _lock_all(self):
        return self._fast.lock_all

    @property
    def _always_open(self):
        return self._fast.always_open

    @property
    def _fence_used(self):
        """RMA was issued in the open fence epoch (FastWin's Fence resets it)."""
        return self._fast.fence_used

    @_fence_used.setter
    def _fence_used(self, value):
        self._fast.fence_used = value

    # ----------------------------------------------------------- checks

    def _check_access(self, rank, what):
        fast = self._fast
        if fast.always_open or fast.lock_all or fast.is_locked(rank):
            return
        if self._fence:
            self._fence_used = True
            return
        if self._access is not None and rank in self._access:
            return
        raise EpochError(f"{what} to rank {rank} of window {self._label()}: no access epoch is open "
                         f"to that rank (call Fence, Start, Lock or Lock_all first)")

    def _passive(self, rank):
        return self._lock_all or self._fast.is_locked(rank) or self._always_open

    def _check_no_epoch(self, what, allow_fence=False):
        if self._locks or self._lock_all:
            raise EpochError(f"{what} on window {self._label()}: a passive-target epoch is open "
                             f"(ranks {sorted(self._locks) if self._locks else 'all'})")
        if self._access is not None:
            raise EpochError(f"{what} on window {self._label()}: a PSCW access epoch is open (Start "
                             f"without Complete)")
        if not allow_fence and self._fence and self._fence_used:
            raise EpochError(f"{what} on window {self._label()}: a fence epoch with RMA is open; end it "
                             f"with Fence(MODE_NOSUCCEED)")

    def _check_free_allowed(self):
        self._check_no_epoch("Free", allow_fence=True)
        if self._exposure is not None:
            raise EpochError(f"Free on window {self._label()}: a PSCW exposure epoch is open (Post "
                             f"without Wait)")

    # -------------------------------------------------------- completion

    def _flush_target(self, t):
        if self._fast.is_dirty(t.rank):
            self._engine.flush(t.addr, self._rt.timeout_ms)
            self._fast.take_dirty(t.rank)  # completed: the kept buffers may go

    def _complete_all(self):
        for t in self._targets:
            self._flush_target(t)

    # ------------------------------------------------------------- fence

    def Fence(self, assertion=0):
        """Complete this rank's RMA, then barrier; opens the next fence epoch."""
        if self._fast.fence(assertion):
            return  # between two fence epochs: all done in C
        self._check_live("Fence")
        _check_assertion(assertion, "Fence")
        self._check_no_epoch("Fence", allow_fence=True)
        if self._exposure is not None:
            raise EpochError(f"Fence on window {self._label()}: a PSCW exposure epoch is open")
        self._complete_all()
        self._fence_barrier()
        self._fast.fence_open = not (assertion & C.MODE_NOSUCCEED)
        self._fence_used = False

    def _fence_barrier(self):
        """Fence's barrier. Same-node ranks meet on counters in their mapped
        control blocks (no MPI call, no message); the first Fence of the
        window finds out, together, whether every rank can."""
        if self._fence_mode == "shared":
            self._fast.fence_barrier()
            return
        comm, timeout = self._comm, self._rt.timeout_ms
        if self._fence_mode == "mpi":
            _rt.barrier(comm.comm, timeout, comm.world_ranks)
            return
        words = self._fence_words()
        if _rt.allreduce_and(comm.comm, words is not None, timeout, comm.world_ranks):
            self._fast.set_fence_barrier(comm.rank, words, self._fence_stalled, _FENCE_MODES)
            self._fence_mode = "shared"
        else:
            self._fence_mode = "mpi"

    def _fence_words(self):
        """The address here of every rank's fence counter, or None when a
        rank's control block cannot be mapped (another node, vendor HIXL)."""
        st = self._rt
        if not _engine.HAS_EXTENSIONS or not config.shared_fence():
            return None
        host = st.addresses[st.rank].rsplit(":", 1)[0]
        if any(st.addresses[w].rsplit(":", 1)[0] != host for w in self._comm.world_ranks):
            return None
        off = CTRL.fence_offset(self._comm.size)
        words = []
        for t in self._targets:
            if t is self._me:
                words.append(self._ctrl.ctypes.data + off)
                continue
            try:
                words.append(self._engine.remote_ptr(t.addr, t.ctrl + off, 8))
            except HixlError:
                return None
        return words

    def _fence_stalled(self, missing, timed_out):
        """Fence waits for ``missing`` (window ranks): give up when one is
        known dead, or past the timeout."""
        what = f"Fence on window {self._label()}"
        self._rt.check_peers([self._targets[r].world for r in missing], what)
        if timed_out:
            raise HixlTimeoutError(f"{what}: the barrier did not complete within {self._rt.timeout_ms} ms; "
                                   f"rank(s) {missing} of the window did not arrive (dead, or not calling "
                                   f"Fence)")

    # -------------------------------------------------------------- PSCW

    def _notify(self, t, kind):
        st = self._rt
        self._engine.send_notify(t.addr, f"{self._key}:{kind}/{st.rank}", b"", st.timeout_ms)

    def Post(self, group, assertion=0):
        """Open an exposure epoch for the origins in ``group``."""
        self._check_live("Post")
        _check_assertion(assertion, "Post")
        if self._exposure is not None:
            raise EpochError(f"Post on window {self._label()}: an exposure epoch is already open")
        ranks = self._comm.group_ranks(group, "Post")
        self._fast.fence_open = False
        for r in ranks:
            self._notify(self._targets[r], "post")
        self._exposure = ranks

    def Start(self, group, assertion=0):
        """Open an access epoch to the targets in ``group`` (waits for their Post)."""
        self._check_live("Start")
        _check_assertion(assertion, "Start")
        self._check_no_epoch("Start")
        ranks = self._comm.group_ranks(group, "Start")
        if not assertion & C.MODE_NOCHECK:
            _rt.wait_notifies(f"{self._key}:post", [self._targets[r].world for r in ranks],
                              self._rt.timeout_ms, f"Start on window {self._label()}")
        self._fast.fence_open = False
        self._fast.set_access(ranks)

    def Complete(self):
        """End the access epoch: complete all RMA, tell each target."""
        self._check_live("Complete")
        if self._access is None:
            raise EpochError(f"Complete on window {self._label()} without Start")
        for r in sorted(self._access):
            t = self._targets[r]
            self._flush_target(t)
            self._notify(t, "complete")  # the engine sends it after the data
        self._fast.set_access(None)

    def Wait(self):
        """End the exposure epoch: wait for Complete from every origin."""
        self._check_live("Wait")
        if self._exposure is None:
            raise EpochError(f"Wait on window {self._label()} without Post")
        _rt.wait_notifies(f"{self._key}:complete", [self._targets[r].world for r in self._exposure],
                          self._rt.timeout_ms, f"Wait on window {self._label()}")
        self._exposure = None

    def Test(self):
        """Non-blocking Wait: True (and the epoch closed) once every origin completed."""
        self._check_live("Test")
        if self._exposure is None:
            raise EpochError(f"Test on window {self._label()} without Post")
        st = self._rt
        st.poll_notifies()
        q = st.notify_queues[f"{self._key}:complete"]
        need = [self._targets[r].world for r in self._exposure]
        have = [src for src, _ in q]
        for w in need:
            if w in have:
                have.remove(w)
            else:
                return False
        _rt.wait_notifies(f"{self._key}:complete", need, st.timeout_ms, "Test")
        self._exposure = None
        return True

    # ---------------------------------------------------- passive target

    def _need_atomics(self):
        if not _engine.HAS_EXTENSIONS:
            raise UnsupportedError(f"window {self._label()}: passive-target locks and accumulates need "
                                   f"remote atomics, which vendor HIXL does not provide (use Fence or PSCW "
                                   f"with Put/Get)")

    def _atomic(self, t, fn, *args, offset=CTRL.LOCK):
        """An engine atomic on a word of t's control block."""
        self._need_atomics()
        return fn(t.addr, t.ctrl + offset, *args, timeout_ms=self._rt.timeout_ms)

    def _acquire(self, t, lock_type):
        eng = self._engine

        def try_once():
            if lock_type == C.LOCK_EXCLUSIVE:
                return self._atomic(t, eng.atomic_cas, 0, LOCK_EXCL) == 0
            if not self._atomic(t, eng.atomic_fetch_add, 1) & LOCK_EXCL:
                return True
            self._atomic(t, eng.atomic_fetch_add, _MASK)  # -1: back out, a writer holds it
            return False

        kind = "exclusive" if lock_type == C.LOCK_EXCLUSIVE else "shared"
        # Backing off leaves the core to the holder, which may need ours.
        _rt.poll(try_once, self._rt.timeout_ms / 1000.0, lambda: HixlTimeoutError(
            f"Lock: could not take the {kind} lock of rank {t.rank} of window {self._label()} "
            f"within {self._rt.timeout_ms} ms"))

    def _release(self, t, lock_type):
        eng = self._engine
        delta = (-LOCK_EXCL if lock_type == C.LOCK_EXCLUSIVE else -1) & _MASK
        self._atomic(t, eng.atomic_fetch_add, delta)

    def Lock(self, rank, lock_type=C.LOCK_EXCLUSIVE, assertion=0):
        """Open a passive-target epoch to ``rank`` (shared or exclusive lock)."""
        self._check_live("Lock")
        _check_assertion(assertion, "Lock")
        if lock_type not in (C.LOCK_EXCLUSIVE, C.LOCK_SHARED):
            raise ParamError(f"Lock: lock_type must be LOCK_EXCLUSIVE or LOCK_SHARED, got {lock_type!r}")
        if rank == C.PROC_NULL:
            return
        rank = self._comm.check_rank(rank, f"Lock on window {self._label()}")
        if self._fast.is_locked(rank):
            raise EpochError(f"Lock: rank {rank} of window {self._label()} is already locked by this rank")
        if self._lock_all:
            raise EpochError(f"Lock: window {self._label()} is inside Lock_all")
        self._check_no_epoch_but_locks("Lock")
        t = self._targets[rank]
        acquired = not assertion & C.MODE_NOCHECK
        if acquired:
            self._acquire(t, lock_type)
        self._fast.fence_open = False
        self._fast.add_lock(rank, lock_type, acquired)

    def _check_no_epoch_but_locks(self, what):
        if self._access is not None:
            raise EpochError(f"{what} on window {self._label()}: a PSCW access epoch is open")
        if self._fence and self._fence_used:
            raise EpochError(f"{what} on window {self._label()}: a fence epoch with RMA is open; end it "
                             f"with Fence(MODE_NOSUCCEED)")

    def Unlock(self, rank):
        """Complete all RMA to ``rank`` and release its lock."""
        self._check_live("Unlock")
        if rank == C.PROC_NULL:
            return
        rank = self._comm.check_rank(rank, f"Unlock on window {self._label()}")
        if not self._fast.is_locked(rank):
            raise EpochError(f"Unlock: rank {rank} of window {self._label()} is not locked by this rank")
        t = self._targets[rank]
        self._flush_target(t)
        lock_type, acquired = self._fast.pop_lock(rank)
        if acquired:
            self._release(t, lock_type)

    def Lock_all(self, assertion=0):
        """Shared locks on every rank of the window."""
        self._check_live("Lock_all")
        _check_assertion(assertion, "Lock_all")
        if self._lock_all or self._locks:
            raise EpochError(f"Lock_all on window {self._label()}: a passive-target epoch is already open")
        self._check_no_epoch_but_locks("Lock_all")
        acquired = not assertion & C.MODE_NOCHECK
        taken = []
        try:
            if acquired:
                for t in self._targets:
                    self._acquire(t, C.LOCK_SHARED)
                    taken.append(t)
        except BaseException:
            for t in taken:
                self._release(t, C.LOCK_SHARED)
            raise
        self._fast.fence_open = False
        self._fast.set_lock_all((True, acquired))

    def Unlock_all(self):
        """Complete all RMA and release the shared locks of Lock_all."""
        self._check_live("Unlock_all")
        if not self._lock_all:
            raise EpochError(f"Unlock_all on window {self._label()} without Lock_all")
        self._complete_all()
        _, acquired = self._lock_all
        self._fast.set_lock_all(False)
        if acquired:
            for t in self._targets:
                self._release(t, C.LOCK_SHARED)

    def _flush(self, rank):
        """Flush beyond the hot path (WinBase.Flush): every check, every case."""
        self._check_live("Flush")
        if rank == C.PROC_NULL:
            return
        rank = self._comm.check_rank(rank, f"Flush on window {self._label()}")
        if not self._passive(rank):
            raise EpochError(f"Flush: no passive-target epoch to rank {rank} of window {self._label()}")
        self._flush_target(self._targets[rank])

    def Flush_all(self):
        """Remote completion of all RMA (inside a passive epoch)."""
        self._check_live("Flush_all")
        if not (self._locks or self._lock_all or self._always_open):
            raise EpochError(f"Flush_all on window {self._label()}: no passive-target epoch is open")
        self._complete_all()

    def Flush_local(self, rank):
        """Local completion of RMA to ``rank`` (here: remote completion)."""
        self.Flush(rank)

    def Flush_local_all(self):
        """Local completion of all RMA (here: remote completion)."""
        self.Flush_all()

    def Sync(self):
        """Synchronize the public and private copies of the window (one copy
        in the unified model): a memory fence, so that loads after it see
        what peers wrote before it."""
        self._check_live("Sync")
        _engine.memory_fence()


def _check_assertion(assertion, what):
    valid = C.MODE_NOCHECK | C.MODE_NOSTORE | C.MODE_NOPUT | C.MODE_NOPRECEDE | C.MODE_NOSUCCEED
    if isinstance(assertion, bool) or not isinstance(assertion, int) or assertion & ~valid:
        raise ParamError(f"{what}: invalid assertion {assertion!r}")
