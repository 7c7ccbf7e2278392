# cython: language_level=3
"""The detector's per-call record in C: what a checked window's Put, Get
and Flush do on every call (the calling line, the clock snapshot, the
call site's record, the pending completions, the origin buffer in use and
its checksum), without a Python frame of the detector's own.

It also gives the hot classes C storage: ``Access`` (log.py), ``LocalUse``
(detector.py), ``_Site`` (log.py) and ``Clock`` (clock.py) subclass the
``*Fields`` types below where this extension is built, so their fields are
C members read here without a lookup; their methods stay in Python. Where
the extension is missing (or ``HIXL_RMA_RACE_PURE=1``), those classes are
plain ``__slots__`` classes and checked.py records in Python, as before.
Both record the same thing.
"""

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBuffer_IsContiguous, PyBUF_FULL_RO,
                             PyBUF_SIMPLE)
from cpython.object cimport PyObject, PyTypeObject
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy, strchr
from libcpp.algorithm cimport sort
from libcpp.map cimport multimap
from libcpp.pair cimport pair
from libcpp.vector cimport vector
from cython.operator cimport dereference as deref, preincrement as inc

cdef extern from *:
    """
    #include <frameobject.h>

    #if PY_VERSION_HEX >= 0x030C0000
    #define HIXL_REC_REQUEST_INDEX PyUnstable_Eval_RequestCodeExtraIndex
    #define HIXL_REC_GET_EXTRA PyUnstable_Code_GetExtra
    #define HIXL_REC_SET_EXTRA PyUnstable_Code_SetExtra
    #else
    #define HIXL_REC_REQUEST_INDEX _PyEval_RequestCodeExtraIndex
    #define HIXL_REC_GET_EXTRA _PyCode_GetExtra
    #define HIXL_REC_SET_EXTRA _PyCode_SetExtra
    #endif

    /* Whether a code object is hixl_rma's own rides on it (its co_extra slot:
       1 not own, 2 own), asked of Python once per code object. */
    static Py_ssize_t hixl_rec_index = -1;

    static void hixl_rec_free(void *extra) { (void)extra; }

    static int hixl_rec_configure(void) {
        if (hixl_rec_index < 0) hixl_rec_index = HIXL_REC_REQUEST_INDEX(hixl_rec_free);
        return hixl_rec_index < 0 ? -1 : 0;
    }

    /* 1 when code is hixl_rma's own, 0 when not, -1 on an error. */
    static int hixl_rec_own(PyObject *own, PyCodeObject *code) {
        void *extra = NULL;
        if (HIXL_REC_GET_EXTRA((PyObject *)code, hixl_rec_index, &extra) < 0) return -1;
        if (extra == NULL) {
            PyObject *r = PyObject_CallOneArg(own, (PyObject *)code);
            if (r == NULL) return -1;
            int t = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (t < 0) return -1;
            extra = (void *)(Py_ssize_t)(t ? 2 : 1);
            if (HIXL_REC_SET_EXTRA((PyObject *)code, hixl_rec_index, extra) < 0) return -1;
        }
        return (Py_ssize_t)extra == 2;
    }

    /* (code, line) of the innermost running frame that is not hixl_rma's own
       code, or of the outermost frame when all are (detector.site_of's answer). */
    static PyObject *hixl_rec_site(PyObject *own) {
        PyFrameObject *f = PyEval_GetFrame();
        if (f == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "race detector: a call with no Python frame");
            return NULL;
        }
        Py_INCREF(f);
        for (;;) {
            PyCodeObject *code = PyFrame_GetCode(f);
            int mine = hixl_rec_own(own, code);
            if (mine < 0) {
                Py_DECREF(code);
                Py_DECREF(f);
                return NULL;
            }
            PyFrameObject *back = mine ? PyFrame_GetBack(f) : NULL;
            if (back == NULL) {
                PyObject *res = Py_BuildValue("(Ni)", (PyObject *)code, PyFrame_GetLineNumber(f));
                Py_DECREF(f);
                return res;
            }
            Py_DECREF(code);
            Py_DECREF(f);
            f = back;
        }
    }

    /* zlib's crc32 (the same polynomial, initial value and final xor). */
    static uint32_t hixl_rec_crc_table[256];
    static void hixl_rec_crc_init(void) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            hixl_rec_crc_table[n] = c;
        }
    }
    static uint32_t hixl_rec_crc32(const unsigned char *p, Py_ssize_t n) {
        uint32_t c = 0xFFFFFFFFu;
        for (Py_ssize_t i = 0; i < n; i++) c = hixl_rec_crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
        return c ^ 0xFFFFFFFFu;
    }
    """
    int hixl_rec_configure()
    object hixl_rec_site(object own)
    void hixl_rec_crc_init()
    uint32_t hixl_rec_crc32(const unsigned char *p, Py_ssize_t n)

