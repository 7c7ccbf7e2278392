# cython: language_level=3
"""The detector's per-call record in C: what a checked window's Put, Get,
Flush, Fence and atomics (of ndarrays at an int displacement) do on every
call (the calling line, the clock snapshot, the call site's record, the
pending completions, the buffers in use and their checksums, the clocks
an atomic or a Fence carries), without a Python frame of the detector's
own.

It also gives the hot classes C storage: ``Access`` (log.py), ``LocalUse``
(detector.py) and ``_Site`` (log.py) subclass the ``*Fields`` types below
where this extension is built, so their fields are C members read here
without a lookup; their methods stay in Python. ``Clock`` is all in C here
(clock.py's is the Python one). Where the extension is missing (or
``HIXL_RMA_RACE_PURE=1``), those classes are plain ``__slots__`` classes
and checked.py records in Python, as before. Both record the same thing.
"""

from cpython.object cimport PyObject, PyTypeObject

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object)
    object PyBytes_FromStringAndSize(const char *, Py_ssize_t)
    int PyList_SetSlice(object, Py_ssize_t, Py_ssize_t, PyObject *) except -1
    PyObject *PyList_GET_ITEM(object, Py_ssize_t)
    Py_ssize_t Py_REFCNT(PyObject *)
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.weakref cimport PyWeakref_GetObject
cimport cython
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libcpp.algorithm cimport sort
from libcpp.map cimport map, multimap
from libcpp.pair cimport pair
from libcpp.vector cimport vector
from cython.operator cimport dereference as deref, preincrement as inc, predecrement as dec
cimport numpy as cnp

cnp.import_array()

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

    /* The line a frame is at: a frame not being traced has its line found by
       a walk over its code's line table from the start, on every call; the
       answer for (code, instruction) is kept here. The cache holds its code
       objects: an address is not reused for another code while kept. */
    typedef struct { PyObject *code; int lasti; int line; } hixl_rec_line_entry;
    static hixl_rec_line_entry hixl_rec_lines[256];

    /* The line of code at byte offset lasti (PyFrame_GetLasti's; -1: not started). */
    static int hixl_rec_line_at(PyCodeObject *code, int lasti) {
        size_t h = (((size_t)code >> 4) ^ (size_t)lasti * 40503u) & 255;
        hixl_rec_line_entry *e = &hixl_rec_lines[h];
        if (e->code == (PyObject *)code && e->lasti == lasti) return e->line;
        int line = lasti < 0 ? code->co_firstlineno : PyCode_Addr2Line(code, lasti);
        if (lasti >= 0) {
            Py_INCREF(code);
            Py_XSETREF(e->code, (PyObject *)code);
            e->lasti = lasti;
            e->line = line;
        }
        return line;
    }

    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* 3.11: the interpreter's own frames are walked, where PyEval_GetFrame
       makes a frame object for a frame that has none yet (every call of a
       function called anew: a lambda's, a wrapper's). */
    #ifndef Py_BUILD_CORE
    #define Py_BUILD_CORE 1
    #endif
    #include "internal/pycore_frame.h"

    static _PyInterpreterFrame *hixl_rec_complete(_PyInterpreterFrame *f) {
        while (f != NULL && _PyFrame_IsIncomplete(f)) f = f->previous;
        return f;
    }

    static PyObject *hixl_rec_frame(PyObject *own, int *line) {
        _PyInterpreterFrame *f = hixl_rec_complete(PyThreadState_GET()->cframe->current_frame);
        if (f == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "race detector: a call with no Python frame");
            return NULL;
        }
        for (;;) {
            PyCodeObject *code = f->f_code;
            int mine = hixl_rec_own(own, code);
            if (mine < 0) return NULL;
            _PyInterpreterFrame *back = mine ? hixl_rec_complete(f->previous) : NULL;
            if (back == NULL) {
                int lasti = _PyInterpreterFrame_LASTI(f);
                *line = hixl_rec_line_at(code, lasti < 0 ? -1 : lasti * (int)sizeof(_Py_CODEUNIT));
                Py_INCREF(code);
                return (PyObject *)code;
            }
            f = back;
        }
    }
    #else
    /* The code object (a new reference) of the innermost running frame that
       is not hixl_rma's own code, or of the outermost frame when all are
       (detector.site_of's answer); its line in *line. */
    static PyObject *hixl_rec_frame(PyObject *own, int *line) {
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
                *line = hixl_rec_line_at(code, PyFrame_GetLasti(f));
                Py_DECREF(f);
                return (PyObject *)code;
            }
            Py_DECREF(code);
            Py_DECREF(f);
            f = back;
        }
    }
    #endif

    /* (code, line) of that frame. */
    static PyObject *hixl_rec_site(PyObject *own) {
        int line = 0;
        PyObject *code = hixl_rec_frame(own, &line);
        return code == NULL ? NULL : Py_BuildValue("(Ni)", code, line);
    }

    /* A clock row into a peer's mapped memory, slot by slot (a reader never
       sees a torn counter), ordered before the synchronization this thread
       makes next (the atomic or the Fence that carries it). A release fence
       is enough: the reader takes the rows after that synchronization and an
       acquire fence, and the two fences order the row through it (C11
       fence-to-fence synchronization); on x86 both are no instruction. */
    static inline void hixl_rec_store_row(long long *dst, const long long *src, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }
    /* Before loading rows a peer may store into: what it stored before the
       synchronization this thread has seen is visible. */
    static inline void hixl_rec_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
    static inline long long hixl_rec_load(const long long *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

    /* zlib's crc32 (the same polynomial, initial value and final xor). */
    static uint32_t hixl_rec_crc_table[256];
    static void hixl_rec_crc_init(void) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            hixl_rec_crc_table[n] = c;
        }
    }
    /* The sum of n 8-byte words at p (unaligned), mod 2**64. Four vector
       accumulators: one is bound by its add's latency, and a buffer a Put
       just copied is in cache, where that bound is what a checksum costs. */
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <immintrin.h>
    #define HIXL_REC_AVX2 1
    __attribute__((target("avx2"))) static uint64_t hixl_rec_wordsum_avx2(const unsigned char *p, Py_ssize_t n) {
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        Py_ssize_t i = 0;
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + 8 * i)));
            a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + 8 * i + 32)));
            a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(p + 8 * i + 64)));
            a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(p + 8 * i + 96)));
        }
        a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
        uint64_t lanes[4];
        _mm256_storeu_si256((__m256i *)lanes, a0);
        uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3], w;
        for (; i < n; i++) {
            memcpy(&w, p + 8 * i, 8);
            s += w;
        }
        return s;
    }
    #endif
    static uint64_t hixl_rec_wordsum_plain(const unsigned char *p, Py_ssize_t n) {
        uint64_t s0 = 0, s1 = 0, w0, w1;
        Py_ssize_t i = 0;
        for (; i + 2 <= n; i += 2) {
            memcpy(&w0, p + 8 * i, 8);
            memcpy(&w1, p + 8 * i + 8, 8);
            s0 += w0;
            s1 += w1;
        }
        if (i < n) {
            memcpy(&w0, p + 8 * i, 8);
            s0 += w0;
        }
        return s0 + s1;
    }
    #ifdef HIXL_REC_AVX2
    static int hixl_rec_has_avx2 = -1;
    static uint64_t hixl_rec_wordsum(const unsigned char *p, Py_ssize_t n) {
        if (hixl_rec_has_avx2 < 0) hixl_rec_has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
        return hixl_rec_has_avx2 ? hixl_rec_wordsum_avx2(p, n) : hixl_rec_wordsum_plain(p, n);
    }
    #else
    static uint64_t hixl_rec_wordsum(const unsigned char *p, Py_ssize_t n) { return hixl_rec_wordsum_plain(p, n); }
    #endif

    /* Empty a list and keep its storage: each interval empties the lists of
       the last one (its buffers in use, its pending records) and fills them
       again, where deleting the slice gave the storage back and the next
       appends took it again. The items are let go after the list is empty
       (one's release may run code that looks at it). */
    static int hixl_rec_list_clear(PyObject *list) {
        PyListObject *l = (PyListObject *)list;
        Py_ssize_t n = Py_SIZE(l), i;
        PyObject *few[16], **items = few;
        if (n == 0) return 0;
        if (n > 16 && (items = (PyObject **)PyMem_Malloc(n * sizeof(PyObject *))) == NULL)
            return PyList_SetSlice(list, 0, n, NULL);
        memcpy(items, l->ob_item, n * sizeof(PyObject *));
        Py_SET_SIZE(l, 0);
        for (i = 0; i < n; i++) Py_DECREF(items[i]);
        if (items != few) PyMem_Free(items);
        return 0;
    }

    /* The last item of a non-empty list, taken out (a new reference), the
       storage kept (list.pop gives back half of it past each halving). */
    static PyObject *hixl_rec_list_pop(PyObject *list) {
        PyListObject *l = (PyListObject *)list;
        Py_SET_SIZE(l, Py_SIZE(l) - 1);
        return l->ob_item[Py_SIZE(l)];
    }

    static uint32_t hixl_rec_crc32(const unsigned char *p, Py_ssize_t n) {
        uint32_t c = 0xFFFFFFFFu;
        for (Py_ssize_t i = 0; i < n; i++) c = hixl_rec_crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
        return c ^ 0xFFFFFFFFu;
    }

    """
    int hixl_rec_configure()
    object hixl_rec_site(object own)
    object hixl_rec_frame(object own, int *line)
    void hixl_rec_store_row(long long *dst, const long long *src, Py_ssize_t n)
    void hixl_rec_acquire()
    long long hixl_rec_load(const long long *p)
    void hixl_rec_crc_init()
    uint32_t hixl_rec_crc32(const unsigned char *p, Py_ssize_t n)
    int hixl_rec_list_clear(object list) except -1
    object hixl_rec_list_pop(object list)
    uint64_t hixl_rec_wordsum(const unsigned char *p, Py_ssize_t n)

hixl_rec_crc_init()

cdef extern from *:
    """
    #include <unordered_map>

    /* A call site as the C record finds it again: the objects by identity
       (the same ones each time a loop's call comes back: the code object,
       the window's key and cached target, interned strings, cached op and
       dtype), the span and the line as numbers. */
    struct hixl_rec_qkey {
        PyObject *code, *key, *tw, *call, *th, *op, *dtype;
        Py_ssize_t lo, n;
        int line;
        bool operator==(const hixl_rec_qkey &o) const {
            return code == o.code && key == o.key && tw == o.tw && call == o.call && th == o.th && op == o.op &&
                   dtype == o.dtype && lo == o.lo && n == o.n && line == o.line;
        }
    };
    struct hixl_rec_qhash {
        size_t operator()(const hixl_rec_qkey &k) const {
            size_t h = (size_t)k.code;
            const size_t parts[] = {(size_t)k.key, (size_t)k.tw, (size_t)k.call, (size_t)k.th, (size_t)k.op,
                                    (size_t)k.dtype, (size_t)k.lo, (size_t)k.n, (size_t)k.line};
            for (size_t p : parts) h = (h ^ p) * 0x100000001b3ULL + (h >> 29);
            return h;
        }
    };
    /* The value is borrowed: Recorder.quick_keep owns it and the key's objects. */
    typedef std::unordered_map<hixl_rec_qkey, PyObject *, hixl_rec_qhash> hixl_rec_qmap;

    static PyObject *hixl_rec_qget(hixl_rec_qmap &m, const hixl_rec_qkey &k) {
        auto it = m.find(k);
        return it == m.end() ? NULL : it->second;
    }
    static void hixl_rec_qput(hixl_rec_qmap &m, const hixl_rec_qkey &k, PyObject *site) { m[k] = site; }
    static inline bool hixl_rec_qeq(const hixl_rec_qkey &a, const hixl_rec_qkey &b) { return a == b; }
    """
    cppclass hixl_rec_qmap:
        pass
    struct hixl_rec_qkey:
        PyObject *code
        PyObject *key
        PyObject *tw
        PyObject *call
        PyObject *th
        PyObject *op
        PyObject *dtype
        Py_ssize_t lo, n
        int line
    PyObject *hixl_rec_qget(hixl_rec_qmap &m, const hixl_rec_qkey &k)
    void hixl_rec_qput(hixl_rec_qmap &m, const hixl_rec_qkey &k, PyObject *site)
    bint hixl_rec_qeq(const hixl_rec_qkey &a, const hixl_rec_qkey &b)


cdef object _ndarray = None  # numpy.ndarray, once a Recorder is made
cdef tuple _EMPTY = ()
cdef list _NONE = []  # never appended to


cdef class Busy:
    """checked.py's per-thread flag: on inside a checked call (the calls it
    makes are the base class's). The main thread's is a C field."""

    cdef bint main_on
    cdef unsigned long main_ident
    cdef object others  # a threading.local: the other threads' flags

    def __init__(self):
        import threading
        self.main_ident = threading.main_thread().ident
        self.others = threading.local()

    cdef inline bint get(self):
        if PyThread_get_thread_ident() == self.main_ident:
            return self.main_on
        return getattr(self.others, "on", False)

    cdef inline void set(self, bint on) except *:
        if PyThread_get_thread_ident() == self.main_ident:
            self.main_on = on
        else:
            self.others.on = on

    @property
    def on(self):
        return self.get()

    @on.setter
    def on(self, value):
        self.set(value)


cdef struct _Arr:
    size_t addr
    Py_ssize_t nbytes


cdef inline bint _c_array(obj, _Arr *out):
    """True (and out filled) when obj is exactly an ndarray and C-contiguous
    (numpy's C API: a buffer export builds a format string on every call)."""
    if type(obj) is not _ndarray:
        return False
    if not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>obj):
        return False
    out.addr = <size_t>cnp.PyArray_DATA(<cnp.ndarray>obj)
    out.nbytes = cnp.PyArray_NBYTES(<cnp.ndarray>obj)
    return True


