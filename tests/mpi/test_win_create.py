"""Window creation and metadata: Create, Allocate, Allocate_shared with
Shared_query, Create_dynamic with Attach/Detach, tomemory, attributes,
group, info, names, Free and the context manager.
"""
import ctypes
import os

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import BoundsError, Communicator, ParamError, Win

from support.mpiutil import barrier, one_node, pattern

# "thread": a rank stuck in a collective is stopped (and mpiexec ends the job)
# rather than left out of step with the others.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]


# --------------------------------------------------------------------- Create

@pytest.mark.core
def test_create_attrs_and_group(comm, rank, size):
    buf = np.zeros(10, np.int32)
    win = Win.Create(buf, disp_unit=4, comm=comm)
    try:
        assert win.attrs == (buf.ctypes.data, buf.nbytes, 4)
        assert win.Get_attr(MPI.WIN_BASE) == buf.ctypes.data
        assert win.Get_attr(MPI.WIN_SIZE) == 40
        assert win.Get_attr(MPI.WIN_DISP_UNIT) == 4
        assert win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_CREATE == win.flavor
        assert win.Get_attr(MPI.WIN_MODEL) == MPI.WIN_UNIFIED == win.model
        group = win.Get_group()
        world = comm.Get_group()
        assert MPI.Group.Compare(group, world) == MPI.IDENT
        assert MPI.Group.Compare(win.group, world) == MPI.IDENT
        assert (group.Get_size(), group.Get_rank()) == (size, rank)
        assert (win.group_size, win.group_rank) == (size, rank)
        group.Free()
        world.Free()
    finally:
        win.Free()


@pytest.mark.core
def test_create_disp_unit_and_tomemory(comm, rank, left, right):
    buf = np.zeros(8, np.float64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    mem = win.tomemory()
    assert len(memoryview(mem).cast("B")) == buf.nbytes
    np.frombuffer(mem, np.float64)[7] = 100.0 + rank    # tomemory aliases the buffer
    win.Fence()
    win.Put(pattern(2, rank, np.float64), right, 3)     # elements 3 and 4
    win.Fence()
    peek = np.zeros(1)
    win.Get(peek, right, 7)
    win.Fence()
    win.Free()
    want = np.zeros(8)
    want[3:5] = pattern(2, left, np.float64)
    want[7] = 100.0 + rank
    np.testing.assert_array_equal(buf, want)
    assert peek[0] == 100.0 + right


def test_create_default_comm_is_self(rank):
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf)                 # mpi4py's defaults: disp_unit 1, COMM_SELF
    assert (win.group_size, win.group_rank) == (1, 0)
    assert win.attrs[2] == 1
    win.Fence()
    win.Put(np.array([rank + 5], np.int64), 0, 8)   # disp_unit 1: byte offset 8
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(buf, [0, rank + 5, 0, 0])


def test_create_on_communicator_object_and_split(comm, rank, size):
    """A hixl_rma.Communicator and a Split sub-communicator with reversed ranks."""
    sub = comm.Split(0, size - rank)                   # sub rank = size - 1 - rank
    hcomm = Communicator(sub)
    assert (hcomm.Get_rank(), hcomm.Get_size()) == (size - 1 - rank, size)
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=hcomm)
    me = hcomm.Get_rank()
    win.Fence()
    win.Put(np.array([rank, me], np.int64), (me + 1) % size)
    win.Fence()
    win.Free()
    sub.Free()
    writer_sub = (me - 1) % size
    np.testing.assert_array_equal(buf, [size - 1 - writer_sub, writer_sub])


@pytest.mark.parametrize("info_kind", ["none", "null", "dict", "mpi_info"])
def test_create_info(comm, info_kind):
    hints = {"no_locks": "false", "accumulate_ordering": "none"}
    info = {"none": None, "null": MPI.INFO_NULL, "dict": hints}.get(info_kind)
    if info_kind == "mpi_info":
        info = MPI.Info.Create()
        for k, v in hints.items():
            info.Set(k, v)
    buf = np.zeros(4, np.uint8)
    win = Win.Create(buf, info=info, comm=comm)
    got = dict(win.Get_info())
    win.Set_info({"same_size": "true"})
    after = dict(win.info)
    win.Free()
    if info_kind == "mpi_info":
        info.Free()
    want = hints if info_kind in ("dict", "mpi_info") else {}
    assert {k: got[k] for k in want} == want
    assert after.get("same_size") == "true"


