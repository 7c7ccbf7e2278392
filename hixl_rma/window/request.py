"""Requests of request-based RMA (Rput, Rget, Raccumulate, Rget_accumulate).

``Request`` has every name of mpi4py's ``MPI.Request``: the MPI forms
(``Wait``, ``Test``, ``Get_status``, ``Waitall`` ... ``Testsome``,
``Get_status_all`` ...) and the lowercase ones mpi4py adds (``wait``,
``test``, ``waitall`` ...), which return what mpi4py's return for a request
that carries no message: ``None`` as the received object. The list forms
take hixl_rma's requests and mpi4py's own, mixed; a completed request is
what mpi4py calls a null request (falsy, skipped by the list forms).
"""
from mpi4py import MPI

from hixl_rma.ground.errors import ParamError, UnsupportedError, also


class Request:
    """An RMA request with the methods of mpi4py's ``MPI.Request``.

    ``Wait`` of an Rput gives (at least) local completion; of an Rget, the
    data. ``keep`` holds the origin/result buffers until then.
    """

    __slots__ = ("_after", "_done", "_keep", "_test", "_wait")

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

    # ------------------------------------------------------------ one request

    def Wait(self, status=None):
        """Block until the operation completed."""
        if not self._done:
            self._wait()
            self._finish()
        _empty_status(status)
        return True

    def Test(self, status=None):
        """True when the operation completed (never blocks for long)."""
        if not self._done and (self._test is None or self._test()):
            self._finish()
        if self._done:
            _empty_status(status)
        return self._done

    def Get_status(self, status=None):
        """Same as Test, without side effects beyond progress."""
        return self.Test(status)

    def wait(self, status=None):
        """Wait; the received object (None: RMA carries none)."""
        self.Wait(status)
        return None

    def test(self, status=None):
        """(flag, received object): Test, and None as the object."""
        return self.Test(status), None

    def get_status(self, status=None):
        """Get_status."""
        return self.Get_status(status)

    def Cancel(self):
        """RMA requests cannot be cancelled (MPI: erroneous); a no-op."""

    cancel = Cancel

    def Free(self):
        """Complete the request and release it (MPI lets a freed request finish)."""
        self.Wait()

    def free(self):
        """Free, if not null (complete)."""
        if not self._done:
            self.Free()

    def __bool__(self):
        """True while the operation is pending (a completed request is
        ``MPI.REQUEST_NULL`` in mpi4py, which is falsy)."""
        return not self._done

    # ------------------------------------------------------------ list forms
    # Each takes hixl_rma requests and mpi4py's own, mixed (both have
    # Wait/Test/Get_status and are falsy once complete or null).

    @classmethod
    def Waitall(cls, requests, statuses=None):
        """Wait for every request of the list."""
        # the caller's statuses may outnumber the requests (MPI: an array of count or more)
        for r, st in zip(_requests(requests, "Waitall"), _statuses(statuses, requests), strict=False):
            r.Wait(st)
        return True

    @classmethod
    def Testall(cls, requests, statuses=None):
        """True when every request completed."""
        reqs = _requests(requests, "Testall")
        return all([r.Test(st) for r, st in zip(reqs, _statuses(statuses, reqs), strict=False)])

    @classmethod
    def Waitany(cls, requests, status=None):
        """Wait for one request of the list; its index (``MPI.UNDEFINED``
        when none is pending)."""
        reqs = _requests(requests, "Waitany")
        pending = _pending(reqs)
        if not pending:
            _empty_status(status)
            return MPI.UNDEFINED
        for i in pending:
            if reqs[i].Test(status):
                return i
        reqs[pending[0]].Wait(status)
        return pending[0]

    @classmethod
    def Testany(cls, requests, status=None):
        """(index, flag): a request of the list that completed, if any
        (``(MPI.UNDEFINED, True)`` when none is pending)."""
        reqs = _requests(requests, "Testany")
        pending = _pending(reqs)
        if not pending:
            _empty_status(status)
            return MPI.UNDEFINED, True
        for i in pending:
            if reqs[i].Test(status):
                return i, True
        return MPI.UNDEFINED, False

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        """Wait until at least one pending request completed; the indices of
        those that did (None when none was pending)."""
        reqs = _requests(requests, "Waitsome")
        if not _pending(reqs):
            return None
        done = cls.Testsome(reqs, statuses)
        if done:
            return done
        i = cls.Waitany(reqs)
        return [i] + [j for j in (cls.Testsome(reqs, statuses) or []) if j != i]

    @classmethod
    def Testsome(cls, requests, statuses=None):
        """The indices of the pending requests that completed now (None when
        none was pending)."""
        reqs = _requests(requests, "Testsome")
        pending = _pending(reqs)
        if not pending:
            return None
        sts = _statuses(statuses, reqs)
        return [i for i in pending if reqs[i].Test(sts[i])]

    @classmethod
    def Get_status_all(cls, requests, statuses=None):
        """True when every request completed (without freeing any)."""
        reqs = _requests(requests, "Get_status_all")
        return all([r.Get_status(st) for r, st in zip(reqs, _statuses(statuses, reqs), strict=False)])

    @classmethod
    def Get_status_any(cls, requests, status=None):
        """(index, flag) of a completed request, as Testany."""
        reqs = _requests(requests, "Get_status_any")
        pending = _pending(reqs)
        if not pending:
            return MPI.UNDEFINED, True
        for i in pending:
            if reqs[i].Get_status(status):
                return i, True
        return MPI.UNDEFINED, False

    @classmethod
    def Get_status_some(cls, requests, statuses=None):
        """The indices of completed requests, as Testsome."""
        reqs = _requests(requests, "Get_status_some")
        pending = _pending(reqs)
        if not pending:
            return None
        sts = _statuses(statuses, reqs)
        return [i for i in pending if reqs[i].Get_status(sts[i])]

    @classmethod
    def waitall(cls, requests, statuses=None):
        """Waitall; the received objects (None each)."""
        cls.Waitall(requests, statuses)
        return [None] * len(requests)

    @classmethod
    def testall(cls, requests, statuses=None):
        """(flag, received objects or None)."""
        flag = cls.Testall(requests, statuses)
        return flag, ([None] * len(requests) if flag else None)

    @classmethod
    def waitany(cls, requests, status=None):
        """(index, received object)."""
        return cls.Waitany(requests, status), None

    @classmethod
    def testany(cls, requests, status=None):
        """(index, flag, received object)."""
        index, flag = cls.Testany(requests, status)
        return index, flag, None

    @classmethod
    def waitsome(cls, requests, statuses=None):
        """(indices, received objects), or (None, None) when none was pending."""
        done = cls.Waitsome(requests, statuses)
        return done, (None if done is None else [None] * len(done))

    @classmethod
    def testsome(cls, requests, statuses=None):
        """(indices, received objects), or (None, None) when none was pending."""
        done = cls.Testsome(requests, statuses)
        return done, (None if done is None else [None] * len(done))

    @classmethod
    def get_status_all(cls, requests, statuses=None):
        """Get_status_all."""
        return cls.Get_status_all(requests, statuses)

    @classmethod
    def get_status_any(cls, requests, status=None):
        """Get_status_any."""
        return cls.Get_status_any(requests, status)

    @classmethod
    def get_status_some(cls, requests, statuses=None):
        """Get_status_some."""
        return cls.Get_status_some(requests, statuses)

    # ------------------------------------------------------------ handles

    def py2f(self):
        raise UnsupportedError("py2f: a hixl_rma RMA request has no MPI (Fortran) handle")

    def toint(self):
        raise UnsupportedError("toint: a hixl_rma RMA request has no MPI handle")

    @property
    def handle(self):
        raise UnsupportedError("handle: a hixl_rma RMA request has no MPI handle")

    @classmethod
    def f2py(cls, arg):
        raise UnsupportedError("f2py: a hixl_rma RMA request cannot be made from an MPI handle")

    @classmethod
    def fromhandle(cls, handle):
        raise UnsupportedError("fromhandle: a hixl_rma RMA request cannot be made from an MPI handle")

    @classmethod
    def fromint(cls, arg):
        raise UnsupportedError("fromint: a hixl_rma RMA request cannot be made from an MPI handle")

    def __repr__(self):
        return f"<hixl_rma.Request {'complete' if self._done else 'pending'}>"