# _untracked: records and buffers in use are not tracked by the cyclic GC
# (their Python subclasses are, as heap types; the record untracks each one
# it makes): they reach no object that reaches them back, and a loop of RMA
# calls made thousands that every full collection walked.
@cython.no_gc
cdef class AccessFields:
    """The storage of log.Access (what a call of a loop looks at first)."""
    cdef public object done, snap, done_call, done_actor, thread
    cdef public Py_ssize_t count  # accesses it took (a C number: a loop's record adds one per call)
    cdef public Py_ssize_t epoch
    cdef public Py_ssize_t touched  # when it last took an access (log.Log.touch)
    cdef public object win, target, blocks, call, op, dtype, rank, site


cdef enum:
    _SUM_OBJ = 0  # a use's checksum is the object crc_obj (None: none taken)
    _SUM_BYTES = 1  # it is the buffer's bytes themselves (at most _SUM_INLINE), in sum
    _SUM_PACKED = 2  # it is detector.checksum's 20 packed bytes of a buffer past 256 bytes, in sum
    _SUM_INLINE = 24


@cython.no_gc
cdef class UseFields:
    """The storage of detector.LocalUse. Its checksum (``crc``) lives in the
    object where the C record took it of a small buffer or of a long one
    (no bytes object made and freed per call); ``crc`` makes one when
    asked."""
    cdef public object win, target, obj, rec, req, call, site
    cdef object crc_obj
    cdef unsigned char sum_kind, sum_n
    cdef unsigned char sum[_SUM_INLINE]
    cdef public size_t lo, hi  # addresses
    cdef public bint writes
    cdef Py_ssize_t seq  # its place in Uses

    @property
    def crc(self):
        if self.sum_kind == _SUM_OBJ:
            return self.crc_obj
        return PyBytes_FromStringAndSize(<const char *>self.sum, self.sum_n)

    @crc.setter
    def crc(self, value):
        self.crc_obj, self.sum_kind = value, _SUM_OBJ

    cdef inline void drop(self):
        """What a spare keeps of it: no buffer of the program's, no record."""
        self.obj = self.crc_obj = self.rec = self.req = None
        self.sum_kind = _SUM_OBJ


cdef inline bint _same_sums(UseFields u, UseFields v):
    """u's checksum is v's."""
    if u.sum_kind != v.sum_kind:
        return u.crc == v.crc
    if u.sum_kind == _SUM_OBJ:
        return u.crc_obj is v.crc_obj or u.crc_obj == v.crc_obj
    return u.sum_n == v.sum_n and memcmp(u.sum, v.sum, u.sum_n) == 0


ctypedef pair[size_t, PyObject *] _HiUse
ctypedef pair[Py_ssize_t, PyObject *] _SeqUse


cdef Py_ssize_t _LINEAR = 16  # up to this many uses, a scan finds the overlapping ones faster than the index


