"""hixl_rma's pytest plugin (hixl_rma_pytest.py), tried as a user would: a
test file with deliberate bugs run under ``mpiexec -n 2`` and ``-n 3`` with
``--with-mpi``. Every rank reports the same verdict naming the failing rank
and its error; a rank that fails before a Fence does not leave the others
waiting; windows are freed after a failure and the next test passes (each test
has a communicator of its own, so one given up in a failed test's window
creation cannot skew the next);
``expect_unchanged`` and ``check`` catch what they should; the run ends."""
import re
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(180)

USER_TESTS = textwrap.dedent(r'''
    import time

    import numpy as np
    import pytest
    import hixl_rma

    pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60)]


    def test_a_fails_on_rank_1_only(comm):
        assert comm.rank != 1, "rank 1 disagrees"


    def test_b_fails_before_fence(comm, window):
        win = window("create", 64, 8)
        win.Fence()
        if comm.rank == 1:
            raise hixl_rma.BoundsError("Put to rank 0 of window w3: made up")
        win.Fence()  # rank 1 never comes: the plugin ends this at once


    def test_b2_fails_before_its_window(comm, window):
        if comm.rank == 1:
            raise hixl_rma.ParamError("made up, before the window")
        window("create", 64, 8)  # the others wait in its creation: ended at once, given up


    def test_c_next_one_passes(comm, ring, window):
        win = window("allocate", 64, 8)
        win.Fence()
        win.Put(np.full(8, comm.rank, np.uint8), ring.right)
        win.Fence()
        assert bytes(win.tomemory())[:8] == bytes([ring.left]) * 8


    def test_d_expect_unchanged(comm, window, expect_unchanged):
        win = window("allocate", 64, 8)
        win.Fence()
        with expect_unchanged(win):
            if comm.rank == 0:
                np.frombuffer(win.tomemory(), np.uint8)[5] = 1  # the one-byte stray write
        win.Fence()


    def test_e_deferred_checks(comm, check, window):
        win = window("create", 16, 8)
        check.equal(comm.rank % 2, 0, "even rank")  # odd ranks mismatch, and still reach the Fences
        win.Fence()
        win.Fence()


    @pytest.mark.mpi(deadline=1)
    def test_f_deadline(comm, window):
        win = window("create", 16, 8)
        if comm.rank == 0:
            win.Fence()  # the others never call it: ends at the 1 s deadline


    def test_f2_fails_while_another_rank_is_late(comm):
        # Rank 1 waits for rank 2 in the verdict exchange when rank 0's
        # failure reaches it: it must still give the verdict every rank gives.
        if comm.rank == 0:
            raise AssertionError("rank 0 fails at once")
        if comm.rank == 2:
            time.sleep(0.5)


    def test_g_windows_left_by_failures_are_gone():
        assert len(hixl_rma.runtime.runtime().windows) == 0
''')


