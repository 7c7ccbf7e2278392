"""Helpers of the tests that start processes (mpiexec jobs, interpreters)."""
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

#: the repository
ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd, env=None, timeout=60, cwd=None):
    """Run a command in its own session; (exit status, stdout+stderr). On
    timeout the whole process group is killed and the test fails with the
    output so far: a hung job fails its test, it never stalls the run."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                         start_new_session=True, cwd=cwd)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail(f"{cmd} hung for {timeout} s; output:\n{out}")
    return p.returncode, out


def finish(proc, done_path, timeout=30):
    """Tell a test's server process to end (it waits for ``done_path``) and
    reap it, killed if it has not ended within ``timeout`` seconds."""
    open(done_path, "w").close()
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


#: For tests and the scripts they start: ``stop(pid)`` SIGSTOPs a process
#: and waits until every thread of it is stopped. The signal is
#: asynchronous: until the thread that takes it runs (later on a busy
#: machine), the process's other threads go on, and one of them may still
#: answer what the test sends next.
STOP = textwrap.dedent('''
    def stop(pid, timeout=10):
        import contextlib, os, signal, time
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            if states and all(st in "tT" for st in states):
                return
            time.sleep(0.001)
        raise AssertionError(f"process {pid} did not stop within {timeout} s")
''')
exec(STOP)  # this module's stop(): the text the scripts get, run here


def script(path):
    """A tool of the repository (``tools/ci/mpi4py_suite.py``: a path from
    its root), which is no package's module, as a module."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def simhosts():
    """tests/support/simhosts.py (the simulated hosts) as a module."""
    from . import simhosts
    return simhosts


#: For the scripts the fault tests start: ``attempt(name, fn)`` runs fn and
#: reports its outcome and duration through the script's own ``out``.
ATTEMPT = textwrap.dedent('''
    def attempt(name, fn):
        t0 = time.monotonic()
        try:
            fn()
            out(name, "OK", f"{time.monotonic() - t0:.3f}")
        except hixl_rma.HixlError as exc:
            out(name, type(exc).__name__, f"{time.monotonic() - t0:.3f}", "|", str(exc).replace("\\n", " "))
        except BaseException as exc:  # anything else is a test failure
            out(name, "UNEXPECTED:" + type(exc).__name__, f"{time.monotonic() - t0:.3f}", "|", exc)
''')


#: For the scripts that hand each other addresses through files (they import
#: json, os and time): ``publish`` writes JSON whole or not at all,
#: ``wait_file`` waits for a file, ``read_json`` for a published one.
FILES = textwrap.dedent('''
    def publish(path, info):
        with open(path + ".tmp", "w") as f:
            json.dump(info, f)
        os.replace(path + ".tmp", path)

    def wait_file(path, timeout=60):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise SystemExit(f"{path} never appeared")
            time.sleep(0.01)

    def read_json(path, timeout=30):
        wait_file(path, timeout)
        with open(path) as f:
            return json.load(f)
''')


#: ``listeners(pid="self")``: the (address, port) of every TCP socket the
#: process listens on (its own sockets only, from /proc), for the tests of
#: what a process exposes; the scripts of those tests include it as is.
LISTENERS = textwrap.dedent('''
    def listeners(pid="self"):
        import os, socket
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
        out = []
        for family, table in ((socket.AF_INET, "tcp"), (socket.AF_INET6, "tcp6")):
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
            for row in rows:
                col = row.split()
                if col[3] != "0A" or int(col[9]) not in inodes:  # 0A: LISTEN
                    continue
                addr, port = col[1].split(":")
                raw = bytes.fromhex(addr)
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                out.append((socket.inet_ntop(family, raw), int(port, 16)))
        return out
''')


def mpiexec():
    """mpiexec next to this Python (the venv's MPICH), else the one on PATH."""
    here = pathlib.Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    assert found, "mpiexec not found next to the interpreter or on PATH"
    return found


def clean_env():
    """This environment without an enclosing MPI launch (PMI/Hydra variables)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "HYDI_", "MPI_LOCALNRANKS",
                                "MPI_LOCALRANKID", "OMPI_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env