cdef class Uses:
    """Detector.local: the origin and result buffers in use, in the order
    they were taken (what iterating gives), indexed by address once there
    are more than a few and a new one falls inside their hull, so that it
    finds those it overlaps without looking at all of them (a loop of 4,096
    Puts before one Flush looked at 8 million pairs)."""

    cdef list items
    cdef multimap[size_t, _HiUse] by_lo  # lo -> (hi, the use); the items own the references
    cdef size_t span  # the longest hi - lo indexed since the last rebuild
    cdef size_t lo_min, hi_max  # the hull of the items (while exact): a use outside it overlaps none
    cdef Py_ssize_t seq
    cdef bint exact  # every item is a UseFields (else overlapping() looks at all)
    cdef bint indexed  # by_lo holds every item
    cdef type last_type  # the last item's, a UseFields (one class in a loop: no subclass test)

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

    cdef clear(self):
        """Keep none."""
        if self.indexed:
            self.by_lo.clear()  # before the old items go (the index borrows their references)
        hixl_rec_list_clear(self.items)
        self.span, self.seq, self.exact, self.indexed = 0, 0, True, False
        self.lo_min, self.hi_max = <size_t>-1, 0

    cdef object clear_but_one(self):
        """clear(); the one item there was, where nothing else holds it (a
        spare), else None."""
        cdef object one = None
        if len(self.items) == 1 and Py_REFCNT(PyList_GET_ITEM(self.items, 0)) == 1:
            one = <object>PyList_GET_ITEM(self.items, 0)
        self.clear()
        return one

    cdef int clear_into(self, list free, Py_ssize_t most) except -1:
        """clear(); the items nothing else holds go to ``free`` (spares the
        record fills again instead of making new ones), emptied of what
        they named, while it has fewer than ``most``."""
        cdef Py_ssize_t i
        cdef UseFields u
        for i in range(len(self.items)):
            if len(free) >= most:
                break
            if Py_REFCNT(PyList_GET_ITEM(self.items, i)) == 1 and self.exact:
                u = <UseFields>PyList_GET_ITEM(self.items, i)
                u.drop()
                free.append(u)
        self.clear()
        return 0

    cpdef replace(self, items):
        """Keep only ``items`` (in their order)."""
        if self.indexed:
            self.by_lo.clear()  # before the old items go (the index borrows their references)
        self.items = list(items)
        self.span, self.seq, self.exact, self.indexed = 0, 0, True, False
        self.lo_min, self.hi_max = <size_t>-1, 0
        for u in self.items:
            self._index(u)

    cdef _index(self, u):
        cdef UseFields f
        if not self.exact:
            return
        if type(u) is not self.last_type and not isinstance(u, UseFields):
            self.exact = False
            if self.indexed:
                self.by_lo.clear()
                self.indexed = False
            return
        f = <UseFields>u
        self.last_type = type(u)
        f.seq = self.seq
        self.seq += 1
        if f.lo < self.lo_min:
            self.lo_min = f.lo
        if f.hi > self.hi_max:
            self.hi_max = f.hi
        if self.indexed:
            self._insert(f)

    cdef inline void _insert(self, UseFields f):
        if f.hi > f.lo and f.hi - f.lo > self.span:
            self.span = f.hi - f.lo
        self.by_lo.insert(pair[size_t, _HiUse](f.lo, _HiUse(f.hi, <PyObject *>f)))

    cpdef list overlapping(self, a, b):
        """The uses with lo < b and a < hi, in order."""
        if not self.exact or a < 0:
            return [u for u in self.items if u.lo < b and a < u.hi]
        return self.near(a, b)

    cdef list near(self, size_t lo, size_t hi):
        """overlapping(lo, hi), from C (_NONE, not a new list, where none is)."""
        cdef size_t start
        cdef vector[_SeqUse] found
        cdef multimap[size_t, _HiUse].iterator it
        cdef UseFields u
        cdef list out = _NONE
        if not self.exact:
            return [u for u in self.items if u.lo < hi and lo < u.hi]
        if hi <= self.lo_min or lo >= self.hi_max:  # a loop's next block, after the others
            return _NONE
        if not self.indexed and len(self.items) > _LINEAR:
            # made when first asked for (a loop over blocks in address order never asks)
            for o in self.items:
                self._insert(<UseFields>o)
            self.indexed = True
        if not self.indexed:
            for o in self.items:
                if (<UseFields>o).lo < hi and lo < (<UseFields>o).hi:
                    if out is _NONE:
                        out = []
                    out.append(o)
            return out
        # an item overlapping [lo, hi) starts after lo - span
        start = lo + 1 - self.span if lo + 1 > self.span else 0
        it = self.by_lo.lower_bound(start)
        while it != self.by_lo.end() and deref(it).first < hi:
            if deref(it).second.first > lo:
                found.push_back(_SeqUse((<UseFields>deref(it).second.second).seq, deref(it).second.second))
            inc(it)
        if found.empty():
            return _NONE
        sort(found.begin(), found.end())
        return [<object>p.second for p in found]


ctypedef pair[size_t, size_t] _Block
ctypedef map[_Block, Py_ssize_t].iterator _BlockAt


cdef extern from *:
    """
    /* A block's size class: floor(log2(n)), n > 0. */
    static inline int hixl_rec_class(size_t n) { return 63 - __builtin_clzll((unsigned long long)n); }
    """
    int hixl_rec_class(size_t n)


cdef class _TargetBlocks:
    """Touched's blocks of one (window, target): (lo, hi) -> when a record
    last took an access of it, by size class (a block of class c is
    shorter than 2**(c+1)), each ordered by lo: a block overlapping [lo,
    hi) of class c starts in [lo + 1 - 2**(c+1), hi), so a query looks at
    the blocks starting there, not at every block a long one would reach
    over (a window-long block with 4,096 small ones made each query walk
    them all)."""
    cdef vector[map[_Block, Py_ssize_t]] classes
    cdef uint64_t used  # bit c: class c has a block
    cdef bint exact  # every block fitted in a size_t (else since() says yes)

    def __cinit__(self):
        self.exact = True
        self.classes.resize(64)

    cdef inline void touch1(self, size_t lo, size_t hi, Py_ssize_t seq):
        cdef int c
        if hi > lo:
            c = hixl_rec_class(hi - lo)
            self.classes[c][_Block(lo, hi)] = seq
            self.used |= (<uint64_t>1) << c

    cdef _BlockAt touch_at(self, size_t lo, size_t hi, Py_ssize_t seq):
        """touch1 of [lo, hi), hi > lo: the block's place in its class, which
        stays valid while this object lives (a map node is never moved)."""
        cdef int c = hixl_rec_class(hi - lo)
        cdef _BlockAt it = self.classes[c].insert(pair[_Block, Py_ssize_t](_Block(lo, hi), seq)).first
        deref(it).second = seq
        self.used |= (<uint64_t>1) << c
        return it

    cdef bint since1(self, size_t lo, size_t hi, Py_ssize_t seq):
        """Whether a block overlapping [lo, hi) took an access after seq."""
        cdef _BlockAt at
        return self.since_at(lo, hi, seq, at, -1)

    cdef bint since_at(self, size_t lo, size_t hi, Py_ssize_t seq, _BlockAt at, int own):
        """since1, where ``at`` is the place of block [lo, hi) in its class
        ``own`` (-1: not known): that class is looked at from there, not
        walked down to from its root (a loop over 4,096 blocks, each walk
        out of cache)."""
        cdef _BlockAt it
        cdef int c
        cdef size_t reach, start
        if not self.exact:
            return True
        if hi <= lo:
            return False
        for c in range(64):
            if not (self.used >> c) & 1:
                continue
            reach = (<size_t>2) << c if c < 62 else <size_t>-1
            start = lo + 1 - reach if lo + 1 > reach else 0
            # the blocks of class c overlapping [lo, hi) start in [start, hi)
            if c == own:
                it = at
                while it != self.classes[c].begin():
                    dec(it)
                    if deref(it).first.first < start:
                        break
                    if deref(it).first.second > lo and deref(it).second > seq:
                        return True
                it = at
            else:
                it = self.classes[c].lower_bound(_Block(start, 0))
            while it != self.classes[c].end() and deref(it).first.first < hi:
                if deref(it).first.second > lo and deref(it).second > seq:
                    return True
                inc(it)
        return False


def _since_both(list touches, list queries):
    """For the tests: touch the blocks ``touches`` ((lo, hi), in order, the
    i-th at seq i + 1) of one _TargetBlocks, then answer each query (i, seq)
    -- whether a block overlapping touches[i] took an access after seq -- as
    since1 and as since_at from touches[i]'s place: a list of both."""
    cdef _TargetBlocks tb = _TargetBlocks()
    cdef vector[_BlockAt] places
    cdef Py_ssize_t i
    for i in range(len(touches)):
        lo, hi = touches[i]
        places.push_back(tb.touch_at(lo, hi, i + 1))
    out = []
    for i, seq in queries:
        lo, hi = touches[i]
        # the block's place is where its last touch left it (an earlier one of the same block: the same node)
        out.append((tb.since1(lo, hi, seq), tb.since_at(lo, hi, seq, places[i], hixl_rec_class(hi - lo))))
    return out


cdef bint _hull(blocks, size_t *lo, size_t *hi):
    """The span from the first byte to the last of blocks ((lo, hi) pairs of
    Python ints) as size_ts, what Touched keeps of a record (one entry,
    however many blocks: a datatype's 4,096 took 4,096 inserts per access;
    wider than the blocks, it can only keep a record from growing). False
    where a block is not one (a count past 64 bits of bytes, a negative
    end)."""
    cdef size_t a, b
    lo[0], hi[0] = <size_t>-1, 0
    try:
        for blk in blocks:
            if type(blk) is not tuple or len(<tuple>blk) != 2:
                return False
            a, b = <size_t>(<tuple>blk)[0], <size_t>(<tuple>blk)[1]
            if b < a:
                return False
            if b > a:
                lo[0], hi[0] = min(lo[0], a), max(hi[0], b)
    except (OverflowError, TypeError):
        return False
    if hi[0] == 0:
        lo[0] = 0  # no byte
    return True


