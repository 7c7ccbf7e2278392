"""The end of a checked run: every rank's records meet at rank 0, which
checks them, prints each race once, and (asked to) writes a JSON report.

Collective over the world, on a communicator of the detector's own, at
Finalize or interpreter exit. A rank that does not arrive within the
runtime's timeout is left out (its races are not reported), rather than
hanging the job.

When the program fails on a rank (an uncaught exception under ``python -m
hixl_rma``, or ``Abort``), that rank cannot wait for a collective the others
may never reach, and the job ends when it aborts: ``failed()`` tells every
other rank (a message on the detector's communicator), and collects, for at
most ``FAILED_WAIT_S``, the records of the ranks that join: another failing
rank, or one that reaches the end of the run (``finish``, which looks for
the message first and while it waits), or one still running window calls
(``look``, from the checked window's methods: a rank looping on a lock the
failed rank's peers will never release would otherwise never join). The
lowest failing rank prints (a higher one that hears of it forwards what it
has), naming the ranks that never joined (blocked in a call the failed rank
never makes, or busy past the wait); every wait has a deadline, and then
the job aborts as before.
"""
import json
import sys
import threading
import time

from mpi4py import MPI

from . import check, state
from .settings import race_json

FAILED_WAIT_S = 5.0  # how long a failing rank waits for the others' records (at most the runtime's timeout)
LOOK_S = 0.1  # how often a running rank's window calls look for a failure notice
_FAIL, _RECORDS, _DONE = 0x4858, 0x4859, 0x485A  # tags on the detector's own communicator


def _arrive(comm, timeout_s):
    """Every rank is at the end: True; the deadline passed: False; a rank
    failed meanwhile (its notice came): the lowest failing rank."""
    req = comm.Ibarrier()
    end = time.monotonic() + timeout_s
    while not req.Test():
        failing = _notices(comm)
        if failing:
            return min(failing)
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def _notices(comm):
    """The ranks whose failure notice has come (each is received once)."""
    out = set()
    st = MPI.Status()
    while comm.Iprobe(MPI.ANY_SOURCE, _FAIL, st):
        out.add(comm.recv(source=st.Get_source(), tag=_FAIL))
    return out


class _Watch:
    """What a running rank heard of failed ranks (``look``), kept for the
    end of its run, and the sends of its records still in flight."""
    __slots__ = ("heard", "main", "next", "sends")

    def __init__(self):
        self.heard = set()
        self.next = 0.0
        self.sends = []
        self.main = threading.main_thread().ident


def _watch(det):
    if det.watch is None:
        det.watch = _Watch()
    return det.watch


def look(det):
    """A window call on a running rank (at most every LOOK_S, main thread
    only: the detector's communicator is the main thread's): where a rank
    failed, this rank's records so far go to it without waiting, so that
    the report covers them even if this rank never reaches its end (it
    loops on a lock, say, that only a failed rank would have released).
    Only the detector's own communicator is touched, and nothing waits:
    the program goes on as it would."""
    w = _watch(det)
    now = time.monotonic()
    if now < w.next or det.finished is not None or threading.get_ident() != w.main:
        return
    w.next = now + LOOK_S
    if MPI.Is_finalized():
        return
    comm = det.report_comm
    w.sends = [r for r in w.sends if not r.Test()]  # progress for a large record list
    failing = _notices(comm)
    if failing:
        w.heard |= failing
        w.sends.append(comm.isend([_mine(det)], dest=min(w.heard), tag=_RECORDS))


def _mine(det):
    with det.mutex:
        # whatever is still pending was never completed: done stays None
        return {"rank": det.rank, "records": det.plain_records(), "races": list(det.races),
                "labels": dict(det.freed, **{k: w.label for k, w in det.windows.items()}),
                "dropped": det.log.dropped()}


