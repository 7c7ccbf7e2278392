#!/usr/bin/env python3
"""Soak test: seeded rounds of one fault each during one workload; no hang,
no crash, no wrong result (issue 40).

    python tools/measure/soak.py --rounds 500 --seed 1 --json out.json
    python tools/measure/soak.py --only-seed 100042          # replay one round

Round ``r`` of ``--seed S`` has the seed ``S * 100000 + r``; that seed alone
picks the fault (a peer killed with SIGKILL on this host or on another
simulated host; a peer stopped with SIGSTOP for the timeout + 1 s, then
resumed; the link between two simulated hosts cut, healed after 2 s in half
of those rounds), the workload (Put + Flush + Get read back under Lock_all;
the same with 2 MiB Puts on a bulk-priority window, whose bytes go over the
peer's paced bulk lane across hosts; an exclusive-lock counter of Fetch_and_op and Accumulate; Fence epochs; NIXL
WRITE + READ of 1 to 1,024 scattered 4 KiB descriptors through NIXL's agent
on HIXL_RMA), when the fault comes (ms into the workload), which rank is the
victim and, for NIXL, how many descriptors.

Each rank runs its workload until 300 ms past the fault time, then meets the
other (Fence; NIXL: its next transfer), so every survivor has a call that
needs the victim after the fault. A survivor's end (an error, or success
where the fault healed) must come within the timeout + 1 s of the fault
(``--timeout-ms``, default 3000, is ``HIXL_RMA_TIMEOUT_MS`` of the ranks);
the ranks then leave with ``os._exit`` (MPICH's MPI_Finalize would wait for a
dead rank forever). Checked per round, a violation printed with its seed:
``hang`` (a survivor ended late or never), ``crash`` (a survivor ended by
anything but PeerFailure, HixlTimeoutError, a NIXL error or success),
``wrong`` (data read back differ; the counter is not the number of
successful increments; a Fetch_and_op result not above the last), and
``no-error`` (a survivor succeeded with its peer killed).

Link faults need root (network namespaces: tests/support/simhosts.py); the
NIXL workload needs NIXL; rounds that cannot run here are skipped, saying
why. Multi-rank rounds use MPICH's hydra (``-disable-auto-cleanup``).
"""
import argparse
import collections
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
KINDS = ("kill", "kill-xhost", "stop", "cut")
WORKLOADS = ("putflush", "lockcounter", "fence", "nixl", "bulk")
TAIL_MS = 300  # the workload goes on this long past the fault, then meets the peer
HEAL_S = 2.0
# hydra sees this wrapper, not the rank: a rank killed by a signal does not
# tear the job down (tests/test_faults.py says why)
WRAPPER = 'trap "" USR1; "$@"; rc=$?; [ "$rc" -eq 137 ] && exit 0; exit "$rc"'

# The rounds' programs (a rank, a NIXL agent) report the same way, as
# who: to a file too, since with the link cut hydra cannot pass on a
# rank's output; END then leaves at once.
REPORT = r'''
log = open(f"{d}/soak.{WHO}.log", "a", buffering=1)


def say(*words):
    line = " ".join(map(str, ("SOAK", WHO, *words))) + "\n"
    log.write(line)
    sys.stdout.write(line)
    sys.stdout.flush()


def end(outcome, *more):
    say("END", outcome, f"{time.monotonic():.6f}", *more)
    sys.stdout.flush()
    os._exit(0)
'''