hixl_rec_crc_init()

cdef object _ndarray = None  # numpy.ndarray, once a Recorder is made
cdef tuple _EMPTY = ()


cdef int _get(obj, Py_buffer *view, int flags):
    """PyObject_GetBuffer, -1 instead of an exception (the caller takes the Python path)."""
    try:
        PyObject_GetBuffer(obj, view, flags)
    except Exception:
        return -1
    return 0


cdef class AccessFields:
    """The storage of log.Access."""
    cdef public object win, target, blocks, call, op, dtype, rank, snap, done, site, done_call, thread, count
    cdef public object done_actor


cdef class UseFields:
    """The storage of detector.LocalUse."""
    cdef public object win, target, lo, hi, writes, obj, crc, rec, req, call, site
    cdef Py_ssize_t seq  # its place in Uses


ctypedef pair[size_t, PyObject *] _HiUse
ctypedef pair[Py_ssize_t, PyObject *] _SeqUse


cdef class Uses:
    """Detector.local: the origin and result buffers in use, in the order
    they were taken (what iterating gives), indexed by address so that a new
    one finds those it overlaps without looking at all of them (a loop of
    4,096 Puts before one Flush looked at 8 million pairs)."""

    cdef list items
    cdef multimap[size_t, _HiUse] by_lo  # lo -> (hi, the use); the items own the references
    cdef size_t span  # the longest hi - lo indexed since the last rebuild
    cdef Py_ssize_t seq
    cdef bint exact  # every item is indexed (else overlapping() looks at all)

    def __init__(self, items=()):
        self.replace(items)

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __bool__(self):
        return len(self.items) > 0

    cpdef append(self, u):
        self.items.append(u)
        self._index(u)

    cpdef replace(self, items):
        """Keep only ``items`` (in their order)."""
        self.by_lo.clear()  # before the old items go (the index borrows their references)
        self.items = list(items)
        self.span, self.seq, self.exact = 0, 0, True
        for u in self.items:
            self._index(u)

    cdef _index(self, u):
        cdef UseFields f
        cdef size_t lo, hi
        if not self.exact:
            return
        if not isinstance(u, UseFields):
            self.exact = False
            return
        f = <UseFields>u
        try:
            lo, hi = f.lo, f.hi
        except (TypeError, OverflowError):
            self.exact = False
            return
        f.seq = self.seq
        self.seq += 1
        if hi > lo and hi - lo > self.span:
            self.span = hi - lo
        self.by_lo.insert(pair[size_t, _HiUse](lo, _HiUse(hi, <PyObject *>u)))

    cpdef list overlapping(self, a, b):
        """The uses with lo < b and a < hi, in order."""
        cdef size_t lo, hi, start
        cdef vector[_SeqUse] found
        cdef multimap[size_t, _HiUse].iterator it
        if not self.exact or a < 0:
            return [u for u in self.items if u.lo < b and a < u.hi]
        lo, hi = a, b
        # an item overlapping [lo, hi) starts after lo - span
        start = lo + 1 - self.span if lo + 1 > self.span else 0
        it = self.by_lo.lower_bound(start)
        while it != self.by_lo.end() and deref(it).first < hi:
            if deref(it).second.first > lo:
                found.push_back(_SeqUse((<UseFields>deref(it).second.second).seq, deref(it).second.second))
            inc(it)
        sort(found.begin(), found.end())
        return [<object>p.second for p in found]


