"""Statistics, machine description and table printing shared by the workloads.

``rich`` is used for tables when it is importable; otherwise plain aligned
text is printed. Nothing here needs anything beyond the standard library.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def summarize(samples: Iterable[float]) -> dict:
    """Median, min and max of a list of repetition results (and the samples)."""
    xs = [float(x) for x in samples]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0, "samples": []}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "samples": xs}


def ratio(a: dict | None, b: dict | None) -> float | None:
    """median(a) / median(b), or None when either is missing."""
    if not a or not b or not a.get("median") or not b.get("median"):
        return None
    return a["median"] / b["median"]


def fmt_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def fmt_num(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if 0 < abs(x) < 1:  # significant digits: an 8 B row's GB/s is not "0.00"
        return f"{x:.{digits + 1}g}"
    return f"{x:.{digits}f}"


def fmt_stat(s: dict | None, digits: int = 2) -> str:
    """``median [min-max]``."""
    if not s or s.get("median") is None:
        return "-"
    return f"{fmt_num(s['median'], digits)} [{fmt_num(s['min'], digits)}-{fmt_num(s['max'], digits)}]"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def machine_info() -> dict:
    """What the numbers were measured on."""
    import numpy as np

    import hixl_rma

    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "cpu_model": _cpu_model(),
        "nproc": os.cpu_count(),
        "cpus_usable": affinity,
        "ucx_version": ".".join(map(str, hixl_rma.UCX_VERSION)),
        "ucx_origin": hixl_rma.UCX_ORIGIN,
        "hixl_rma_version": hixl_rma.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "ucx_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("UCX_")},
    }


def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                notes: Sequence[str] = (), file=None) -> None:
    """A table with ``rich`` when available, plain text otherwise."""
    file = file or sys.stdout
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        Console = None
    if Console is not None:
        table = Table(title=escape(title))
        for i, h in enumerate(headers):
            table.add_column(escape(h), justify="left" if i == 0 else "right", no_wrap=True)
        for r in rows:
            table.add_row(*[escape(str(c)) for c in r])
        # Never truncate numbers: outside a terminal (pipes, CI logs) rich would
        # assume 80 columns, so size the console to the table instead.
        need = sum(max(len(str(h)), *(len(str(r[i])) for r in rows)) + 3 for i, h in enumerate(headers)) + 1
        console = Console(file=file)
        if not console.is_terminal or console.width < need:
            # (a height too: rich sizes a TERM=dumb terminal 80x25 unless given both)
            console = Console(file=file, width=max(need, 80), height=25)
        console.print(table)
        for n in notes:
            console.print(n, markup=False, highlight=False, soft_wrap=True)
        return
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(str(c))) for w, c in zip(widths, r, strict=True)]
    line = "  ".join("-" * w for w in widths)
    print(title, file=file)
    print(line, file=file)
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                    for i, (h, w) in enumerate(zip(headers, widths, strict=True))), file=file)
    print(line, file=file)
    for r in rows:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))), file=file)
    print(line, file=file)
    for n in notes:
        print(n, file=file)
    file.flush()
