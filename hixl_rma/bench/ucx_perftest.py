"""Run UCX's own ``ucx_perftest`` as the raw-UCX reference.

One server and one client process on 127.0.0.1 per measurement, on a free
port. The binary comes from the UCX the package was built against: the
libucx wheel's ``bin/`` (its RUNPATH does not exist on this machine, so the
wheel's ``lib/`` goes on ``LD_LIBRARY_PATH``), ``$UCX_HOME/bin`` for a
system-UCX build, or ``$HIXL_RMA_UCX_PERFTEST`` when set.

Bandwidth tests pass ``-o`` (do not progress the responder), so the target
side of ucx_perftest is as idle as the engine's target.
"""
from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence

#: ``ucx_perftest`` prints bandwidth in MB/s with MB = 2**20 bytes.
MB = 1 << 20


class PerftestError(RuntimeError):
    """ucx_perftest could not be found, did not start, or printed no result."""


def find() -> str | None:
    """Path of ``ucx_perftest`` for the UCX hixl_rma uses, or None."""
    override = os.environ.get("HIXL_RMA_UCX_PERFTEST")
    if override:
        return override if os.access(override, os.X_OK) else None
    candidates = []
    try:
        from hixl_rma import _build_config as cfg

        if getattr(cfg, "UCX_SOURCE", "wheel") == "system" and cfg.UCX_HOME:
            candidates.append(os.path.join(cfg.UCX_HOME, "bin", "ucx_perftest"))
    except ImportError:
        pass
    try:
        import libucx

        candidates.append(os.path.join(os.path.dirname(libucx.__file__), "bin", "ucx_perftest"))
    except ImportError:
        pass
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("ucx_perftest")


def environment(exe: str, overrides: dict | None = None) -> dict:
    """The process environment for ``exe``: its UCX's lib dir on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    lib = os.path.normpath(os.path.join(os.path.dirname(exe), "..", "lib"))
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(overrides or {})
    return env


def version(exe: str) -> str | None:
    """UCX version line of the ucx_info next to ``exe`` (None if unavailable)."""
    info = os.path.join(os.path.dirname(exe), "ucx_info")
    if not os.access(info, os.X_OK):
        return None
    try:
        out = subprocess.run([info, "-v"], env=environment(exe), capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        if "version" in line.lower():
            return line.strip("# ").strip()
    return None


def free_port() -> int:
    """A port that is free now, below the usual ephemeral range.

    Ports the kernel hands out for ``bind(0)`` (engines, clients) come from
    the ephemeral range, so a port outside it is less likely to be taken
    between this check and the server's bind; :func:`run` retries anyway.
    """
    for _ in range(100):
        port = random.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool | None:
    """Is some socket listening on ``port``? None when /proc cannot tell."""
    seen = False
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        seen = True
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False if seen else None


def parse_final(output: str) -> dict:
    """The numbers of ucx_perftest's ``Final:`` line."""
    for line in output.splitlines()[::-1]:
        line = line.strip()
        if line.startswith("Final:"):
            f = [float(x.replace(",", "")) for x in line.split()[1:]]
            if len(f) < 7:
                break
            return {"iterations": int(f[0]), "lat_p50_us": f[1], "lat_avg_us": f[2], "lat_overall_us": f[3],
                    "bw_avg_MBps": f[4], "bw_overall_MBps": f[5], "msgrate_avg": f[6],
                    "msgrate_overall": f[7] if len(f) > 7 else f[6]}
    raise PerftestError("no 'Final:' line in ucx_perftest output:\n" + output[-2000:])


def _unbind(p: subprocess.Popen) -> None:
    """Let a ucx_perftest process run on every core of the machine: it
    inherits the launching rank's binding (Open MPI binds each rank to one
    core), and a ping-pong of two pollers on one core costs a time slice per
    round trip, so that ``ucp_put_lat`` ran past its limit."""
    try:
        os.sched_setaffinity(p.pid, range(os.cpu_count() or 1))
    except (AttributeError, OSError, ValueError):
        pass  # no affinity call here, or the process is gone: it runs as launched


def _stop(p: subprocess.Popen) -> str:
    if p.poll() is None:
        p.kill()
    try:
        out, _ = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        out = ""
    return out or ""


def run(exe: str, test: str, size: int, iters: int, warmup: int = 10, extra: Sequence[str] = (),
        env: dict | None = None, timeout: float = 120.0, start_timeout: float = 15.0) -> dict:
    """One ucx_perftest measurement (server + client); returns :func:`parse_final`'s dict."""
    args = ["-t", test, "-s", str(size), "-n", str(iters), "-w", str(warmup), *extra]
    environ = environment(exe, env)
    last_error = ""
    for _attempt in range(3):
        port = free_port()
        server = subprocess.Popen([exe, "-p", str(port), *extra], env=environ, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _unbind(server)
        try:
            deadline = time.monotonic() + start_timeout
            while True:
                if server.poll() is not None:
                    break
                state = _listening(port)
                if state is None:  # no /proc: give it a moment
                    time.sleep(0.5)
                    break
                if state:
                    break
                if time.monotonic() > deadline:
                    raise PerftestError(f"ucx_perftest server did not listen on port {port} "
                                        f"within {start_timeout:.0f} s")
                time.sleep(0.01)
            if server.poll() is not None:  # e.g. the port was taken meanwhile: try another
                last_error = f"ucx_perftest server exited with {server.returncode}:\n{_stop(server)}"
                continue
            client = subprocess.Popen([exe, "127.0.0.1", "-p", str(port), *args], env=environ,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            _unbind(client)
            try:
                stdout, stderr = client.communicate(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                _stop(client)
                raise PerftestError(f"ucx_perftest {' '.join(args)} ran past {timeout:.0f} s") from exc
            out = stdout + stderr
            if client.returncode == 0:
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                result = parse_final(out)
                result.update(test=test, size=size, args=args)
                return result
            last_error = f"ucx_perftest {' '.join(args)} exited with {client.returncode}:\n{out[-2000:]}"
        finally:
            _stop(server)
    raise PerftestError(last_error)


def bandwidth_gbps(result: dict) -> float:
    """Bandwidth of a ``*_bw`` result in GB/s (1e9 bytes per second)."""
    return result["bw_overall_MBps"] * MB / 1e9