cdef class SiteFields:
    """The storage of log._Site."""
    cdef public list first
    cdef public object last
    cdef public object seen


cdef class ClockFields:
    """The storage of clock.Clock."""
    cdef public object me, n
    cdef public list c
    cdef public object _snap


cdef inline object _new(type cls):
    """An instance of a Python subclass of one of the storages, its fields None."""
    return (<PyTypeObject *>cls).tp_new(cls, <PyObject *>_EMPTY, NULL)


cdef object _sum_crc(const unsigned char *p, Py_ssize_t n):
    """detector.checksum's value of n bytes at p (a C-contiguous buffer)."""
    cdef Py_ssize_t words, i
    cdef uint64_t s = 0, w
    if n <= 256:
        return hixl_rec_crc32(p, n)
    words = n // 8
    for i in range(words):
        memcpy(&w, p + 8 * i, 8)
        s += w
    return (s, hixl_rec_crc32(p + 8 * words, n - 8 * words), n)


cdef inline bint _byte_castable(const char *fmt):
    """memoryview.cast("B") takes a view of this format: a native single
    character (an '@' before it allowed); no format is "B"."""
    if fmt == NULL:
        return True
    if fmt[0] == b'@':
        fmt += 1
    return fmt[0] != 0 and strchr("cbBhHiIlLqQnNfde?P", fmt[0]) != NULL and fmt[1] == 0