def _report(det, every, missing=(), failed=()):
    """Check the records of ``every`` rank's dict, print, write the JSON
    report; the number of races."""
    _options = state.options
    labels, records, reports, dropped = {}, [], [], 0
    for m in every:
        labels.update(m["labels"])
        records.extend(m["records"])
        reports.extend(m["races"])
        dropped += m["dropped"]
    check.THREADS = det.threads
    reports.extend(check.races(records, labels))
    found = sum(1 for r in reports if r["kind"] == "race")
    if failed:
        print(f"hixl_rma race detector: the program failed on rank(s) {_ranks(failed)}; the report covers "
              f"rank(s) {_ranks(m['rank'] for m in every)}"
              + (f"; rank(s) {_ranks(missing)} did not join it within {FAILED_WAIT_S:g} s, their accesses "
                 f"are not in it" if missing else ""), file=det.out)
    _print(reports, len(records), dropped, det.out)
    path = _options["json"] or race_json()
    if path:
        with open(path, "w") as f:
            json.dump({"races": found, "warnings": len(reports) - found, "reports": reports,
                       "records": len(records), "dropped": dropped, "ranks": len(every),
                       "missing": sorted(missing), "failed": sorted(failed)}, f, indent=1)
    return found


def _ranks(ranks):
    return ", ".join(str(r) for r in sorted(ranks))


