"""MPI's own synchronizations, made to carry vector clocks.

mpi4py's communicator types are extension types whose methods cannot be
replaced, so the detector hands out a subclass: ``MPI.COMM_WORLD`` (and
``hixl_rma.COMM_WORLD``) become a ``ClockComm`` over the same handle, and
a ``ClockComm``'s Dup/Split/Create/... return ``ClockComm`` s. Each has a
shadow communicator (a Dup made with it, so collectively) that carries
the clocks, never the program's messages:

- a send first sends this rank's clock on the shadow (same destination
  and tag), a receive then takes the clock from the source and tag its
  status names (MPI's non-overtaking order pairs them);
- a collective is followed by an Allreduce(MAX) of the clocks on the
  shadow; a Barrier is that Allreduce alone. Every collective is taken as
  ordering everyone with everyone (a Bcast orders only root before the
  others): more order than MPI promises, so it can hide a race, never
  invent one.

Not carried: nonblocking receives completed by the list forms of
``MPI.Request`` (Waitall ...), persistent and partitioned
communication, one-sided MPI.Win of mpi4py itself, intercommunicators.
"""
from mpi4py import MPI
import numpy as np

_P2P_SEND = ("Send", "Ssend", "Bsend", "Rsend", "send", "ssend", "bsend", "Isend", "Issend", "Ibsend", "Irsend",
             "isend", "issend", "ibsend")
_COLLECTIVES = ("Bcast", "bcast", "Allreduce", "allreduce", "Reduce", "reduce", "Gather", "gather", "Gatherv",
                "Allgather", "allgather", "Allgatherv", "Scatter", "scatter", "Scatterv", "Alltoall", "alltoall",
                "Alltoallv", "Scan", "scan", "Exscan", "exscan", "Reduce_scatter", "Reduce_scatter_block")
_MAKERS = ("Dup", "Split", "Create", "Clone", "Split_type", "Create_group")


def make_class(det):
    """A ClockComm class bound to detector ``det``."""
    base = MPI.Intracomm

    class ClockComm(base):
        """An mpi4py intracommunicator whose calls carry the race detector's clocks."""

        def _shadow(self):
            # None for a communicator mpi4py made of this class without wrap()
            # (Idup and friends create their result as type(self)): plain MPI.
            # Kept on the object, not by handle: MPI reuses a freed handle.
            return self.__dict__.get("_race_shadow")

        def Barrier(self):
            if self._shadow() is None:
                return base.Barrier(self)
            c = det.release()
            self._shadow().Allreduce(MPI.IN_PLACE, c, op=MPI.MAX)
            det.acquire(c)

        barrier = Barrier

        def Recv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
            if self._shadow() is None:
                return base.Recv(self, buf, source, tag, status)
            st = status if status is not None else MPI.Status()
            base.Recv(self, buf, source, tag, st)
            _take(self, st)

        def recv(self, buf=None, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
            if self._shadow() is None:
                return base.recv(self, buf, source, tag, status)
            st = status if status is not None else MPI.Status()
            obj = base.recv(self, buf, source, tag, st)
            _take(self, st)
            return obj

        def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG,
                     status=None):
            if self._shadow() is None:
                return base.Sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, status)
            _give(self, dest, sendtag)
            st = status if status is not None else MPI.Status()
            base.Sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, st)
            _take(self, st)

        def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG,
                     status=None):
            if self._shadow() is None:
                return base.sendrecv(self, sendobj, dest, sendtag, recvbuf, source, recvtag, status)
            _give(self, dest, sendtag)
            st = status if status is not None else MPI.Status()
            obj = base.sendrecv(self, sendobj, dest, sendtag, recvbuf, source, recvtag, st)
            _take(self, st)
            return obj

    def _give(comm, dest, tag):
        c = det.release()
        if dest != MPI.PROC_NULL:
            _pending.append((comm._shadow().Isend(c, dest, tag), c))
            if len(_pending) > 64:
                _pending[:] = [(r, b) for r, b in _pending if not r.Test()]

    def _take(comm, st):
        src = st.Get_source()
        if src == MPI.PROC_NULL or src < 0:
            return
        c = np.empty(det.width, np.int64)
        comm._shadow().Recv(c, src, st.Get_tag())
        det.acquire(c)

    def sender(name):
        fn = getattr(base, name)

        def send(self, buf, dest, tag=0, *args, **kwargs):
            if self._shadow() is not None:
                _give(self, dest, tag)
            return fn(self, buf, dest, tag, *args, **kwargs)

        send.__name__ = name
        return send

    def collective(name):
        fn = getattr(base, name)

        def coll(self, *args, **kwargs):
            sh = self._shadow()
            if sh is None:
                return fn(self, *args, **kwargs)
            c = det.release()
            out = fn(self, *args, **kwargs)
            sh.Allreduce(MPI.IN_PLACE, c, op=MPI.MAX)
            det.acquire(c)
            return out

        coll.__name__ = name
        return coll

    def maker(name):
        fn = getattr(base, name)

        def make(self, *args, **kwargs):
            new = fn(self, *args, **kwargs)
            return wrap(new) if self._shadow() is not None else new

        make.__name__ = name
        return make

    for name in _P2P_SEND:
        if hasattr(base, name):
            setattr(ClockComm, name, sender(name))
    for name in _COLLECTIVES:
        if hasattr(base, name):
            setattr(ClockComm, name, collective(name))
    for name in _MAKERS:
        if hasattr(base, name):
            setattr(ClockComm, name, maker(name))
    _pending = []
    _plain = {}  # id -> (plain communicator, its shadow)

    def wrap(comm):
        """``comm`` as a ClockComm (collective: its shadow is a Dup)."""
        if comm == MPI.COMM_NULL or comm.Is_inter():
            return comm
        cc = ClockComm(comm)
        if isinstance(comm, ClockComm):
            sh = comm.__dict__.get("_race_shadow")
        else:
            # a plain communicator (the HIXL face's Fence): its shadow once, the object kept
            held = _plain.get(id(comm))
            sh = held[1] if held is not None and held[0] is comm else None
        if sh is None:
            sh = base.Dup(comm)
            if not isinstance(comm, ClockComm):
                _plain[id(comm)] = (comm, sh)
        cc._race_shadow = sh
        return cc

    def shadow_of(comm):
        """comm's shadow, made now (collectively) if it has none, and kept."""
        if isinstance(comm, ClockComm):
            sh = comm.__dict__.get("_race_shadow")
            if sh is None:
                sh = comm._race_shadow = base.Dup(comm)
            return sh
        return wrap(comm).__dict__["_race_shadow"]

    ClockComm.wrap = staticmethod(wrap)
    ClockComm.shadow_of = staticmethod(shadow_of)
    return ClockComm