@pytest.mark.parametrize("memory", ["none", "empty"])
def test_create_without_memory(comm, rank, right, memory):
    """A rank may expose nothing (MPI: size 0); access to it is out of bounds."""
    mem = None if memory == "none" else np.zeros(0, np.int64)
    win = Win.Create(mem, disp_unit=8, comm=comm)
    assert win.attrs[1] == 0 and len(win.tomemory()) == 0
    win.Fence()
    with pytest.raises(BoundsError, match=f"rank {right} .*length 8 bytes exceeds the window "
                                          f"size 0 bytes"):
        win.Put(np.ones(1, np.int64), right, 0)
    win.Put(np.ones(0, np.int64), right, 0)     # zero bytes: nothing to check, nothing moves
    win.Fence()
    win.Free()


def test_create_bad_info_and_disp_unit(comm):
    buf = np.zeros(4, np.uint8)
    with pytest.raises(ParamError, match="info must be") as err:
        Win.Create(buf, info=[("a", "b")], comm=comm)
    assert err.value.status == hixl_rma.PARAM_INVALID and isinstance(err.value, TypeError)
    for bad in (0, -4):
        with pytest.raises(ParamError, match="disp_unit must be a positive int") as err:
            Win.Create(buf, disp_unit=bad, comm=comm)
        assert err.value.Get_error_class() == MPI.ERR_DISP
    for bad in (2.0, "8", None):
        with pytest.raises(TypeError, match="disp_unit must be an integer"):
            Win.Create(buf, disp_unit=bad, comm=comm)
    with pytest.raises(ParamError, match="window memory must be contiguous"):
        Win.Create(np.zeros(8, np.int64)[::2], comm=comm)
    with pytest.raises(ParamError, match="read-only"):
        Win.Create(b"immutable", comm=comm)
    # Nothing half-made is left behind: a good window still works.
    win = Win.Create(buf, comm=comm)
    win.Fence()
    win.Fence()
    win.Free()


def test_creation_failing_on_one_rank_fails_everywhere(comm, rank, left, right):
    """Creation is collective: a rank whose part fails must not leave the others
    waiting in the exchange of window metadata; they raise too, naming it."""
    memory = b"read-only bytes" if rank == 0 else np.zeros(4, np.int64)
    if rank == 0:
        with pytest.raises(ParamError, match="window memory buffer is read-only"):
            Win.Create(memory, disp_unit=8, comm=comm)
    else:
        with pytest.raises(ParamError, match="window creation failed at rank 0 of the "
                                             "communicator: window memory buffer is read-only"):
            Win.Create(memory, disp_unit=8, comm=comm)
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)   # the next creation is in step
    win.Fence()
    win.Put(pattern(4, rank), right)
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(buf, pattern(4, left))


def test_two_windows_over_the_same_memory(comm, rank, left, right):
    buf = np.zeros(4, np.int64)
    first = Win.Create(buf, disp_unit=8, comm=comm)
    try:
        second = Win.Create(buf[2:], disp_unit=8, comm=comm)
    except BaseException:
        first.Free()
        raise
    first.Fence()
    second.Fence()
    first.Put(pattern(2, rank), right, 0)
    second.Put(pattern(2, rank, salt=1), right, 0)
    first.Fence()
    second.Fence()
    second.Free()
    first.Free()
    np.testing.assert_array_equal(buf, np.r_[pattern(2, left), pattern(2, left, salt=1)])


def test_name(comm):
    buf = np.zeros(1, np.uint8)
    win = Win.Create(buf, comm=comm)
    assert win.Get_name() == ""
    win.Set_name("kv-cache")
    assert win.name == "kv-cache"
    win.name = "renamed"
    assert win.Get_name() == "renamed" and "renamed" in repr(win)
    with pytest.raises(ParamError, match="name must be a str"):
        win.Set_name(3)
    win.Free()


# ------------------------------------------------------------------- Allocate

@pytest.mark.core
def test_allocate(comm, rank, left, right):
    n = 256
    win = Win.Allocate(n * 8, disp_unit=8, comm=comm)
    assert win.flavor == MPI.WIN_FLAVOR_ALLOCATE
    mem = np.frombuffer(win.tomemory(), np.int64)
    assert mem.size == n
    base, nbytes, unit = win.attrs
    assert (nbytes, unit) == (n * 8, 8) and base == mem.ctypes.data
    mem[:] = np.arange(n) + 1000 * rank
    win.Fence()
    win.Put(pattern(5, rank), right, n - 5)
    out = np.zeros(n - 5, np.int64)
    win.Get(out, right, 0)
    win.Fence()
    got = mem.copy()
    win.Free()
    want = np.arange(n) + 1000 * rank
    want[n - 5:] = pattern(5, left)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(out, np.arange(n - 5) + 1000 * right)


