# Posts of the HIXL face and Put_batch/Get_batch at a priority, on the
# engine by the target's address (included by _engine.pyx): the caller names
# the peer, so these resolve it.

def post_at(Engine eng, remote, object op, object descs, int priority):
    """Post (n, 3) uint64 descriptors to ``remote`` at ``priority``; a WRITE's
    large copies into mapped memory go to the copy thread, queued at that
    priority. Complete with ``flush_at`` of the same priority."""
    cdef vector[TransferOpDesc] v
    _descs(descs, v)
    if not eng._usable():
        raise ParamError(f"TransferPost({remote!r}): the engine is finalized")
    _post(eng, remote, op, v, False, True, priority)


def flush_at(Engine eng, remote, int priority, timeout_ms=None):
    """Complete what was posted to ``remote`` at ``priority`` (0 high, 1
    normal, 2 bulk) or higher: a flush on a peer handle of that priority,
    which does not wait for less urgent detached work (the HIXL face's
    TransferAsync requests)."""
    cdef AscendString cr = _remote(remote)
    cdef int32_t tmo = _timeout(timeout_ms)
    cdef PeerRef *p = NULL
    cdef Status st
    if not eng._usable():
        raise ParamError(f"Flush({remote!r}): the engine is finalized")
    eng._calls += 1
    with nogil:
        st = AcquirePeer(eng._h[0], cr, p, <Priority>priority)
        if st == 0:
            st = FlushPeer(eng._h[0], p, tmo)
            ReleasePeer(p)
    eng._calls -= 1
    _check(st, f"Flush({remote!r})")


def post_batch(Engine eng, remote, object op, object origin, object offsets, object disps, uint64_t unit,
               uint64_t base, uint64_t size, int priority=1):
    """Put_batch / Get_batch of the common case: a contiguous origin buffer
    with (n, 2) int64 (offset, length) rows and n int64 target displacements,
    every block inside the origin and the window. Checked and posted in one
    C loop without the GIL (no per-block Python work). Posted, it returns the
    origin's buffer export, which the caller keeps until the flush that
    completes the batch (the engine reads or writes the origin until then:
    its copy thread, UCX's zero-copy lanes; held, a bytearray cannot resize
    under them). False, with nothing moved, for anything else: the Python
    layer then raises the precise error. (A window's Put_batch posts on the
    target's handle: WindowState.post_batch_at.)"""
    cdef Status st = 0
    cdef Py_ssize_t n = 0
    if not eng._usable():
        return False
    cdef AscendString cr = _remote(remote)
    export = _post_batch(eng, &cr, NULL, op, origin, offsets, disps, unit, base, size, priority, &st, &n)
    _check(st, f"TransferPost({remote!r}, {n} blocks)")
    return export


cdef object _post_batch(Engine eng, const AscendString *cr, PeerRef *p, object op, object origin, object offsets,
                        object disps, uint64_t unit, uint64_t base, uint64_t size, int priority, Status *st,
                        Py_ssize_t *count):
    """post_batch's check and post, on handle p (or by the name cr where p
    is NULL): the export, False (not the common case, nothing moved), or
    None with st[0] set (the engine refused it; nothing is kept)."""
    cdef Py_buffer view
    cdef const int64_t[:, ::1] offs
    cdef const int64_t[::1] d
    cdef vector[TransferOpDesc] v
    cdef Py_ssize_t i, n
    cdef int64_t o, ln
    cdef uint64_t toff, max_disp
    cdef bint ok = True
    cdef cpp_bool in_flight = True
    cdef int cop = _opcode(op)
    cdef _Export export = None
    st[0] = 0
    if not eng._usable() or unit == 0 or not (_int64_array(offsets, 2) and _int64_array(disps, 1)):
        return False
    offs = offsets
    d = disps
    n = offs.shape[0]
    count[0] = n
    if n == 0 or d.shape[0] != n:
        return False
    if _get_buffer(origin, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (PyBUF_WRITABLE if cop == READ else 0)) != 0:
        PyErr_Clear()
        return False
    try:
        if view.format != NULL and strchr(view.format, b'O') != NULL:
            return False
        max_disp = size // unit
        eng._calls += 1
        with nogil:
            v.resize(n)
            for i in range(n):
                o = offs[i, 0]
                ln = offs[i, 1]
                # Every bound is compared before any product or sum is formed: nothing wraps.
                if (o < 0 or ln < 0 or o > view.len or ln > view.len - o or d[i] < 0
                        or <uint64_t>d[i] > max_disp):
                    ok = False
                    break
                toff = <uint64_t>d[i] * unit
                if <uint64_t>ln > size - toff:
                    ok = False
                    break
                v[i].local_addr = <uintptr_t>view.buf + <uintptr_t>o
                v[i].remote_addr = base + toff
                v[i].len = <size_t>ln
            if ok:
                # A Put_batch is posted (complete at the flush): its large
                # copies into mapped memory go to the engine's copy thread.
                if p != NULL:
                    st[0] = PostTo(eng._h[0], p, <TransferOp>cop, v.data(), v.size(), MEM_HOST, cop == WRITE,
                                   in_flight)
                else:
                    st[0] = TransferPost(eng._h[0], cr[0], <TransferOp>cop, v, MEM_HOST, cop == WRITE,
                                         <Priority>priority)
        eng._calls -= 1
        if not ok:
            return False
        if st[0] != 0:
            return None
        export = _Export.__new__(_Export)
        export.view = view  # the export moves into it: released at completion, not here
        export.held = True
        return export
    finally:
        if export is None:
            PyBuffer_Release(&view)