_MPI_REQUEST = MPI.Request  # mpi4py's own, whatever dropin later puts in its place


def _empty_status(status):
    """What MPI sets in the status of a completed RMA request: the empty
    status (no source, no tag, no data)."""
    if status is not None:
        status.Set_source(MPI.ANY_SOURCE)
        status.Set_tag(MPI.ANY_TAG)
        status.Set_error(MPI.SUCCESS)
        status.Set_elements(MPI.BYTE, 0)


def _pending(reqs):
    return [i for i, r in enumerate(reqs) if r]


def _statuses(statuses, requests):
    """One status (or None) per request."""
    if statuses is None:
        return [None] * len(requests)
    if len(statuses) < len(requests):
        statuses.extend(MPI.Status() for _ in range(len(requests) - len(statuses)))
    return statuses


def _requests(requests, what):
    if not isinstance(requests, (list, tuple)):
        try:
            requests = list(requests)
        except TypeError:
            raise also(ParamError, TypeError)(f"{what} needs a sequence of requests, got "
                                              f"{type(requests).__name__}", error_class=MPI.ERR_REQUEST) from None
    for r in requests:
        if not isinstance(r, (Request, _MPI_REQUEST)):
            raise also(ParamError, TypeError)(f"{what}: {r!r} is neither a hixl_rma nor an mpi4py request",
                                              error_class=MPI.ERR_REQUEST)
    return requests
