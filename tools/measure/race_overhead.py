#!/usr/bin/env python3
"""What the race detector costs on the benchmark: the ratio of hixl's
medians with it on (HIXL_RMA_CHECK=races) to off, per figure of W1..W4.

    python tools/measure/race_overhead.py OFF.json ON.json

where the two files come from

    mpiexec -n 2 python -m hixl_rma.bench rma W1 W2 W3 W4 --json OFF.json
    HIXL_RMA_CHECK=races mpiexec -n 2 python -m hixl_rma.bench rma W1 W2 W3 W4 --json ON.json

A ratio is slowdown: time on / time off, or bandwidth off / bandwidth on.
Either argument may be several runs' files joined by commas (interleaved
runs on a busy machine): a figure's value is then the median of their
medians.
"""
import json
import sys


def _median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def medians(paths):
    """{figure id: (label, metric, better, median)} over the runs in paths (comma-separated)."""
    runs = {}
    for path in paths.split(","):
        with open(path) as f:
            doc = json.load(f)
        for fig in doc["figures"]:
            h = fig["results"].get("hixl")
            if h and h["median"]:
                runs.setdefault(fig["id"], (fig["label"], fig["metric"], fig["better"], []))[3].append(h["median"])
    return {fid: (label, metric, better, _median(v)) for fid, (label, metric, better, v) in runs.items()}


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    off, on = medians(argv[0]), medians(argv[1])
    rows = []
    for fid, (label, metric, better, m_off) in off.items():
        if fid not in on or not m_off or not on[fid][3]:
            continue
        m_on = on[fid][3]
        slow = m_on / m_off if better == "lower" else m_off / m_on
        rows.append((fid.split("/")[0], label, metric, m_off, m_on, slow))
    print(f"{'figure':58s} {'metric':>6s} {'off':>10s} {'on':>10s} {'slowdown':>8s}")
    for w, label, metric, a, b, slow in rows:
        print(f"{w + ' ' + label:58s} {metric:>6s} {a:10.4g} {b:10.4g} {slow:7.2f}x")
    for w in sorted({r[0] for r in rows}):
        s = sorted(r[5] for r in rows if r[0] == w)
        print(f"{w}: {len(s)} figures, slowdown median {s[len(s) // 2]:.2f}x, max {s[-1]:.2f}x, "
              f"{sum(x <= 3 for x in s)} within 3x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