def failed():
    """The program failed on this rank and the job is about to end: the
    report, with what the ranks that join within FAILED_WAIT_S give (see
    the module's doc). Returns the number of races found here (0 where
    another rank prints); never raises, never waits past its deadline."""
    det = state.ACTIVE
    if det is None or det.finished is not None:
        return 0
    try:
        return _failed(det)
    except Exception as exc:  # the program's own failure is what the job ends with
        print(f"hixl_rma race detector: rank {det.rank}: no report ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        det.finished = 0
        return 0


def _failed(det):
    from hixl_rma.ground import config

    from . import lines
    lines.stop()
    det.finished = 0
    if MPI.Is_finalized():
        return 0
    comm, me, size = det.report_comm, det.rank, det.size
    end = time.monotonic() + min(FAILED_WAIT_S, config.timeout_ms() / 1000)
    sends = [comm.isend(me, dest=q, tag=_FAIL) for q in range(size) if q != me]
    got = {me: _mine(det)}
    failing = {me} | _watch(det).heard
    leader = me
    st = MPI.Status()
    while time.monotonic() < end:
        failing |= _notices(comm)
        if min(failing) < leader:
            leader = min(failing)
        while comm.Iprobe(MPI.ANY_SOURCE, _RECORDS, st):
            for m in comm.recv(source=st.Get_source(), tag=_RECORDS):
                got[m["rank"]] = m
        if leader != me:
            # the lowest failing rank reports: what this one has goes there, then it waits for the report
            sends.append(comm.isend(list(got.values()), dest=leader, tag=_RECORDS))
            got = {}
            _await_report(comm, leader, end, forward=True)
            return 0
        if len(got) == size:
            break
        time.sleep(0.005)
    found = _report(det, list(got.values()), set(range(size)) - set(got), failing)
    det.finished = found
    for q in range(size):
        if q != me:
            sends.append(comm.isend(found, dest=q, tag=_DONE))
    _settle(sends, end + 0.5)
    return found


def _join(det, comm, leader, mine, timeout_s):
    """This rank reached the end of the run after rank ``leader`` failed:
    its records go there; the number of races the report found (0 if it
    did not come within the deadline)."""
    req = comm.isend([mine], dest=leader, tag=_RECORDS)
    found = _await_report(comm, leader, time.monotonic() + min(FAILED_WAIT_S, timeout_s))
    _settle([req, *_watch(det).sends], time.monotonic() + 0.5)
    return found


def _await_report(comm, leader, end, forward=False):
    """Wait (until ``end``) for the leader's report to be done; records that
    come meanwhile (``forward``: to a failing rank that is not the leader)
    go on to it."""
    st = MPI.Status()
    sends = []
    found = 0
    # the leader reports at the latest FAILED_WAIT_S after it failed, which was before ``end``
    while time.monotonic() < end + FAILED_WAIT_S:
        if comm.Iprobe(leader, _DONE, st):
            found = comm.recv(source=leader, tag=_DONE)
            break
        if forward:
            while comm.Iprobe(MPI.ANY_SOURCE, _RECORDS, st):
                sends.append(comm.isend(comm.recv(source=st.Get_source(), tag=_RECORDS), dest=leader,
                                        tag=_RECORDS))
        _notices(comm)
        time.sleep(0.005)
    _settle(sends, time.monotonic() + 0.5)
    return found


def wrap_abort(cls):
    """``cls.Abort`` (the detector's COMM_WORLD class) reports first (failed())."""
    if cls.__dict__.get("_race_abort"):
        return
    base = cls.Abort

    def Abort(self, errorcode=0):
        det = state.ACTIVE
        if det is not None and det.finished is None:
            failed()
            sys.stderr.flush()
            time.sleep(0.2)  # mpiexec's forwarder reads the report before the abort ends the job
        return base(self, errorcode)

    Abort.__doc__ = base.__doc__
    cls.Abort = Abort
    cls._race_abort = True


def _settle(reqs, end):
    """Give the messages sent a moment to leave before the job ends (no wait past ``end``)."""
    while reqs and time.monotonic() < end:
        reqs = [r for r in reqs if not r.Test()]
        if reqs:
            time.sleep(0.002)


def finish():
    """Gather, check, print; returns the number of races (not warnings) found."""
    det, _options = state.ACTIVE, state.options
    if det is None:
        return 0
    if det.finished is not None:
        return det.finished
    from hixl_rma.ground import config

    from . import lines
    lines.stop()
    comm = det.report_comm
    if MPI.Is_finalized():
        det.finished = 0
        return 0
    mine = _mine(det)
    # a rank failed before this one reached the end (heard now, or by look() earlier): it reports
    w = _watch(det)
    failing = _notices(comm) | w.heard
    ok = min(failing) if failing else _arrive(comm, config.timeout_ms() / 1000)
    if ok is not True and ok is not False:
        found = _join(det, comm, ok, mine, config.timeout_ms() / 1000)
        det.finished = found
        return found
    if not ok:
        print(f"hixl_rma race detector: rank {det.rank}: not every rank reached the end in time; "
              f"only this rank's own findings are reported", file=sys.stderr)
        every = [mine]
    else:
        every = comm.gather(mine, root=0)
    found = 0
    if det.rank == 0 or not ok:
        found = _report(det, every)
    if ok:
        found = comm.bcast(found, root=0)
    det.finished = found
    if _options["json"] or race_json():
        _options["keep_going"] = True
    return found


def format_report(r):
    a, b = r["a"], r["b"]

    def side(s):
        extra = "".join(f" {k}={s[k]}" for k in ("op", "dtype") if k in s)
        return f"{s['call']}{extra} by rank {s['rank']} at {s['where']}"
    head = "RACE" if r["kind"] == "race" else "WARNING (polling)"
    lo, hi = r["bytes"]
    where = (f"window {r['window']}, rank {r['target']}'s memory, bytes [{lo}, {hi})" if r["scope"] == "target"
             else f"window {r['window']}, origin buffer at {r.get('address')} ({hi - lo} bytes) of rank "
                  f"{r['seen_by']}")
    return (f"hixl_rma: {head} on {where}\n"
            f"  {side(a)}\n  {side(b)}\n  unordered: {r['why']}")


def _print(reports, nrec, dropped, out):
    for r in reports:
        print(format_report(r), file=out)
    races = sum(1 for r in reports if r["kind"] == "race")
    note = f", {dropped} repeated records not kept (HIXL_RMA_RACE_KEEP)" if dropped else ""
    print(f"hixl_rma race detector: {races} race(s), {len(reports) - races} warning(s) in {nrec} "
          f"access records{note}", file=out)
    out.flush()
