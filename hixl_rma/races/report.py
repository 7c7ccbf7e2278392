"""The end of a checked run: every rank's records meet at rank 0, which
checks them, prints each race once, and (asked to) writes a JSON report.

Collective over the world, on a communicator of the detector's own, at
Finalize or interpreter exit. A rank that does not arrive within the
runtime's timeout is left out (its races are not reported), rather than
hanging the job.
"""
import json
import sys
import time

from mpi4py import MPI

from . import check


def _arrive(comm, timeout_s):
    req = comm.Ibarrier()
    end = time.monotonic() + timeout_s
    while not req.Test():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def finish():
    """Gather, check, print; returns the number of races (not warnings) found."""
    from . import ACTIVE, _options
    det = ACTIVE
    if det is None:
        return 0
    if det.finished is not None:
        return det.finished
    from .. import config
    from . import lines
    lines.stop()
    comm = det.report_comm
    if MPI.Is_finalized():
        det.finished = 0
        return 0
    with det.mutex:
        # whatever is still pending was never completed: done stays None
        mine = {"rank": det.rank, "records": det.plain_records(), "races": list(det.races),
                "labels": dict(det.freed, **{k: w.label for k, w in det.windows.items()}), "dropped": det.log.dropped()}
    ok = _arrive(comm, config.timeout_ms() / 1000)
    if not ok:
        print(f"hixl_rma race detector: rank {det.rank}: not every rank reached the end in time; "
              f"only this rank's own findings are reported", file=sys.stderr)
        every = [mine]
    else:
        every = comm.gather(mine, root=0)
    found = 0
    if det.rank == 0 or not ok:
        labels, records, reports, dropped = {}, [], [], 0
        for m in every:
            labels.update(m["labels"])
            records.extend(m["records"])
            reports.extend(m["races"])
            dropped += m["dropped"]
        check.THREADS = det.threads
        reports.extend(check.races(records, labels))
        found = sum(1 for r in reports if r["kind"] == "race")
        _print(reports, len(records), dropped, det.out)
        path = _options["json"] or config.race_json()
        if path:
            with open(path, "w") as f:
                json.dump({"races": found, "warnings": len(reports) - found, "reports": reports,
                           "records": len(records), "dropped": dropped, "ranks": len(every)}, f, indent=1)
    if ok:
        found = comm.bcast(found, root=0)
    det.finished = found
    if _options["json"] or config.race_json():
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
