"""Synchronization of hixl_rma.Win: the epoch state machine (fence, PSCW,
passive target), checked by every sync call and every RMA call.

Passive target uses a reader-writer lock word in each rank's control block,
driven by remote atomics (the foMPI design): exclusive = CAS 0 -> LOCK_EXCL
and the owner, shared = fetch-add 1 and back off while LOCK_EXCL is set, plus
a reader slot per origin. Owner and slots let the survivors break the holds
of a rank known dead. PSCW and fence
completion are engine notifies and a barrier.
"""

from hixl_rma import _engine
from hixl_rma.ground import config
from hixl_rma.ground import constants as C
from hixl_rma.ground.errors import EpochError, HixlError, HixlTimeoutError, ParamError, PeerFailure
from hixl_rma.runtime import process as _rt

from . import ctrl as CTRL

# The lock word's encoding is the extension's (_window_state/locks.pxi), written once: the writer
# bit, the word of an exclusive hold by a window rank, the writer a word names.
LOCK_EXCL = _engine.LOCK_EXCL
_exclusive_word, _writer_of = _engine.lock_word_exclusive, _engine.lock_word_writer
_MASK = (1 << 64) - 1
# What Fence's C path accepts: every assertion but MODE_NOSUCCEED (which
# closes the run of fence epochs, a change of state the Python layer makes).
_FENCE_MODES = C.MODE_NOCHECK | C.MODE_NOSTORE | C.MODE_NOPUT | C.MODE_NOPRECEDE