def test_allocate_zero_size_on_some_ranks(comm, rank, left, right):
    """Odd ranks expose nothing: a Put to them is a BoundsError, to even ranks it works."""
    nbytes = 0 if rank % 2 else 16
    win = Win.Allocate(nbytes, comm=comm)
    assert len(win.tomemory()) == nbytes and win.attrs[1] == nbytes
    np.frombuffer(win.tomemory(), np.uint8)[:] = 0
    win.Fence()
    if right % 2:
        with pytest.raises(BoundsError, match=f"rank {right} .*window size 0 bytes"):
            win.Put(np.ones(1, np.uint8), right, 0)
    else:
        win.Put(np.full(4, rank + 1, np.uint8), right, 2)
    win.Fence()
    got = bytes(win.tomemory())
    win.Free()
    want = bytearray(nbytes)
    if not rank % 2:                       # left's right is this even rank
        want[2:6] = bytes([left + 1] * 4)
    assert got == bytes(want)


def test_allocate_bad_size(comm):
    with pytest.raises(ParamError, match="window size must be a non-negative int") as err:
        Win.Allocate(-1, comm=comm)
    assert err.value.Get_error_class() == MPI.ERR_SIZE
    for bad in (1.5, "8"):
        with pytest.raises(ParamError, match="window size must be an integer") as err:
            Win.Allocate(bad, comm=comm)
        assert isinstance(err.value, TypeError)


# ------------------------------------------------------------ Allocate_shared

def _shared_memory_transports():
    """False when UCX_TLS leaves UCX no shared-memory transport (e.g. tcp only)."""
    tls = os.environ.get("UCX_TLS", "")
    if not tls or tls.startswith("^"):
        return True
    return any(t in ("all", "sm", "shm", "posix", "sysv", "cma", "xpmem", "knem")
               for t in tls.split(","))


def test_allocate_shared_direct_access(node):
    comm, rank, size = node, node.rank, node.size
    left, right = (rank - 1) % size, (rank + 1) % size
    n = 64
    win = Win.Allocate_shared(n * 4, disp_unit=4, comm=comm)
    assert win.flavor == MPI.WIN_FLAVOR_SHARED
    mine = np.frombuffer(win.tomemory(), np.int32)
    mine[:] = -1
    if not _shared_memory_transports():
        # Without a shared-memory transport nothing is mapped: say so, do not crash.
        with pytest.raises(hixl_rma.UnsupportedError, match="not mapped into this process") as err:
            win.Shared_query(right)
        assert isinstance(err.value, NotImplementedError)
        win.Free()
        return
    peer_mem, unit = win.Shared_query(right)
    first, _ = win.Shared_query(MPI.PROC_NULL)     # the lowest rank with memory: rank 0
    first_addr = np.frombuffer(first, np.uint8).ctypes.data
    assert unit == 4 and len(memoryview(peer_mem).cast("B")) == n * 4
    own_mem, own_unit = win.Shared_query(rank)
    assert own_unit == 4
    win.Fence()
    peer = np.frombuffer(peer_mem, np.int32)
    peer[:8] = pattern(8, rank, np.int32)          # plain stores into the neighbour's memory
    np.frombuffer(own_mem, np.int32)[-1] = rank    # and into our own through Shared_query
    win.Fence()
    got = mine.copy()
    seen = peer.copy()                             # loads from the neighbour's memory
    out = np.zeros(8, np.int32)
    win.Get(out, right, 0)                         # RMA sees the same bytes
    win.Fence()
    win.Free()
    want = np.full(n, -1, np.int32)
    want[:8] = pattern(8, left, np.int32)
    want[-1] = rank
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(seen[:8], pattern(8, rank, np.int32))
    assert seen[-1] == right
    np.testing.assert_array_equal(out, pattern(8, rank, np.int32))
    zero_addr = comm.bcast(mine.ctypes.data if rank == 0 else None, root=0)
    assert first_addr == (zero_addr if rank == 0 else first_addr)
    assert len(memoryview(first).cast("B")) == n * 4


