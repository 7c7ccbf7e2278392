"""Transfer priorities (info key ``priority``): a high window's batch and
notification pass a bulk window's large batch to the same peer, and every
byte of both still arrives, each notification after its own data."""
import numpy as np
import pytest

import hixl_rma
from hixl_rma import Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

BULK = 96 << 20   # one detached batch of ~190 spans: far longer to copy than one notification's trip
HIGH = 64 << 10
ROUNDS = 3


def _win(comm, size, priority):
    win = Win.Allocate(size, disp_unit=1, info={"priority": priority}, comm=comm)
    mem = np.frombuffer(win.tomemory(), np.uint8)
    mem[:] = 0
    return win, mem


def test_high_passes_bulk_and_all_data_arrives(comm, rank):
    bulk, bmem = _win(comm, BULK, "bulk")
    high, hmem = _win(comm, HIGH, "high")
    barrier(comm)
    passed = []
    try:
        if rank == 0:
            borig = np.empty(BULK, np.uint8)
            horig = np.empty(HIGH, np.uint8)
            boffs = np.array([[0, BULK]], np.int64)
            hoffs = np.array([[0, HIGH]], np.int64)
            zero = np.zeros(1, np.int64)
            bulk.Lock_all(hixl_rma.MODE_NOCHECK)
            high.Lock_all(hixl_rma.MODE_NOCHECK)
        for k in range(ROUNDS):
            if rank == 0:
                borig[:] = k + 1
                horig[:] = 100 + k
                bulk.Put_batch((borig, boffs), 1, zero, tag=k)   # queued first: ~100 MiB, then its notification
                high.Put_batch((horig, hoffs), 1, zero, tag=k)   # queued after it
                high.Flush(1)
                bulk.Flush(1)
            elif rank == 1:
                high.Wait_notify(tag=k, source=0, timeout=30)
                # The notification follows its own data ...
                assert np.all(hmem == 100 + k), f"round {k}: high data incomplete at its notification"
                # ... and not the bulk batch queued before it (whose own
                # notification comes after all of it): observed, not timed.
                early = bulk.Test_notify(tag=k, source=0)  # takes it if it came
                passed.append(early is None)
                if early is None:
                    bulk.Wait_notify(tag=k, source=0, timeout=30)
                assert np.all(bmem == k + 1), f"round {k}: bulk data incomplete at its notification"
            barrier(comm)
        if rank == 0:
            high.Unlock_all()
            bulk.Unlock_all()
        passed = comm.bcast(passed, root=1)
        # Without priorities the high notification waits behind the bulk one
        # in every round; with them it passes in (almost) every round.
        assert any(passed), f"the high notification never passed the bulk batch: {passed}"
    finally:
        high.Free()
        bulk.Free()


@pytest.mark.parametrize("order", ["high_first", "bulk_first"])
def test_mixed_priorities_interleaved_data(comm, rank, order):
    """Many small and large batches of high, normal and bulk windows to one
    peer interleaved: every byte right, every notification after its data."""
    sizes = {"high": 1 << 20, "normal": 8 << 20, "bulk": 24 << 20}
    names = list(sizes) if order == "high_first" else list(reversed(sizes))
    wins = {p: _win(comm, sizes[p], p) for p in names}
    barrier(comm)
    try:
        if rank == 0:
            for p in names:
                wins[p][0].Lock_all(hixl_rma.MODE_NOCHECK)
            origs = {p: np.empty(sizes[p], np.uint8) for p in names}
        for k in range(4):
            if rank == 0:
                for p in names:
                    n = sizes[p]
                    origs[p][:] = (k * 7 + len(p)) % 251
                    step = n // 4
                    offs = np.array([[i * step, step] for i in range(4)], np.int64)
                    wins[p][0].Put_batch((origs[p], offs), 1, offs[:, 0].copy(), tag=k)
                for p in names:
                    wins[p][0].Flush(1)
            elif rank == 1:
                for p in names:
                    win, mem = wins[p]
                    win.Wait_notify(tag=k, source=0, timeout=30)
                    assert np.all(mem == (k * 7 + len(p)) % 251), f"{p} window, round {k}: data before notification"
            barrier(comm)
        if rank == 0:
            for p in names:
                wins[p][0].Unlock_all()
    finally:
        for p in names:
            wins[p][0].Free()
