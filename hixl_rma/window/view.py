"""A read-only view of one window, for tools (``Win.view()``).

What a tool that observes windows (the race detector) may know of one,
without reaching into its state: a stable id, its name for messages, its
flavor, communicator and ranks, this rank's memory and each target's
displacement unit, and the window's own checks (which raise the errors a
call on the window would). Aliases of a window (``Win(win)``) have the
same view.
"""
from hixl_rma.ground.constants import WIN_FLAVOR_DYNAMIC as _DYNAMIC


class WindowView:
    """The window of ``core`` as a tool sees it (read-only)."""

    __slots__ = ("_core",)

    def __init__(self, core):
        self._core = core

    @property
    def key(self):
        """The window's id: the same at every rank, never reused in the job."""
        return self._core.key

    def label(self):
        """The window's name in messages."""
        return self._core.label()

    @property
    def flavor(self):
        """``WIN_FLAVOR_CREATE``, ``_ALLOCATE``, ``_SHARED`` or ``_DYNAMIC``."""
        return self._core.flavor

    @property
    def comm(self):
        """The window's mpi4py communicator."""
        return self._core.comm.comm

    @property
    def rank(self):
        """This rank in the window's communicator."""
        return self._core.comm.rank

    @property
    def world_ranks(self):
        """The world rank of each rank of the window's communicator."""
        return tuple(self._core.comm.world_ranks)

    @property
    def device(self):
        """True when this rank's window memory is device memory."""
        return bool(self._core.device)

    @property
    def base(self):
        """The address of this rank's window memory (0 for a dynamic window
        or device memory: no one range of host memory)."""
        c = self._core
        return 0 if c.flavor == _DYNAMIC or c.device else c.me.base

    @property
    def size(self):
        """The bytes of this rank's window memory (0 where ``base`` is)."""
        c = self._core
        return 0 if c.flavor == _DYNAMIC or c.device else c.me.size

    @property
    def disp_unit(self):
        """This rank's displacement unit."""
        return self._core.disp_unit

    def disp_unit_of(self, rank):
        """The displacement unit of ``rank`` (of the window's communicator)."""
        return self._core.targets[rank].disp_unit

    @property
    def freed(self):
        """True once the window is freed (or for the null window)."""
        return bool(self._core.freed)

    def check_live(self, what):
        """Raise the window's error for call ``what`` when it is freed."""
        self._core.check_live(what)

    def check_target(self, rank, what):
        """Raise the window's error for call ``what`` to ``rank`` (a bad rank,
        no epoch, a freed window); False for PROC_NULL, else True."""
        return self._core.target(rank, what) is not None

    def group_ranks(self, group, what):
        """The ranks in the window's communicator of ``group``'s members
        (ParamError naming ``what`` for a member outside it)."""
        return self._core.comm.group_ranks(group, what)