cdef class Touched:
    """log.Log.touched: for each (window, target), the span of each record
    that took an access, and when the last one did (a count of Log.touch's), so
    that a record may grow over the accesses of other records of other
    bytes (Log.regrow) -- a loop of Puts to 4,096 blocks made 4,096 records
    in every interval."""
    cdef public Py_ssize_t seq
    cdef public object last  # the record the last access touched
    cdef dict targets  # (win, target) -> _TargetBlocks

    def __init__(self):
        self.targets = {}

    cdef _TargetBlocks of(self, pk):
        cdef _TargetBlocks t = self.targets.get(pk)
        if t is None:
            t = self.targets[pk] = _TargetBlocks()
        return t

    cpdef touch(self, rec):
        """rec took an access now."""
        cdef AccessFields r = <AccessFields?>rec
        cdef _TargetBlocks t = self.of((r.win, r.target))
        cdef size_t lo, hi
        self.last = rec
        self.seq += 1
        r.touched = self.seq
        if not _hull(r.blocks, &lo, &hi):
            t.exact = False
        else:
            t.touch1(lo, hi, self.seq)

    cpdef bint since(self, rec) except -1:
        """Whether a block overlapping rec's took an access of another
        record after rec's last one."""
        cdef AccessFields r = <AccessFields?>rec
        cdef _TargetBlocks t = self.targets.get((r.win, r.target))
        cdef size_t lo, hi
        if t is None:
            return False
        return not _hull(r.blocks, &lo, &hi) or t.since1(lo, hi, r.touched)

    def forget(self, win):
        """Window ``win`` is freed."""
        for k in [k for k in self.targets if k[0] == win]:
            del self.targets[k]


cdef class SiteFields:
    """The storage of log._Site. What a call looks at first comes first: a
    loop over blocks finds each site, and its newest record, out of cache."""
    cdef hixl_rec_qkey qk  # what the C record found it by last (its objects kept by Recorder.quick_keep)
    cdef SiteFields next  # the site the C record found after this one, the last time (a loop's next call)
    cdef public object newest  # its last record (log.Log.put's)
    cdef object where  # (code, line) of its records, once the C record found it
    cdef _TargetBlocks tb  # the blocks its records' block is one of, at tb_at (Recorder.touch)
    cdef _BlockAt tb_at
    cdef public list first
    cdef public object last
    cdef public object seen


cdef class Clock:
    """clock.Clock, its counters a C array: a tick makes no list item, a
    synchronization sends and merges them without converting each (the
    Python one is clock._PyClock)."""
    cdef public object me, n  # me: the clock's slot, the same int object in every record it makes
    cdef Py_ssize_t me_i
    cdef vector[long long] v
    cdef public object _snap
    cdef public Py_ssize_t fe

    def __init__(self, me, n):
        if not 0 <= me < n:
            raise ValueError(f"race detector: clock slot {me} of {n}")
        self.me, self.n, self.me_i = me, n, me
        self.v.assign(<Py_ssize_t>n, 0)
        self.v[self.me_i] = 1
        self._snap = None
        self.fe = 0  # how many times another slot's counter grew (log.py merges records while it stays)

    @property
    def c(self):
        """The counters (a copy)."""
        return [x for x in self.v]

    def snap(self):
        """The clock as a snapshot (shared by every access until the next
        tick): its counters as int64 bytes (clock.counters gives the ints)."""
        if self._snap is None:
            self._snap = _snap_of(self)
        return self._snap

    def now(self):
        """This thread's own counter."""
        return self.v[self.me_i]

    def tick(self):
        return _tick(self)

    def merge(self, other):
        """Take in another clock (a sequence of n counters, or an array of rows of them)."""
        cdef cnp.ndarray rows
        cdef Py_ssize_t i
        if isinstance(other, _ndarray_type()):
            rows = _np().ascontiguousarray(other, _np().int64)
            if rows.ndim == 1:
                rows = rows.reshape(1, -1)
            elif rows.ndim > 2:
                rows = rows.reshape(rows.shape[0], -1)
            if rows.shape[0] == 0:
                self._snap = None
                return
            if rows.shape[1] > <Py_ssize_t>self.v.size():
                raise IndexError(f"race detector: a clock of {rows.shape[1]} counters merged into one of {self.n}")
            _merge_rows(self, <const long long *>cnp.PyArray_DATA(rows), rows.shape[0], rows.shape[1], False)
            return
        i = 0
        for x in other:
            if i >= <Py_ssize_t>self.v.size():
                raise IndexError(f"race detector: a clock of more than {self.n} counters merged")
            if x > self.v[i]:
                self.v[i] = x
                if i != self.me_i:
                    self.fe += 1
            i += 1
        self._snap = None

    def array(self):
        """The counters as an int64 array (what a message carries)."""
        out = _np().empty(self.v.size(), _np().int64)
        if self.v.size():
            memcpy(cnp.PyArray_DATA(<cnp.ndarray>out), &self.v[0], self.v.size() * sizeof(long long))
        return out


cdef object _numpy = None


cdef object _np():
    global _numpy
    if _numpy is None:
        import numpy
        _numpy = numpy
    return _numpy


cdef object _ndarray_type():
    return _np().ndarray


cdef bytes _snap_of(Clock clock):
    """The counters as a record's snapshot: their int64s in one bytes object
    (not a tuple of ints: one allocation, no cyclic-GC object; clock.counters
    reads it)."""
    return PyBytes_FromStringAndSize(<const char *>&clock.v[0], clock.v.size() * sizeof(long long))


cdef inline object _new(type cls):
    """An instance of a Python subclass of one of the storages, its fields None."""
    return (<PyTypeObject *>cls).tp_new(cls, <PyObject *>_EMPTY, NULL)


cdef inline void _pack_sum(const unsigned char *p, Py_ssize_t n, unsigned char *out):
    """detector.checksum's value of n > 256 bytes at p, packed as its
    struct.pack("=QIQ", word sum, crc32 of the tail, n) is (20 bytes)."""
    cdef Py_ssize_t words = n // 8
    cdef uint64_t s = hixl_rec_wordsum(p, words), size = <uint64_t>n
    cdef uint32_t c = hixl_rec_crc32(p + 8 * words, n - 8 * words)
    memcpy(out, &s, 8)  # native byte order, as "=" packs
    memcpy(out + 8, &c, 4)
    memcpy(out + 12, &size, 8)


cdef object _sum_crc(const unsigned char *p, Py_ssize_t n):
    """detector.checksum's value of n bytes at p (a C-contiguous buffer)."""
    cdef unsigned char packed[20]
    if n <= 256:
        return PyBytes_FromStringAndSize(<const char *>p, n)
    _pack_sum(p, n, packed)
    return PyBytes_FromStringAndSize(<const char *>packed, 20)


cdef bint _same_sum(const unsigned char *p, Py_ssize_t n, crc):
    """_sum_crc(p, n) == crc, without making the checksum object."""
    cdef unsigned char packed[20]
    if type(crc) is not bytes:
        return False
    if n <= 256:
        return PyBytes_GET_SIZE(crc) == n and memcmp(PyBytes_AS_STRING(crc), p, n) == 0
    _pack_sum(p, n, packed)
    return PyBytes_GET_SIZE(crc) == 20 and memcmp(PyBytes_AS_STRING(crc), packed, 20) == 0


_FLUSH = "Flush"
_WHY_BOTH = "both use the buffer before either completed locally"


cdef bint _castable(obj):
    """memoryview(obj).cast("B") takes this ndarray's format: a native
    single-character one (what detector.checksum reads word by word)."""
    d = <object>cnp.PyArray_DESCR(<cnp.ndarray>obj)
    c = d.char
    return d.byteorder in "=|" and len(c) == 1 and c in "bBhHiIlLqQnNfde?"


cpdef object fast_checksum(obj, slow):
    """detector.checksum(obj): in C for a C-contiguous ndarray whose bytes
    it reads, else ``slow(obj)`` (detector.checksum itself)."""
    cdef _Arr a
    if _c_array(obj, &a):
        if a.nbytes <= 256:
            return _sum_crc(<const unsigned char *>a.addr, a.nbytes)
        if _castable(obj):
            return _sum_crc(<const unsigned char *>a.addr, a.nbytes)
    return slow(obj)


def _checksum_of(obj):
    """detector.checksum(obj) as this module computes it (for the tests)."""
    global _ndarray
    import numpy as np
    from .detector import checksum
    if _ndarray is None:  # as a Recorder sets it: the C path takes ndarrays
        _ndarray = np.ndarray
    return fast_checksum(obj, checksum)


cdef object _by_identity(list cache, obj, fn):
    """fn(obj), remembered by obj's identity (MPI.Op and MPI.Datatype are
    not hashable): the first 64 objects asked about are kept."""
    for o, v in cache:
        if o is obj:
            return v
    v = fn(obj)
    if len(cache) < 64:
        cache.append((obj, v))
    return v


