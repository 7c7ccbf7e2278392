"""Requests of request-based RMA (Rput, Rget, Raccumulate, Rget_accumulate)."""
from .errors import ParamError


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

    def Free(self):
        """Complete the request and release it (MPI lets a freed request finish)."""
        self.Wait()

    def Get_status(self, status=None):
        """Same as Test, without side effects beyond progress."""
        return self.Test()

    @staticmethod
    def Waitall(requests, statuses=None):
        """Wait for every request of the list."""
        if not isinstance(requests, (list, tuple)):
            raise ParamError(f"Waitall needs a list of requests, got {type(requests).__name__}")
        for r in requests:
            if not isinstance(r, Request):
                raise ParamError(f"Waitall: {r!r} is not a hixl_rma.Request")
        for r in requests:
            r.Wait()
        return True

    @staticmethod
    def Testall(requests, statuses=None):
        """True when every request completed."""
        return all([r.Test() for r in requests])

    def __repr__(self):
        return f"<hixl_rma.Request {'complete' if self._done else 'pending'}>"
