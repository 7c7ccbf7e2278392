"""Layout of a window's per-rank control block.

Engine-allocated, so same-node peers map it and its atomics need no target
CPU. Offsets in bytes; every rank's block has the same layout.
"""

LOCK = 0          # reader-writer lock word (its encoding: _engine.LOCK_EXCL, lock_word_exclusive)
ACC = 8           # accumulate lock (0 free, else owner world rank + 1)
LOCK_WAITERS = 16  # ranks of the owner's node asleep on LOCK (a futex): a release there wakes them
DYN_SEQ = 64         # seqlock over the dynamic-window region table (dynamic.py)
DYN_COUNT = 72       # regions in the table
DYN_TABLE_ADDR = 80  # address of the (addr, len) uint64 pairs, engine memory of the owner
SIZE = 4096          # the fixed part; per-rank words follow


def consumed_offset(rank):
    """The notifications the owner consumed from ``rank`` (its credit)."""
    return SIZE + 8 * rank


def reader_offset(comm_size, rank):
    """1 while ``rank`` holds a shared lock on the owner (so that a rank
    known dead can have its hold broken), else 0."""
    return SIZE + 8 * comm_size + 8 * rank


def fence_offset(comm_size):
    """The owner's fence counter, on a cache line of its own after the
    per-rank words (the other ranks poll it; nothing else may share it)."""
    return (SIZE + 16 * comm_size + 63) // 64 * 64


def nbytes(comm_size):
    """Size of the control block of a window over ``comm_size`` ranks."""
    return fence_offset(comm_size) + 64