class Sync:
    """The synchronization calls of a window (a part of its core): Fence,
    PSCW, passive target, Flush, Sync.

    The origin's access epochs (fence, PSCW access group, locks, Lock_all,
    the HIXL face's always-open) are owned by the core's WindowState, which the
    hot path reads; this class changes them only through WindowState's methods.
    What is its own: the exposure epoch (target side) and Fence's barrier
    kind, which are not the hot path's business."""

    __slots__ = ("exposure", "fence_mode", "w")

    def __init__(self, core):
        self.w = core
        self.fence_mode = None  # Fence's barrier: None (the first Fence decides), "shared" or "mpi"
        self.exposure = None    # PSCW exposure group (list of ranks) after Post

    # ----------------------------------------------------------- checks

    def check_no_epoch(self, what, allow_fence=False):
        w = fast = self.w
        if fast.locks or fast.lock_all:
            raise EpochError(f"{what} on window {w.label()}: a passive-target epoch is open "
                             f"(ranks {sorted(fast.locks) if fast.locks else 'all'})")
        if fast.access is not None:
            raise EpochError(f"{what} on window {w.label()}: a PSCW access epoch is open (Start "
                             f"without Complete)")
        if not allow_fence and fast.fence_open and fast.fence_used:
            raise EpochError(f"{what} on window {w.label()}: a fence epoch with RMA is open; end it "
                             f"with Fence(MODE_NOSUCCEED)")

    def check_free_allowed(self):
        self.check_no_epoch("Free", allow_fence=True)
        if self.exposure is not None:
            raise EpochError(f"Free on window {self.w.label()}: a PSCW exposure epoch is open (Post "
                             f"without Wait)")

    # ------------------------------------------------------------- fence

    def fence(self, assertion):
        """Fence beyond WindowState's (which takes one between two fence epochs
        in C): every check, the first Fence, MODE_NOSUCCEED."""
        w = self.w
        w.check_live("Fence")
        _check_assertion(assertion, "Fence")
        self.check_no_epoch("Fence", allow_fence=True)
        if self.exposure is not None:
            raise EpochError(f"Fence on window {w.label()}: a PSCW exposure epoch is open")
        w.complete_all()
        self._fence_barrier()
        w.fence_open = not (assertion & C.MODE_NOSUCCEED)
        w.fence_used = False

    def _fence_barrier(self):
        """Fence's barrier. Same-node ranks meet on counters in their mapped
        control blocks (no MPI call, no message); the first Fence of the
        window finds out, together, whether every rank can."""
        w = self.w
        if self.fence_mode == "shared":
            w.fence_barrier()
            return
        comm, timeout = w.comm, w.rt.timeout_ms
        if self.fence_mode == "mpi":
            _rt.barrier(comm.comm, timeout, comm.world_ranks, program=False)
            return
        found = self._fence_words()
        if _rt.allreduce_and(comm.comm, found is not None, timeout, comm.world_ranks):
            words, pins = found
            w.set_fence_barrier(comm.rank, words, self._fence_stalled, _FENCE_MODES, pins)
            self.fence_mode = "shared"
        else:
            self.fence_mode = "mpi"

    def _fence_words(self):
        """(the address here of every rank's fence counter, the pins that
        keep them mapped), or None when a rank's control block cannot be
        mapped (another node, vendor HIXL)."""
        w = self.w
        st = w.rt
        if not _engine.has("remote_ptr") or not config.shared_fence():
            return None
        if not st.same_node(w.comm.world_ranks):
            return None
        off = CTRL.fence_offset(w.comm.size)
        words, pins = [], []
        for t in w.targets:
            if t is w.me:
                words.append(w.ctrl.ctypes.data + off)
                continue
            try:
                pins.append(w.engine.pin_remote(t.addr, t.ctrl + off, 8))  # mapped while Fence reads it
            except HixlError:
                return None
            words.append(pins[-1].addr)
        return words, pins

    def _fence_stalled(self, missing, timed_out):
        """Fence waits for ``missing`` (window ranks): give up when one is
        known dead, or past the timeout."""
        w = self.w
        what = f"Fence on window {w.label()}"
        _rt.interruption()
        w.rt.check_peers([w.targets[r].world for r in missing], what)
        if timed_out:
            raise HixlTimeoutError(f"{what}: the barrier did not complete within {w.rt.timeout_ms} ms; "
                                   f"rank(s) {missing} of the window did not arrive (dead, or not calling "
                                   f"Fence)")

    # -------------------------------------------------------------- PSCW

    def _notify(self, t, kind):
        st = self.w.rt
        self.w.send_notify_at(t.rank, f"{self.w.key}:{kind}/{st.rank}", st.timeout_ms, f"PSCW ({kind})")

    def post(self, group, assertion):
        """Open an exposure epoch for the origins in ``group``."""
        w = self.w
        w.check_live("Post")
        _check_assertion(assertion, "Post")
        if self.exposure is not None:
            raise EpochError(f"Post on window {w.label()}: an exposure epoch is already open")
        ranks = w.comm.group_ranks(group, "Post")
        w.fence_open = False
        for r in ranks:
            self._notify(w.targets[r], "post")
        self.exposure = ranks

    def start(self, group, assertion):
        """Open an access epoch to the targets in ``group`` (waits for their Post)."""
        w = self.w
        w.check_live("Start")
        _check_assertion(assertion, "Start")
        self.check_no_epoch("Start")
        ranks = w.comm.group_ranks(group, "Start")
        if not assertion & C.MODE_NOCHECK:
            _rt.wait_notifies(f"{w.key}:post", [w.targets[r].world for r in ranks],
                              w.rt.timeout_ms, f"Start on window {w.label()}")
        w.fence_open = False
        w.set_access(ranks)

    def complete(self):
        """End the access epoch: complete all RMA, tell each target."""
        w = self.w
        w.check_live("Complete")
        if w.access is None:
            raise EpochError(f"Complete on window {w.label()} without Start")
        for r in sorted(w.access):
            t = w.targets[r]
            w.flush_target(t)
            self._notify(t, "complete")  # the engine sends it after the data
        w.set_access(None)

    def wait(self):
        """End the exposure epoch: wait for Complete from every origin."""
        w = self.w
        w.check_live("Wait")
        if self.exposure is None:
            raise EpochError(f"Wait on window {w.label()} without Post")
        _rt.wait_notifies(f"{w.key}:complete", [w.targets[r].world for r in self.exposure],
                          w.rt.timeout_ms, f"Wait on window {w.label()}")
        self.exposure = None

    def test(self):
        """Non-blocking Wait: True (and the epoch closed) once every origin completed."""
        w = self.w
        w.check_live("Test")
        if self.exposure is None:
            raise EpochError(f"Test on window {w.label()} without Post")
        st = w.rt
        st.poll_notifies()
        q = st.notify_queues[f"{w.key}:complete"]
        need = [w.targets[r].world for r in self.exposure]
        have = [src for src, _ in q]
        for r in need:
            if r in have:
                have.remove(r)
            else:
                return False
        _rt.wait_notifies(f"{w.key}:complete", need, st.timeout_ms, "Test")
        self.exposure = None
        return True

    # ---------------------------------------------------- passive target

    def _acquire(self, t, lock_type):
        """Take t's lock word. Exclusive: CAS 0 -> LOCK_EXCL | owner (this
        window rank + 1; a CAS that timed out but landed is found ours on the
        next try). Shared: fetch-add 1, backed out while a writer holds it,
        then this rank's reader slot at t set, so that the hold can be broken
        if this rank dies. Holds of ranks known dead are broken while waiting."""
        w = self.w
        mine = _exclusive_word(w.comm.rank)
        slot = CTRL.reader_offset(w.comm.size, w.comm.rank)

        exclusive = lock_type == C.LOCK_EXCLUSIVE

        def try_once():
            got = w.try_lock(t.rank, exclusive)  # mapped here: CPU atomics, in C
            if got >= 0:
                return got == 1
            if engine_try():
                return True
            w.make_ready(t)  # connected now: the word mapped for the tries and the wait, where it can be
            return False

        def engine_try():
            if exclusive:
                return w.ctrl_atomic(t, "CSWAP", mine, compare=0) in (0, mine)
            if not w.ctrl_atomic(t, "ADD", 1) & LOCK_EXCL:
                w.ctrl_atomic(t, "SWAP", 1, offset=slot)
                return True
            w.ctrl_atomic(t, "ADD", _MASK)  # -1: back out, a writer holds it
            return False

        kind = "exclusive" if lock_type == C.LOCK_EXCLUSIVE else "shared"
        # Backing off leaves the core to the holder, which may need ours.
        # Where the word is mapped here, the wait between tries is C's, without the GIL, woken as the
        # word looks free (the poll still checks deadline, interruption and dead holders every 0.1 s).
        _rt.poll(try_once, w.rt.timeout_ms / 1000.0, lambda: HixlTimeoutError(
            f"Lock: could not take the {kind} lock of rank {t.rank} of window {w.label()} "
            f"within {w.rt.timeout_ms} ms"), check=lambda: self._break_dead(t),
            block=lambda seconds: w.wait_lock_free(t.rank, exclusive, seconds))

    def _break_dead(self, t):
        """Release at t what ranks known dead hold of its lock word: an
        exclusive lock (its owner field), shared holds (their reader slots)."""
        w = self.w
        dead = [r for r, other in enumerate(w.targets) if r != w.comm.rank and w.rt.is_dead(other.world)]
        if not dead or w.rt.is_dead(t.world):
            return
        word = w.ctrl_atomic(t, "ADD", 0)
        writer = _writer_of(word)
        if writer in dead:
            w.ctrl_atomic(t, "CSWAP", (word - _exclusive_word(writer)) & _MASK, compare=word)
        for r in dead:
            if w.ctrl_atomic(t, "CSWAP", 0, compare=1, offset=CTRL.reader_offset(w.comm.size, r)) == 1:
                w.ctrl_atomic(t, "ADD", _MASK)  # its shared hold: -1
        w.wake_lock_waiters(t.rank)

    def _release(self, t, lock_type):
        try:
            self._release_word(t, lock_type)
        finally:
            # The ranks of this node asleep on the word (a waiting _acquire) wake now, not at their next check.
            self.w.wake_lock_waiters(t.rank)

    def _release_word(self, t, lock_type):
        w = self.w
        if lock_type == C.LOCK_EXCLUSIVE:
            # Only a word that still names this rank as its holder loses
            # this rank's bits: a hold broken meanwhile (by a rank that
            # believed this one dead) belongs to someone else now.
            mine = _exclusive_word(w.comm.rank)
            word = w.ctrl_atomic(t, "CSWAP", 0, compare=mine)
            while word != mine:
                if _writer_of(word) != w.comm.rank:
                    raise PeerFailure(f"Unlock: the exclusive lock of rank {t.rank} of window {w.label()} was "
                                      f"not this rank's any more (another rank broke it, believing this rank "
                                      f"dead); nothing was released")
                old, word = word, w.ctrl_atomic(t, "CSWAP", (word - mine) & _MASK, compare=word)
                if word == old:  # shared lockers backing out were counted in it: they keep theirs
                    return
            return
        # Only the one who clears the slot takes the count back (this rank,
        # or a survivor breaking the hold of a rank it believes dead).
        if w.ctrl_atomic(t, "CSWAP", 0, compare=1, offset=CTRL.reader_offset(w.comm.size, w.comm.rank)) == 1:
            w.ctrl_atomic(t, "ADD", _MASK)

    def _release_all(self, targets, lock_type):
        """Release at every target, whatever fails at some; the first
        failure as (target, error), or None."""
        first = None
        for t in targets:
            try:
                self._release(t, lock_type)
            except HixlError as exc:
                first = first or (t, exc)
        return first

    def lock(self, rank, lock_type, assertion):
        """Open a passive-target epoch to ``rank`` (shared or exclusive lock)."""
        w = self.w
        w.check_live("Lock")
        _check_assertion(assertion, "Lock")
        if lock_type not in (C.LOCK_EXCLUSIVE, C.LOCK_SHARED):
            raise ParamError(f"Lock: lock_type must be LOCK_EXCLUSIVE or LOCK_SHARED, got {lock_type!r}")
        if rank == C.PROC_NULL:
            return
        rank = w.comm.check_rank(rank, f"Lock on window {w.label()}")
        if w.is_locked(rank):
            raise EpochError(f"Lock: rank {rank} of window {w.label()} is already locked by this rank")
        if w.lock_all:
            raise EpochError(f"Lock: window {w.label()} is inside Lock_all")
        self._check_no_epoch_but_locks("Lock")
        t = w.targets[rank]
        acquired = not assertion & C.MODE_NOCHECK
        if acquired:
            self._acquire(t, lock_type)
            w.make_ready(t)  # the next Lock, and the RMA inside, take the hot path
        w.fence_open = False
        w.add_lock(rank, lock_type, acquired)

    def _check_no_epoch_but_locks(self, what):
        w = self.w
        if w.access is not None:
            raise EpochError(f"{what} on window {w.label()}: a PSCW access epoch is open")
        if w.fence_open and w.fence_used:
            raise EpochError(f"{what} on window {w.label()}: a fence epoch with RMA is open; end it "
                             f"with Fence(MODE_NOSUCCEED)")

    def unlock(self, rank):
        """Complete all RMA to ``rank`` and release its lock."""
        w = self.w
        w.check_live("Unlock")
        if rank == C.PROC_NULL:
            return
        rank = w.comm.check_rank(rank, f"Unlock on window {w.label()}")
        if not w.is_locked(rank):
            raise EpochError(f"Unlock: rank {rank} of window {w.label()} is not locked by this rank")
        t = w.targets[rank]
        try:
            w.flush_target(t)
        finally:
            # The epoch ends here even when the flush failed (a dead target):
            # Free and new epochs are possible, as after any Unlock.
            lock_type, acquired = w.pop_lock(rank)
        if acquired:
            self._release(t, lock_type)

    def lock_all(self, assertion):
        """Shared locks on every rank of the window."""
        w = self.w
        w.check_live("Lock_all")
        _check_assertion(assertion, "Lock_all")
        if w.lock_all or w.locks:
            raise EpochError(f"Lock_all on window {w.label()}: a passive-target epoch is already open")
        self._check_no_epoch_but_locks("Lock_all")
        acquired = not assertion & C.MODE_NOCHECK
        taken = []
        try:
            if acquired:
                for t in w.targets:
                    self._acquire(t, C.LOCK_SHARED)
                    taken.append(t)
        except BaseException:
            self._release_all(taken, C.LOCK_SHARED)
            raise
        w.fence_open = False
        w.set_lock_all((True, acquired))

    def unlock_all(self):
        """Complete all RMA and release the shared locks of Lock_all."""
        w = self.w
        w.check_live("Unlock_all")
        if not w.lock_all:
            raise EpochError(f"Unlock_all on window {w.label()} without Lock_all")
        _, acquired = w.lock_all
        # Every target is completed and released that can be, whatever fails
        # at others (a dead rank); the epoch ends here either way, and the
        # first failure is raised after.
        first, done = None, []
        for t in w.targets:
            try:
                w.flush_target(t)
                done.append(t)
            except HixlError as exc:
                first = first or (t, exc)
        w.set_lock_all(False)
        if acquired:
            first = self._release_all(done, C.LOCK_SHARED) or first
        if first is not None:
            t, exc = first
            raise exc.again(f"Unlock_all on window {w.label()}: rank {t.rank} (world rank {t.world}): {exc} "
                            f"(the epoch is closed; the other ranks' locks were released)")

    def flush(self, rank):
        """Flush beyond the hot path (WinBase.Flush): every check, every case."""
        w = self.w
        w.check_live("Flush")
        if rank == C.PROC_NULL:
            return
        rank = w.comm.check_rank(rank, f"Flush on window {w.label()}")
        if not w.in_passive(rank):
            raise EpochError(f"Flush: no passive-target epoch to rank {rank} of window {w.label()}")
        w.flush_target(w.targets[rank])

    def flush_all(self):
        """Remote completion of all RMA (inside a passive epoch)."""
        w = self.w
        w.check_live("Flush_all")
        if not (w.locks or w.lock_all or w.always_open):
            raise EpochError(f"Flush_all on window {w.label()}: no passive-target epoch is open")
        w.complete_all()

    def sync(self):
        """Synchronize the public and private copies of the window (one copy
        in the unified model): a memory fence, so that loads after it see
        what peers wrote before it."""
        self.w.check_live("Sync")
        _engine.memory_fence()


def _check_assertion(assertion, what):
    valid = C.MODE_NOCHECK | C.MODE_NOSTORE | C.MODE_NOPUT | C.MODE_NOPRECEDE | C.MODE_NOSUCCEED
    if isinstance(assertion, bool) or not isinstance(assertion, int) or assertion & ~valid:
        raise ParamError(f"{what}: invalid assertion {assertion!r}")
