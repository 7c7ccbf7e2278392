"""Requests of request-based RMA (Rput, Rget, Raccumulate, Rget_accumulate)."""
from mpi4py import MPI

from .errors import ParamError, also


class Request:
    """An RMA request with mpi4py's ``Wait``/``Test`` and ``Request.Waitall``.

    ``Wait`` of an Rput gives (at least) local completion; of an Rget, the
    data. ``keep`` holds the origin/result buffers until then.
    """

    __slots__ = ("_wait", "_test", "_keep", "_done", "_after")

    def __init__(self, wait, test=None, keep=None, after=None):
        self._wait = wait
        self._test = test
        self._keep = keep
        self._done = False
        self._after = after

    @classmethod
    def completed(cls, keep=None):
        """A request that is already complete."""
        req = cls(None)
        req._done = True
        return req

    def _finish(self):
        self._done = True
        self._keep = None
        if self._after is not None:
            after, self._after = self._after, None
            after()

    def Wait(self, status=None):
        """Block until the operation completed."""
        if not self._done:
            self._wait()
            self._finish()
        return True

    def Test(self, status=None):
        """True when the operation completed (never blocks for long)."""
        if self._done:
            return True
        if self._test is None or self._test():
            self._finish()
        return self._done

    def __bool__(self):
        """True while the operation is pending (a completed request is
        ``MPI.REQUEST_NULL`` in mpi4py, which is falsy)."""
        return not self._done

    def Cancel(self):
        """RMA requests cannot be cancelled (MPI: erroneous); a no-op."""

    def Free(self):
        """Complete the request and release it (MPI lets a freed request finish)."""
        self.Wait()

    def Get_status(self, status=None):
        """Same as Test, without side effects beyond progress."""
        return self.Test()

    # The list forms take hixl_rma requests and mpi4py's own ones, mixed.

    @staticmethod
    def Waitall(requests, statuses=None):
        """Wait for every request of the list."""
        for r in _requests(requests, "Waitall"):
            r.Wait()
        return True

    @staticmethod
    def Testall(requests, statuses=None):
        """True when every request completed."""
        return all([r.Test() for r in _requests(requests, "Testall")])

    @staticmethod
    def Waitany(requests, status=None):
        """Wait for one request of the list; its index (``MPI.UNDEFINED``
        when none is pending)."""
        reqs = _requests(requests, "Waitany")
        pending = [i for i, r in enumerate(reqs) if r]
        if not pending:
            return MPI.UNDEFINED
        for i in pending:
            if reqs[i].Test():
                return i
        reqs[pending[0]].Wait()
        return pending[0]

    @staticmethod
    def Testany(requests, status=None):
        """(index, flag): a request of the list that completed, if any
        (``(MPI.UNDEFINED, True)`` when none is pending)."""
        reqs = _requests(requests, "Testany")
        pending = [i for i, r in enumerate(reqs) if r]
        if not pending:
            return MPI.UNDEFINED, True
        for i in pending:
            if reqs[i].Test():
                return i, True
        return MPI.UNDEFINED, False

    def __repr__(self):
        return f"<hixl_rma.Request {'complete' if self._done else 'pending'}>"


_MPI_REQUEST = MPI.Request  # mpi4py's own, whatever dropin later puts in its place


def _requests(requests, what):
    if not isinstance(requests, (list, tuple)):
        raise also(ParamError, TypeError)(f"{what} needs a list of requests, got {type(requests).__name__}",
                                          error_class=MPI.ERR_REQUEST)
    for r in requests:
        if not isinstance(r, (Request, _MPI_REQUEST)):
            raise also(ParamError, TypeError)(f"{what}: {r!r} is neither a hixl_rma nor an mpi4py request",
                                              error_class=MPI.ERR_REQUEST)
    return requests
