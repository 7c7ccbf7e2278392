"""hixl_rma's pytest plugin: multi-rank RMA tests under pytest-mpi that agree
across ranks and never hang.

Registered as ``hixl_rma`` (the ``pytest11`` entry point); active under
``--with-mpi`` (pytest-mpi), for tests marked ``@pytest.mark.mpi``;
``-p no:hixl_rma`` turns it off. A module of its own, outside the package,
so that a pytest run without ``--with-mpi`` imports neither hixl_rma nor
MPI.

- **One verdict.** After each phase of a test (setup, call) the ranks
  exchange their outcomes (bounded by the test's deadline), and every rank
  reports the same one: a test that failed on rank 1 fails on every rank,
  with ``failed on rank(s) 1: rank 1: BoundsError: ...``.
- **No hang, no wait.** A rank that fails tells the others at once; their
  blocking hixl_rma calls inside that test (Fence, Free, locks, PSCW,
  ``Wait_notify``, window creation, barriers through ``hixl_rma.runtime``)
  raise ``RankFailed`` within about 0.1 s, naming the rank and its error.
  Windows the test left are freed locally, and the next test starts with
  every rank in step. ``@pytest.mark.mpi(deadline=S)`` bounds the test's
  blocking calls and the exchange (default: ``HIXL_RMA_TIMEOUT_MS``).
- **Races**: ``--hixl-races`` runs the session under hixl_rma's race
  detector (``hixl_rma.races``): at its end the races of every rank are
  printed on rank 0 and the run fails.
- **Fixtures**: ``comm`` (a communicator of the test's own: what a failed
  test left half done cannot skew the next), ``ring`` (``left``, ``right``), ``window`` (a
  factory: ``window("allocate", 64, disp_unit=8)``; freed after the test,
  also when it failed), ``expect_unchanged`` (``with expect_unchanged(win):``
  fails the test if a byte of the local window memory changed), ``check``
  (``check.equal(actual, expected, msg)``: mismatches are collected and fail
  the test at its end, so a rank with wrong data still reaches every later
  collective).
"""
import collections
import contextlib

import numpy as np
import pytest

_ABORT_TAG = 0x4858  # on the plugin's own communicator: nothing else uses it
_RECORD = 1024       # bytes of one rank's outcome in the exchange
_state = None        # the plugin's _Session under --with-mpi


class RankFailed(Exception):
    """Another rank failed the running test; raised from a blocking call."""


def _text(record):
    return bytes(record).rstrip(b"\0").decode(errors="replace")


def _pack(text):
    raw = text.encode()[:_RECORD - 1]
    out = np.zeros(_RECORD, np.uint8)
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


class _Session:
    """The plugin's communicator, the running test, and what was heard."""

    def __init__(self):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.nodeid = None
        self.failed = {}    # rank -> its first error, in the running test
        self.sends = []     # our abort messages of the running test (requests, buffers)
        self.exchanging = False  # in the verdict exchange, which every rank reaches anyway

    # ------------------------------------------------------- abort messages

    def tell_others(self, error):
        """This rank failed the running test: tell every other rank now."""
        msg = _pack(f"{self.nodeid}\n{error}")
        for r in range(self.size):
            if r != self.rank:
                self.sends.append((self.comm.Isend(msg, dest=r, tag=_ABORT_TAG), msg))

    def hear(self):
        """Take the abort messages that arrived; those of the running test
        are recorded (older ones are stale and dropped)."""
        status = self.MPI.Status()
        while self.comm.Iprobe(source=self.MPI.ANY_SOURCE, tag=_ABORT_TAG, status=status):
            buf = np.zeros(_RECORD, np.uint8)
            self.comm.Recv(buf, source=status.Get_source(), tag=_ABORT_TAG)
            nodeid, _, error = _text(buf).partition("\n")
            if nodeid == self.nodeid:
                self.failed.setdefault(status.Get_source(), error)

    def interrupt(self):
        """Called by hixl_rma's wait loops about every 0.1 s: raise when
        another rank failed the running test."""
        __tracebackhide__ = True  # the user's frame is the one to show
        # A rank that failed tells the others, then joins the exchange: one
        # ended by that message there would give a verdict of its own.
        if self.nodeid is None or self.exchanging:
            return
        self.hear()
        others = {r: e for r, e in self.failed.items() if r != self.rank}
        if others:
            r = min(others)
            raise RankFailed(f"rank {r} failed {self.nodeid.rpartition('::')[2]}: {others[r]}")

    # ------------------------------------------------------------ verdicts

    def exchange(self, outcome, deadline_ms):
        """Every rank's outcome of this phase: ({rank: first error}, any rank
        skipped). ``outcome`` is "P", "S" or "F" and this rank's error."""
        from hixl_rma import runtime as _rt
        mine = _pack(outcome)
        every = np.zeros((self.size, _RECORD), np.uint8)
        self.exchanging = True
        try:
            _rt.collective(self.comm, lambda: self.comm.Iallgather(mine, every), "the verdict exchange",
                           deadline_ms, keep=(mine, every),
                           message=lambda: f"the ranks' verdicts did not meet within {deadline_ms} ms")
        except Exception as exc:  # a rank hung past the deadline: say so; the run cannot stay in step
            return {self.rank: f"{type(exc).__name__}: {exc}"}, False
        finally:
            self.exchanging = False
        failed, stopped, skipped = {}, {}, False
        for r, rec in enumerate(every):
            text = _text(rec)
            if text.startswith("F"):
                failed[r] = text[1:]
            elif text.startswith("I"):
                stopped[r] = text[1:]  # ended by another rank's failure
            skipped |= text == "S"
        failed = failed or stopped
        self.failed.update(failed)
        return failed, skipped

    def finish_test(self):
        """Between tests: our messages delivered (one not delivered yet stays
        with its buffer until it is), stale ones dropped."""
        from hixl_rma import runtime as _rt
        for req, _ in self.sends:
            with contextlib.suppress(Exception):
                _rt.wait_request(req, 1000, lambda: "abort message")
        self.sends = [(req, buf) for req, buf in self.sends if req]
        self.nodeid = None
        self.hear()
        self.failed.clear()

    def new_comm(self, deadline_ms):
        """A communicator of the running test's own (MPI_Comm_idup of the
        plugin's): a collective one test gave up on cannot put the next
        test's collectives out of step."""
        from hixl_rma import runtime as _rt
        made = []
        _rt.collective(self.comm, lambda: _rt.idup(self.comm, made), "the test's communicator", deadline_ms,
                       keep=made)
        return made[0]


