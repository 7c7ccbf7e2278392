"""The check where every rank's accesses meet (rank 0, at the end of the run).

Two accesses of one window's memory at one target race when their byte
ranges overlap, at least one writes, they are not two accumulates MPI
makes atomic with each other (same basic datatype, and the same op or one
of them NO_OP: MPI's default ``accumulate_ops=same_op_no_op``), and
neither happens before the other: neither completed at a tick of its rank
that the other's clock knew when it was issued.

A read that one call site repeats over several intervals and that races
only with a write is reported as polling: a warning, not an error (MPI
defines it under the unified memory model, and it is how flags are waited
for; the reader should use an atomic, or a synchronization).
"""
import bisect
import collections

import numpy as np

_READS = {"Get", "Rget", "Get_batch", "load"}
_WRITES = {"Put", "Rput", "Put_notify", "Put_batch", "store"}


def _writes(r):
    c = r["call"]
    if c in _WRITES:
        return True
    if c in _READS:
        return False
    return r["op"] != "NO_OP"


def _atomic(r):
    return r["call"] not in _READS and r["call"] not in _WRITES


def _overlap(a, b):
    """The first overlapping byte range of two sorted block lists, or None
    (binary search of the shorter list's blocks in the longer one)."""
    ab, bb = a["blocks"], b["blocks"]
    if len(ab) > len(bb):
        ab, bb = bb, ab
    starts = [lo for lo, _ in bb] if len(bb) > 8 else None
    for lo, hi in ab:
        if starts is None:
            cands = bb
        else:
            k = max(bisect.bisect_right(starts, lo) - 1, 0)
            cands = bb[k:k + 2 + bisect.bisect_left(starts, hi, k) - k]
        for blo, bhi in cands:
            olo, ohi = max(lo, blo), min(hi, bhi)
            if olo < ohi:
                return olo, ohi
    return None


def _unlocked(r):
    """A load or store made under no lock of its window (Detector._unlocked):
    done at its thread's next synchronization, or never."""
    return r["call"] in ("load", "store") and (r["done"] is None or r["done_call"] == "synchronization")


def _hb(a, b):
    if a["thread"] == b["thread"] and _unlocked(a):
        return b["snap"][a["thread"]] >= a["snap"][a["thread"]]  # its own thread: program order
    return a["done"] is not None and b["snap"][a["done_actor"]] >= a["done"]


def _why(a, b):
    def one(x, y):
        unlocked = x["call"] in ("load", "store") and x["done_call"] == "synchronization"
        if x["done"] is None:
            if x["call"] in ("load", "store"):
                return (f"rank {x['rank']}'s {x['call']} ran under no lock of the window and no later "
                        f"synchronization of its rank orders it (a lock's or an atomic's order is chance)")
            return f"rank {x['rank']}'s {x['call']} was never completed"
        how = f" ({x['done_call']})" if x["done_call"] and not unlocked else ""
        verb = "ran" if x["call"] in ("load", "store") else "completed"
        if unlocked:
            verb = ("ran under no lock of the window, so only its rank's next synchronization other than a "
                    "lock's or an atomic's (whose order is chance) orders it: that was")
        return (f"rank {x['rank']}'s {x['call']} {verb} at event #{x['done']}{how} of its "
                f"{_thread(x['done_actor'])}, which rank {y['rank']} had not seen when its {y['call']} ran "
                f"(it knew that thread up to #{y['snap'][x['done_actor']]})")
    if a["rank"] == b["rank"] and a["thread"] != b["thread"]:
        return f"two threads of rank {a['rank']}, unordered: {one(a, b)}; {one(b, a)}"
    return f"{one(a, b)}; and {one(b, a)}"


def _aligned(a, b):
    """The elements of two accumulates of one datatype coincide (or they
    overlap element for element unaligned, which MPI makes no atomicity of)."""
    try:
        size = np.dtype(a["dtype"]).itemsize
    except TypeError:
        return True
    return all((x[0] - y[0]) % size == 0 for x in a["blocks"] for y in b["blocks"] if x[0] < y[1] and y[0] < x[1])


THREADS = 8  # clock slots per rank (set by the caller from the detector)


def _thread(actor):
    slot = actor % THREADS
    return "main thread" if slot == 0 else f"thread #{slot}"


def _same_op(x, y):
    # Compare_and_swap is a conditional REPLACE: a spin lock taken by CAS and
    # released by Accumulate(REPLACE) (or CAS) is not a race on its word
    return (x if x != "CAS" else "REPLACE") == (y if y != "CAS" else "REPLACE")


def conflicting(a, b):
    """True when a and b race (their byte ranges are checked apart)."""
    if not (_writes(a) or _writes(b)):
        return False
    if _atomic(a) and _atomic(b) and a["dtype"] == b["dtype"] and (
            _same_op(a["op"], b["op"]) or "NO_OP" in (a["op"], b["op"])) and _aligned(a, b):
        return False
    if a["rank"] == b["rank"] and a["call"] in ("load", "store") and b["call"] in ("load", "store"):
        return False  # one process's own loads and stores: program order (threads: not modelled)
    return not (_hb(a, b) or _hb(b, a))


def races(records, labels):
    """Races among ``records`` (plain dicts of every rank): a list of report dicts."""
    groups = collections.defaultdict(list)
    for r in records:
        groups[(r["win"], r["target"])].append(r)
    out, seen = [], set()
    for (win, target), recs in groups.items():
        ext = [(r["blocks"][0][0], max(h for _, h in r["blocks"])) if r["blocks"] else (0, 0) for r in recs]
        order = sorted(range(len(recs)), key=lambda k: ext[k][0])
        reps = collections.Counter((r["rank"], r["file"], r["line"], r["call"]) for r in recs)
        # reads one site repeats (across intervals, or within one): polling
        polled = [r for r in recs if not _writes(r) and (r.get("count", 1) > 1 or
                                                         reps[(r["rank"], r["file"], r["line"], r["call"])] > 1)]
        for n, i in enumerate(order):
            a = recs[i]
            for m in range(n + 1, len(order)):  # not order[n + 1:]: a copy per record, n^2 at the end
                j = order[m]
                if ext[j][0] >= ext[i][1]:
                    break  # sorted by first byte: no later record starts before a ends
                b = recs[j]
                if not conflicting(a, b):
                    continue
                ov = _overlap(a, b)
                if ov is None:
                    continue
                x, y = sorted((a, b), key=lambda r: (r["rank"], r["line"]))
                key = (win, target, x["rank"], x["file"], x["line"], x["call"], y["rank"], y["file"], y["line"],
                       y["call"])
                if key in seen:
                    continue
                seen.add(key)
                kind = "race"
                for p, q in ((x, y), (y, x)):
                    # a read of bytes its rank polls (the poll, or the read after it that takes the value)
                    if not _writes(p) and _writes(q) and any(
                            o["rank"] == p["rank"] and _overlap(o, p) is not None for o in polled):
                        kind = "polling"
                out.append({"kind": kind, "scope": "target", "window": labels.get(win, win), "target": target,
                            "bytes": list(ov), "a": _side(x), "b": _side(y), "why": _why(x, y),
                            "seen_by": target})
    return out


def _side(r):
    d = {"call": r["call"], "rank": r["rank"], "where": f"{r['file']}:{r['line']}"}
    if r["op"] is not None:
        d["op"] = r["op"]
    if r["dtype"] is not None:
        d["dtype"] = r["dtype"]
    return d
