"""hixl_rma's engine as a NIXL backend (HIXL_RMA, libplugin_HIXL_RMA.so),
driven through NIXL's own Python agent as its users drive it: two processes
moving and verifying data, the same script on NIXL's UCX backend giving the
same result, a serving connector's call sequence, both backends in one
agent, bad input and dead peers, the ABI guard, and two simulated hosts.
Skipped, saying why, where NIXL is not installed."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from support import procutil

HERE = pathlib.Path(__file__).resolve().parent
PEER = HERE / "support" / "nixl_peer.py"

try:
    from hixl_rma import nixl as hn

    _have = hn.installed()
    _why = None if _have else "NIXL is not installed (pip install --no-deps nixl-cu12==1.5.1 nixl==1.5.1)"
    if _have and not os.path.exists(pathlib.Path(hn.__file__).parent / hn.PLUGIN_FILE):
        _why = "this hixl_rma was built without libplugin_HIXL_RMA.so"
except ImportError as exc:  # pragma: no cover
    _why = f"hixl_rma.nixl: {exc}"

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(_why is not None, reason=str(_why))]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIXL_RMA_", "UCX_", "NIXL_"))}
    env["NIXL_PEER_TIMEOUT"] = "90"
    env.update(extra)
    return env


def _pair(tmp_path, backends, a_role, b_role, prefix=(None, None), env=None):
    """Runs two peer roles (the first in the background); (rc, out) of each."""
    d = tmp_path / f"rv-{backends}-{a_role}"
    d.mkdir()
    env = env or _env()
    a = subprocess.Popen((prefix[0] or []) + [sys.executable, str(PEER), a_role, backends, str(d)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        rc_b, out_b = procutil.run((prefix[1] or []) + [sys.executable, str(PEER), b_role, backends, str(d)],
                                   env=env, timeout=200)
        out_a, _ = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
            a.communicate()
    return (a.returncode, out_a), (rc_b, out_b)


def _result(out):
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert lines, out[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


def _expected_digest():
    import numpy as np

    from support import nixl_peer

    bufs = [np.zeros(n, np.uint8) for n in nixl_peer.REGIONS]
    return nixl_peer.digest(nixl_peer.expected(2, bufs))


def test_two_processes_hixl_rma_and_the_same_with_ucx(tmp_path):
    """WRITE and READ of 206 descriptors (1 B to 64 MiB, three regions) with
    notifications both ways, verified byte for byte on both sides; NIXL's
    UCX backend gives the same bytes (a differential test)."""
    results = {}
    for backends in ("HIXL_RMA", "UCX"):
        (rc_t, out_t), (rc_i, out_i) = _pair(tmp_path, backends, "target", "initiator")
        assert rc_t == 0 and "target ok" in out_t, f"{backends} target:\n{out_t[-4000:]}"
        assert rc_i == 0, f"{backends} initiator:\n{out_i[-4000:]}"
        results[backends] = _result(out_i)
    want = _expected_digest()
    assert results["HIXL_RMA"]["read_digest"] == results["UCX"]["read_digest"] == want, results
    assert results["HIXL_RMA"]["descriptors"] == 206 and results["HIXL_RMA"]["bytes"] > 64 << 20


def test_serving_connector_call_sequence(tmp_path):
    """prep_xfer_dlist / make_prepped_xfer / transfer / check_xfer_state /
    get_new_notifs / send_notif / release / remove_remote_agent /
    deregister_memory, as a connector calls them, on HIXL_RMA."""
    (rc_s, out_s), (rc_c, out_c) = _pair(tmp_path, "HIXL_RMA", "conn-target", "conn-initiator")
    assert rc_c == 0 and "client ok" in out_c, out_c[-4000:]
    assert rc_s == 0 and "server ok" in out_s, out_s[-4000:]


ONE_AGENT_BOTH = textwrap.dedent(r'''
    import time
    import numpy as np
    from hixl_rma import nixl as hn
    a, b = hn.agent("a"), hn.agent("b")          # HIXL_RMA and UCX, both asserted there
    assert {"HIXL_RMA", "UCX"} <= set(a.backends), a.backends
    src = np.arange(3 << 20, dtype=np.uint32).view(np.uint8)[: 3 << 20].copy()
    dst = np.zeros_like(src)
    for ag, arr in ((a, src), (b, dst)):
        ag.register_memory(ag.get_reg_descs([(arr.ctypes.data, arr.nbytes, 0, "")], "DRAM"))
    a.add_remote_agent(b.get_agent_metadata()); b.add_remote_agent(a.get_agent_metadata())
    third = 1 << 20
    for i, names in enumerate((["HIXL_RMA"], ["UCX"], [])):   # [] : NIXL picks
        loc = a.get_xfer_descs([(src.ctypes.data + i * third, third, 0)], "DRAM")
        rem = b.get_xfer_descs([(dst.ctypes.data + i * third, third, 0)], "DRAM")
        kw = {"backends": names} if names else {}
        h = a.initialize_xfer("WRITE", loc, rem, "b", b"part%d" % i, **kw)
        a.transfer(h)
        end = time.monotonic() + 30
        while a.check_xfer_state(h) == "PROC" and time.monotonic() < end:
            time.sleep(0.001)
        assert a.check_xfer_state(h) == "DONE", (names, a.check_xfer_state(h))
        end = time.monotonic() + 30
        while not b.check_remote_xfer_done("a", b"part%d" % i) and time.monotonic() < end:
            time.sleep(0.005)
        assert np.array_equal(dst[i * third:(i + 1) * third], src[i * third:(i + 1) * third]), names
        a.release_xfer_handle(h)
    assert np.array_equal(dst, src)
    print("both ok")
''')


def test_one_agent_with_both_backends(tmp_path):
    """The multi-backend use: one agent with HIXL_RMA and UCX; a transfer
    names HIXL_RMA, one UCX, one lets NIXL pick; all in one process."""
    script = tmp_path / "both.py"
    script.write_text(ONE_AGENT_BOTH)
    rc, out = procutil.run([sys.executable, str(script)], env=_env(), timeout=120)
    assert rc == 0 and "both ok" in out, out[-4000:]


BAD_INPUT = textwrap.dedent(r'''
    import sys, time
    import numpy as np
    from hixl_rma import nixl as hn
    a, b = hn.agent("a", ["HIXL_RMA"]), hn.agent("b", ["HIXL_RMA"])
    guard = 4096
    src = np.full(1 << 20, 7, np.uint8)
    dst = np.zeros((1 << 20) + 2 * guard, np.uint8)     # registered: the middle only
    a.register_memory(a.get_reg_descs([(src.ctypes.data, src.nbytes, 0, "")], "DRAM"))
    b.register_memory(b.get_reg_descs([(dst.ctypes.data + guard, 1 << 20, 0, "")], "DRAM"))
    a.add_remote_agent(b.get_agent_metadata()); b.add_remote_agent(a.get_agent_metadata())
    base = dst.ctypes.data + guard

    def refused(what, remote, agent="b", local=(src.ctypes.data, 4096, 0)):
        try:
            h = a.initialize_xfer("WRITE", a.get_xfer_descs([local], "DRAM"),
                                  a.get_xfer_descs([remote], "DRAM"), agent)
        except Exception as exc:
            print(what, "refused:", type(exc).__name__, exc)
            return
        st = a.transfer(h)
        end = time.monotonic() + 30
        while st == "PROC" and time.monotonic() < end:
            st = a.check_xfer_state(h); time.sleep(0.001)
        assert st == "ERR", (what, st)
        print(what, "refused: ERR")

    refused("past the end", (base + (1 << 20) - 100, 4096, 0))
    refused("before the start", (base - 64, 4096, 0))
    refused("nowhere", (0x1000, 4096, 0))
    refused("local not registered", (base, 4096, 0), local=(dst.ctypes.data, 4096, 0))
    refused("unknown agent", (base, 4096, 0), agent="nobody")
    assert not dst[:guard].any() and not dst[-guard:].any(), "written outside the registered range"
    assert not dst[guard:-guard].any(), "a refused transfer wrote"
    print("bad input ok")
''')


def test_bad_input_is_a_nixl_error_and_writes_nothing(tmp_path):
    """Descriptors outside every registered region (remote or local) and an
    unknown agent: an error from NIXL, no crash, no byte written."""
    script = tmp_path / "bad.py"
    script.write_text(BAD_INPUT)
    rc, out = procutil.run([sys.executable, str(script)], env=_env(), timeout=120)
    assert rc == 0 and "bad input ok" in out, out[-4000:]
    for what in ("past the end", "before the start", "nowhere", "local not registered", "unknown agent"):
        assert f"{what} refused" in out, out[-4000:]


KILLER = textwrap.dedent(r'''
    import json, os, signal, sys, time
    import numpy as np
    from hixl_rma import nixl as hn
    d, mode, victim_pid_file = sys.argv[1], sys.argv[2], sys.argv[3]
    a = hn.agent("killer", ["HIXL_RMA"])
    guard = 1 << 16
    mem = np.zeros((64 << 20) + 2 * guard, np.uint8)
    a.register_memory(a.get_reg_descs([(mem.ctypes.data + guard, 64 << 20, 0, "")], "DRAM"))
    tmp = f"{d}/killer.md.tmp"; open(tmp, "wb").write(a.get_agent_metadata()); os.rename(tmp, f"{d}/killer.md")
    end = time.monotonic() + 60
    while not os.path.exists(f"{d}/victim.md"):
        assert time.monotonic() < end, "no victim"
        time.sleep(0.02)
    peer = a.add_remote_agent(open(f"{d}/victim.md", "rb").read())
    peer = peer.decode() if isinstance(peer, bytes) else peer
    base, size = json.load(open(f"{d}/victim.regions"))
    pid = int(open(victim_pid_file).read())
    blk = 4 << 20
    loc = a.get_xfer_descs([(mem.ctypes.data + guard + i * blk, blk, 0) for i in range(16)], "DRAM")
    rem = a.get_xfer_descs([(base + i * blk, blk, 0) for i in range(16)], "DRAM")
    # a first transfer works
    h = a.initialize_xfer("READ", loc, rem, peer)
    a.transfer(h)
    while a.check_xfer_state(h) == "PROC":
        time.sleep(0.001)
    assert a.check_xfer_state(h) == "DONE"
    a.release_xfer_handle(h)
    if mode == "after":
        os.kill(pid, signal.SIGKILL)
        time.sleep(1)
    t0 = time.monotonic()
    states = []
    try:
        for rep in range(200):
            h = a.initialize_xfer("READ" if rep % 2 else "WRITE", loc, rem, peer, b"x")
            st = a.transfer(h)
            if mode == "during" and rep == 1:
                os.kill(pid, signal.SIGKILL)
            while st == "PROC":
                st = a.check_xfer_state(h)
                time.sleep(0.001)
            states.append(st)
            if st == "ERR":
                break
    except Exception as exc:
        states.append(f"raised {type(exc).__name__}: {exc}")
    took = time.monotonic() - t0
    assert not mem[:guard].any() and not mem[-guard:].any(), "written outside the registered range"
    print("STATES", states[-3:], "after", round(took, 1), "s", flush=True)
    assert states and states[-1] != "DONE", states
    print("killer ok", flush=True)
''')


@pytest.mark.parametrize("mode", ["after", "during"])
def test_dead_peer_is_a_nixl_error_within_the_timeout(tmp_path, mode):
    """A transfer after the peer was killed, and a peer killed while
    transfers run: an error status (or exception) from NIXL within the
    engine's timeout, no crash, nothing written outside the registered
    range."""
    d = tmp_path / "rv"
    d.mkdir()
    env = _env(HIXL_RMA_TIMEOUT_MS="5000")
    victim = subprocess.Popen([sys.executable, str(PEER), "victim", "HIXL_RMA", str(d)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pid_file = tmp_path / "victim.pid"
    pid_file.write_text(str(victim.pid))
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    try:
        t0 = time.monotonic()
        rc, out = procutil.run([sys.executable, str(script), str(d), mode, str(pid_file)], env=env, timeout=150)
        took = time.monotonic() - t0
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
        victim.communicate()
    assert rc == 0 and "killer ok" in out, out[-4000:]
    assert victim.returncode == -signal.SIGKILL
    assert took < 120, out[-2000:]


def _fake_nixl_tree(root, version):
    """The installed NIXL wheel's layout, its metadata saying `version`: the
    loader takes $ORIGIN through symbolic links, so the package and libnixl
    are copies (the rest links)."""
    pkg, _, libs = hn.installed()
    site = libs.parent
    (root / libs.name).mkdir(parents=True)
    for entry in libs.iterdir():
        if entry.name == "libnixl.so":
            shutil.copy2(entry, root / libs.name / entry.name)
        else:
            (root / libs.name / entry.name).symlink_to(entry)
    shutil.copytree(site / pkg, root / pkg)
    for name in ("nixl", "nixl_meta_utils.py", f"{pkg}.libs"):
        (root / name).symlink_to(site / name)
    info = root / f"{pkg}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {pkg.replace('_', '-')}\nVersion: {version}\n")
    return root


GUARD = textwrap.dedent(r'''
    import sys
    from hixl_rma import nixl as hn
    print("CHECK", repr(hn.check()))
    try:
        hn.agent("g", ["HIXL_RMA"])
        print("LOADED")
    except hn.NixlUnavailable as exc:
        print("REFUSED", exc)
    a = hn.agent("u", ["UCX"])   # NIXL's own backends are unaffected
    print("UCX there", "UCX" in a.backends)
''')


def test_abi_guard_accepts_the_installed_nixl_and_refuses_another_version(tmp_path):
    """The installed NIXL passes (version listed, vtable of its UCX plugin
    ours); the same libraries under a version outside the allow-list are
    refused at load, with the reason, and NIXL's UCX still works."""
    script = tmp_path / "guard.py"
    script.write_text(GUARD)
    rc, out = procutil.run([sys.executable, str(script)], env=_env(), timeout=120)
    assert rc == 0 and "CHECK ''" in out and "LOADED" in out and "UCX there True" in out, out[-4000:]
    fake = _fake_nixl_tree(tmp_path / "site", "0.7.1")
    env = _env(PYTHONPATH=str(fake), XDG_CACHE_HOME=str(tmp_path / "cache"))
    rc, out = procutil.run([sys.executable, str(script)], env=env, timeout=120)
    assert rc == 0, out[-4000:]
    assert "REFUSED" in out and "NIXL 0.7.1" in out and "not one this plugin was built for" in out, out[-4000:]
    assert "HIXL_RMA not loaded" in out and "UCX there True" in out, out[-4000:]


