"""Every HIXL_RMA_* setting is read in one place (hixl_rma/ground/config.py), given
to the engine as options, and documented in the docs with its default."""
import os
import re

import pytest

import hixl_rma
from hixl_rma.ground import config

pytestmark = pytest.mark.timeout(60)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_ONLY = {"HIXL_RMA_UCX_PERFTEST", "HIXL_RMA_LEAK_CYCLES", "HIXL_RMA_LEAK_RSS_MB"}


def _sources(*dirs, exts=(".py", ".pyx", ".pxi", ".cc", ".h")):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(exts) and not f.endswith("_engine.cpp"):
                    yield os.path.join(base, f)


def test_every_setting_is_read_in_config_only():
    readers = {}
    for path in _sources("hixl_rma", "src"):
        text = open(path, errors="replace").read()
        for name in re.findall(r'(?:getenv|environ\.get|environ\[)\(?\s*"(HIXL_RMA_\w+)"', text):
            readers.setdefault(name, set()).add(os.path.relpath(path, ROOT))
    allowed = {"hixl_rma/ground/config.py"}
    stray = {n: sorted(p - allowed) for n, p in readers.items() if p - allowed and n not in TEST_ONLY}
    assert stray == {}, f"read outside config.py: {stray}"
    engine = sorted(p for ps in readers.values() for p in ps if p.startswith("src/"))
    assert engine == [], f"the engine reads a setting itself: {engine}"


def test_the_docs_list_every_setting_with_its_default():
    """docs/guide/settings.md is made from config.SETTINGS by the hixl-settings
    directive (docs/_ext/hixl_settings.py) when the docs are built."""
    page = open(os.path.join(ROOT, "docs", "guide", "settings.md")).read()
    assert "```{hixl-settings}" in page
    pytest.importorskip("docutils", reason="the docs' extra ([docs]) is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location("hixl_settings", os.path.join(ROOT, "docs", "_ext",
                                                                                "hixl_settings.py"))
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    rows = {}
    for row in ext.settings_table(config.SETTINGS).findall(lambda n: n.tagname == "row"):
        cells = [entry.astext() for entry in row.children]
        rows[cells[0]] = cells
    for name, (default, read, what) in config.SETTINGS.items():
        assert rows[name] == [name, default or "unset", read, what], (name, rows.get(name))


def test_engine_takes_the_settings_as_options_and_names_a_bad_one(monkeypatch):
    monkeypatch.setenv("HIXL_RMA_CMA", "sometimes")
    with pytest.raises(hixl_rma.ParamError, match="option Cma must be 1, 0 or short, got 'sometimes'"):
        hixl_rma.Engine()
    monkeypatch.setenv("HIXL_RMA_CMA", "0")
    monkeypatch.setenv("HIXL_RMA_DIRECT", "2")
    with pytest.raises(hixl_rma.ParamError, match="option Direct must be 0 or 1, got '2'"):
        hixl_rma.Engine()
    monkeypatch.setenv("HIXL_RMA_DIRECT", "0")
    for bad in ("two", "0", "-1"):
        monkeypatch.setenv("HIXL_RMA_CMA_THREADS", bad)
        with pytest.raises(hixl_rma.ParamError, match=f"option CmaThreads must be a number of threads "
                                                      rf"\(1 or more\), got '{bad}'"):
            hixl_rma.Engine()
    monkeypatch.delenv("HIXL_RMA_CMA_THREADS")
    for bad in ("many", "-1", str(1 << 31)):
        monkeypatch.setenv("HIXL_RMA_BULK_INFLIGHT", bad)
        with pytest.raises(hixl_rma.ParamError, match=rf"option BulkInFlight must be a number of bytes from 0 to "
                                                      rf"1073741824, got '{bad}'"):
            hixl_rma.Engine()
    monkeypatch.delenv("HIXL_RMA_BULK_INFLIGHT")
    assert config.engine_options() == {"PollUs": "50", "Cma": "0", "Direct": "0", "CmaThreads": "",
                                       "BulkInFlight": "1048576", "Telemetry": "0"}
    with hixl_rma.Engine() as eng:  # valid settings: a working engine
        assert eng.address.startswith("127.0.0.1:")
    with pytest.raises(hixl_rma.ParamError, match="HIXL_RMA_TIMEOUT_MS must be positive"):
        monkeypatch.setenv("HIXL_RMA_TIMEOUT_MS", "-5")
        config.timeout_ms()


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_bad_notify_batch_setting_is_named(monkeypatch, value):
    monkeypatch.setenv("HIXL_RMA_NOTIFY_BATCH", value)
    with pytest.raises(hixl_rma.ParamError, match=f"HIXL_RMA_NOTIFY_BATCH must be a positive integer, got '{value}'"):
        config.notify_batch()
    monkeypatch.setenv("HIXL_RMA_NOTIFY_BATCH", "16")
    assert config.notify_batch() == 16


@pytest.mark.parametrize("value", ["yes", "targets"])
def test_bad_target_atomics_setting_is_named(monkeypatch, value):
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", value)
    with pytest.raises(hixl_rma.ParamError, match=f"HIXL_RMA_TARGET_OPS must be auto, target or origin, "
                                                  f"got '{value}'"):
        config.target_ops()
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", " Target")
    assert config.target_ops() == "target"