@pytest.mark.skipif(not _shared_memory_transports(), reason="UCX_TLS leaves no shared-memory transport")
def test_allocate_shared_is_contiguous_across_ranks(node):
    """MPI's default: rank r's part starts where rank r-1's ends, so a rank
    reaches its neighbours' parts from its own base."""
    comm, rank, size = node, node.rank, node.size
    sizes = [8 * (r + 1) for r in range(size)]  # unequal parts
    win = Win.Allocate_shared(sizes[rank], disp_unit=8, comm=comm)
    bases = [win.Shared_query(r)[0].address for r in range(size)]
    assert bases == [bases[0] + sum(sizes[:r]) for r in range(size)]
    assert win.tomemory().address == bases[rank] and win.Get_attr(MPI.WIN_BASE) == bases[rank]
    np.frombuffer(win.tomemory(), np.int64)[:] = rank + 1
    win.Fence()
    whole = np.ctypeslib.as_array((ctypes.c_int64 * (sum(sizes) // 8)).from_address(bases[0]))
    seen = whole.copy()  # every part, through one pointer
    got = np.zeros(1, np.int64)
    win.Get(got, (rank + 1) % size, 0)  # RMA into the segment works as into any window memory
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(seen, np.repeat(np.arange(1, size + 1), np.arange(1, size + 1)))
    np.testing.assert_array_equal(got, [(rank + 1) % size + 1])


def test_allocate_shared_noncontig_gives_each_rank_its_own(node):
    comm, rank, size = node, node.rank, node.size
    win = Win.Allocate_shared(16, 8, {"alloc_shared_noncontig": "true"}, comm)
    assert win._core.segment is None and len(win.tomemory()) == 16
    np.frombuffer(win.tomemory(), np.int64)[:] = rank
    win.Fence()
    got = np.zeros(2, np.int64)
    win.Get(got, (rank + 1) % size, 0)
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(got, [(rank + 1) % size] * 2)


@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_shared_query_on_every_flavor(comm, rank, left, right, flavor):
    """MPI 4.1: Shared_query works on any window; a rank's memory this
    process cannot load and store is an empty buffer (with its disp_unit)."""
    own = np.full(4, rank, np.int64)
    win = Win.Create(own, 8, comm=comm) if flavor == "create" else Win.Allocate(32, 8, comm=comm)
    if flavor == "allocate":
        own = np.frombuffer(win.tomemory(), np.int64)
        own[:] = rank
    mem, unit = win.Shared_query(rank)
    assert unit == 8 and type(mem) is MPI.buffer
    assert mem.address == own.ctypes.data and mem.nbytes == 32
    peer, unit = win.Shared_query(right)
    assert unit == 8 and type(peer) is MPI.buffer
    win.Fence()
    if (flavor == "allocate" and _shared_memory_transports() and comm.Get_size() > 1
            and one_node([right])):
        # Engine memory of a same-node rank is mapped here: plain stores reach it.
        assert peer.nbytes == 32
        np.frombuffer(peer, np.int64)[1] = 100 + rank
    else:
        # Plain user memory of another process (cma only), another host's, or no mapping.
        assert (peer.address, peer.nbytes) == ((own.ctypes.data, 32) if right == rank else (0, 0))
        win.Put(np.array([100 + rank], np.int64), right, 1)
    win.Fence()
    got = own.copy()
    win.Free()
    np.testing.assert_array_equal(got, [rank, 100 + left if comm.Get_size() > 1 else 100 + rank,
                                        rank, rank])


def test_shared_query_view_outlives_the_window(comm, rank, right):
    """A Shared_query view of a peer's memory keeps that mapping alive: after
    both ranks freed the window and every engine flushed (which releases the
    retired remote keys), loads and stores through the view reach memory
    nobody uses any more instead of faulting."""
    win = Win.Allocate(64, 8, comm=comm)
    np.frombuffer(win.tomemory(), np.int64)[:] = rank
    win.Fence()
    view, _ = win.Shared_query(right)
    win.Fence()
    mapped = len(memoryview(view)) == 64
    win.Free()
    st = hixl_rma.runtime.runtime()
    barrier(comm)
    for w in range(st.size):
        if w in st.connected:
            st.engine.flush(st.addresses[w], 5000)  # retired keys go here, but for the view's
    barrier(comm)
    if mapped:
        arr = np.frombuffer(view, np.int64)
        seen = int(arr[1])
        arr[0] = 5  # a store into what the peer let go: no fault
        assert seen == right
    else:
        assert not _shared_memory_transports() or not one_node([right]) or comm.Get_size() == 1


# ------------------------------------------------------------- Create_dynamic

@pytest.mark.core
@pytest.mark.parametrize("address_of", ["mpi4py", "hixl_rma", "ctypes"])
def test_dynamic_attach_detach(comm, rank, left, right, address_of):
    get_address = {"mpi4py": MPI.Get_address,
                   "hixl_rma": lambda b: hixl_rma.Get_address(b),
                   "ctypes": lambda b: b.ctypes.data}[address_of]
    win = Win.Create_dynamic(comm=comm)
    assert win.flavor == MPI.WIN_FLAVOR_DYNAMIC
    region_a = np.zeros(16, np.int64)
    region_b = np.zeros(4, np.float64)
    win.Attach(region_a)
    win.Attach(region_b)
    addrs = comm.allgather((get_address(region_a), get_address(region_b)))
    ra, rb = addrs[right]
    win.Fence()
    # Displacements are absolute addresses (disp_unit 1).
    win.Put(pattern(3, rank), right, ra + 5 * 8)
    win.Put(pattern(2, rank, np.float64), right, (rb + 8, 2, MPI.DOUBLE))
    win.Fence()
    out = np.zeros(3, np.int64)
    win.Get(out, right, ra + 5 * 8)
    with pytest.raises(BoundsError, match=f"rank {right} of dynamic window .*not in an attached"):
        win.Put(np.ones(1, np.int64), right, rb + 4 * 8)     # just past region b
    win.Fence()
    win.Detach(region_b)
    win.Fence()
    with pytest.raises(BoundsError, match=f"address {rb} length 8 is not in an attached region"):
        win.Put(np.ones(1, np.float64), right, rb)           # detached at the target
    win.Fence()
    got_a, got_b = region_a.copy(), region_b.copy()
    win.Detach(region_a)
    with pytest.raises(ParamError, match="Detach: no region of 128 bytes is attached at address"):
        win.Detach(region_a)
    win.Free()
    want_a = np.zeros(16, np.int64)
    want_a[5:8] = pattern(3, left)
    np.testing.assert_array_equal(got_a, want_a)
    np.testing.assert_array_equal(got_b, np.r_[0.0, pattern(2, left, np.float64), 0.0])
    np.testing.assert_array_equal(out, pattern(3, rank))


def test_attach_needs_dynamic_window(comm):
    win = Win.Create(np.zeros(4, np.uint8), comm=comm)
    with pytest.raises(ParamError, match="Attach needs a window made by Create_dynamic"):
        win.Attach(np.zeros(4, np.uint8))
    win.Free()


# -------------------------------------------------------------- Free, `with`

@pytest.mark.core
def test_free_is_final_and_a_second_free_raises(comm, rank, right):
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Free()
    with pytest.raises(ParamError, match=r"Free: window .* has been freed") as err:
        win.Free()                    # as mpi4py: freeing MPI_WIN_NULL is an error
    assert isinstance(err.value, MPI.Exception) and err.value.Get_error_class() == MPI.ERR_WIN
    win.free()                        # mpi4py's lower-case free: only if not null
    assert "freed" in repr(win) and not win and win == hixl_rma.win.WIN_NULL
    with pytest.raises(ParamError, match="has been freed"):
        win.tomemory()
    with pytest.raises(ParamError, match="has been freed"):
        win.Fence()
    with pytest.raises(ParamError, match="has been freed"):
        win.Lock(right)


@pytest.mark.core
def test_context_manager(comm, rank, left, right):
    buf = np.zeros(3, np.int64)
    with Win.Create(buf, disp_unit=8, comm=comm) as win:
        win.Fence()
        win.Put(pattern(3, rank), right)
        win.Fence()
    np.testing.assert_array_equal(buf, pattern(3, left))
    with pytest.raises(ParamError, match="has been freed"):
        win.Put(pattern(3, rank), right)
    with Win.Allocate(8, comm=comm) as win2:
        assert len(win2.tomemory()) == 8
    with pytest.raises(ParamError, match="has been freed"):
        win2.tomemory()


def test_win_constructor_gives_null_windows_and_aliases(comm, rank, left, right):
    null = Win()
    assert not null and null == hixl_rma.win.WIN_NULL and repr(null) == "<hixl_rma.Win MPI_WIN_NULL>"
    with pytest.raises(ParamError, match="is the null window"):
        null.Fence()
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    alias = Win(win)
    alias.Fence()
    alias.Put(pattern(1, rank), right, 1)   # one window: the alias opens and uses its epochs
    win.Fence()
    alias.Free()
    assert not win
    assert buf[1] == pattern(1, left)[0]
