"""What an engine advertises (netif.py): HIXL_RMA_IFNAME's grammar, the
default choice, loopback only for single-host jobs, the error that says
what to set, and UCX_NET_DEVICES from the choice."""
import pytest

from hixl_rma import ParamError
from hixl_rma.runtime import netif

pytestmark = pytest.mark.timeout(30)

UP, LOOP = 0x1, 0x8
FOUND = [("lo", "127.0.0.1", UP | LOOP), ("eth0", "10.0.0.5", UP), ("docker0", "172.17.0.1", UP),
         ("ib0", "192.168.7.5", UP), ("eth1", "10.1.0.5", 0), ("virbr0", "192.168.122.1", UP)]


@pytest.mark.parametrize("spec, want", [
    (None, ["eth0", "ib0"]),              # up, not loopback, not a container bridge
    ("eth", ["eth0"]),                    # a prefix; eth1 is down
    ("ib,eth", ["eth0", "ib0"]),          # interface order, not the order given
    ("^eth,docker,virbr", ["lo", "ib0"]),  # exclusion (loopback too, when not excluded)
    ("=eth0", ["eth0"]),
    ("=eth", []),                         # whole names only
    ("^=docker0", ["lo", "eth0", "ib0", "virbr0"]),
    ("lo", ["lo"]),
])
def test_ifname_selects_as_nccl_does(spec, want):
    assert [n for n, _ in netif.select(spec, FOUND)] == want


@pytest.mark.parametrize("spec", ["", "^", "=", "^=", " , "])
def test_empty_ifname_is_refused(spec):
    if not spec:  # unset: the default choice
        assert netif.select(spec, FOUND)
        return
    with pytest.raises(ParamError, match="names no interface"):
        netif.parse_ifname(spec)


def test_choice_of_listen_address_and_advertised_ones(monkeypatch):
    monkeypatch.setattr(netif, "interfaces", lambda: FOUND)
    # Every rank on this host: loopback, whatever the interfaces are.
    assert netif.choose(None, None, True) == ("127.0.0.1", ["127.0.0.1"], [])
    # Across hosts: every chosen address is advertised; the engine listens on all.
    assert netif.choose(None, None, False) == ("0.0.0.0", ["10.0.0.5", "192.168.7.5"], ["eth0", "ib0"])
    # One address: listen there only.
    assert netif.choose(None, "eth", False) == ("10.0.0.5", ["10.0.0.5"], ["eth0"])
    # HIXL_RMA_IFNAME is honoured on one host too.
    assert netif.choose(None, "ib", True) == ("192.168.7.5", ["192.168.7.5"], ["ib0"])
    # HIXL_RMA_HOST wins over everything.
    assert netif.choose("10.9.9.9", "eth", False) == ("10.9.9.9", ["10.9.9.9"], [])


def test_no_usable_interface_says_what_was_found_and_what_to_set(monkeypatch):
    monkeypatch.setattr(netif, "interfaces", lambda: FOUND[:1] + FOUND[2:3])
    with pytest.raises(ParamError) as err:
        netif.choose(None, None, False)
    msg = str(err.value)
    assert "lo 127.0.0.1" in msg and "docker0 172.17.0.1" in msg
    assert "HIXL_RMA_IFNAME" in msg and "HIXL_RMA_HOST" in msg and "spans hosts" in msg
    monkeypatch.setattr(netif, "interfaces", lambda: FOUND)
    with pytest.raises(ParamError, match=r"HIXL_RMA_IFNAME='wlan' matches no interface that is up"):
        netif.choose(None, "wlan", False)


def test_ucx_net_devices_follow_the_choice_and_keep_rdma(monkeypatch):
    monkeypatch.setattr(netif, "rdma_ports", lambda: ["mlx5_0:1", "mlx5_1:1"])
    assert netif.ucx_net_devices(["eth0", "eth0"]) == "eth0,mlx5_0:1,mlx5_1:1"
    assert netif.ucx_net_devices([]) is None  # loopback (one host) or HIXL_RMA_HOST: UCX's default


def test_this_host():
    """The real interfaces of this machine: loopback is among them, and one
    host key per network namespace."""
    names = [n for n, _, _ in netif.interfaces()]
    assert "lo" in names
    assert netif.node_key() == netif.node_key() and len(netif.node_key()) == 40