RANK = r'''
import os, sys, time
import numpy as np
from mpi4py import MPI
import hixl_rma
from hixl_rma import Win

workload, fault_ms, token, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
comm = MPI.COMM_WORLD
rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
@@REPORT_WHO_rank@@


hixl_rma.Init()
buf = np.zeros(4096, np.int64)
win = Win.Create(buf, disp_unit=8, comm=comm)
win.Fence()
win.Put(np.full(1, 1, np.int64), peer, 4095)  # connected both ways before the fault
win.Fence()
if workload == "bulk":  # across hosts its Puts and Gets go over the peer's paced bulk lane
    big = np.zeros(1 << 19, np.int64)
    bwin = Win.Create(big, disp_unit=8, comm=comm, info={"priority": "bulk"})
    bwin.Fence()
comm.Barrier()
t0 = time.monotonic()
say("GO", f"{t0:.6f}", os.getpid())
stop_at = t0 + (fault_ms + %(tail)d) / 1000
one = np.ones(1, np.int64)
done = 0
try:
    if workload in ("putflush", "bulk"):
        # bulk: 2 MiB a Put, more than the peer's bulk lane has in flight at once
        w, n, slots = (bwin, 1 << 18, 2) if workload == "bulk" else (win, 64, 32)
        src, back = np.empty(n, np.int64), np.empty(n, np.int64)
        w.Fence(hixl_rma.MODE_NOSUCCEED)
        w.Lock_all()
        while time.monotonic() < stop_at:
            src[:] = np.arange(n) + done * n + rank * 10**12
            off = (done % slots) * n
            w.Put(src, peer, off)
            w.Flush(peer)
            back[:] = -1
            w.Get(back, peer, off)
            w.Flush(peer)
            if not np.array_equal(back, src):
                end("WRONG", f"{workload}-readback-iteration-{done}")
            done += 1
        w.Unlock_all()
        win.Fence()
    elif workload == "lockcounter":
        last = -1
        res = np.zeros(1, np.int64)
        win.Fence(hixl_rma.MODE_NOSUCCEED)
        while time.monotonic() < stop_at:
            win.Lock(0, hixl_rma.LOCK_EXCLUSIVE)
            if done % 2:
                win.Accumulate(one, 0, op=hixl_rma.SUM)
            else:
                win.Fetch_and_op(one, res, 0, 0, op=hixl_rma.SUM)
            win.Unlock(0)
            if not done % 2:
                if res[0] <= last:
                    end("WRONG", f"fetch-and-op-{res[0]}-after-{last}")
                last = res[0]
            done += 1
        win.Fence()
        win.Put(np.full(1, done, np.int64), 0, 1 + rank)
        win.Fence()
        if rank == 0 and buf[0] != buf[1] + buf[2]:
            end("WRONG", f"counter-{buf[0]}-increments-{buf[1]}+{buf[2]}")
    elif workload == "fence":
        mine = np.zeros(2, np.int64)
        while True:
            go_on = int(time.monotonic() < stop_at)
            # epochs alternate slots: the peer's Put of the next epoch may
            # land while this rank reads this one's
            slot = 8 + 2 * (done % 2)
            mine[:] = (done * 10 + rank, go_on)
            win.Put(mine, peer, slot)
            win.Fence()
            if buf[slot] != done * 10 + peer:
                end("WRONG", f"epoch-{done}-got-{buf[slot]}")
            done += 1
            if not (go_on and buf[slot + 1]):
                break
    else:
        raise SystemExit(f"unknown workload {workload}")
except hixl_rma.HixlError as exc:
    end(type(exc).__name__, done, "|", str(exc).replace("\n", " ")[:300])
except BaseException as exc:
    end("CRASH:" + type(exc).__name__, done, "|", str(exc).replace("\n", " ")[:300])
end("ok", done)
'''.replace("%(tail)d", str(TAIL_MS))
RANK = RANK.replace("@@REPORT_WHO_rank@@", REPORT.replace("WHO", "rank"))

