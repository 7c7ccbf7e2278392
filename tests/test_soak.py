"""The soak test (tools/measure/soak.py) for a few fixed rounds: each fault
kind (a peer killed on this host and on another simulated host, stopped past
the timeout, the link cut with and without healing) and each workload
(Put/Flush, the same on a bulk window, exclusive-lock counter, Fence
epochs, NIXL) at least once, with no hang, no crash and no wrong result.
Rounds that cannot run here (no root
for the simulated hosts, no NIXL, no hydra) are skipped by the runner,
saying why; the long run is by hand (docs/guide/failures.md, "Soak test")."""
import json
import os
import sys

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(170)

soak = procutil.script("tools/measure/soak.py")

# Fixed round seeds (replay one: python tools/measure/soak.py --only-seed S);
# one stop round only: it lasts the timeout + 1 s longer than the others.
# 100058: a peer killed during the bulk window's stream, on this host (no
# bulk lane). 100010, 100009: the same streams both ways across hosts (so
# both ranks open their bulk lanes at once) cut and healed, and a peer
# killed: before the lanes had a worker of their own, one run in five
# crashed in UCX's tcp transport (docs/guide/failures.md, "Fixed problems").
# 100061, 100062: a peer killed on another host during the lock counter,
# whose survivor's next collective crashed inside MPICH (1 run in 3) before
# the runtime checked its members first.
SEEDS = (100051, 100008, 100025, 100022, 100058, 100000, 100012, 100079, 100061, 100062, 100010, 100009)


def test_the_fixed_seeds_cover_every_fault_and_workload():
    plans = [soak.plan(s) for s in SEEDS]
    assert {p["label"] for p in plans} == {"kill", "kill-xhost", "stop", "cut", "cut+heal"}
    assert {p["workload"] for p in plans} == set(soak.WORKLOADS)
    assert soak.plan(SEEDS[0]) == soak.plan(SEEDS[0])  # a seed replays the same round


def test_soak_rounds_end_in_time_with_a_clear_error_or_right_data(tmp_path):
    out_json = tmp_path / "soak.json"
    env = procutil.clean_env()
    env["HIXL_SIMHOSTS_PREFIX"] = "hixl-soak-ci"  # apart from a soak run by hand beside it
    cmd = [sys.executable, str(procutil.ROOT / "tools" / "measure" / "soak.py"),
           "--only-seed", ",".join(map(str, SEEDS)), "--timeout-ms", "3000", "--json", str(out_json)]
    rc, out = procutil.run(cmd, env=env, timeout=160)
    assert out_json.exists(), out[-4000:]
    result = json.loads(out_json.read_text())
    assert result["violations"] == [], out[-6000:]
    assert rc == 0, out[-4000:]
    rounds = result["rounds"]
    assert len(rounds) == len(SEEDS), out[-4000:]
    ran = [r for r in rounds if "skipped" not in r]
    for r in rounds:
        assert "skipped" in r or r["outcomes"], r
    if os.geteuid() == 0:  # the link faults ran too
        assert {r["label"] for r in ran} >= {"kill-xhost", "cut", "cut+heal"}, out[-4000:]
    # every survivor's time to its end is measured from the fault, within the bound
    for r in ran:
        for w, took in r["time_to_end"].items():
            assert took <= 3.0 + 1.0, (r["seed"], w, took)
