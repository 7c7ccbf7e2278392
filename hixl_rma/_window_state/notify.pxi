# Notifications held back for a batch (notified RMA, as notify.py batches
# it) of a window's state (included by _engine.pyx): per rank, the tags, in
# order; pending work of the target, sent by the synchronization that
# completes the rest (Flush, Fence, Unlock) or by notify.py.

@cython.final
cdef class _Held:
    """The held notifications and the counts of those sent. ``mu`` orders
    the sends of all threads (the pacer's too): whoever holds it takes the
    tags, so batches leave in order."""
    cdef vector[vector[int64_t]] tags
    cdef Py_ssize_t ranks        # ranks with held notifications
    cdef vector[uint64_t] sent   # notifications sent to each rank (notify.py's credit counts them)
    cdef bytes name              # "<key>:n/<this world rank>": what the target's queue is keyed by
    cdef object late             # a failure of a send nobody waited for (the pacer's): the next sync's
    cdef cpp_mutex mu

    cdef void resize(self, Py_ssize_t n, bytes name):
        self.tags.resize(n)
        self.sent.resize(n, 0)
        self.name = name

    cdef inline bint has(self, Py_ssize_t r):
        return not self.tags[r].empty()

    cdef size_t hold(self, Py_ssize_t r, int64_t tag):
        """Hold a notification for r's next batch; how many are held now."""
        if self.tags[r].empty():
            self.ranks += 1
        self.tags[r].push_back(tag)
        return self.tags[r].size()

    cdef size_t take(self, Py_ssize_t r, vector[int64_t] &out):
        """Move r's held tags into ``out`` (the caller holds ``mu``); how many."""
        out.swap(self.tags[r])
        if not out.empty():
            self.ranks -= 1
        return out.size()

    cdef int raise_late(self) except -1:
        """Raise what a send nobody waited for failed with (once)."""
        late, self.late = self.late, None
        if late is not None:
            raise late
        return 0