NIXL = r'''
import json, os, sys, time
import numpy as np
from hixl_rma import nixl as hn

role, d, fault_ms, ndesc, seed, timeout_s, token = sys.argv[1:8]
fault_ms, ndesc, seed, timeout_s = int(fault_ms), int(ndesc), int(seed), float(timeout_s)
BLK, NBLK = 4096, 1024


@@REPORT_WHO_role@@


def put(path, data):
    open(path + ".tmp", "wb").write(data)
    os.rename(path + ".tmp", path)


def take(path, limit=60):
    stop = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > stop:
            end("SETUP", f"no-{os.path.basename(path)}")
        time.sleep(0.01)
    return open(path, "rb").read()


agent = hn.agent(role, ["HIXL_RMA"])
mem = np.zeros(NBLK * BLK, np.uint8)
back = np.zeros(NBLK * BLK, np.uint8)
agent.register_memory(agent.get_reg_descs([(mem.ctypes.data, mem.nbytes, 0, ""),
                                           (back.ctypes.data, back.nbytes, 0, "")], "DRAM"))
put(f"{d}/{role}.md", agent.get_agent_metadata())
if role == "target":
    say("PID", os.getpid())
    put(f"{d}/target.base", str(mem.ctypes.data).encode())
    take(f"{d}/stop", 3600)
    end("ok")
peer = agent.add_remote_agent(take(f"{d}/target.md"))
peer = peer.decode() if isinstance(peer, bytes) else peer
base = int(take(f"{d}/target.base"))
rng = np.random.default_rng(seed)
where = rng.permutation(NBLK)[:ndesc]
local = agent.get_xfer_descs([(mem.ctypes.data + int(b) * BLK, BLK, 0) for b in where], "DRAM")
readback = agent.get_xfer_descs([(back.ctypes.data + int(b) * BLK, BLK, 0) for b in where], "DRAM")
remote = agent.get_xfer_descs([(base + int(b) * BLK, BLK, 0) for b in where], "DRAM")
pick = np.concatenate([np.arange(int(b) * BLK, (int(b) + 1) * BLK) for b in where])


def xfer(op, loc):
    h = agent.initialize_xfer(op, loc, remote, peer)
    st = agent.transfer(h)
    limit = time.monotonic() + timeout_s + 5
    while st == "PROC":
        if time.monotonic() > limit:
            end("HANG", f"{op}-PROC-past-timeout+5s")
        time.sleep(0.0002)
        st = agent.check_xfer_state(h)
    agent.release_xfer_handle(h)
    return st


done = 0
try:
    for _ in range(2):  # connected before the fault
        if xfer("WRITE", local) != "DONE":
            end("SETUP", "warm-up")
    t0 = time.monotonic()
    say("GO", f"{t0:.6f}", os.getpid())
    stop_at = t0 + (fault_ms + %(tail)d) / 1000
    while True:
        mem[pick] = (np.arange(pick.size) + done * 7 + seed) % 251
        back[pick] = 0
        st = xfer("WRITE", local)
        if st == "DONE":
            st = xfer("READ", readback)
        if st != "DONE":
            end("nixl:" + st, done)
        if not np.array_equal(back[pick], mem[pick]):
            end("WRONG", f"readback-{done}")
        done += 1
        if time.monotonic() >= stop_at:
            break
except Exception as exc:
    kind = ("nixl:" if type(exc).__module__.startswith("nixl") else "CRASH:") + type(exc).__name__
    end(kind, done, "|", str(exc).replace("\n", " ")[:300])
end("ok", done)
'''.replace("%(tail)d", str(TAIL_MS))
NIXL = NIXL.replace("@@REPORT_WHO_role@@", REPORT.replace("WHO", "role"))


def plan(seed):
    """What round `seed` does (a function of the seed alone)."""
    rng = random.Random(seed)
    p = {"seed": seed, "kind": rng.choice(KINDS), "workload": rng.choice(WORKLOADS[:4]),
         "fault_ms": rng.randint(50, 800), "victim": rng.randint(0, 1), "heal": rng.random() < 0.5,
         "ndesc": rng.choice((1, 16, 256, 1024))}
    # Drawn last, so that the seeds of the rounds before it still replay
    # those rounds: half of the Put/Flush rounds stream on a bulk window.
    if rng.random() < 0.5 and p["workload"] == "putflush":
        p["workload"] = "bulk"
    if p["kind"] != "cut":
        p["heal"] = False
    if p["workload"] == "nixl":
        p["victim"] = "target"  # the initiator is the one that waits on it
    p["label"] = "cut+heal" if p["heal"] else p["kind"]
    return p


