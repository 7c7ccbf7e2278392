#!/usr/bin/env python3
"""Simulated hosts on one machine, for multi-host runs in tests and by hand.

Each host is a network namespace joined to the others by a bridge (host i
is 10.77.0.<i+1>/24 on its ``eth0``), plus its own UTS, IPC, PID and mount
namespaces: its own hostname (``h<i>``), ``/dev/shm``, pids and
``/etc/hosts``. As on a Debian-style cluster node, a host's own name
resolves to 127.0.1.1 there and the other hosts' names to their addresses.
A "head" namespace (10.77.0.254, root's pids and mounts) runs ``mpiexec``,
which starts its proxies on the hosts through this script's ``ssh``
stand-in, as it would through ssh.

By hand (root, ``ip``, ``unshare`` and ``nsenter``)::

    python tests/support/simhosts.py up 2
    python tests/support/simhosts.py mpiexec -n 3 -- python -m hixl_rma.bench ...   # ranks 2+1
    python tests/support/simhosts.py exec 1 -- hostname
    python tests/support/simhosts.py down

Run as anything but one of its commands, the script is the ssh stand-in
(``[options] host command...``). ``mpiexec`` places ranks in blocks (``--per-host``, default: as even as
possible), with MPICH's hydra (``-launcher ssh -launcher-exec``) or Open
MPI's (``--mca plm_rsh_agent``), whichever ``mpiexec`` on PATH is.

``HIXL_SIMHOSTS_SYSCTL=key=value[,key=value...]`` sets those kernel settings in
every namespace ``up`` makes (the per-namespace network ones, such as
``net.ipv4.tcp_rto_max_ms=1000``).

From Python: ``with simhosts.hosts(2) as h: h.mpiexec([...], n=3)``; the
hosts go down whatever happens (and ``down`` removes what a killed run
left).
"""
import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

# Names of the namespaces (and the state folder): runs that must not meet
# (two checkouts testing at once) each set their own.
PREFIX = os.environ.get("HIXL_SIMHOSTS_PREFIX", "hixl-sim")
SUBNET = "10.77.0"
HEAD_IP = f"{SUBNET}.254"
STATE = os.environ.get("HIXL_SIMHOSTS_STATE", f"/tmp/{PREFIX}")
SELF = os.path.abspath(__file__)


def usable():
    """None when simulated hosts can be made here, else the reason why not."""
    if os.geteuid() != 0:
        return "needs root (network, UTS, PID and mount namespaces)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` on PATH"
    return None


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def _ip(ns, *args):
    return _run("ip", "-n", ns, *args)


def _state_file():
    return os.path.join(STATE, "hosts.json")


def load():
    """The hosts that are up: [{"name", "ip", "pid"}], or [] when none."""
    try:
        with open(_state_file()) as f:
            return json.load(f)["hosts"]
    except (OSError, ValueError, KeyError):
        return []


def _children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(p) for p in f.read().split()]
    return out