cdef object _words(object obj, object slow):
    """detector.checksum(obj) of a C-contiguous ndarray over 256 bytes: what
    it reads through memoryview(obj).cast("B"), or ``slow`` where that fails
    (it has no checksum then)."""
    cdef Py_buffer view
    if _get(obj, &view, PyBUF_FULL_RO) < 0:
        return slow(obj)
    try:
        if PyBuffer_IsContiguous(&view, b'C') and _byte_castable(view.format):
            return _sum_crc(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return slow(obj)


cdef object _checksum(object obj, object slow):
    """detector.checksum(obj): in C for a C-contiguous ndarray (the same value), else ``slow``."""
    cdef Py_buffer view
    if type(obj) is not _ndarray:
        return slow(obj)
    if _get(obj, &view, PyBUF_SIMPLE) < 0:  # numpy: not C-contiguous
        return slow(obj)
    try:
        if view.len <= 256:
            return hixl_rec_crc32(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return _words(obj, slow)


_FLUSH = "Flush"
_WHY_BOTH = "both use the buffer before either completed locally"


def _checksum_of(obj):
    """detector.checksum(obj) as this module computes it (for the tests)."""
    from .detector import checksum
    return _checksum(obj, checksum)


cdef class Recorder:
    """The record of one detector's Put, Get and Flush."""

    cdef object det, windows, tl, lock, unlock, tls, own, slow, atomics_done, checksum
    cdef dict sites, pend, quick
    cdef object keep, rank
    cdef type Access, LocalUse, Site
    cdef object proc_null
    cdef unsigned long main_ident  # the main thread's clock, without a thread-local lookup
    cdef object main_clock
    cdef tuple w_last  # the last call's window: (its core, its WinInfo, {target rank: (world rank, disp_unit)})

    def __init__(self, det, tls, slow, atomics_done, proc_null):
        """``tls``: checked.py's per-thread flag (inside a checked call);
        ``slow(win, call, origin, target_rank, target)``: the general record;
        ``atomics_done(info, targets)``: what a Flush of an atomic's target does."""
        global _ndarray
        import numpy as np
        from .detector import LocalUse, _own, checksum
        from .log import Access, _Site
        if hixl_rec_configure() < 0:
            raise RuntimeError("no code-object extra slot left for the race detector")
        _ndarray = np.ndarray
        import threading
        self.det, self.windows, self.tl = det, det.windows, det._tl
        self.lock, self.unlock = det.mutex.acquire, det.mutex.release
        main = threading.main_thread().ident
        self.main_ident, self.main_clock = 0, None
        if det._slots.get(main) is det._main:  # a thread's clock is made once and kept
            self.main_ident, self.main_clock = main, det._main
        self.sites, self.pend, self.quick = det.log.sites, det.pend, {}
        self.keep, self.rank = det.log.keep, det.rank
        self.tls, self.slow, self.atomics_done, self.checksum = tls, slow, atomics_done, checksum
        self.own = lambda code: _own(code.co_filename)
        self.Access, self.LocalUse, self.Site = Access, LocalUse, _Site
        self.proc_null = proc_null

    cdef ClockFields clock(self):
        if self.main_ident and PyThread_get_thread_ident() == self.main_ident:
            return <ClockFields>self.main_clock
        c = getattr(self.tl, "clock", None)
        if c is None:
            c = self.det._new_thread_clock()
        return <ClockFields>c

    cdef tuple window(self, w):
        """(w, its WinInfo, {target rank: (world rank, disp_unit)}) of window core w."""
        c = self.w_last
        if c is None or c[0] is not w:
            c = self.w_last = (w, self.windows[w.key], {})
        return c

    def site(self):
        """(code, line) of the program's line making the current call."""
        return hixl_rec_site(self.own)

    cpdef moved(self, win, str call, origin, target_rank, target, bint receives):
        """Record a Put or Get the base class has just made (checked.py's _moved)."""
        if self.tls.on or target_rank == self.proc_null:
            return
        if type(origin) is _ndarray and (target is None or type(target) is int):
            if self.fast(win, call, origin, target_rank, target, receives):
                return
        self.slow(win, call, origin, target_rank, target)

    cdef bint fast(self, win, str call, origin, target_rank, target, bint receives) except -1:
        """Put/Get of a C-contiguous ndarray at an int displacement (checked.py's fast).
        False: not C-contiguous, the general record's."""
        cdef Py_buffer view
        cdef ClockFields clock
        cdef SiteFields st
        cdef AccessFields last, rec
        cdef UseFields u, nu
        cdef Py_ssize_t n
        cdef bint have_view = False
        if _get(origin, &view, PyBUF_SIMPLE) == 0:  # numpy: C-contiguous
            have_view = True
            n = view.len
        else:
            if not origin.flags.c_contiguous:
                return False
            n = origin.nbytes
        try:
            w = win._w
            _, info, targets = self.window(w)
            key = info.key
            t = targets.get(target_rank)
            if t is None:
                t = targets[target_rank] = (info.world[target_rank], w.targets[target_rank].disp_unit)
            tw, du = t
            lo = (target or 0) * du
            where_ = hixl_rec_site(self.own)
            code, line = where_
            self.lock()
            try:
                clock = self.clock()
                snap = clock._snap
                if snap is None:
                    snap = clock._snap = tuple(clock.c)
                th = clock.me
                qk = (id(code), line, key, tw, call, lo, n, th)
                o = self.quick.get(qk)
                if o is None:
                    blocks = ((lo, lo + n),) if n else ()
                    k = (key, tw, call, None, None, code, line, blocks, th)
                    o = self.sites.get(k)
                    if o is None:
                        o = self.sites[k] = self.Site(self.keep)
                    # a site keeps its code object (its records' sites hold it): its id stays its own
                    self.quick[qk] = o
                st = <SiteFields>o
                o = st.last[-1] if st.last else (st.first[-1] if st.first else None)
                if o is not None and (<AccessFields>o).snap is snap and (<AccessFields>o).done is None:
                    last = <AccessFields>o
                    last.count += 1
                    rec = last
                else:
                    rec = <AccessFields>_new(self.Access)
                    rec.win, rec.target, rec.call, rec.rank, rec.snap = key, tw, call, self.rank, snap
                    rec.blocks = (<AccessFields>o).blocks if o is not None else (((lo, lo + n),) if n else ())
                    rec.site, rec.thread, rec.done_actor, rec.count = where_, th, th, 1
                    st.seen += 1
                    if len(st.first) < self.keep:
                        st.first.append(rec)
                    else:
                        st.last.append(rec)
                    pk = (key, tw)
                    p = self.pend.get(pk)
                    if p is None:
                        self.pend[pk] = [rec]
                    else:
                        p.append(rec)
                if n:
                    if have_view:
                        a = <size_t>view.buf
                    else:
                        a = origin.__array_interface__["data"][0]
                    b = a + n
                    det = self.det
                    uses = det.local
                    near = (<Uses>uses).overlapping(a, b) if type(uses) is Uses else list(uses)
                    for o in near:
                        u = <UseFields>o
                        if u.lo < b and a < u.hi and (receives or u.writes):
                            det._local_race(u, call, where_, receives, _WHY_BOTH)
                    if receives:
                        crc = None
                    elif have_view and n <= 256:
                        crc = hixl_rec_crc32(<const unsigned char *>view.buf, n)
                    elif have_view:
                        crc = _words(origin, self.checksum)
                    else:
                        crc = self.checksum(origin)
                    obj = None if receives else origin
                    for o in near:
                        u = <UseFields>o
                        if (u.rec is rec and u.obj is obj and u.lo == a and u.hi == b and u.req is None
                                and u.crc == crc and u.site == where_ and u.writes == receives):
                            break  # the same use again (a loop of Puts of one buffer): one is enough
                    else:
                        nu = <UseFields>_new(self.LocalUse)
                        nu.win, nu.target, nu.lo, nu.hi, nu.writes = key, tw, a, b, receives
                        nu.obj, nu.crc, nu.rec, nu.call, nu.site = obj, crc, rec, call, where_
                        uses.append(nu)
            finally:
                self.unlock()
        finally:
            if have_view:
                PyBuffer_Release(&view)
        return True

    cpdef flushed(self, win, rank):
        """Flush(rank): what this rank did to rank is complete, remotely and
        locally (checked.py's flushed)."""
        cdef ClockFields clock
        cdef AccessFields r
        cdef UseFields u
        cdef list keep
        if self.tls.on or rank == self.proc_null:
            return
        info = self.window(win._w)[1]
        tw = info.world[rank]
        wkey = info.key
        det = self.det
        self.lock()
        try:
            clock = self.clock()
            me = clock.me
            now = clock.c[me] + 1
            clock.c[me] = now
            clock._snap = None
            recs = self.pend.pop((wkey, tw), None)
            if recs:
                for o in recs:
                    r = <AccessFields>o
                    r.done, r.done_call, r.done_actor = now, _FLUSH, me
            if det.local:
                # det.complete(info, {tw}, "Flush", remote=False)
                keep = []
                for o in det.local:
                    u = <UseFields>o
                    if not (u.win == wkey and u.target == tw and u.req is None):
                        keep.append(u)
                        continue
                    if u.crc is not None and _checksum(u.obj, self.checksum) != u.crc:
                        det._changed(u, _FLUSH, None)
                det.local.replace(keep)
        finally:
            self.unlock()
        if rank in info.atomics:
            self.atomics_done(info, {tw})


def make_calls(Win, Recorder r):
    """CheckedWin's Put, Get and Flush, recording through ``r``: no Python frame."""
    base_put, base_get, base_flush = Win.Put, Win.Get, Win.Flush

    def Put(self, origin, target_rank, target=None):
        """Write origin into the target window (recorded by the race detector)."""
        base_put(self, origin, target_rank, target)
        r.moved(self, "Put", origin, target_rank, target, False)

    def Get(self, origin, target_rank, target=None):
        """Read the target window into origin (recorded by the race detector)."""
        base_get(self, origin, target_rank, target)
        r.moved(self, "Get", origin, target_rank, target, True)

    def Flush(self, rank):
        """Remote completion of all RMA to ``rank`` (seen by the race detector)."""
        base_flush(self, rank)
        r.flushed(self, rank)

    return Put, Get, Flush
