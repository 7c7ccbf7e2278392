"""Which addresses this rank's engine advertises, chosen as the field does
it (NCCL's ``NCCL_SOCKET_IFNAME``, UCX's ``UCX_NET_DEVICES``, MPICH's
``-iface``).

- ``HIXL_RMA_HOST``: the one address to listen on and advertise.
- ``HIXL_RMA_IFNAME``: interfaces by name or prefix, comma-separated
  (``eth,ib``); ``^`` first excludes them instead (``^docker,virbr``); ``=``
  first matches whole names only (``=eth0``).
- Otherwise: loopback when every rank of the job is on this host (so a
  single-node job stays off the LAN); else every address of the interfaces
  that are up, but loopback and container bridges (docker, virbr), in
  interface order. A peer connects to the first one that reaches it.

UCX's own network lanes use the same interfaces: ``UCX_NET_DEVICES`` is set
from the choice (with every RDMA port, so RDMA stays on) unless the user
set it.
"""
import fcntl
import hashlib
import os
import socket
import struct

from hixl_rma.ground.errors import ParamError

LOOPBACK = "127.0.0.1"
_DEFAULT_EXCLUDE = ("lo", "docker", "virbr")
_SIOCGIFFLAGS, _SIOCGIFADDR = 0x8913, 0x8915
_IFF_UP, _IFF_LOOPBACK = 0x1, 0x8


def node_key():
    """The same string for every process of one host's network, a different
    one elsewhere: host name, boot id and network namespace (simulated and
    containerised hosts share a kernel, not a network)."""
    parts = [socket.gethostname()]
    for path, read in (("/proc/sys/kernel/random/boot_id", lambda p: open(p).read().strip()),
                       ("/proc/self/ns/net", lambda p: str(os.stat(p).st_ino))):
        try:
            parts.append(read(path))
        except OSError:
            parts.append("")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()


def interfaces():
    """[(name, IPv4 address, flags)] of the interfaces that have one."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                flags = struct.unpack_from("H", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, req), 16)[0]
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)[20:24])
            except OSError:
                continue  # no IPv4 address
            out.append((name, addr, flags))
    return out


def parse_ifname(spec):
    """HIXL_RMA_IFNAME -> (exclude, exact, [names]); ParamError if empty."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ParamError(f"HIXL_RMA_IFNAME={spec!r} names no interface (give names or prefixes, "
                         f"comma-separated; '^' first to exclude them, '=' for whole names)")
    return exclude, exact, names


def _matches(name, names, exact):
    return any(name == n if exact else name.startswith(n) for n in names)


def select(ifname, found):
    """The (name, address) pairs that ``ifname`` (or the default) picks from
    ``found`` (as ``interfaces()`` gives), up ones only."""
    up = [(n, a, f) for n, a, f in found if f & _IFF_UP]
    if ifname:
        exclude, exact, names = parse_ifname(ifname)
        return [(n, a) for n, a, f in up if _matches(n, names, exact) != exclude]
    return [(n, a) for n, a, f in up if not f & _IFF_LOOPBACK and not _matches(n, _DEFAULT_EXCLUDE, False)]


def choose(host, ifname, single_node):
    """(listen host, [advertised addresses], [interface names]) of this
    rank's engine; ParamError, naming what was found and what to set, when
    no interface qualifies."""
    if host:
        return host, [host], []
    if single_node and not ifname:
        return LOOPBACK, [LOOPBACK], []
    found = interfaces()
    picked = select(ifname, found)
    if not picked:
        seen = ", ".join(f"{n} {a}" for n, a, _ in found) or "none"
        what = f"HIXL_RMA_IFNAME={ifname!r} matches no interface that is up" if ifname else \
            "this host has no interface but loopback and container bridges, and the job spans hosts"
        raise ParamError(f"Init on {socket.gethostname()}: {what} (interfaces with an IPv4 address: {seen}); "
                         f"set HIXL_RMA_IFNAME to the interface that joins the hosts, or HIXL_RMA_HOST "
                         f"to this host's address")
    addrs = list(dict.fromkeys(a for _, a in picked))
    # One address: listen there only. Several: listen on all and advertise these.
    return (addrs[0] if len(addrs) == 1 else "0.0.0.0"), addrs, [n for n, _ in picked]


def rdma_ports():
    """UCX's names of this host's RDMA ports (``mlx5_0:1``)."""
    base = "/sys/class/infiniband"
    out = []
    try:
        for dev in sorted(os.listdir(base)):
            for port in sorted(os.listdir(os.path.join(base, dev, "ports")), key=lambda p: int(p)):
                out.append(f"{dev}:{port}")
    except (OSError, ValueError):
        pass
    return out


def ucx_net_devices(names):
    """UCX_NET_DEVICES for the chosen interfaces (and every RDMA port), or
    None to leave UCX's default (loopback chosen: a single-node job)."""
    if not names:
        return None
    return ",".join(list(dict.fromkeys(names)) + rdma_ports())