def _simhosts():
    os.environ.setdefault("HIXL_SIMHOSTS_PREFIX", "hixl-soak")
    sys.path.insert(0, str(ROOT / "tests"))
    from support import simhosts
    return simhosts


def _hydra(mpiexec):
    try:
        r = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "HYDRA" in r.stdout + r.stderr


def _nixl_why():
    try:
        from hixl_rma import nixl as hn
    except ImportError as exc:
        return f"hixl_rma.nixl: {exc}"
    if not hn.installed():
        return "NIXL is not installed"
    if not (pathlib.Path(hn.__file__).parent / hn.PLUGIN_FILE).exists():
        return "hixl_rma was built without libplugin_HIXL_RMA.so"
    return None


def _host_pid(token, ns_pid, host=None):
    """The pid (in this namespace) of this round's process whose own pid is
    `ns_pid`: here, or in the pid namespace of simulated host `host` (the
    hosts' namespaces give the same pids)."""
    want = os.readlink(f"/proc/{host['pid']}/ns/pid") if host else os.readlink("/proc/self/ns/pid")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if token.encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
            if int(nspid[-1]) == ns_pid and os.readlink(f"/proc/{entry}/ns/pid") == want:
                return int(entry)
        except (OSError, StopIteration):
            continue
    return None