def up(n):
    """Make hosts h0..h<n-1> (after removing any left from an earlier run)."""
    why = usable()
    if why:
        raise RuntimeError(f"simulated hosts: {why}")
    if not 1 <= n <= 200:
        raise ValueError(f"between 1 and 200 hosts, not {n}")
    down()
    os.makedirs(STATE, exist_ok=True)
    sw, head = f"{PREFIX}-sw", f"{PREFIX}-head"
    _run("ip", "netns", "add", sw)
    _ip(sw, "link", "add", "br0", "type", "bridge")
    _ip(sw, "link", "set", "br0", "up")
    hosts = []
    for i, (ns, ip) in enumerate([(f"{PREFIX}-h{i}", f"{SUBNET}.{i + 1}") for i in range(n)] + [(head, HEAD_IP)]):
        _run("ip", "netns", "add", ns)
        port = f"hxs{i}"
        _run("ip", "link", "add", port, "netns", sw, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip(sw, "link", "set", port, "master", "br0", "up")
        _ip(ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip(ns, "link", "set", "eth0", "up")
        _ip(ns, "link", "set", "lo", "up")
        for setting in filter(None, os.environ.get("HIXL_SIMHOSTS_SYSCTL", "").split(",")):
            _run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", setting.strip())
        if ns != head:
            hosts.append({"name": f"h{i}", "ip": ip, "ns": ns})
    for h in hosts:
        etc_hosts = os.path.join(STATE, f"hosts.{h['name']}")
        with open(etc_hosts, "w") as f:
            f.write(f"127.0.0.1 localhost\n127.0.1.1 {h['name']}\n")
            f.writelines(f"{o['ip']} {o['name']}\n" for o in hosts if o is not h)
        # The host's first process (pid 1 there): its namespaces are the host.
        init = (f"hostname {h['name']} && mount -t tmpfs tmpfs /dev/shm && "
                f"mount --bind {shlex.quote(etc_hosts)} /etc/hosts && exec sleep infinity")
        p = subprocess.Popen(["ip", "netns", "exec", h["ns"], "unshare", "-u", "-i", "-p", "-m", "--fork",
                              "--mount-proc", "--propagation", "private", "sh", "-c", init],
                             stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            kids = _children(p.pid) if p.poll() is None else []
            if kids and _hostname_of(kids[0]) == h["name"]:
                h["pid"] = kids[0]
                break
            if p.poll() is not None or time.monotonic() > deadline:
                down()
                raise RuntimeError(f"simulated host {h['name']} did not start (rc {p.poll()})")
            time.sleep(0.02)
        h["unshare_pid"] = p.pid
    with open(_state_file(), "w") as f:
        json.dump({"hosts": hosts, "head": head}, f)
    return hosts


def _hostname_of(pid):
    r = _run("nsenter", "-t", str(pid), "-u", "hostname", check=False)
    return r.stdout.strip() if r.returncode == 0 else None


def down():
    """Remove every simulated host (and whatever runs on them)."""
    for h in load():
        for pid in (h.get("pid"), h.get("unshare_pid")):
            if pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)  # pid 1 of the host: its pid namespace goes with it
    listed = _run("ip", "netns", "list", check=False).stdout.split("\n") if shutil.which("ip") else []
    for line in listed:
        name = line.split(" ")[0]
        if name.startswith(PREFIX + "-"):
            _run("ip", "netns", "del", name, check=False)
    shutil.rmtree(STATE, ignore_errors=True)


def _find(which):
    """A host by index, name or address."""
    for i, h in enumerate(load()):
        if which in (str(i), h["name"], h["ip"]):
            return h
    raise SystemExit(f"simhosts: no simulated host {which!r} (is it up?)")


def enter(host):
    """The command prefix that runs a command on ``host``."""
    return ["nsenter", "-t", str(host["pid"]), "-n", "-u", "-i", "-p", "-m", f"--wd={os.getcwd()}", "--"]


def exec_on(which, cmd):
    """Run ``cmd`` (a list) on a host, as this process (execvp)."""
    argv = enter(_find(which)) + cmd
    os.execvp(argv[0], argv)


def ssh(argv):
    """The ssh stand-in: ``[options] host command...`` as ssh takes them
    (hydra passes ``-x``; Open MPI's rsh agent options take no value)."""
    while argv and argv[0].startswith("-"):
        argv = argv[1:]
    if len(argv) < 2:
        raise SystemExit("simhosts ssh: usage: ssh [options] host command...")
    exec_on(argv[0], ["sh", "-c", " ".join(argv[1:])])


def _placement(n, hosts, per_host):
    if per_host:
        counts = [int(c) for c in per_host.split(",")]
        if sum(counts) != n or len(counts) > len(hosts):
            raise SystemExit(f"simhosts: --per-host {per_host} does not place {n} ranks on {len(hosts)} hosts")
    else:
        counts = [n // len(hosts) + (1 if i < n % len(hosts) else 0) for i in range(len(hosts))]
    # --per-host may name fewer hosts than there are: the rest get no rank
    return [(h, c) for h, c in zip(hosts, counts, strict=False) if c]


def mpiexec_argv(n, cmd, per_host=None, mpiexec="mpiexec", hydra_args=()):
    """The command line that starts ``cmd`` as ``n`` ranks on the hosts (in
    blocks: ranks of one host are consecutive); run it in the head namespace
    (``head_prefix``). ``hydra_args`` go to MPICH's mpiexec only."""
    hosts = load()
    if not hosts:
        raise SystemExit("simhosts: no simulated hosts are up (simhosts.py up N)")
    place = _placement(n, hosts, per_host)
    agent = SELF  # its own ssh: an executable that takes ssh's arguments
    version = _run(mpiexec, "--version", check=False).stdout
    if "Open MPI" in version or "OpenRTE" in version or "PRRTE" in version:
        return [mpiexec, "--allow-run-as-root", "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include",
                f"{SUBNET}.0/24", "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24",
                "--host", ",".join(f"{h['ip']}:{c}" for h, c in place), "--map-by", "slot", "-n", str(n), *cmd]
    # hydra: one -hosts entry per host with its rank count, block placement.
    return [mpiexec, *hydra_args, "-launcher", "ssh", "-launcher-exec", agent, "-iface", "eth0",
            "-hosts", ",".join(f"{h['ip']}:{c}" for h, c in place), "-n", str(n), *cmd]


def head_prefix():
    """The command prefix that runs in the head namespace (mpiexec's)."""
    return ["ip", "netns", "exec", f"{PREFIX}-head"]


class Hosts:
    """Simulated hosts that are up (see ``hosts``)."""

    def __init__(self, hosts):
        self.hosts = hosts

    def run(self, which, cmd, **kw):
        """subprocess.run of ``cmd`` on one host."""
        return subprocess.run(enter(self.hosts[which]) + list(cmd), **kw)

    def mpiexec(self, cmd, n, per_host=None, timeout=600, env=None, hydra_args=(), **kw):
        """subprocess.run of ``cmd`` as ``n`` ranks over the hosts, killed
        (the whole launch) past ``timeout`` seconds; output in ``.stdout``."""
        argv = head_prefix() + mpiexec_argv(n, list(cmd), per_host, hydra_args=hydra_args)
        p = subprocess.Popen(argv, env=env, start_new_session=True, text=True,
                             stdout=kw.pop("stdout", subprocess.PIPE), stderr=kw.pop("stderr", subprocess.STDOUT),
                             **kw)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            out = (out or "") + f"\n[simhosts: killed after {timeout} s]"
            return subprocess.CompletedProcess(argv, -9, out, None)
        return subprocess.CompletedProcess(argv, p.returncode, out, None)


@contextlib.contextmanager
def hosts(n):
    """``n`` simulated hosts for the ``with`` block; down whatever happens."""
    try:
        yield Hosts(up(n))
    finally:
        down()


_COMMANDS = ("up", "down", "list", "exec", "mpiexec")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ssh"]:
        return ssh(argv[1:])
    if argv and argv[0] not in _COMMANDS and not argv[0].startswith("-h"):
        return ssh(argv)  # started by mpiexec as its ssh (-launcher-exec / plm_rsh_agent)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("up", help="make N hosts").add_argument("n", type=int)
    sub.add_parser("down", help="remove them")
    sub.add_parser("list", help="the hosts that are up")
    e = sub.add_parser("exec", help="run a command on a host")
    e.add_argument("host")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    m = sub.add_parser("mpiexec", help="run a command as N ranks over the hosts")
    m.add_argument("-n", type=int, required=True)
    m.add_argument("--per-host", help="ranks on each host, e.g. 2,1 (default: as even as possible)")
    m.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    def strip(c):
        return c[1:] if c[:1] == ["--"] else c
    if a.what == "up":
        for h in up(a.n):
            print(f"{h['name']} {h['ip']}")
    elif a.what == "down":
        down()
    elif a.what == "list":
        for h in load():
            print(f"{h['name']} {h['ip']} pid {h['pid']}")
    elif a.what == "exec":
        exec_on(a.host, strip(a.cmd))
    elif a.what == "mpiexec":
        argv = head_prefix() + mpiexec_argv(a.n, strip(a.cmd), a.per_host)
        os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
