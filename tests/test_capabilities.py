"""What an engine can do, asked one way (ext::BuildCapabilities,
ext::GetCapabilities; ``_engine.has``, ``CAPABILITIES``,
``Engine.capabilities()``), and the engine's extension calls declared once
(src/include/hixl/hixl_ext_calls.h): the binding's declarations made from
that list, every entry defined by the built-in engine, and the vendor
build's stand-ins answering UNSUPPORTED."""
import os
import pathlib
import re
import runpy
import shutil
import subprocess

import numpy as np
import pytest

import hixl_rma
from hixl_rma import WRITE, _engine
from hixl_rma.ground.errors import ParamError

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parent.parent
CALLS = ROOT / "src" / "include" / "hixl" / "hixl_ext_calls.h"
needs_sources = pytest.mark.skipif(not CALLS.is_file(), reason="the engine's sources are not beside the tests")


def test_the_built_in_engine_has_every_capability():
    assert _engine.CAPABILITIES == frozenset(_engine.CAPABILITY_BITS)
    assert all(_engine.has(name) for name in _engine.CAPABILITY_BITS)
    bits = list(_engine.CAPABILITY_BITS.values())
    assert len(set(bits)) == len(bits) and all(b and b & (b - 1) == 0 for b in bits)  # one bit each


def test_a_misspelt_capability_is_an_error_not_a_no():
    with pytest.raises(KeyError, match="atomix"):
        _engine.has("atomix")


@pytest.mark.parametrize("options, missing", [
    ({}, set()),
    ({"Cma": "0"}, {"path_cma"}),
    ({"Direct": "0"}, {"path_mapped", "detach"}),
    ({"Cma": "0", "Direct": "0"}, {"path_cma", "path_mapped", "detach"}),
])
def test_an_engine_offers_what_its_options_leave_on(monkeypatch, options, missing):
    for var in ("HIXL_RMA_CMA", "HIXL_RMA_DIRECT", "UCX_TLS"):
        monkeypatch.delenv(var, raising=False)
    e = hixl_rma.Engine(options=options)
    try:
        assert _engine.CAPABILITIES - e.capabilities() == missing
    finally:
        e.finalize()
    with pytest.raises(ParamError):
        e.capabilities()


def _stats_after_one_batch(monkeypatch, options):
    """One post of two blocks from a to b, one into b's registered memory and
    one into b's engine memory: (a's stats delta, bytes at b)."""
    for var in ("HIXL_RMA_CMA", "HIXL_RMA_DIRECT", "UCX_TLS"):
        monkeypatch.delenv(var, raising=False)
    a, b = hixl_rma.Engine(options=options), hixl_rma.Engine(options=options)
    try:
        a.connect(b.address)
        reg = np.zeros(4096, np.uint8)
        b.register_mem(reg)
        alloc = b.alloc_mem(4096)
        src = np.arange(64, dtype=np.uint8) + 1
        a.register_mem(src)
        before = a.stats()
        base = src.__array_interface__["data"][0]
        a.transfer_sync(b.address, WRITE, [(base, reg.__array_interface__["data"][0] + 8, 32),
                                           (base + 32, alloc.addr + 16, 32)])
        after = a.stats()
        got = (bytes(reg[8:40]), bytes(np.frombuffer(alloc, np.uint8)[16:48]))
        assert got == (bytes(src[:32]), bytes(src[32:])), "a path moved the wrong bytes"
        assert reg[:8].sum() == 0 and reg[40:].sum() == 0, "a byte outside the blocks changed"
        return {k: after[k] - before[k] for k in ("direct_ops", "vectored_ops", "transfer_ops")}
    finally:
        a.finalize()
        b.finalize()


def test_each_block_of_one_batch_takes_the_path_its_capabilities_allow(monkeypatch):
    both = _stats_after_one_batch(monkeypatch, {})
    assert both == {"direct_ops": 1, "vectored_ops": 1, "transfer_ops": 2}
    no_cma = _stats_after_one_batch(monkeypatch, {"Cma": "0"})
    assert no_cma == {"direct_ops": 1, "vectored_ops": 0, "transfer_ops": 2}  # the registered block by UCX
    neither = _stats_after_one_batch(monkeypatch, {"Cma": "0", "Direct": "0"})
    assert neither == {"direct_ops": 0, "vectored_ops": 0, "transfer_ops": 2}  # both by UCX