cdef class _WinRec:
    """What the record keeps of one checked window: its view (Win.view()), its WinInfo, its
    targets' (world rank, disp_unit), and its clock window's calls and rows."""
    cdef object core, info, key, targets, cw, put, get, flush, rows, mem, peers
    cdef set atomics  # info.atomics: the targets of atomics not yet flushed (set methods called in C)
    cdef _Target last  # the last call's target
    cdef vector[long long *] peer_p  # each peer's clock memory where mapped here (cw.peers), else NULL
    cdef const long long *rows_p  # cw._rows: nc rows read from a peer
    cdef const long long *mem_p  # cw.mem: this rank's clock window memory
    cdef Py_ssize_t nc, nw, me, fence_at, atomic_at
    cdef Py_ssize_t fences  # ClockWindow.fences, counted here where the Fence records in C

    def __init__(self, core, info):
        self.core, self.info, self.key, self.targets, self.atomics = core, info, info.key, {}, info.atomics
        cw = self.cw = info.clocks
        self.put, self.get, self.flush = cw.win.Put, cw.win.Get, cw.win.Flush
        self.rows, self.mem = cw._rows, cw.mem
        self.rows_p = <const long long *>cnp.PyArray_DATA(<cnp.ndarray>self.rows)
        self.mem_p = <const long long *>cnp.PyArray_DATA(<cnp.ndarray>self.mem)
        self.nc, self.nw, self.me = cw.nc, cw.nw, cw.me
        self.fence_at, self.atomic_at = cw.FENCE, cw.ATOMIC
        self.fences = cw.fences
        self.peers = list(cw.peers)  # kept: the pointers below are theirs
        for v in self.peers:
            self.peer_p.push_back(<long long *>cnp.PyArray_DATA(<cnp.ndarray>v) if v is not None else NULL)

    cdef int send(self, arr, Py_ssize_t q, Py_ssize_t off) except -1:
        """This rank's clock (an int64 array) into peer q's slots at off:
        stored where q's memory is mapped here, else a Put and a Flush."""
        if self.peer_p[q] != NULL:
            hixl_rec_store_row(self.peer_p[q] + off, <const long long *>cnp.PyArray_DATA(<cnp.ndarray>arr),
                               self.nw)
        else:
            self.put(arr, q, off)
            self.flush(q)
        return 0

    cdef _Target target(self, target_rank):
        """What the record needs of target_rank."""
        cdef _Target t = self.last
        if t is not None and t.rank is target_rank:
            return t
        t = self.targets.get(target_rank)
        if t is None:
            t = _Target()
            t.rank, t.tw = target_rank, self.info.world[target_rank]
            t.du = self.core.disp_unit_of(target_rank)
            t.pk = (self.key, t.tw)
            self.targets[target_rank] = t
        self.last = t
        return t


cdef class _Target:
    """A window's target rank as the record needs it: its world rank, its
    disp_unit, its key in Detector.pend."""
    cdef object rank, tw, pk
    cdef Py_ssize_t du
    cdef _TargetBlocks blocks  # log.touched's of (window, this target), once the record asked
    cdef list plist  # Detector.pend's list of this target, once the record asked


cdef inline long long _tick(Clock clock):
    """clock's own counter, advanced (Clock.tick); a C number (an int object
    is made only where a record keeps it)."""
    clock.v[clock.me_i] += 1
    clock._snap = None
    return clock.v[clock.me_i]


cdef int _merge_rows(Clock clock, const long long *rows, Py_ssize_t nrows, Py_ssize_t nw, bint shared=True) except -1:
    """Clock.merge of the rows' element-wise maximum (``shared``: rows a
    peer stores into, loaded after an acquire fence, slot by slot)."""
    cdef Py_ssize_t i, k
    cdef long long m, v
    if shared:
        hixl_rec_acquire()
    for i in range(nw):
        m = hixl_rec_load(rows + i)
        for k in range(1, nrows):
            v = hixl_rec_load(rows + k * nw + i)
            if v > m:
                m = v
        if m > clock.v[i]:
            clock.v[i] = m
            if i != clock.me_i:
                clock.fe += 1
    clock._snap = None
    return 0


cdef int _done(recs, now, str call, me) except -1:
    """The pending records in recs are complete at now (by call, of actor
    me); the list is kept, emptied: the next access at its target appends
    to it."""
    cdef AccessFields r
    if not recs:
        return 0
    for o in <list>recs:
        r = <AccessFields>o
        r.done, r.done_call, r.done_actor = now, call, me
    hixl_rec_list_clear(recs)
    return 0


cdef Py_ssize_t _SPARES = 4096  # the most uses kept for the next interval


