"""Run code written for mpi4py's ``MPI.Win`` on ``hixl_rma.Win`` unchanged.

``install()`` puts hixl_rma's window, and what goes with it, in the place of
mpi4py's in the ``mpi4py.MPI`` module, so every later ``MPI.Win.Create``,
``MPI.WIN_NULL`` or ``isinstance(w, MPI.Win)`` in this process means
hixl_rma's:

- ``MPI.Win`` and ``MPI.WIN_NULL``;
- ``MPI.Request``: mpi4py's request class, extended so that its list forms
  (``Waitall`` ... ``Get_status_some``, ``waitall`` ... ``get_status_some``) also take the
  requests of ``Rput``/``Rget``/``Raccumulate``/``Rget_accumulate``, mixed
  with mpi4py's own, and ``isinstance(r, MPI.Request)`` holds for both.

Errors need no replacing: every hixl_rma error already is an
``MPI.Exception`` (or the ``ValueError``/``TypeError`` mpi4py raises).
``python -m hixl_rma prog.py`` calls ``install()`` before the program's first
line runs. Importing ``mpi4py.MPI`` initializes MPI, which is the program's
to do (it may set ``mpi4py.rc.initialize = False`` and call
``MPI.Init_thread`` itself): when ``mpi4py.MPI`` is not imported yet,
``install()`` makes the replacement as the program's own import of it
completes, before that import returns.
"""
import sys

from .runtime.hooks import OnMPIImport

_saved = {}
#: mpi4py request classes whose own list forms a list holding one of them
#: goes to (the race detector's receives: completing one takes a clock)
own_list_forms = []


def _mpi():
    return sys.modules["mpi4py.MPI"]


def original(name="Win"):
    """mpi4py's own object of that name, whether or not ``install()`` is in effect."""
    return _saved.get(name, getattr(_mpi(), name))


class _RequestType(type):
    """isinstance/issubclass of the replaced ``MPI.Request`` also hold for
    mpi4py's own requests and for hixl_rma's."""

    def __instancecheck__(cls, obj):
        from .window.request import Request
        return isinstance(obj, (original("Request"), Request))

    def __subclasscheck__(cls, sub):
        from .window.request import Request
        return issubclass(sub, (original("Request"), Request))


# The list forms of MPI.Request: each also takes hixl_rma's requests.
LIST_FORMS = ("Waitall", "Testall", "Waitany", "Testany", "Waitsome", "Testsome", "Get_status_all",
              "Get_status_any", "Get_status_some", "waitall", "testall", "waitany", "testany", "waitsome",
              "testsome", "get_status_all", "get_status_any", "get_status_some")


def _mixed_request_class():
    from .window.request import Request as HixlRequest
    base = original("Request")

    def list_form(name):
        theirs, ours = getattr(base, name), getattr(HixlRequest, name)

        def form(cls, requests, *args, **kwargs):
            # Lists of mpi4py's requests alone keep mpi4py's own call (and
            # its speed); a list with one of ours goes to ours, which calls
            # each request's own Wait/Test.
            if any(isinstance(r, HixlRequest) for r in requests):
                return ours(list(requests), *args, **kwargs)
            if own_list_forms:
                own = next((type(r) for r in requests if type(r) in own_list_forms), None)
                if own is not None:
                    return getattr(own, name)(requests, *args, **kwargs)
            return theirs(requests, *args, **kwargs)

        form.__name__ = form.__qualname__ = name
        form.__doc__ = theirs.__doc__
        return classmethod(form)

    ns = {name: list_form(name) for name in LIST_FORMS}
    ns["__doc__"] = "mpi4py's ``MPI.Request``, whose list forms also take hixl_rma's RMA requests."
    Request = _RequestType("Request", (base,), ns)
    Request.__module__ = "mpi4py.MPI"
    Request.__qualname__ = "Request"
    return Request


def install():
    """Make ``mpi4py.MPI`` hand out hixl_rma's ``Win`` in this process
    (idempotent): now if it is imported, else as soon as it is."""
    if _saved or _hook in sys.meta_path:
        return
    if "mpi4py.MPI" in sys.modules:
        _replace(sys.modules["mpi4py.MPI"])
    else:
        sys.meta_path.insert(0, _hook)


_deferred = None  # mpi4py.MPI, when its import came from inside one of hixl_rma's own (see _replace)


def _replace(MPI):
    global _deferred
    if getattr(sys.modules.get(__package__), "_importing", 0):
        # hixl_rma's own lazy import brought mpi4py.MPI in (errors.py imports it): win, which imports
        # modules being initialized now, is imported once that import is done (replace_deferred, from
        # hixl_rma.__getattr__), before the program's next line runs.
        _deferred = MPI
        return
    _deferred = None
    from . import win
    replacements = {"Win": win.Win, "WIN_NULL": win.WIN_NULL}
    for name in replacements:
        _saved[name] = getattr(MPI, name)
    _saved["Request"] = MPI.Request
    replacements["Request"] = _mixed_request_class()
    for name, value in replacements.items():
        setattr(MPI, name, value)


_hook = OnMPIImport(_replace)


def replace_deferred():
    """The replacement a hook deferred (``_replace``), now that hixl_rma's own import is done."""
    if _deferred is not None:
        _replace(_deferred)


def uninstall():
    """Give ``mpi4py.MPI`` its own objects back."""
    global _deferred
    _deferred = None
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)
    for name, value in _saved.items():
        setattr(_mpi(), name, value)
    _saved.clear()


def installed():
    """True while ``install()`` is in effect."""
    return bool(_saved)