def _reap_token(token):
    """Kill whatever of this round is left (processes this runner started)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        os.kill(int(entry), signal.SIGCONT)
                        os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


class Job:
    """Processes of one round, their output lines collected by threads."""

    def __init__(self, d):
        self.d, self.procs, self.lines, self.cond = d, [], [], threading.Condition()

    def start(self, argv, env):
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        threading.Thread(target=self._read, args=(p,), daemon=True).start()
        return p

    def _read(self, p):
        for line in p.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def soak(self):
        """{who: {"PID": [...], "GO": [...], "END": [...]}} from the SOAK lines."""
        out = collections.defaultdict(dict)
        lines = []
        for f in self.d.glob("soak.*.log"):
            lines += f.read_text().splitlines()
        for line in lines:
            w = line.split()
            if len(w) >= 4 and w[0] == "SOAK":
                out[w[1]].setdefault(w[2], w[3:])
        return out

    def wait_for(self, pred, deadline):
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0 or (all(p.poll() is not None for p in self.procs) and not pred()):
                    return pred()
                self.cond.wait(min(left, 0.05))
            return True

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


class Soak:
    def __init__(self, args):
        self.a = args
        self.timeout_s = args.timeout_ms / 1000
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="hixl-soak-"))
        (self.tmp / "soak_rank.py").write_text(RANK)
        (self.tmp / "soak_nixl.py").write_text(NIXL)
        self.mpiexec = shutil.which("mpiexec", path=str(pathlib.Path(sys.executable).parent)) or "mpiexec"
        self.hydra = _hydra(self.mpiexec)
        self.nixl_why = _nixl_why()
        self.sim = _simhosts()
        self.sim_why = self.sim.usable()
        self.hosts = None

    def close(self):
        if self.hosts is not None:
            self.sim.down()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, nixl=False):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "HYDI_", "MPI_LOCAL", "OMPI_"))}
        if nixl:
            env = {k: v for k, v in env.items() if not k.startswith(("HIXL_RMA_", "UCX_", "NIXL_"))}
        env["HIXL_RMA_TIMEOUT_MS"] = str(self.a.timeout_ms)
        env["PYTHONUNBUFFERED"] = "1"
        for kv in self.a.env:
            k, _, v = kv.partition("=")
            env[k] = v
        return env

    def skip_reason(self, p):
        if p["workload"] == "nixl" and self.nixl_why:
            return f"nixl workload: {self.nixl_why}"
        if p["workload"] != "nixl" and not self.hydra:
            return "the multi-rank workloads need MPICH hydra's -disable-auto-cleanup"
        if p["kind"] in ("kill-xhost", "cut") and self.sim_why:
            return f"simulated hosts: {self.sim_why}"
        return None

    def two_hosts(self):
        if self.hosts is None:
            self.hosts = self.sim.up(2)
        return self.hosts

    def round(self, p):
        why = self.skip_reason(p)
        if why:
            return {**p, "skipped": why}
        token = f"soak{p['seed']}x{os.getpid()}"
        xhost = p["kind"] in ("kill-xhost", "cut")
        d = self.tmp / token
        d.mkdir()
        job = Job(d)
        rec = {**p, "violations": []}
        try:
            if p["workload"] == "nixl":
                who = ["target", "initiator"]
                env = self.env(nixl=True)
                env.setdefault("HIXL_RMA_NIXL_TOKEN", f"soak-token-{token}-0123456789")  # listen on the hosts' network
                for i, role in enumerate(who):
                    pre = self.sim.enter(self.hosts[1 - i]) if xhost else []  # target on h1
                    job.start([*pre, sys.executable, str(self.tmp / "soak_nixl.py"), role, str(d), str(p["fault_ms"]),
                               str(p["ndesc"]), str(p["seed"]), str(self.timeout_s), token], env)
                victim = "target"
            else:
                who = ["0", "1"]
                rank_cmd = ["bash", "-c", WRAPPER, "wrapper", sys.executable, str(self.tmp / "soak_rank.py"),
                            p["workload"], str(p["fault_ms"]), token, str(d)]
                if xhost:
                    argv = self.sim.head_prefix() + self.sim.mpiexec_argv(
                        2, rank_cmd, "1,1", mpiexec=self.mpiexec, hydra_args=["-disable-auto-cleanup"])
                else:
                    argv = [self.mpiexec, "-disable-auto-cleanup", "-n", "2", *rank_cmd]
                job.start(argv, self.env())
                victim = str(p["victim"])
            self._drive(p, rec, job, who, victim, token, d, xhost)
        finally:
            if xhost and self.hosts:
                subprocess.run(["ip", "-n", f"{self.sim.PREFIX}-sw", "link", "set", "hxs1", "up"], check=False)
            job.kill()
            _reap_token(token)
            shutil.rmtree(d, ignore_errors=True)
        return rec

    def _drive(self, p, rec, job, who, victim, token, d, xhost):
        ready = {w: "GO" for w in who}
        if p["workload"] == "nixl":
            ready["target"] = "PID"  # the target only serves
        started = job.wait_for(lambda: all(v in job.soak().get(w, {}) for w, v in ready.items()),
                               time.monotonic() + 90)
        s = job.soak()
        if not started:
            rec["output"] = job.lines[-30:]
            rec["violations"].append("setup")  # not the fault's doing: reported, replayable
            return
        go = max(float(s[w]["GO"][0]) for w, v in ready.items() if v == "GO")
        mine = s[victim].get("PID") or s[victim]["GO"][1:]
        host = None
        if xhost:  # rank r (NIXL: the initiator, then the target) on host r
            host = self.hosts[1 if victim in ("1", "target") else 0]
        pid = _host_pid(token, int(mine[0]), host)
        if pid is None:
            rec["output"] = job.lines[-30:]
            rec["violations"].append("setup:no-victim-pid")
            return
        t_plan = go + p["fault_ms"] / 1000
        time.sleep(max(0.0, t_plan - time.monotonic()))
        t_fault = time.monotonic()
        rec["late_ms"] = round((t_fault - t_plan) * 1000, 1)
        kind = p["kind"]
        link = ["ip", "-n", f"{self.sim.PREFIX}-sw", "link", "set", "hxs1"]
        resume_at = heal_at = None
        if kind in ("kill", "kill-xhost"):
            os.kill(pid, signal.SIGKILL)
        elif kind == "stop":
            os.kill(pid, signal.SIGSTOP)
            resume_at = t_fault + self.timeout_s + 1
        else:
            subprocess.run([*link, "down"], check=True)
            heal_at = t_fault + HEAL_S if p["heal"] else None
        survivors = [w for w in who if not (kind.startswith("kill") and w == victim)]
        bound = t_fault + self.timeout_s + 1
        if kind == "stop":
            others = [w for w in survivors if w != victim]
        else:
            others = survivors
        if p["workload"] == "nixl":
            others = ["initiator"]  # the target is passive: it ends when told
        last = max(bound, resume_at + self.timeout_s + 1 if resume_at else 0, heal_at or 0) + 5
        while time.monotonic() < last:
            now = time.monotonic()
            if resume_at and now >= resume_at:
                os.kill(pid, signal.SIGCONT)
                resume_at = None
            if heal_at and now >= heal_at:
                subprocess.run([*link, "up"], check=True)
                heal_at = None
            s = job.soak()
            if all("END" in s.get(w, {}) for w in others) and not resume_at and not heal_at:
                break
            with job.cond:
                job.cond.wait(0.02)
        if p["workload"] == "nixl":
            (d / "stop").touch()  # the target ends when told
        # the resumed victim ends too (not bounded by the fault: reported); the
        # rest of the launch is killed
        end_of_job = time.monotonic() + (self.timeout_s + 2 if kind == "stop" else 0.5)
        while time.monotonic() < end_of_job and any(x.poll() is None for x in job.procs):
            if kind == "stop" and all("END" in job.soak().get(w, {}) for w in survivors):
                break
            time.sleep(0.02)
        s = job.soak()
        rec["outcomes"], rec["time_to_end"], rec["time_to_end_unbounded"] = {}, {}, {}
        for w in survivors:
            e = s.get(w, {}).get("END")
            if e is None:
                rec["outcomes"][w] = "none"
                died = [line for line in job.lines if line.startswith("wrapper:") and "Killed" not in line]
                rec["violations"].append(f"crash:{w}:{died[0].split(None, 3)[-1].strip()}" if died else f"hang:{w}")
                continue
            outcome, t_end = e[0], float(e[1])
            rec["outcomes"][w] = outcome
            detail = " ".join(e[2:])
            if detail:
                rec.setdefault("details", {})[w] = detail
            took = t_end - t_fault
            in_bound = w in others
            # bounded by the fault: the time to error of the summary; else (the
            # resumed victim, the NIXL target told to end) reported apart
            rec["time_to_end" if in_bound else "time_to_end_unbounded"][w] = round(took, 3)
            if in_bound and took > self.timeout_s + 1:
                rec["violations"].append(f"hang:{w}:{took:.2f}s")
            if w == victim and kind == "stop" and t_end - (t_fault + self.timeout_s + 1) > self.timeout_s + 1:
                rec["violations"].append(f"hang:{w}:resumed-{took:.2f}s")
            if outcome == "WRONG":
                rec["violations"].append(f"wrong:{w}")
            elif outcome == "ok":
                if kind.startswith("kill") and rec["late_ms"] < TAIL_MS / 2 and w in others:
                    rec["violations"].append(f"no-error:{w}")
            elif not (outcome in ("PeerFailure", "HixlTimeoutError") or outcome.startswith("nixl:")):
                rec["violations"].append(f"crash:{w}:{outcome}")
        if rec["violations"]:
            rec["output"] = job.lines[-40:]


def summarize(records, timeout_s):
    rows = collections.defaultdict(list)
    for r in records:
        if "skipped" not in r:
            rows[(r["label"], r["workload"])].append(r)
    lines = [f"{'fault':<11}{'workload':<13}{'rounds':>6}  {'worst s':>8}{'median s':>9}  outcomes (survivors)"]
    table = []
    for (label, wl), rs in sorted(rows.items()):
        outs = collections.Counter(o for r in rs for o in r.get("outcomes", {}).values())
        errs = [t for r in rs for w, t in r.get("time_to_end", {}).items()
                if r["outcomes"].get(w) not in ("ok", "WRONG")]
        worst = max(errs) if errs else None
        med = statistics.median(errs) if errs else None
        table.append({"fault": label, "workload": wl, "rounds": len(rs), "outcomes": dict(outs),
                      "worst_s": worst, "median_s": med})
        lines.append(f"{label:<11}{wl:<13}{len(rs):>6}  {worst if worst is not None else '-':>8}"
                     f"{round(med, 3) if med is not None else '-':>9}  "
                     + ", ".join(f"{k} {v}" for k, v in sorted(outs.items())))
    per_kind = collections.defaultdict(list)
    for r in records:
        for w, t in r.get("time_to_end", {}).items():
            if r["outcomes"].get(w) not in ("ok", "WRONG"):
                per_kind[r["label"]].append(t)
    lines.append("worst time to error per fault (bound %.1f s): " % (timeout_s + 1)
                 + ", ".join(f"{k} {max(v):.3f} s" for k, v in sorted(per_kind.items())))
    return lines, table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1, help="round r has the seed SEED * 100000 + r")
    ap.add_argument("--only-seed", action="append", default=[],
                    help="run these round seeds (comma-separated, repeatable) instead")
    ap.add_argument("--timeout-ms", type=int, default=3000, help="HIXL_RMA_TIMEOUT_MS of the ranks (the bound)")
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="more environment for the ranks")
    ap.add_argument("--json", help="write every round and the table here")
    ap.add_argument("--minutes", type=float, help="stop starting rounds after this long")
    a = ap.parse_args(argv)
    seeds = [int(s) for arg in a.only_seed for s in arg.split(",") if s] or \
        [a.seed * 100000 + r for r in range(a.rounds)]
    soak = Soak(a)
    records, t_start = [], time.monotonic()
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1) or (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for seed in seeds:
            if a.minutes and time.monotonic() - t_start > a.minutes * 60:
                print(f"soak: stopping after {a.minutes} min", flush=True)
                break
            p = plan(seed)
            if soak.skip_reason(p) is None and p["kind"] in ("kill-xhost", "cut"):
                soak.two_hosts()
            r = soak.round(p)
            records.append(r)
            if "skipped" in r:
                print(f"seed {seed}: {p['label']} / {p['workload']}: skipped ({r['skipped']})", flush=True)
                continue
            print(f"seed {seed}: {p['label']:<10} {p['workload']:<11} at {p['fault_ms']} ms "
                  f"(late {r.get('late_ms')} ms): {r.get('outcomes')} {r.get('time_to_end')}"
                  + (f"  VIOLATION {r['violations']}" if r["violations"] else ""), flush=True)
            if a.json:
                _write(a.json, records, soak.timeout_s, seeds, time.monotonic() - t_start)
    except KeyboardInterrupt:
        print("soak: interrupted", flush=True)
    finally:
        soak.close()
    lines, _table = summarize(records, soak.timeout_s)
    print("\n".join(lines))
    bad = [r for r in records if r.get("violations")]
    for r in bad:
        print(f"VIOLATION seed {r['seed']} ({r['label']} / {r['workload']}): {r['violations']}  "
              f"replay: python tools/measure/soak.py --only-seed {r['seed']}")
        for line in r.get("output", [])[-15:]:
            print("    " + line)
    print(f"{len(records)} rounds ({sum('skipped' in r for r in records)} skipped), {len(bad)} with violations, "
          f"{time.monotonic() - t_start:.0f} s")
    if a.json:
        _write(a.json, records, soak.timeout_s, seeds, time.monotonic() - t_start)
    return 1 if bad else 0


def _write(path, records, timeout_s, seeds, took):
    _lines, table = summarize(records, timeout_s)
    with open(path + ".tmp", "w") as f:
        json.dump({"timeout_s": timeout_s, "seeds": len(seeds), "seconds": round(took, 1), "table": table,
                   "violations": [r for r in records if r.get("violations")], "rounds": records}, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