cdef class Recorder:
    """The record of one detector's Put, Get, Flush, atomics and Fence."""

    cdef object det, windows, tl, lock, unlock, own, slow, atomics_done, checksum, opname, log
    cdef Busy tls
    cdef Uses local  # det.local
    cdef Touched tch  # det.log.touched
    cdef UseFields spare  # a use the last completion freed, which nothing else holds (see use())
    cdef list spares  # the same where it freed several (at most _SPARES)
    cdef dict sites, pend, recs
    cdef hixl_rec_qmap quick  # call sites found before, by identity (site_of)
    cdef list quick_keep  # what quick's entries name
    cdef SiteFields h_site  # the last access's site
    cdef list ops, dtypes, types
    cdef object op_last, op_name  # name_of's last op and its name
    cdef tuple dtype_last  # dtype_of's last answer
    cdef object type_info
    cdef object keep, rank
    cdef type Access, LocalUse, Site
    cdef object proc_null
    cdef unsigned long main_ident  # the main thread's clock, without a thread-local lookup
    cdef object main_clock
    cdef bint solo  # no thread but the main one records: the detector's mutex is not needed
    cdef _WinRec w_last  # the last call's window
    cdef str what  # the call being recorded, where a window's error names it
    cdef object win_ref, weakref  # a weak reference to the Win object of w_last; weakref.ref
    cdef object out  # the main thread's clock as int64, what a synchronization sends
    cdef long long *out_p

    def __init__(self, det, Busy tls, slow, atomics_done, proc_null, opname, type_info):
        """``tls``: checked.py's per-thread flag (inside a checked call);
        ``slow(win, call, origin, target_rank, target)``: the general record;
        ``atomics_done(info, targets)``: what a Flush of an atomic's target
        does (where this one does not do it itself); ``opname(op)``: an op's
        name in a record; ``type_info(datatype)``: (size, base dtype str)
        of a contiguous datatype, else None."""
        global _ndarray
        import numpy as np
        import threading
        from .detector import LocalUse, _own, checksum
        from .log import Access, _Site
        if hixl_rec_configure() < 0:
            raise RuntimeError("no code-object extra slot left for the race detector")
        _ndarray = np.ndarray
        self.det, self.windows, self.tl = det, det.windows, det._tl
        self.local = det.local
        self.tch = det.log.touched
        self.spares = []
        self.lock, self.unlock = det.mutex.acquire, det.mutex.release
        main = threading.main_thread().ident
        self.main_ident, self.main_clock = 0, None
        if det._slots.get(main) is det._main:  # a thread's clock is made once and kept
            self.main_ident, self.main_clock = main, det._main
        # Under the GIL, a section of this record runs alone unless another
        # thread records too: one that exists now, or one started later
        # (threads.py's Thread.start tells, before it runs).
        self.solo = self.main_ident != 0 and threading.active_count() == 1
        self.log, self.sites, self.pend, self.recs, self.quick_keep = det.log, det.log.sites, det.pend, {}, []
        self.ops, self.dtypes, self.types = [], [], []
        self.keep, self.rank = det.log.keep, det.rank
        self.tls, self.slow, self.atomics_done, self.checksum = tls, slow, atomics_done, checksum
        self.opname, self.type_info = opname, type_info
        self.own = lambda code: _own(code.co_filename)
        self.Access, self.LocalUse, self.Site = Access, LocalUse, _Site
        self.proc_null = proc_null
        import weakref
        self.weakref = weakref.ref
        self.out = np.zeros(det.width, np.int64)
        self.out_p = <long long *>cnp.PyArray_DATA(<cnp.ndarray>self.out)

    cdef inline bint is_null(self, rank) except -1:
        """rank == MPI.PROC_NULL: an int of its value is the cached small int
        itself (no comparison call); anything else is compared."""
        return rank is self.proc_null or (type(rank) is not int and rank == self.proc_null)

    def threads_started(self):
        """Another thread may record from now on: sections take the mutex."""
        self.solo = False

    cdef inline bint enter(self) except -1:
        """Take the detector's mutex where another thread may record; whether taken."""
        if self.solo:
            return False
        self.lock()
        return True

    cdef inline int leave(self, bint taken) except -1:
        if taken:
            self.unlock()
        return 0

    cdef bint on_main(self):
        return self.main_ident != 0 and PyThread_get_thread_ident() == self.main_ident

    cdef Clock clock(self):
        if self.on_main():
            return <Clock>self.main_clock
        self.solo = False
        c = getattr(self.tl, "clock", None)
        if c is None:
            c = self.det._new_thread_clock()
        return <Clock>c

    cdef _WinRec window(self, w):
        """What the record keeps of window w (its view; ``self.what``: the call)."""
        cdef _WinRec c = self.w_last
        if c is not None and c.core is w:
            return c
        c = self.recs.get(w.key)
        if c is None or c.core is not w:
            info = self.windows.get(w.key)
            if info is None:  # freed: its error, not the record's
                w.check_live(self.what)
                raise RuntimeError(f"race detector: window {w.label()} is not known to it")
            c = self.recs[w.key] = _WinRec(w, info)
        self.w_last = c
        return c

    cdef _WinRec of(self, win):
        """What the record keeps of checked window win (the last one's
        without looking up its core: a weak reference says it is the same)."""
        if self.win_ref is not None and <object>PyWeakref_GetObject(self.win_ref) is win and self.w_last is not None:
            return self.w_last
        c = self.window(win.view())
        self.win_ref = self.weakref(win)
        return c

    def forget(self, key):
        """Window ``key`` is freed."""
        self.recs.pop(key, None)
        del self.spares[:]
        self.spare = None
        if self.w_last is not None and self.w_last.key == key:
            self.w_last = self.win_ref = None

    cdef object release(self, Clock clock):
        """Detector.release: the clock to send (an int64 array), then a tick.
        The main thread's is the same array each time: what it is sent by
        is flushed before it is filled again."""
        cdef Py_ssize_t i
        if clock is self.main_clock:
            memcpy(self.out_p, &clock.v[0], clock.v.size() * sizeof(long long))
            arr = self.out
        else:
            arr = clock.array()
        _tick(clock)
        return arr

    def site(self):
        """(code, line) of the program's line making the current call."""
        return hixl_rec_site(self.own)

    cdef tuple dtype_of(self, arr):
        """(dtype, dtype.str, whether detector.checksum reads it word by word)
        of an ndarray's dtype, remembered by identity (the last one's without
        a search: a loop's)."""
        cdef tuple e
        d = <object>cnp.PyArray_DESCR(<cnp.ndarray>arr)
        if self.dtype_last is not None and (<tuple>self.dtype_last)[0] is d:
            return self.dtype_last
        self.dtype_last = e = self.dtype_search(arr, d)
        return e

    cdef tuple dtype_search(self, arr, d):
        cdef tuple e
        for o in self.dtypes:
            e = <tuple>o
            if e[0] is d:
                return e
        e = (d, d.str, _castable(arr))
        if len(self.dtypes) < 64:
            self.dtypes.append(e)
        return e

    cdef inline bint sums_in_c(self, obj, _Arr *a) except -1:
        """Whether this module's checksum reads the C-contiguous ndarray obj
        (its bytes up to 256, else a dtype detector.checksum reads word by word)."""
        return a.nbytes <= 256 or self.dtype_of(obj)[2]

    cdef object crc(self, obj, _Arr *a):
        """detector.checksum(obj) of a C-contiguous ndarray."""
        if self.sums_in_c(obj, a):
            return _sum_crc(<const unsigned char *>a.addr, a.nbytes)
        return self.checksum(obj)

    cdef object checksum_of(self, obj):
        """detector.checksum(obj)."""
        cdef _Arr a
        if _c_array(obj, &a):
            return self.crc(obj, &a)
        return self.checksum(obj)

    cdef bint unchanged(self, obj, crc) except -1:
        """checksum_of(obj) == crc: in place where crc() reads obj itself."""
        cdef _Arr a
        if _c_array(obj, &a) and self.sums_in_c(obj, &a):
            return _same_sum(<const unsigned char *>a.addr, a.nbytes, crc)
        return self.checksum_of(obj) == crc

    cdef SiteFields site_of(self, const hixl_rec_qkey &qk):
        """The log's site (log._Site) of the call qk names, made on first use."""
        cdef PyObject *found = hixl_rec_qget(self.quick, qk)
        cdef SiteFields st
        if found != NULL:
            st = <SiteFields>found
            st.qk = qk
            return st
        code, key, tw, call = <object>qk.code, <object>qk.key, <object>qk.tw, <object>qk.call
        th, op, dtype = <object>qk.th, <object>qk.op, <object>qk.dtype
        lo, n, line = qk.lo, qk.n, qk.line
        blocks = ((lo, lo + n),) if n else ()
        k = (key, tw, call, op, dtype, code, line, blocks, th)
        o = self.sites.get(k)
        if o is None:
            o = self.sites[k] = self.Site(self.keep)
        st = <SiteFields>o
        st.where, st.qk = (code, line), qk
        # kept: the objects the key names by address live as long as the entry
        self.quick_keep.append((code, key, tw, call, th, op, dtype, o))
        hixl_rec_qput(self.quick, qk, <PyObject *>o)
        return st

    cdef AccessFields access(self, key, _Target t, str call, op, dtype, Py_ssize_t lo, Py_ssize_t n, code, int line,
                             Clock clock):
        """Detector.access under the mutex: the record of this call at this
        site in this interval (the last one again, grown, or a new pending
        one). The site is ``self.h_site`` after it."""
        cdef SiteFields st = self.h_site, nx
        cdef AccessFields rec
        cdef hixl_rec_qkey qk
        tw, pk = t.tw, t.pk
        snap = clock._snap  # None: the clock changed since the last snapshot, made only for a new record
        th = clock.me
        # The objects are the same ones each time a loop's call comes back (the code object, the
        # window's key and cached target, interned strings, cached op and dtype, the clock's slot):
        # compared by identity, a miss only costs the lookup.
        qk.code, qk.key, qk.tw, qk.call = <PyObject *>code, <PyObject *>key, <PyObject *>tw, <PyObject *>call
        qk.th, qk.op, qk.dtype = <PyObject *>th, <PyObject *>op, <PyObject *>dtype
        qk.lo, qk.n, qk.line = lo, n, line
        if st is None or not hixl_rec_qeq(st.qk, qk):
            # not the last call's site again (a loop's): the one that followed it last time (a loop
            # over blocks), else the lookup
            nx = st.next if st is not None else None
            if nx is None or not hixl_rec_qeq(nx.qk, qk):
                nx = self.site_of(qk)
            if st is not None:
                st.next = nx
            st = self.h_site = nx
        o = st.newest
        if o is not None:
            rec = <AccessFields>o
            if snap is not None and rec.snap is snap and rec.done is None:
                rec.count += 1
                self.touch(rec, t, lo, n, st)
                return rec
            if (rec.done is not None and rec.epoch == clock.fe  # Log.regrow's growth
                    and (self.tch.last is rec or (lo >= 0 and not self.since(st, t, lo, n, rec.touched)))):
                rec.done = rec.done_call = None
                rec.done_actor = rec.thread
                rec.count += 1
                self.touch(rec, t, lo, n, st)
                self.pending(t, rec)
                return rec
        if snap is None:
            snap = clock._snap = _snap_of(clock)
        rec = <AccessFields>_new(self.Access)
        PyObject_GC_UnTrack(rec)  # see _untracked
        rec.epoch = clock.fe
        rec.win, rec.target, rec.call, rec.op, rec.dtype, rec.rank, rec.snap = key, tw, call, op, dtype, self.rank, snap
        rec.blocks = (<AccessFields>o).blocks if o is not None else (((lo, lo + n),) if n else ())
        rec.site, rec.thread, rec.done_actor, rec.count = st.where, th, th, 1
        st.seen += 1
        if len(st.first) < self.keep:
            st.first.append(rec)
        else:
            st.last.append(rec)
        st.newest = rec
        self.touch(rec, t, lo, n, st)
        self.pending(t, rec)
        return rec

    cdef inline _TargetBlocks blocks_of(self, _Target t):
        if t.blocks is None:
            t.blocks = self.tch.of(t.pk)
        return t.blocks

    cdef inline int touch(self, AccessFields rec, _Target t, Py_ssize_t lo, Py_ssize_t n, SiteFields st) except -1:
        """log.Log.touch of rec, whose blocks are [lo, lo + n), its site st's
        (which keeps the block's place, for the next one)."""
        cdef _TargetBlocks tb
        self.tch.last = rec
        self.tch.seq += 1
        rec.touched = self.tch.seq
        if n > 0:
            tb = self.blocks_of(t)
            if lo < 0:
                tb.exact = False
            elif st.tb is tb:
                deref(st.tb_at).second = rec.touched
            else:
                st.tb_at = tb.touch_at(<size_t>lo, <size_t>(lo + n), rec.touched)
                st.tb = tb
        return 0

    cdef inline bint since(self, SiteFields st, _Target t, Py_ssize_t lo, Py_ssize_t n, Py_ssize_t seq) except -1:
        """Touched.since of a record of site st, whose blocks are [lo, lo + n)."""
        cdef _TargetBlocks tb = self.blocks_of(t)
        if st.tb is tb:
            return tb.since_at(<size_t>lo, <size_t>(lo + n), seq, st.tb_at, hixl_rec_class(<size_t>n))
        return tb.since1(<size_t>lo, <size_t>(lo + n), seq)

    cdef inline int pending(self, _Target t, AccessFields rec) except -1:
        """rec is not remotely complete: its target has it pending."""
        self.pend_of(t).append(rec)
        return 0

    cdef inline list pend_of(self, _Target t):
        """Detector.pend's list of t (a list, once made, stays there)."""
        if t.plist is None:
            t.plist = self.pend.setdefault(t.pk, [])
        return t.plist

    cdef use(self, key, tw, size_t a, size_t b, bint writes, obj, _Arr *arr, AccessFields rec, str call, where_):
        """Detector.use under the mutex: a buffer [a, b) in use until local
        completion (obj and arr: an origin, a C-contiguous ndarray whose
        checksum is taken, else None and NULL), after the races with those
        in use it overlaps."""
        cdef UseFields u, nu
        cdef list near = self.local.near(a, b) if self.local.items else _NONE
        for o in near:
            u = <UseFields>o
            if u.lo < b and a < u.hi and (writes or u.writes):
                self.det._local_race(u, call, where_, writes, _WHY_BOTH)
        nu = self.spare_of()
        if nu is None:
            nu = <UseFields>_new(self.LocalUse)
            PyObject_GC_UnTrack(nu)  # see _untracked
        nu.win, nu.target, nu.lo, nu.hi, nu.writes = key, tw, a, b, writes
        nu.obj, nu.rec, nu.call, nu.site, nu.req = obj, rec, call, where_, None
        if arr != NULL:
            self.take_sum(nu, obj, arr)
        else:
            nu.crc_obj, nu.sum_kind = None, _SUM_OBJ
        for o in near:
            u = <UseFields>o
            if (u.rec is rec and u.obj is obj and u.lo == a and u.hi == b and u.req is None
                    and _same_sums(u, nu) and u.site == where_ and u.writes == writes):
                self.spare_back(nu)  # the same use again (a loop of Puts of one buffer): one is enough
                return
        self.local.append(nu)

    cdef int spare_back(self, UseFields u) except -1:
        """u, never in use, is a spare again."""
        u.drop()
        if self.spare is None:
            self.spare = u
        elif len(self.spares) < _SPARES:
            self.spares.append(u)
        return 0

    cdef int take_sum(self, UseFields u, obj, _Arr *a) except -1:
        """u's checksum of origin obj (a C-contiguous ndarray): what crc()
        gives, in u itself where it is the bytes (up to _SUM_INLINE) or the
        packed word sum."""
        if a.nbytes <= _SUM_INLINE:
            memcpy(u.sum, <const void *>a.addr, a.nbytes)
            u.crc_obj, u.sum_n, u.sum_kind = None, a.nbytes, _SUM_BYTES
        elif a.nbytes > 256 and self.sums_in_c(obj, a):
            _pack_sum(<const unsigned char *>a.addr, a.nbytes, u.sum)
            u.crc_obj, u.sum_n, u.sum_kind = None, 20, _SUM_PACKED
        else:
            u.crc_obj, u.sum_kind = self.crc(obj, a), _SUM_OBJ
        return 0

    cdef bint use_unchanged(self, UseFields u) except -1:
        """The buffer of u has the checksum u took (true where none was)."""
        cdef _Arr a
        cdef unsigned char packed[20]
        if u.sum_kind == _SUM_OBJ:
            return u.crc_obj is None or self.unchanged(u.obj, u.crc_obj)
        if not _c_array(u.obj, &a) or not self.sums_in_c(u.obj, &a):
            return self.checksum_of(u.obj) == u.crc
        if u.sum_kind == _SUM_BYTES:
            return a.nbytes == u.sum_n and memcmp(<const void *>a.addr, u.sum, u.sum_n) == 0
        if a.nbytes <= 256:
            return False  # the packed sum is of more than 256 bytes
        _pack_sum(<const unsigned char *>a.addr, a.nbytes, packed)
        return memcmp(packed, u.sum, 20) == 0

    cdef UseFields spare_of(self):
        """A use the last completion freed, taken (see complete_local), or
        None: any is as good as another, use() fills every field."""
        cdef UseFields u = self.spare
        if u is not None:
            self.spare = None
            return u
        if self.spares:
            return <UseFields>hixl_rec_list_pop(self.spares)
        return None

    cpdef moved(self, win, str call, origin, target_rank, target, bint receives):
        """Record a Put or Get the base class has just made (checked.py's _moved)."""
        cdef _Arr a
        if self.tls.get() or self.is_null(target_rank):
            return
        if not (_c_array(origin, &a) and self.fast(win, call, origin, &a, target_rank, target, receives)):
            self.slow(win, call, origin, target_rank, target)

    cdef object spec_type(self, datatype):
        """(size, base dtype str) of a contiguous datatype (its one block at 0
        as long as its extent), else None."""
        return _by_identity(self.types, datatype, self.type_info)

    cdef bint fast(self, win, str call, origin, _Arr *a, target_rank, target, bint receives) except -1:
        """Put/Get of a C-contiguous ndarray at an int displacement, or at a
        (disp, count, datatype) target of a contiguous datatype (checked.py's
        fast and, for the latter, what its general record makes of it).
        False: anything else, the general record's (nothing done)."""
        cdef AccessFields rec
        cdef Py_ssize_t held = a.nbytes, k, lo, n
        cdef int line
        cdef _Target t
        W = self.of(win)
        t = W.target(target_rank)
        if target is None or type(target) is int:
            # in C: the base call took the displacement, so it is a window offset (a Python product
            # made an int object, past the small ones, per call)
            lo, n, dtype = (<Py_ssize_t>target if target is not None else 0) * t.du, held, None
        else:
            # target_blocks' rules, for the forms whose blocks are one span
            if type(target) is not tuple and type(target) is not list:
                return False
            k = len(target)
            if k < 1 or k > 3 or type(target[0]) is not int:
                return False
            count = target[1] if k > 1 else None
            if count is not None and type(count) is not int:
                return False
            if k == 3 and target[2] is not None:
                info = self.spec_type(target[2])
                if info is None:
                    return False
                tsize, dtype = info
                if count is None:
                    if tsize == 0:
                        return False
                    count = held // tsize
                described = count * tsize
            else:
                dtype = self.dtype_of(origin)[1]
                described = held if count is None else count * cnp.PyArray_ITEMSIZE(<cnp.ndarray>origin)
            # the base call took it: a Put's target may describe more than the origin holds (a count
            # past 64 bits of bytes too: a Python int here), a Get's origin may hold more than the
            # target describes
            n = min(described, held) if not receives else described
            lo = <Py_ssize_t>target[0] * t.du
        code = hixl_rec_frame(self.own, &line)
        taken = self.enter()
        try:
            rec = self.access(W.key, t, call, None, dtype, lo, n, code, line, self.clock())
            if held:
                if receives:
                    self.use(W.key, t.tw, a.addr, a.addr + held, True, None, NULL, rec, call, self.h_site.where)
                else:
                    self.use(W.key, t.tw, a.addr, a.addr + held, False, origin, a, rec, call, self.h_site.where)
        finally:
            self.leave(taken)
        return True

    # ------------------------------------------------------------ atomics

    cdef object name_of(self, op):
        """checked._opname(op) (the last one's without a search: a loop's)."""
        if op is not self.op_last or op is None:
            self.op_name = _by_identity(self.ops, op, self.opname)
            self.op_last = op
        return self.op_name

    cdef int atomic_issue(self, _WinRec W, target_rank) except -1:
        """Before an atomic: this rank's clock to its row of the target's
        atomic record (checked.py's atomic_issue)."""
        taken = self.enter()
        try:
            clock = self.clock()
            _tick(clock)
            arr = self.release(clock)
        finally:
            self.leave(taken)
        W.send(arr, target_rank, W.atomic_at + W.me * W.nw)
        return 0

    cdef int atomic_read(self, _WinRec W, rank) except -1:
        """An atomic at rank completed: what every origin of atomics left
        there orders this rank (checked.py's atomics_done)."""
        cdef const long long *rows = W.peer_p[<Py_ssize_t>rank]
        W.atomics.discard(rank)
        if rows != NULL:  # mapped here: loaded in place
            rows += W.atomic_at
        else:
            W.get(W.rows, rank, W.atomic_at)
            W.flush(rank)
            rows = W.rows_p
        taken = self.enter()
        try:
            clock = self.clock()
            _merge_rows(clock, rows, W.nc, W.nw)
            _tick(clock)
        finally:
            self.leave(taken)
        return 0

    cpdef bint atomic(self, win, base, str call, origin, result, compare, target_rank, target, op) except -1:
        """An atomic call of C-contiguous ndarrays at an int displacement:
        issue (the clock), the base call, the record. False: anything else,
        the Python method's (nothing done)."""
        cdef _Arr o, r, c
        cdef AccessFields rec
        cdef _Target t
        cdef Py_ssize_t lo
        cdef int line
        r.addr = r.nbytes = c.addr = c.nbytes = 0
        if self.is_null(target_rank) or not (target is None or type(target) is int):
            return False
        if not _c_array(origin, &o):
            return False
        if result is not None and not _c_array(result, &r):
            return False
        if compare is not None and not _c_array(compare, &c):
            return False
        self.what = call
        W = self.of(win)
        if type(target_rank) is not int or not 0 <= <Py_ssize_t>target_rank < W.nc:
            return False  # the Python record's, which lets the window name what is wrong
        self.atomic_issue(W, target_rank)
        _as_called(base, win, call, origin, result, compare, target_rank, target, op)
        opn = "CAS" if compare is not None else self.name_of(op)
        t = W.target(target_rank)
        tw = t.tw
        lo = (<Py_ssize_t>target if target is not None else 0) * t.du
        dtype = self.dtype_of(origin)[1]
        code = hixl_rec_frame(self.own, &line)
        taken = self.enter()
        try:
            rec = self.access(W.key, t, call, opn, dtype, lo, o.nbytes, code, line, self.clock())
            where_ = self.h_site.where
            W.atomics.add(target_rank)
            if o.nbytes and not (call == "Get_accumulate" and opn == "NO_OP"):
                self.use(W.key, tw, o.addr, o.addr + o.nbytes, False, origin, &o, rec, call, where_)
            if result is not None and r.nbytes:
                self.use(W.key, tw, r.addr, r.addr + r.nbytes, True, None, NULL, rec, call, where_)
            if compare is not None and c.nbytes:
                self.use(W.key, tw, c.addr, c.addr + c.nbytes, False, compare, &c, rec, call, where_)
        finally:
            self.leave(taken)
        return True

    # ------------------------------------------------------------ completion

    cdef complete_local(self, wkey, tw, str call):
        """The buffers in use by calls of window wkey (to tw; None: any) are
        free: a checksum that changed is a race (Detector._release_local)."""
        cdef UseFields u
        cdef list keep = None
        for o in self.local.items:
            u = <UseFields>o
            if not ((u.win is wkey or u.win == wkey) and (tw is None or u.target is tw or u.target == tw)
                    and u.req is None):
                if keep is None:
                    keep = []
                keep.append(u)
                continue
            if not self.use_unchanged(u):
                self.det._changed(u, call, None)
        o = u = None  # the item's only holder is the list again (see clear_into)
        if keep:
            self.local.replace(keep)
        elif len(self.local.items) == 1:  # a loop's one buffer: no list, no dict
            u = self.local.clear_but_one()
            if u is not None:
                u.drop()
            self.spare = u
        else:
            self.local.clear_into(self.spares, _SPARES)

    cdef int complete(self, _WinRec W, _Target t, str call) except -1:
        """Under the mutex: this rank's accesses of W to t (None: to every
        target) are complete, remotely and locally, at a new tick
        (Detector.complete)."""
        cdef AccessFields r
        clock = self.clock()
        me = clock.me
        now = _tick(clock)  # an int object: the records keep it
        if self.pend:
            if t is not None:
                _done(self.pend_of(t), now, call, me)
            else:
                for k, v in self.pend.items():
                    if k[0] == W.key:
                        _done(v, now, call, me)
        if self.local.items:
            self.complete_local(W.key, t.tw if t is not None else None, call)
        return 0

    cpdef flushed(self, win, rank):
        """Flush(rank): what this rank did to rank is complete, remotely and
        locally (checked.py's flushed)."""
        cdef _Target t
        if self.tls.get() or self.is_null(rank):
            return
        W = self.of(win)
        t = W.target(rank)
        tw = t.tw
        taken = self.enter()
        try:
            self.complete(W, t, _FLUSH)
        finally:
            self.leave(taken)
        if W.atomics and rank in W.atomics:
            if self.on_main():
                self.atomic_read(W, rank)
            else:
                self.atomics_done(W.info, {tw})

    cpdef fence(self, win, base, assertion):
        """Fence: this rank's accesses of win complete, its clock goes to
        every peer's fence row, the base Fence, then the peers' rows are
        taken in (checked.py's Fence)."""
        cdef Clock clock
        cdef Py_ssize_t q, row, parity
        self.what = "Fence"
        W = self.of(win)
        if W.core.freed:
            W.core.check_live("Fence")  # a freed window says so, not its clock window
        taken = self.enter()
        try:
            self.complete(W, None, "Fence")
        finally:
            self.leave(taken)
        if W.atomics:
            self.atomics_done(W.info, None)
        taken = self.enter()
        try:
            arr = self.release(self.clock())
        finally:
            self.leave(taken)
        parity = W.fences & 1
        row = W.fence_at + (parity * W.nc + W.me) * W.nw
        for q in range(W.nc):
            if q != W.me:
                W.send(arr, q, row)
        base(win, assertion)
        W.fences += 1
        taken = self.enter()
        try:
            clock = self.clock()
            _merge_rows(clock, W.mem_p + W.fence_at + parity * W.nc * W.nw, W.nc, W.nw)
            _tick(clock)
        finally:
            self.leave(taken)


