# The extension-type part of hixl_rma.Win (included by _engine.pyx).
#
# mpi4py's MPI.Win exports the local window memory through the buffer
# protocol (``memoryview(win)``; mpi4py.util.sync spins on it), which on
# CPython < 3.12 only an extension type can offer. The Python class Win
# derives from this one and keeps the window's state.

from cpython.buffer cimport PyBuffer_FillInfo


cdef class WinBase:
    """Base of hixl_rma.Win: the buffer protocol over the local window memory."""

    def _local_span(self):
        """(address, nbytes, readonly) of the local window memory; (0, 0,
        False) for a window without memory. Win defines it."""
        return 0, 0, False

    def __getbuffer__(self, Py_buffer *view, int flags):
        cdef uintptr_t addr
        cdef Py_ssize_t nbytes
        cdef bint readonly
        a, n, ro = self._local_span()
        addr, nbytes, readonly = a, n, ro
        # view.obj is this window, which holds the memory's owner (and, for
        # engine memory, the mapping) for as long as the view lives.
        PyBuffer_FillInfo(view, self, <void *>addr, nbytes, readonly, flags)
