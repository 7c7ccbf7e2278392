"""Fixtures of the multi-rank tests (run under mpiexec with pytest-mpi).

Run: ``mpiexec -n 2 python -m pytest --with-mpi -q tests/mpi`` (any size >= 2);
``-m core`` selects the subset that is also run with ``UCX_TLS=tcp``.

Every test is collective: all ranks run it in step. hixl_rma's pytest
plugin (hixl_rma_pytest.py) keeps them so: it gives every rank the same
verdict, ends the other ranks' blocking calls when one fails, frees what a
failed test left, and provides ``comm``, ``ring``, ``window``,
``expect_unchanged`` and ``check``; the fixtures here add what these tests
name often.
"""
import pytest
from mpi4py import MPI

import hixl_rma


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "core: the essential multi-rank subset (put/get in each sync mode, locks, "
                   "PSCW, errors), also run over UCX_TLS=tcp")


@pytest.fixture(autouse=True, scope="module")
def _hixl_init():
    hixl_rma.Init()
    yield


@pytest.fixture
def rank(comm):
    return comm.Get_rank()


@pytest.fixture
def size(comm):
    return comm.Get_size()


@pytest.fixture
def right(ring):
    """The ring neighbour this rank writes to."""
    return ring.right


@pytest.fixture
def left(ring):
    """The ring neighbour that writes to this rank."""
    return ring.left


@pytest.fixture
def node(comm):
    """The ranks of this host (``COMM_TYPE_SHARED``): what ``Allocate_shared``
    takes, as MPI requires; all of ``comm`` when the job is on one host."""
    c = comm.Split_type(MPI.COMM_TYPE_SHARED)
    yield c
    c.Free()
