"""Run code written for mpi4py's ``MPI.Win`` on ``hixl_rma.Win`` unchanged.

``install()`` puts hixl_rma's window, and what goes with it, in the place of
mpi4py's in the ``mpi4py.MPI`` module, so every later ``MPI.Win.Create``,
``MPI.WIN_NULL`` or ``isinstance(w, MPI.Win)`` in this process means
hixl_rma's:

- ``MPI.Win`` and ``MPI.WIN_NULL``;
- ``MPI.Request``: mpi4py's request class, extended so that its list forms
  (``Waitall``, ``Testall``, ``Waitany``, ``Testany``) also take the
  requests of ``Rput``/``Rget``/``Raccumulate``/``Rget_accumulate``, mixed
  with mpi4py's own, and ``isinstance(r, MPI.Request)`` holds for both.

Errors need no replacing: every hixl_rma error already is an
``MPI.Exception`` (or the ``ValueError``/``TypeError`` mpi4py raises).
``python -m hixl_rma prog.py`` calls ``install()`` before the program's first
line runs.
"""
from mpi4py import MPI

_saved = {}


def original(name="Win"):
    """mpi4py's own object of that name, whether or not ``install()`` is in effect."""
    return _saved.get(name, getattr(MPI, name))


class _RequestType(type):
    """isinstance/issubclass of the replaced ``MPI.Request`` also hold for
    mpi4py's own requests and for hixl_rma's."""

    def __instancecheck__(cls, obj):
        from .request import Request
        return isinstance(obj, (original("Request"), Request))

    def __subclasscheck__(cls, sub):
        from .request import Request
        return issubclass(sub, (original("Request"), Request))


def _mixed_request_class():
    from .request import Request as HixlRequest
    base = original("Request")

    def split(requests):
        ours = [r for r in requests if isinstance(r, HixlRequest)]
        theirs = [r for r in requests if not isinstance(r, HixlRequest)]
        return ours, theirs

    class Request(base, metaclass=_RequestType):
        """mpi4py's ``MPI.Request``, whose list forms also take hixl_rma's RMA requests."""

        @staticmethod
        def Waitall(requests, statuses=None):
            ours, theirs = split(requests)
            if not ours:
                return base.Waitall(requests, statuses)
            HixlRequest.Waitall(ours)
            return base.Waitall(theirs) if theirs else True

        @staticmethod
        def Testall(requests, statuses=None):
            ours, theirs = split(requests)
            if not ours:
                return base.Testall(requests, statuses)
            return HixlRequest.Testall(ours) and (base.Testall(theirs) if theirs else True)

        @staticmethod
        def Waitany(requests, status=None):
            if not split(requests)[0]:
                return base.Waitany(requests, status)
            return HixlRequest.Waitany(list(requests))

        @staticmethod
        def Testany(requests, status=None):
            if not split(requests)[0]:
                return base.Testany(requests, status)
            return HixlRequest.Testany(list(requests))

    Request.__module__ = MPI.__name__
    Request.__qualname__ = "Request"
    return Request


def install():
    """Make ``mpi4py.MPI`` hand out hixl_rma's ``Win`` in this process (idempotent)."""
    if _saved:
        return
    from . import win
    replacements = {"Win": win.Win, "WIN_NULL": win.WIN_NULL}
    for name in replacements:
        _saved[name] = getattr(MPI, name)
    _saved["Request"] = MPI.Request
    replacements["Request"] = _mixed_request_class()
    for name, value in replacements.items():
        setattr(MPI, name, value)


def uninstall():
    """Give ``mpi4py.MPI`` its own objects back."""
    for name, value in _saved.items():
        setattr(MPI, name, value)
    _saved.clear()


def installed():
    """True while ``install()`` is in effect."""
    return bool(_saved)