@needs_sources
def test_the_bindings_declarations_are_what_the_list_makes():
    gen = runpy.run_path(str(ROOT / "tools" / "build" / "ext_decls.py"))
    entries = gen["entries"](CALLS.read_text())
    names = [name for _, name, _ in entries]
    assert len(names) == len(set(names)) and {"PostTo", "GetCapabilities", "BuildCapabilities"} <= set(names)
    pxi = gen["render"](CALLS.read_text())
    for _, name, params in entries:
        arities = {len(m.group(1).split(",")) if m.group(1) else 0
                   for m in re.finditer(rf"^    \S.* {name}\((.*)\)", pxi, re.M)}
        required = sum(1 for p in params if "=" not in p)
        assert arities == set(range(required, len(params) + 1)), (name, arities)
    # Every entry is something the built-in engine defines (its facade, hixl.cc).
    facade = (ROOT / "src" / "engine" / "facade" / "hixl.cc").read_text().split("namespace ext {", 1)[1]
    for ret, name, _ in entries:
        assert re.search(rf"^{re.escape(ret)} {name}\(", facade, re.M), f"hixl.cc defines no ext::{name}"


@needs_sources
def test_a_list_entry_on_two_lines_is_refused():
    gen = runpy.run_path(str(ROOT / "tools" / "build" / "ext_decls.py"))
    with pytest.raises(ValueError, match="one entry on one line"):
        gen["entries"]("HIXL_EXT_CALL(Status, Flush, (Hixl &engine,\n    int32_t timeout), UNSUPPORTED)\n")


@needs_sources
def test_the_vendor_builds_stand_ins_answer_unsupported(tmp_path):
    """The binding's compat header under HIXL_VENDOR, against hixl.h alone:
    every call of the list exists and answers UNSUPPORTED, and the build's
    capabilities are none."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler on PATH")
    vendor = tmp_path / "vendor" / "hixl"
    vendor.mkdir(parents=True)
    for h in ("hixl.h", "hixl_types.h"):  # what a CANN prefix exposes
        shutil.copy(ROOT / "src" / "include" / "hixl" / h, vendor / h)
    src = tmp_path / "vendor_check.cc"
    src.write_text("""
#include <cstdio>
#include "_engine_compat.h"
int main() {
  using namespace hixl;
  // Never used: a stand-in takes it and answers (no engine is linked to make one).
  alignas(Hixl) static unsigned char storage[sizeof(Hixl)];
  Hixl *h = reinterpret_cast<Hixl *>(storage);
  void *p = nullptr;
  MemHandle mh{};
  ext::Capabilities caps{};
  ext::PeerRef *ref = nullptr;
  bool in_flight = true;
  int bad = 0;
  bad += ext::BuildCapabilities() != 0;
  bad += ext::AllocMem(*h, 8, MEM_HOST, mh, p) != UNSUPPORTED;
  bad += ext::GetCapabilities(*h, caps) != UNSUPPORTED;
  bad += ext::AcquirePeer(*h, AscendString("x"), ref) != UNSUPPORTED;
  bad += ext::PostTo(*h, ref, WRITE, nullptr, 0, MEM_HOST, false, in_flight) != UNSUPPORTED;
  bad += ext::MappingGeneration(*h) != 0;
  std::printf("%s\\n", ext::LastError().c_str());
  return bad;
}
""")
    exe = tmp_path / "vendor_check"
    r = subprocess.run([cxx, "-std=c++17", "-Wall", "-Werror", "-DHIXL_VENDOR=1", f"-I{ROOT / 'hixl_rma'}",
                        f"-I{tmp_path / 'vendor'}", f"-I{ROOT / 'src' / 'include'}", str(src), "-o", str(exe)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and "vendor HIXL" in run.stdout, (run.returncode, run.stdout, run.stderr)
