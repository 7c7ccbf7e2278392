"""Tenant domains (issue 26): engines of different domains never complete a
handshake, even with the same job token, and learn nothing of each other.

The domain is bound into the key the handshake's proofs are made with
(HMAC-SHA-256 of "hixl-rma domain\\0" + domain under the token; the token
alone without a domain) and never travels. A tenant that knows the token but
not the domain gets the server's challenge (a nonce and a proof it cannot
check) and a REJECT, never the memory table, and writes nothing.
"""
import hashlib
import hmac
import json
import sys
import textwrap

import numpy as np
import pytest

import hixl_rma
from hixl_rma import READ, WRITE
from hixl_rma.ground import config
from hixl_rma.ground.errors import HixlError, NotConnectedError, ParamError

import test_security as sec
from support import procutil

pytestmark = pytest.mark.timeout(120)

TOKEN = sec.TOKEN
DOMAIN = "tenant-a"
PATTERN = b"TENANT-A-SECRET:"
SIZE = 1 << 16


def domain_key(token, domain):
    return hmac.new(token, b"hixl-rma domain\0" + domain, hashlib.sha256).digest()


class Tenant:
    """A serving engine of domain tenant-a with a patterned registered buffer."""

    def __init__(self):
        self.engine = hixl_rma.Engine(options={"JobToken": TOKEN, "Domain": DOMAIN})
        self.mem = np.frombuffer((PATTERN * (SIZE // len(PATTERN)))[:SIZE], np.uint8).copy()
        self.expect = self.mem.copy()
        self.handle = self.engine.register_mem(self.mem)
        host, port = self.engine.address.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def untouched(self):
        return np.array_equal(self.mem, self.expect)


@pytest.fixture(scope="module")
def tenant():
    t = Tenant()
    yield t
    t.engine.finalize()


@pytest.mark.parametrize("options", [
    {"JobToken": TOKEN, "Domain": "tenant-b"},        # the same token, another domain
    {"JobToken": TOKEN},                               # the same token, no domain
    {"JobToken": TOKEN, "Domain": DOMAIN + "\0"},      # a domain one byte longer
    {"JobToken": TOKEN, "Domain": DOMAIN[:-1]},        # a prefix of the domain
], ids=["other-domain", "no-domain", "longer", "prefix"])
def test_other_domain_with_the_same_token_is_refused(tenant, options):
    other = hixl_rma.Engine(options=options)
    try:
        src = np.zeros(SIZE, np.uint8)
        other.register_mem(src)
        with pytest.raises(HixlError, match="does not prove this job token and domain") as ei:
            other.connect(tenant.engine.address, timeout_ms=3000)
        assert ei.value.status == hixl_rma.FAILED
        assert other.stats()["endpoints"] == 0
        # Refused means no connection: no table, no Get, no Put.
        with pytest.raises(NotConnectedError, match="not connected"):
            other.transfer_sync(tenant.engine.address, READ, [(src.ctypes.data, tenant.handle.addr, SIZE)])
        with pytest.raises(NotConnectedError, match="not connected"):
            other.transfer_sync(tenant.engine.address, WRITE, [(src.ctypes.data, tenant.handle.addr, SIZE)])
        assert not src.any()
        assert tenant.untouched()
    finally:
        other.finalize()


def test_same_domain_connects_and_moves_bytes(tenant):
    peer = hixl_rma.Engine(options={"JobToken": TOKEN, "Domain": DOMAIN})
    try:
        buf = np.zeros(SIZE, np.uint8)
        peer.register_mem(buf)
        peer.connect(tenant.engine.address, timeout_ms=5000)
        peer.transfer_sync(tenant.engine.address, READ, [(buf.ctypes.data, tenant.handle.addr, SIZE)])
        assert np.array_equal(buf, tenant.expect)
    finally:
        peer.finalize()


def test_a_server_of_another_domain_is_refused_before_we_prove_anything(tenant):
    """The client checks the server's proof first: a tenant-b client connecting
    to tenant-a's engine refuses it, and tenant-a sees no proof (its accepted
    count returns to where it was, nothing authenticated)."""
    # The module's tenant keeps no peer of its own: once an earlier test's
    # peer is seen gone (its progress thread may not have run yet on a busy
    # machine), none is authenticated.
    assert sec.wait_until(lambda: tenant.engine.stats()["accepted"] == 0), tenant.engine.stats()
    other = hixl_rma.Engine(options={"JobToken": TOKEN, "Domain": "tenant-b"})
    try:
        with pytest.raises(HixlError, match="does not prove"):
            other.connect(tenant.engine.address, timeout_ms=3000)
    finally:
        other.finalize()
    assert sec.wait_until(lambda: tenant.engine.stats()["accepted"] == 0), tenant.engine.stats()


@pytest.mark.parametrize("key", ["token", "domain-as-token", "other-domain"])
def test_raw_handshake_without_the_domain_gets_a_refusal_only(tenant, key):
    """By hand: a client that proves the token alone (or another domain's key,
    or uses the domain as the token) gets REJECT and the close; the
    challenge's proof does not verify under the token alone, only under
    the domain's key (the binding is real, and the domain never travels)."""
    k = {"token": TOKEN.encode(), "domain-as-token": DOMAIN.encode(),
         "other-domain": domain_key(TOKEN.encode(), b"tenant-b")}[key]
    challenge, answer = sec.handshake(tenant, k)
    assert answer == (sec.REJECT, b"")
    server_nonce, server_id, server_proof = sec.fields(challenge)
    assert DOMAIN.encode() not in challenge
    assert server_proof != sec.proof(TOKEN.encode(), b"server", server_id, sec.NONCE, server_nonce, tenant.port)
    assert server_proof == sec.proof(domain_key(TOKEN.encode(), DOMAIN.encode()), b"server", server_id, sec.NONCE,
                                     server_nonce, tenant.port)
    assert tenant.untouched()


def test_raw_handshake_with_the_domain_key_is_let_in(tenant):
    """The control: the same handshake with the domain's key is accepted."""
    _, answer = sec.handshake(tenant, domain_key(TOKEN.encode(), DOMAIN.encode()))
    assert answer is not None and answer[0] == sec.HELLO_OK


@pytest.mark.parametrize("value, message", [("", "got 0"), ("d" * 257, "got 257")])
def test_bad_domain_option_is_refused(value, message):
    with pytest.raises(ParamError, match=f"option Domain must be 1 to 256 bytes, {message}"):
        hixl_rma.Engine(options={"JobToken": TOKEN, "Domain": value})


def test_bad_domain_setting_names_it(monkeypatch):
    assert config.domain() is None
    monkeypatch.setenv("HIXL_RMA_DOMAIN", "x" * 300)
    with pytest.raises(ParamError, match="HIXL_RMA_DOMAIN must be 1 to 256 bytes, got 300"):
        config.domain()
    with pytest.raises(ParamError, match=r"Init\(domain=...\) must be 1 to 256 bytes, got 0"):
        config.domain("")
    with pytest.raises(ParamError, match=r"Init\(domain=...\) must be a str"):
        config.domain(7)
    monkeypatch.setenv("HIXL_RMA_DOMAIN", "tenant-z")
    assert config.domain() == "tenant-z" and config.domain("mine") == "mine"


# ------------------------------------------------------------ MPI jobs

JOB = textwrap.dedent(r'''
    import json, os, sys
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import runtime
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    hixl_rma.Init(domain=sys.argv[2 + min(rank, 1)])  # rank 0 the first domain, the others the second
    mem = np.zeros(64, np.uint8)
    win = hixl_rma.Win.Create(mem, comm=comm)
    out = {"domain": runtime.runtime().domain}
    try:  # first contact (Lock_all's lock words), then the Put
        win.Lock_all()
        if rank == 0:
            win.Put(np.full(64, 9, np.uint8), 1)
            win.Flush(1)
        win.Unlock_all()
        out["rma"] = "ok"
    except hixl_rma.HixlError as exc:
        out["rma"] = f"{type(exc).__name__}: {exc}"
    comm.Barrier()
    out["mem"] = int(mem.sum())
    with open(os.path.join(sys.argv[1], f"r{rank}.json"), "w") as f:
        json.dump(out, f)
    win.Free()
''')


@pytest.mark.parametrize("domains", [("tenant-a", "tenant-a"), ("tenant-a", "tenant-b")], ids=["same", "different"])
def test_job_ranks_in_their_domains(tmp_path, domains):
    """A two-rank job whose ranks were started in the same domain moves data;
    ranks started in different domains refuse each other (the Put names the
    refusal) and nothing is written."""
    prog = tmp_path / "job.py"
    prog.write_text(JOB)
    rc, out = procutil.run(["mpiexec", "-n", "2", sys.executable, str(prog), str(tmp_path), *domains], None, 90)
    assert rc == 0, out
    check_job(tmp_path, domains)


def check_job(tmp_path, domains):
    """What JOB's two ranks wrote: data moved in one domain, refusals across two."""
    r0 = json.loads((tmp_path / "r0.json").read_text())
    r1 = json.loads((tmp_path / "r1.json").read_text())
    assert (r0["domain"], r1["domain"]) == domains
    if domains[0] == domains[1]:
        assert r0["rma"] == r1["rma"] == "ok" and r1["mem"] == 9 * 64, (r0, r1)
    else:
        for r in (r0, r1):
            assert "does not prove this job token and domain" in r["rma"], r
        assert r1["mem"] == 0, r1