@pytest.fixture(scope="module")
def user_tests(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")
    (d / "test_user.py").write_text(USER_TESTS)
    return d


def _per_rank(d, n):
    """{rank: {test: first line of its failure}} from each rank's JUnit XML."""
    ranks = {}
    for r in range(n):
        path = d / f"junit-{r}.xml"
        if not path.exists():
            continue
        failed = {}
        for case in ET.parse(path).getroot().iter("testcase"):
            f = case.find("failure")
            if f is not None:
                failed[case.get("name")] = (f.get("message") or f.text or "").strip().splitlines()[0]
        ranks[r] = failed
    return ranks


def _run_user_tests(d, n, *args):
    """mpiexec -n n pytest --with-mpi test_user.py, each rank writing junit-<rank>.xml."""
    for old in d.glob("junit-*.xml"):
        old.unlink()
    cmd = (f"exec {sys.executable} -m pytest -q -p no:cacheprovider --with-mpi --junitxml=junit-$PMI_RANK.xml "
           + " ".join(args) + " test_user.py")
    return procutil.run(["mpiexec", "-n", str(n), "sh", "-c", cmd], None, 150, cwd=str(d))


@pytest.mark.parametrize("n", [2, 3])
def test_user_suite_under_the_plugin(user_tests, n):
    t0 = time.monotonic()
    rc, out = _run_user_tests(user_tests, n)
    elapsed = time.monotonic() - t0
    assert rc != 0, out
    ranks = _per_rank(user_tests, n)
    assert sorted(ranks) == list(range(n)), out
    # Every rank: the same failures, the same first line.
    assert all(ranks[r] == ranks[0] for r in ranks), out
    failed = ranks[0]
    assert set(failed) == {"test_a_fails_on_rank_1_only", "test_b_fails_before_fence",
                           "test_b2_fails_before_its_window", "test_d_expect_unchanged",
                           "test_e_deferred_checks", "test_f_deadline", "test_f2_fails_while_another_rank_is_late"}, out
    assert failed["test_a_fails_on_rank_1_only"].startswith("failed on rank(s) 1: rank 1: AssertionError: rank 1 "
                                                            "disagrees"), out
    assert failed["test_b_fails_before_fence"].startswith("failed on rank(s) 1: rank 1: BoundsError: Put to rank 0 "
                                                          "of window w3"), out
    assert failed["test_d_expect_unchanged"].startswith("failed on rank(s) 0: rank 0: Failed: a refused operation "
                                                        "changed 1 byte(s)"), out
    odd = ", ".join(str(r) for r in range(1, n, 2))
    assert failed["test_e_deferred_checks"].startswith(f"failed on rank(s) {odd}: rank 1: AssertionError: 1 "
                                                       f"deferred check(s) failed: even rank"), out
    assert "HixlTimeoutError" in failed["test_f_deadline"], out
    # Nothing else failed (the test after each failure passed), and no rank waited for a timeout
    # but the deadline test's 1 s.
    assert failed["test_b2_fails_before_its_window"].startswith("failed on rank(s) 1: rank 1: ParamError: made up"), out
    assert failed["test_f2_fails_while_another_rank_is_late"].startswith("failed on rank(s) 0: rank 0: AssertionError: "
                                                                        "rank 0 fails at once"), out
    assert out.count("7 failed, 2 passed") == n, out
    # MPICH finds no request or communicator left behind at its Finalize.
    assert "pending" not in out.lower() and "leak" not in out.lower(), out
    assert elapsed < 60, out
    # The rank that was left in Fence was told why, at once.
    assert re.search(r"RankFailed: rank 1 failed test_b_fails_before_fence: BoundsError", out), out


def test_plugin_is_inert_without_mpi(user_tests):
    """Without --with-mpi, pytest-mpi skips the marked tests and the plugin
    does nothing (it imports neither hixl_rma nor MPI)."""
    rc, out = procutil.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "test_a",
                            "test_user.py"], None, 60, cwd=str(user_tests))
    assert rc == 0 and "1 skipped" in out, out
    rc, out = procutil.run([sys.executable, "-c", "import sys, hixl_rma_pytest; "
                            "assert 'mpi4py' not in sys.modules and 'hixl_rma' not in sys.modules"], None, 60)
    assert rc == 0, out


def test_plugin_opt_out(tmp_path):
    """-p no:hixl_rma: no verdict exchange (rank 0 passes the test rank 1 fails)."""
    (tmp_path / "test_plain.py").write_text(textwrap.dedent('''
        import pytest
        from mpi4py import MPI

        @pytest.mark.mpi(min_size=2)
        def test_plain():
            assert MPI.COMM_WORLD.rank != 1
    '''))
    _rc, out = procutil.run(["mpiexec", "-n", "2", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:hixl_rma", "--with-mpi", "test_plain.py"], None, 60, cwd=str(tmp_path))
    assert "1 passed" in out and "1 failed" in out, out
