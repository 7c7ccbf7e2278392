# cython: language_level=3
"""The line watch's trace function, in C (lines.py decides what it watches).

A Python trace function (``sys.settrace``) is a Python call for every
frame the program enters, hixl_rma's own and the detector's included, and
for every line of the frames it keeps: the detector's main cost in a loop
of small RMA calls. This one is C: a call event costs nothing, a line
event a read of its code object's classification (kept on the code object,
asked of lines.py once) and, in watched code, one lookup of its line number;
only a line that names something to watch calls back into Python.
"""

from cpython.object cimport PyObject

cdef extern from *:
    """
    #include <frameobject.h>

    #if PY_VERSION_HEX >= 0x030C0000
    #define HIXL_LT_REQUEST_INDEX PyUnstable_Eval_RequestCodeExtraIndex
    #define HIXL_LT_GET_EXTRA PyUnstable_Code_GetExtra
    #define HIXL_LT_SET_EXTRA PyUnstable_Code_SetExtra
    #else
    #define HIXL_LT_REQUEST_INDEX _PyEval_RequestCodeExtraIndex
    #define HIXL_LT_GET_EXTRA _PyCode_GetExtra
    #define HIXL_LT_SET_EXTRA _PyCode_SetExtra
    #endif

    static PyObject *hixl_lt_classify = NULL;  /* classify(code) -> {lineno: entries} or None */
    static PyObject *hixl_lt_on_line = NULL;   /* on_line(frame): a watched line is about to run */
    /* Each code object's classification rides on the code object itself (its
       co_extra slot): no hashing of code objects, which is not cached, per line. */
    static Py_ssize_t hixl_lt_index = -1;

    static void hixl_lt_free(void *extra) { Py_XDECREF((PyObject *)extra); }

    static int hixl_lt_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
        (void)obj;
        (void)arg;
        if (what != PyTrace_LINE || hixl_lt_index < 0) return 0;
        PyCodeObject *code = PyFrame_GetCode(frame);
        void *extra = NULL;
        if (HIXL_LT_GET_EXTRA((PyObject *)code, hixl_lt_index, &extra) < 0) {
            Py_DECREF(code);
            return -1;
        }
        if (extra == NULL) {
            PyObject *table = PyObject_CallOneArg(hixl_lt_classify, (PyObject *)code);
            if (table == NULL || HIXL_LT_SET_EXTRA((PyObject *)code, hixl_lt_index, table) < 0) {
                Py_XDECREF(table);
                Py_DECREF(code);
                return -1;
            }
            extra = table;  /* the code object owns the reference now */
        }
        Py_DECREF(code);
        if (extra == Py_None) return 0;
        PyObject *line = PyLong_FromLong(PyFrame_GetLineNumber(frame));
        if (line == NULL) return -1;
        PyObject *entries = PyDict_GetItemWithError((PyObject *)extra, line);
        Py_DECREF(line);
        if (entries == NULL) return PyErr_Occurred() ? -1 : 0;
        PyObject *r = PyObject_CallOneArg(hixl_lt_on_line, (PyObject *)frame);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }

    static int hixl_lt_configure(void) {
        if (hixl_lt_index < 0) hixl_lt_index = HIXL_LT_REQUEST_INDEX(hixl_lt_free);
        return hixl_lt_index < 0 ? -1 : 0;
    }
    static void hixl_lt_install(void) { PyEval_SetTrace(hixl_lt_trace, NULL); }
    static void hixl_lt_remove(void) { PyEval_SetTrace(NULL, NULL); }
    """
    PyObject *hixl_lt_classify
    PyObject *hixl_lt_on_line
    int hixl_lt_configure()
    void hixl_lt_install()
    void hixl_lt_remove()

cdef object _keep = None  # owns what the C globals point at


def configure(classify, on_line):
    """``classify(code)``: the code object's {lineno: entries} table, or None
    where nothing is to be watched (asked once per code object);
    ``on_line(frame)``: a line with entries is about to run."""
    global _keep, hixl_lt_classify, hixl_lt_on_line
    if hixl_lt_configure() < 0:
        raise RuntimeError("no code-object extra slot left for the line watch")
    _keep = (classify, on_line)
    hixl_lt_classify = <PyObject *>classify
    hixl_lt_on_line = <PyObject *>on_line


def install():
    """Trace the calling thread with the C function."""
    hixl_lt_install()


def remove():
    """Stop tracing the calling thread."""
    hixl_lt_remove()
