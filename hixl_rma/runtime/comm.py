"""Communicator: an mpi4py intracommunicator whose ranks map to engines."""
from mpi4py import MPI

from hixl_rma.ground.errors import ParamError, also

from . import process as _rt


class Communicator:
    """Wraps an mpi4py intracommunicator (COMM_WORLD, Split results, ...).

    Translates its ranks to world ranks, whose engines are connected on
    first use.
    """

    def __init__(self, comm=None):
        st = _rt.runtime()
        if comm is None:
            comm = st.world
        elif isinstance(comm, Communicator):
            comm = comm.comm
        if not isinstance(comm, MPI.Comm):
            raise also(ParamError, TypeError)(
                f"comm must be an mpi4py intracommunicator or a hixl_rma.Communicator, "
                f"got {type(comm).__name__}", error_class=MPI.ERR_COMM)
        if comm == MPI.COMM_NULL:
            raise ParamError("comm is MPI.COMM_NULL", error_class=MPI.ERR_COMM)
        if comm.Is_inter():
            raise ParamError("comm must be an intracommunicator, not an intercommunicator",
                             error_class=MPI.ERR_COMM)
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        group = comm.Get_group()
        try:
            self.world_ranks = MPI.Group.Translate_ranks(group, list(range(self.size)),
                                                         st.world.Get_group())
        finally:
            group.Free()

    def Get_rank(self):
        """This process's rank in the communicator."""
        return self.rank

    def Get_size(self):
        """Number of ranks in the communicator."""
        return self.size

    def check_rank(self, rank, what):
        """Validate a rank argument; returns it as an int."""
        if isinstance(rank, bool) or not isinstance(rank, int):
            try:
                import numpy as np
                if isinstance(rank, np.integer):
                    rank = int(rank)
                else:
                    raise TypeError
            except TypeError:
                raise also(ParamError, TypeError)(f"{what}: rank must be an int, got {type(rank).__name__}",
                                                  error_class=MPI.ERR_RANK) from None
        if not 0 <= rank < self.size:
            raise ParamError(f"{what}: rank {rank} is out of range for a communicator of {self.size} ranks",
                             error_class=MPI.ERR_RANK)
        return rank

    def address(self, rank):
        """Engine address of ``rank`` (connected on first use)."""
        return _rt.runtime().connect(self.world_ranks[rank])

    def group_ranks(self, group, what):
        """Ranks of this communicator named by an mpi4py Group or a rank list."""
        if isinstance(group, MPI.Group):
            mine = self.comm.Get_group()
            try:
                ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), mine)
            finally:
                mine.Free()
            if any(r == MPI.UNDEFINED for r in ranks):
                raise ParamError(f"{what}: the group has ranks outside the window's communicator")
            return list(ranks)
        try:
            ranks = [self.check_rank(r, what) for r in group]
        except TypeError:
            raise ParamError(f"{what}: group must be an mpi4py Group or a list of ranks, "
                             f"got {type(group).__name__}") from None
        if len(set(ranks)) != len(ranks):
            raise ParamError(f"{what}: group lists a rank twice: {ranks}")
        return ranks

    def dup(self, timeout_ms, what):
        """A Communicator over a duplicate of this one, made within
        timeout_ms (MPI_Comm_idup): a window's collectives then stay off the
        user's communicator, which the user may free before the window, as
        MPI allows. The caller frees it (``free``)."""
        made = []
        _rt.collective(self.comm, lambda: _rt.idup(self.comm, made), what, timeout_ms, self.world_ranks,
                       keep=made)
        dup = object.__new__(Communicator)
        dup.comm, dup.rank, dup.size, dup.world_ranks = made[0], self.rank, self.size, self.world_ranks
        return dup

    def free(self):
        """Free the communicator (a duplicate made by ``dup``); local."""
        if self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
            self.comm.Free()

    def Barrier(self):
        """A barrier with the runtime's timeout (no busy spinning)."""
        _rt.barrier(self.comm, _rt.runtime().timeout_ms, program=True)

    def __repr__(self):
        return f"<hixl_rma.Communicator rank {self.rank} of {self.size}>"


def as_communicator(comm):
    """A Communicator for an mpi4py communicator, Communicator or None (world)."""
    return comm if isinstance(comm, Communicator) else Communicator(comm)