def _marker(item):
    return item.get_closest_marker("mpi")


def _deadline_ms(item):
    from hixl_rma.ground import config
    m = _marker(item)
    seconds = m.kwargs.get("deadline") if m is not None else None
    return int(seconds * 1000) if seconds else config.timeout_ms()


def _first_error(report):
    """One line: the exception's class (without its module) and message."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        line = crash.message.splitlines()[0] if crash.message else "failed"
    else:
        line = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "failed"
    name, sep, rest = line.partition(": ")
    return (name.rpartition(".")[2] + sep + rest) if sep and " " not in name else line


def _verdict_text(failed):
    ranks = ", ".join(str(r) for r in sorted(failed))
    return f"failed on rank(s) {ranks}: " + "; ".join(f"rank {r}: {failed[r]}" for r in sorted(failed))


# ------------------------------------------------------------------ hooks

def pytest_addoption(parser):
    parser.getgroup("hixl_rma").addoption(
        "--hixl-races", action="store_true", default=False,
        help="run hixl_rma's race detector over the session; a race found fails the run (its report is "
             "printed at the end, HIXL_RMA_RACE_JSON writes it as JSON)")


def pytest_sessionfinish(session, exitstatus):
    if not session.config.getoption("hixl_races", default=False):
        return
    import hixl_rma.races as races
    from hixl_rma.races.settings import race_json
    found = races.finish() if races.ACTIVE is not None else 0
    if found and session.exitstatus == 0 and not race_json():
        session.exitstatus = 1  # HIXL_RMA_RACE_JSON: the report is written, the run keeps its verdict


def pytest_configure(config):
    global _state
    if config.getoption("hixl_races", default=False):
        # hixl_rma (its UCX) first, then MPI: the order that works with every MPI (DESIGN.md, one UCX per process)
        import hixl_rma.races as races  # noqa: I001
        from mpi4py import MPI  # noqa: F401  (initializes MPI: the detector starts over it)
        races.enable(keep_going=True, at_exit=False)
    config.addinivalue_line("markers", "mpi(min_size=N, deadline=S): a multi-rank test (pytest-mpi); "
                                       "hixl_rma's plugin bounds its blocking calls by S seconds")
    if not config.getoption("with_mpi", default=False):
        return
    from hixl_rma import runtime as _rt
    _state = _Session()
    _rt.set_interrupt(_state.interrupt)


def pytest_unconfigure(config):
    global _state
    if _state is not None:
        from hixl_rma import runtime as _rt
        _rt.set_interrupt(None)
        with contextlib.suppress(Exception):
            _state.comm.Free()
        _state = None


def _active(item):
    return _state is not None and _marker(item) is not None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if _active(item):
        _state.nodeid = item.nodeid
        _state.failed.clear()
        from hixl_rma import runtime as _rt
        if _rt.Is_initialized():
            item._hixl_timeout = _rt.runtime().timeout_ms
            _rt.runtime().timeout_ms = _deadline_ms(item)
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    if _active(item):
        from hixl_rma import runtime as _rt
        # The windows the test body makes (fixtures' own are their business).
        item._hixl_windows = set(_rt.runtime().windows) if _rt.Is_initialized() else set()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if not _active(item) or call.when == "teardown" or (call.when == "call" and getattr(item, "_hixl_no_call", False)):
        return report
    error = _first_error(report) if report.failed else None
    stopped = call.excinfo is not None and call.excinfo.errisinstance(RankFailed)
    if error is not None and not stopped:
        _state.tell_others(error)
    outcome = ("I" if stopped else "F") + error if error is not None else "S" if report.skipped else "P"
    # Another rank may still be in a blocking call bounded by the deadline
    # (it then fails and tells): the exchange waits for that and a margin.
    failed, skipped = _state.exchange(outcome, 2 * _deadline_ms(item) + 5000)
    if call.when == "setup" and (failed or skipped):
        item._hixl_no_call = True  # some rank runs no call phase: none exchanges one
    if failed:
        # The same first line on every rank (pytest's summary shows it), then
        # this rank's own traceback if it failed.
        text = _verdict_text(failed)
        report.outcome = "failed"
        report.longrepr = f"{text}\n\n{report.longrepr}" if report.longrepr and error is not None else text
    return report


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        if _active(item):
            from hixl_rma import runtime as _rt
            if _rt.Is_initialized():
                st = _rt.runtime()
                if _state.failed and hasattr(item, "_hixl_windows"):
                    for core in list(st.windows - item._hixl_windows):
                        core.teardown_local()  # left by a failed test: freed here, no collective
                if hasattr(item, "_hixl_timeout"):
                    st.timeout_ms = item._hixl_timeout
            _state.finish_test()


# --------------------------------------------------------------- fixtures

Ring = collections.namedtuple("Ring", "left right")


@pytest.fixture
def comm(request):
    """The test's communicator: a communicator of all ranks made for this
    test alone under ``--with-mpi`` (``mpi(min_size=N)`` is pytest-mpi's),
    so that what one test leaves half done on it cannot skew the next;
    COMM_WORLD without the plugin."""
    from mpi4py import MPI
    if _state is None:
        yield MPI.COMM_WORLD
        return
    c = _state.new_comm(_deadline_ms(request.node))
    yield c
    if not MPI.Is_finalized():
        c.Free()  # local; what is still pending on it completes first (MPI_Comm_free)


@pytest.fixture
def ring(comm):
    """This rank's ring neighbours: ``left`` writes to it, it writes to ``right``."""
    rank, size = comm.Get_rank(), comm.Get_size()
    return Ring((rank - 1) % size, (rank + 1) % size)


@pytest.fixture
def window(comm):
    """``window(kind, nbytes, disp_unit=1)``: a window of ``kind`` ("create"
    over a zeroed numpy buffer, "allocate", "shared", "dynamic") on every
    rank of ``comm``, freed after the test (collectively when every rank
    passed, locally otherwise)."""
    from hixl_rma import Win
    made = []

    def make(kind="create", nbytes=64, disp_unit=1, info=None):
        info = info or {}
        if kind == "create":
            win = Win.Create(np.zeros(nbytes, np.uint8), disp_unit, info, comm)
        elif kind == "allocate":
            win = Win.Allocate(nbytes, disp_unit, info, comm)
        elif kind == "shared":
            win = Win.Allocate_shared(nbytes, disp_unit, info, comm)
        elif kind == "dynamic":
            win = Win.Create_dynamic(info, comm)
        else:
            raise ValueError(f"window kind must be create, allocate, shared or dynamic, not {kind!r}")
        made.append(win)
        return win

    yield make
    everyone_passed = _state is None or not _state.failed
    for win in made:
        if win:
            if everyone_passed:
                win.Free()
            else:
                win._core.teardown_local()


@pytest.fixture
def expect_unchanged():
    """``with expect_unchanged(win):`` fails the test (on every rank) if a
    byte of this rank's window memory changed inside the block."""
    @contextlib.contextmanager
    def guard(win, what="a refused operation"):
        before = bytes(win.tomemory())
        yield
        after = bytes(win.tomemory())
        if after != before:
            diff = np.flatnonzero(np.frombuffer(after, np.uint8) != np.frombuffer(before, np.uint8))
            pytest.fail(f"{what} changed {len(diff)} byte(s) of window {win.name or win._core.key}'s local memory "
                        f"(first at offset {int(diff[0])}: {before[diff[0]]} -> {after[diff[0]]})", pytrace=False)
    return guard


class Check:
    """Deferred checks: a mismatch is recorded, not raised, so that the rank
    goes on to every later collective; the test fails at its end."""

    def __init__(self):
        self.failures = []

    def equal(self, actual, expected, msg=""):
        a, e = np.asarray(actual), np.asarray(expected)
        if a.shape != e.shape or not np.array_equal(a, e):
            self.failures.append(f"{msg or 'check.equal'}: {_short(actual)} != {_short(expected)}")
            return False
        return True

    def true(self, value, msg=""):
        if not value:
            self.failures.append(msg or "check.true")
        return bool(value)


def _short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@pytest.fixture
def check(request):
    """``check.equal(actual, expected, msg)``: see Check."""
    c = Check()
    request.node._hixl_check = c
    return c


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    result = yield
    c = getattr(pyfuncitem, "_hixl_check", None)
    if c is not None and c.failures:
        raise AssertionError(f"{len(c.failures)} deferred check(s) failed: " + "; ".join(c.failures))
    return result