def _patched_vtable_size(src, dst, slots):
    """A copy of `src` whose nixlBackendEngine vtable symbol claims `slots` slots."""
    import struct

    data = bytearray(src.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    done = False
    for i in range(shnum):
        _name, typ, _, _, off, size, link, _, _, _entsize = struct.unpack_from("<IIQQQQIIQQ", data,
                                                                              shoff + i * shentsize)
        if typ not in (2, 11):  # SYMTAB, DYNSYM
            continue
        stroff = struct.unpack_from("<IIQQQQIIQQ", data, shoff + link * shentsize)[4]
        for k in range(size // 24):
            at = off + k * 24
            st_name = struct.unpack_from("<I", data, at)[0]
            end = data.index(0, stroff + st_name)
            if data[stroff + st_name:end] == b"_ZTV17nixlBackendEngine":
                struct.pack_into("<Q", data, at + 16, (slots + 2) * 8)
                done = True
    assert done
    dst.write_bytes(bytes(data))


def test_vtable_check_reads_the_installed_ucx_plugin_and_sees_a_difference(tmp_path):
    """The vtable check passes on the wheel's libplugin_UCX.so and names the
    difference on a copy whose base vtable has another number of slots, or
    on a library that is no NIXL engine."""
    import ctypes

    _, _, libs = hn.installed()
    ucx = libs / "plugins" / "libplugin_UCX.so"
    from hixl_rma.runtime import ucx as _ucx

    _ucx.load()
    lib = ctypes.CDLL(hn.plugin_path())
    buf = ctypes.create_string_buffer(2048)
    assert lib.hixl_rma_nixl_check_vtable(str(ucx).encode(), buf, len(buf)) == 0, buf.value
    other = tmp_path / "libplugin_UCX.so"
    _patched_vtable_size(ucx, other, 29)
    assert lib.hixl_rma_nixl_check_vtable(str(other).encode(), buf, len(buf)) == 1
    assert b"has 29 slots, ours 27" in buf.value, buf.value
    assert lib.hixl_rma_nixl_check_vtable(str(libs / "libnixl.so").encode(), buf, len(buf)) == 1
    assert b"no nixlBackendEngine/nixlUcxEngine vtable" in buf.value, buf.value


def test_version_line_names_the_supported_nixl():
    rc, out = procutil.run([sys.executable, "-m", "hixl_rma", "--version"], env=_env(), timeout=60)
    assert rc == 0, out
    assert "NIXL backend HIXL_RMA: supports NIXL 1.5.1, 1.4.1" in out, out


# Other NIXL releases on the allow-list, each unpacked in a folder of its own
# here (.ci/run puts 1.4.1 there); the main one is the one installed.
_OTHER_NIXL = sorted(p for p in (HERE.parent / ".nixl-versions").glob("*") if p.is_dir())


@pytest.mark.skipif(not _OTHER_NIXL, reason="no other NIXL release in .nixl-versions/ (.ci/run installs 1.4.1 there)")
@pytest.mark.parametrize("site", _OTHER_NIXL, ids=lambda p: p.name)
def test_each_supported_nixl_release(tmp_path, site):
    """Another release on the allow-list: its binaries have the layout of
    the checked one (tools/build/nixl_layout.py), the plugin loads in it,
    and two of its agents move and verify the 206 descriptors."""
    import importlib.metadata

    assert site.name in hn.SUPPORTED_NIXL_VERSIONS, site
    main_site = pathlib.Path(importlib.metadata.distribution("nixl-cu12").locate_file(""))
    rc, out = procutil.run([sys.executable, str(HERE.parent / "tools" / "build" / "nixl_layout.py"),
                            str(main_site), str(site)], env=_env(), timeout=120)
    assert rc == 0 and out.count("same ") == 6, out
    env = _env(PYTHONPATH=str(site))
    rc, out = procutil.run([sys.executable, "-m", "hixl_rma", "--version"], env=env, timeout=60)
    assert rc == 0 and f"NIXL {site.name} installed (supported)" in out, out
    (rc_t, out_t), (rc_i, out_i) = _pair(tmp_path, "HIXL_RMA", "target", "initiator", env=env)
    assert rc_t == 0 and "target ok" in out_t, out_t[-4000:]
    assert rc_i == 0, out_i[-4000:]
    result = _result(out_i)
    assert result["nixl"] == site.name and result["read_digest"] == _expected_digest(), result


simhosts = procutil.simhosts()


@pytest.mark.skipif(simhosts.usable() is not None, reason=f"simulated hosts: {simhosts.usable()}")
def test_two_processes_across_simulated_hosts(tmp_path):
    """The two-process test with the target and the initiator on two
    simulated hosts: the engines listen on their hosts' network (a job
    token given), nothing set but the token."""
    with simhosts.hosts(2) as hosts:
        pre = [simhosts.enter(h) for h in hosts.hosts]
        env = _env(HIXL_RMA_NIXL_TOKEN="nixl-test-token-0123456789")
        (rc_t, out_t), (rc_i, out_i) = _pair(tmp_path, "HIXL_RMA", "target", "initiator", prefix=pre, env=env)
    assert rc_t == 0 and "target ok" in out_t, out_t[-4000:]
    assert rc_i == 0, out_i[-4000:]
    assert _result(out_i)["read_digest"] == _expected_digest()


@pytest.mark.parametrize("backend", ["HIXL_RMA", "UCX"])
def test_readme_example_two_processes(tmp_path, backend):
    """examples/nixl_two_process.py, as the README runs it, with a rendezvous
    folder that does not exist yet (the example makes it)."""
    example = HERE.parent / "examples" / "nixl_two_process.py"
    tmp_path = tmp_path / "rendezvous"
    target = subprocess.Popen([sys.executable, str(example), "target", str(tmp_path), backend], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        rc, out = procutil.run([sys.executable, str(example), "initiator", str(tmp_path), backend], env=_env(),
                               timeout=120)
        out_t, _ = target.communicate(timeout=60)
    finally:
        if target.poll() is None:
            os.killpg(target.pid, signal.SIGKILL)
            target.communicate()
    assert rc == 0 and f"written and read back over {backend}" in out, out[-3000:]
    assert target.returncode == 0 and f"received over {backend} and checked" in out_t, out_t[-3000:]


def test_bench_nixl_quick(tmp_path):
    """``python -m hixl_rma.bench nixl --quick``: both backends measured in
    one run, every figure's data checked (a smoke test, not a measurement)."""
    out = tmp_path / "nixl.json"
    rc, text = procutil.run([sys.executable, "-m", "hixl_rma.bench", "nixl", "--quick", "--sizes", "4K,64K",
                             "--batch", "4", "--iters", "3", "--json", str(out)], env=_env(), timeout=240)
    assert rc == 0, text[-4000:]
    res = json.loads(out.read_text())
    assert res["ok"] and len(res["figures"]) == 8, res
    for f in res["figures"]:
        assert f["HIXL_RMA"]["gbps"] > 0 and f["UCX"]["gbps"] > 0 and f["op"] in ("WRITE", "READ"), f



def test_bench_nixl_scatter_quick(tmp_path):
    """``--scatter``: N scattered 4 KiB blocks with a notification on both
    backends, each repetition's blocks read back and compared, the floor
    and the cost per descriptor reported (a smoke test, not a measurement)."""
    out = tmp_path / "scatter.json"
    rc, text = procutil.run([sys.executable, "-m", "hixl_rma.bench", "nixl", "--scatter", "64,512", "--reps", "2",
                             "--json", str(out)], env=_env(), timeout=240)
    assert rc == 0 and "HIXL_RMA / floor" in text, text[-4000:]
    res = json.loads(out.read_text())
    assert res["ok"] and res["scatter"] and [f["descs"] for f in res["figures"]] == [64, 512], res
    for f in res["figures"]:
        assert f["floor_ms"] > 0 and f["HIXL_RMA"]["ms"] >= f["HIXL_RMA"]["prep_ms"] > 0, f
        assert f["UCX"]["us_per_desc"] > 0 and len(f["HIXL_RMA"]["samples"]) == 2, f


LATE_AND_BUSY = textwrap.dedent(r'''
    import time
    import numpy as np
    from hixl_rma import nixl as hn
    a, b = hn.agent("a", ["HIXL_RMA"]), hn.agent("b", ["HIXL_RMA"])
    src = np.full(1 << 20, 9, np.uint8)
    r1, r2 = np.zeros(1 << 20, np.uint8), np.zeros(1 << 20, np.uint8)
    a.register_memory(a.get_reg_descs([(src.ctypes.data, src.nbytes, 0, "")], "DRAM"))
    b.register_memory(b.get_reg_descs([(r1.ctypes.data, r1.nbytes, 0, "")], "DRAM"))
    a.add_remote_agent(b.get_agent_metadata()); b.add_remote_agent(a.get_agent_metadata())

    def wait(h):
        end = time.monotonic() + 60
        while a.check_xfer_state(h) == "PROC" and time.monotonic() < end:
            time.sleep(0.001)
        return a.check_xfer_state(h)

    def write(dst):
        h = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, src.nbytes, 0)], "DRAM"),
                              a.get_xfer_descs([(dst.ctypes.data, dst.nbytes, 0)], "DRAM"), "b")
        a.transfer(h)
        st = wait(h)
        a.release_xfer_handle(h)
        return st

    assert write(r1) == "DONE" and (r1 == 9).all()
    # registered after the peers connected: its metadata sent again
    b.register_memory(b.get_reg_descs([(r2.ctypes.data, r2.nbytes, 0, "")], "DRAM"))
    a.add_remote_agent(b.get_agent_metadata())
    assert write(r2) == "DONE" and (r2 == 9).all()
    print("late region ok", flush=True)
    # deregistered while a transfer uses it (UCX over tcp here: it stays in flight)
    big, far = np.full(256 << 20, 5, np.uint8), np.zeros(256 << 20, np.uint8)
    reg = a.register_memory(a.get_reg_descs([(big.ctypes.data, big.nbytes, 0, "")], "DRAM"))
    b.register_memory(b.get_reg_descs([(far.ctypes.data, far.nbytes, 0, "")], "DRAM"))
    a.add_remote_agent(b.get_agent_metadata())
    blk = 4 << 20
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(big.ctypes.data + i * blk, blk, 0) for i in range(64)], "DRAM"),
                          a.get_xfer_descs([(far.ctypes.data + i * blk, blk, 0) for i in range(64)], "DRAM"), "b")
    a.transfer(h)
    first = a.check_xfer_state(h)
    try:
        a.deregister_memory(reg)
    except Exception as exc:
        print("deregister raised", type(exc).__name__)
    assert wait(h) == "DONE", "the transfer under a deregistration failed"
    assert (far == 5).all(), "the transfer under a deregistration lost data"
    try:
        st = a.transfer(h)          # the region is gone now: an error, not a transfer
        st = wait(h) if st == "PROC" else st
    except Exception as exc:
        st = f"raised {type(exc).__name__}"
    assert st != "DONE", st
    print("busy deregistration ok", first, st, flush=True)
''')


def test_late_region_and_deregistration_under_a_transfer(tmp_path):
    """A region registered after the peers connected is reachable once its
    metadata is sent again; deregistering memory a transfer in flight uses
    is refused (the region is withdrawn when that transfer ends, which
    completes with its data); a handle on it then fails."""
    script = tmp_path / "late.py"
    script.write_text(LATE_AND_BUSY)
    rc, out = procutil.run([sys.executable, str(script)], env=_env(UCX_TLS="tcp", HIXL_RMA_CMA="0",
                                                                   HIXL_RMA_DIRECT="0"), timeout=180)
    assert rc == 0 and "late region ok" in out and "busy deregistration ok" in out, out[-4000:]
    if "busy deregistration ok PROC" in out:  # it was in flight when deregistered
        assert "in flight; it is withdrawn when they end" in out, out[-4000:]


def test_python_and_plugin_allow_lists_agree():
    """hixl_rma.nixl.SUPPORTED_NIXL_VERSIONS is the plugin's own list."""
    import re

    src = (HERE.parent / "src" / "nixl_plugin" / "nixl_abi.h").read_text()
    table = re.search(r"kCheckedNixlLayouts\[\] = \{(.*?)\n\};", src, re.S).group(1)
    assert tuple(re.findall(r'\{"([^"]+)"', table)) == hn.SUPPORTED_NIXL_VERSIONS