cdef object _as_called(fn, win, str call, origin, result, compare, target_rank, target, op):
    """fn(win, ...) with an atomic's arguments in ``call``'s order."""
    if call == "Fetch_and_op":
        return fn(win, origin, result, target_rank, target, op)
    if call == "Compare_and_swap":
        return fn(win, origin, compare, result, target_rank, target)
    if call == "Accumulate":
        return fn(win, origin, target_rank, target, op)
    return fn(win, origin, result, target_rank, target, op)


cdef object _atomic(Busy tls, Recorder r, win, base, python, str call, origin, result, compare, target_rank, target,
                    op):
    """An atomic of make_calls': recorded in C where it can be, else by
    ``python`` (each called with the call's arguments in its order)."""
    if tls.get():
        return _as_called(base, win, call, origin, result, compare, target_rank, target, op)
    tls.set(True)
    try:
        done = r.atomic(win, base, call, origin, result, compare, target_rank, target, op)
    finally:
        tls.set(False)
    if not done:
        _as_called(python, win, call, origin, result, compare, target_rank, target, op)


def make_calls(Win, Recorder r, Busy tls, python):
    """CheckedWin's Put, Get, Flush, Fence and atomics, recording through
    ``r``: no Python frame. ``python``: the class whose methods record in
    Python (what an atomic of anything but ndarrays at an int displacement
    takes)."""
    base_put, base_get, base_flush, base_fence = Win.Put, Win.Get, Win.Flush, Win.Fence
    base_fop, base_cas, base_acc, base_gacc = (Win.Fetch_and_op, Win.Compare_and_swap, Win.Accumulate,
                                               Win.Get_accumulate)
    py_fop, py_cas, py_acc, py_gacc = (python.Fetch_and_op, python.Compare_and_swap, python.Accumulate,
                                       python.Get_accumulate)
    from mpi4py import MPI
    SUM = MPI.SUM

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

    def Fence(self, assertion=0):
        """Complete this rank's RMA, then barrier (the race detector's clocks ride on it)."""
        if tls.get():
            return base_fence(self, assertion)
        tls.set(True)
        try:
            r.fence(self, base_fence, assertion)
        finally:
            tls.set(False)

    def Fetch_and_op(self, origin, result, target_rank, target_disp=0, op=SUM):
        """Get_accumulate of one element (recorded by the race detector)."""
        _atomic(tls, r, self, base_fop, py_fop, "Fetch_and_op", origin, result, None, target_rank, target_disp, op)

    def Compare_and_swap(self, origin, compare, result, target_rank, target_disp=0):
        """Store origin at the target if it equals compare (recorded by the race detector)."""
        if compare is None:  # the base call says what is wrong
            return py_cas(self, origin, compare, result, target_rank, target_disp)
        _atomic(tls, r, self, base_cas, py_cas, "Compare_and_swap", origin, result, compare, target_rank,
                target_disp, None)

    def Accumulate(self, origin, target_rank, target=None, op=SUM):
        """Element-wise atomic target = op(target, origin) (recorded by the race detector)."""
        _atomic(tls, r, self, base_acc, py_acc, "Accumulate", origin, None, None, target_rank, target, op)

    def Get_accumulate(self, origin, result, target_rank, target=None, op=SUM):
        """Accumulate returning the previous target values (recorded by the race detector)."""
        if result is None:  # the base call says what is wrong
            return py_gacc(self, origin, result, target_rank, target, op)
        _atomic(tls, r, self, base_gacc, py_gacc, "Get_accumulate", origin, result, None, target_rank, target, op)

    return {"Put": Put, "Get": Get, "Flush": Flush, "Fence": Fence, "Fetch_and_op": Fetch_and_op,
            "Compare_and_swap": Compare_and_swap, "Accumulate": Accumulate, "Get_accumulate": Get_accumulate}
