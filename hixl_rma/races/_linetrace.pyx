# cython: language_level=3
"""The line watch's trace function, in C (lines.py decides what it watches).

A Python trace function (``sys.settrace``) is a Python call for every
frame the program enters, hixl_rma's own and the detector's included, and
for every line of the frames it keeps: the detector's main cost in a loop
of small RMA calls. This one is C: a call event costs nothing, a line
event a read of its code object's classification (kept on the code object,
asked of lines.py once) and, in watched code, one lookup of its line number;
only a line whose names are bound to a buffer (an ndarray, a memoryview ...:
what lines.py looks at) calls back into Python.

Tracing on 3.11 slows every instruction of every frame, watched or not:
there a frame evaluation function runs the frames of code with no line to
watch untraced (hixl_lt_eval), set aside while a thread's C stack is deep
(hixl_lt_floor: it makes each Python call a C call). 3.12+ has sys.monitoring, whose LINE events
are per code object and per line: the same checks run as its callbacks
(start_monitoring), and a line with nothing to watch is disabled for good.
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

    static PyObject *hixl_lt_arrays = NULL;    /* the types whose objects on_line looks at */

    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* 3.11 has no call that reads one local: the frame's locals dict
       (PyFrame_GetLocals) copies every local on every line event of a
       watched line, where the slot is one load. */
    #ifndef Py_BUILD_CORE
    #define Py_BUILD_CORE 1
    #endif
    #include "internal/pycore_frame.h"
    #include <pthread.h>
    #define HIXL_LT_SLOTS 1
    #endif

    /* What name of one entry ((name, how, index, store, slot)) is bound to
       in the frame, as lines._resolve finds it: a new reference; NULL with
       no error when unbound; NULL with an error set when it cannot tell. */
    static PyObject *hixl_lt_resolve(PyFrameObject *frame, PyObject *entry, PyObject **locals,
                                     PyObject **globals) {
        PyObject *name = PyTuple_GET_ITEM(entry, 0), *how = PyTuple_GET_ITEM(entry, 1), *obj;
        Py_ssize_t slot = -1;
        if (PyTuple_GET_SIZE(entry) >= 5 && PyLong_Check(PyTuple_GET_ITEM(entry, 4))) {
            slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 4));
            if (slot == -1 && PyErr_Occurred()) return NULL;
        }
        if (slot >= 0) {
    #ifdef HIXL_LT_SLOTS
            _PyInterpreterFrame *f = frame->f_frame;
            if (slot >= f->f_code->co_nlocalsplus) {
                PyErr_SetString(PyExc_IndexError, "slot past the frame's locals");  /* on_line decides */
                return NULL;
            }
            obj = f->localsplus[slot];
            /* a LOAD_DEREF slot holds the cell once the frame runs its lines */
            if (obj != NULL && PyUnicode_CompareWithASCIIString(how, "LOAD_DEREF") == 0) {
                if (!PyCell_Check(obj)) {
                    PyErr_SetString(PyExc_TypeError, "free variable not a cell");
                    return NULL;
                }
                obj = PyCell_GET(obj);
            }
            Py_XINCREF(obj);
            return obj;
    #elif PY_VERSION_HEX >= 0x030C0000
            obj = PyFrame_GetVar(frame, name);
            if (obj == NULL && PyErr_ExceptionMatches(PyExc_NameError)) PyErr_Clear();
            return obj;
    #endif
        }
        if (*globals == NULL && (*globals = PyFrame_GetGlobals(frame)) == NULL) return NULL;
        if (PyUnicode_CompareWithASCIIString(how, "LOAD_GLOBAL") == 0) {
            obj = PyDict_GetItemWithError(*globals, name);
            Py_XINCREF(obj);
            return obj;
        }
        if (*locals == NULL && (*locals = PyFrame_GetLocals(frame)) == NULL) return NULL;
        if (!PyDict_Check(*locals)) {
            PyErr_SetString(PyExc_TypeError, "locals not a dict");  /* on_line decides */
            return NULL;
        }
        obj = PyDict_GetItemWithError(*locals, name);
        if (obj == NULL && !PyErr_Occurred() && PyUnicode_CompareWithASCIIString(how, "LOAD_NAME") == 0)
            obj = PyDict_GetItemWithError(*globals, name);
        Py_XINCREF(obj);
        return obj;
    }

    /* Whether obj is an instance of one of the types (a subclass's too):
       its type's MRO, not isinstance's __class__ lookup, which an int or a
       function on a watched line paid on every line event. */
    static int hixl_lt_is_array(PyObject *obj) {
        /* what a loop's lines name most: none of them a buffer */
        if (obj == Py_None || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || PyList_CheckExact(obj) ||
            PyTuple_CheckExact(obj) || PyUnicode_CheckExact(obj) || PyDict_CheckExact(obj) || PyBool_Check(obj) ||
            PyFunction_Check(obj) || PyMethod_Check(obj) || PyCFunction_CheckExact(obj))
            return 0;
        if (!PyTuple_Check(hixl_lt_arrays)) return 1;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(hixl_lt_arrays); k++) {
            PyObject *t = PyTuple_GET_ITEM(hixl_lt_arrays, k);
            if (PyType_Check(t) && PyObject_TypeCheck(obj, (PyTypeObject *)t)) return 1;
        }
        return 0;
    }

    /* 0 when no name of the line's entries is bound to a buffer type (on_line
       would look at nothing); 1 when one is, or when it cannot tell. */
    static int hixl_lt_names_buffer(PyFrameObject *frame, PyObject *entries) {
        PyObject *locals = NULL, *globals = NULL;
        int found = 0;
        if (!PyTuple_Check(entries)) return 1;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(entries) && !found; i++) {
            PyObject *entry = PyTuple_GET_ITEM(entries, i);
            if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) { found = 1; break; }
            PyObject *obj = hixl_lt_resolve(frame, entry, &locals, &globals);
            if (obj == NULL) {
                if (PyErr_Occurred()) { PyErr_Clear(); found = 1; }
                continue;
            }
            if (hixl_lt_is_array(obj)) found = 1;
            Py_DECREF(obj);
        }
        Py_XDECREF(locals);
        Py_XDECREF(globals);
        return found;
    }

    /* classify's {lineno: entries} as a tuple (first line, entries of it,
       of the next, ...; None where a line has none): a line event indexes
       it, where a dict lookup made an int object first. */
    static PyObject *hixl_lt_lines(PyObject *table) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        long lo = 0, hi = -1;
        if (!PyDict_Check(table)) {
            PyErr_SetString(PyExc_TypeError, "race detector: a line table not a dict");
            return NULL;
        }
        while (PyDict_Next(table, &pos, &k, &v)) {
            long ln = PyLong_AsLong(k);
            if (ln == -1 && PyErr_Occurred()) return NULL;
            if (hi < lo) lo = hi = ln;
            if (ln < lo) lo = ln;
            if (ln > hi) hi = ln;
        }
        if (hi < lo) Py_RETURN_NONE;  /* no line to watch */
        PyObject *t = PyTuple_New(hi - lo + 2);
        if (t == NULL) return NULL;
        PyObject *first = PyLong_FromLong(lo);
        if (first == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, 0, first);
        for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(t); i++) {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(t, i, Py_None);
        }
        pos = 0;
        while (PyDict_Next(table, &pos, &k, &v)) {
            Py_ssize_t i = PyLong_AsLong(k) - lo + 1;
            Py_INCREF(v);
            Py_DECREF(PyTuple_GET_ITEM(t, i));  /* None, which the tuple held */
            PyTuple_SET_ITEM(t, i, v);
        }
        return t;
    }

    /* The code object's line tuple, or None where it has no line to watch
       (borrowed: the code object owns it); NULL with an error set. */
    static PyObject *hixl_lt_table(PyCodeObject *code) {
        void *extra = NULL;
        if (HIXL_LT_GET_EXTRA((PyObject *)code, hixl_lt_index, &extra) < 0) return NULL;
        if (extra != NULL) return (PyObject *)extra;
        PyObject *table = PyObject_CallOneArg(hixl_lt_classify, (PyObject *)code);
        if (table != NULL && table != Py_None) Py_SETREF(table, hixl_lt_lines(table));
        if (table == NULL || HIXL_LT_SET_EXTRA((PyObject *)code, hixl_lt_index, table) < 0) {
            Py_XDECREF(table);
            return NULL;
        }
        return table;  /* the code object owns the reference now */
    }

    /* Line `line` of frame (running code, whose line tuple is lines) is
       about to run: on_line is called where its names are bound to a
       buffer. 1: the line has nothing to watch, ever; 0: done; -1: error. */
    static int hixl_lt_line(PyFrameObject *frame, PyObject *lines, int line) {
        Py_ssize_t i = (Py_ssize_t)line - PyLong_AsSsize_t(PyTuple_GET_ITEM(lines, 0)) + 1;
        if (i < 1 || i >= PyTuple_GET_SIZE(lines)) return 1;
        PyObject *entries = PyTuple_GET_ITEM(lines, i);
        if (entries == Py_None) return 1;
        if (hixl_lt_arrays != NULL && !hixl_lt_names_buffer(frame, entries)) return 0;
        PyObject *r = PyObject_CallOneArg(hixl_lt_on_line, (PyObject *)frame);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }

    static int hixl_lt_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
        (void)obj;
        (void)arg;
        if (what != PyTrace_LINE || hixl_lt_index < 0) return 0;
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *extra = hixl_lt_table(code);
        Py_DECREF(code);
        if (extra == NULL) return -1;
        if (extra == Py_None) return 0;
        return hixl_lt_line(frame, extra, PyFrame_GetLineNumber(frame)) < 0 ? -1 : 0;
    }

    /* sys.monitoring's callbacks (3.12+; lines.py registers them). PY_START:
       the code object's classification; LINE events are turned on for it
       where it has a line to watch (the caller does), and PY_START is
       disabled for it: 1 when it has one, 0 when not, -1: error. */
    static int hixl_lt_mon_start(PyObject *code) {
        if (!PyCode_Check(code) || hixl_lt_index < 0) return 0;
        PyObject *table = hixl_lt_table((PyCodeObject *)code);
        if (table == NULL) return -1;
        return table != Py_None;
    }
    /* LINE: 1 when the line has nothing to watch (the callback disables
       its event there for good), 0 when done, -1: error. */
    static int hixl_lt_mon_line(PyObject *code, int line) {
        void *extra = NULL;
        if (!PyCode_Check(code) || hixl_lt_index < 0) return 1;
        if (HIXL_LT_GET_EXTRA(code, hixl_lt_index, &extra) < 0) return -1;
        if (extra == NULL || extra == Py_None) return 1;
        /* a callback in C runs in no frame of its own: the current frame is the line's */
        PyFrameObject *frame = PyEval_GetFrame();
        if (frame == NULL) return 0;
        PyCodeObject *fc = PyFrame_GetCode(frame);
        int same = (PyObject *)fc == code;
        Py_DECREF(fc);
        if (!same) return 0;
        return hixl_lt_line(frame, (PyObject *)extra, line);
    }

    #ifdef HIXL_LT_SLOTS
    /* Frames of code with no line to watch run untraced (3.11).

       Tracing on 3.11 is per thread: with a trace function set, every
       instruction of every frame takes the tracing path, unspecialized,
       whether its lines are watched or not (hixl_rma's, numpy's, the
       standard library's). A frame evaluation function (PEP 523) is asked
       for each frame the interpreter runs, and a frame's eval loop takes
       its caller's tracing flag (cframe.use_tracing) as it starts: so the
       flag is set for the frame from its code object's classification and
       put back for the caller when it returns. Nothing is lost: the trace
       function does nothing in such a frame. With the function set, 3.11
       runs each Python call in an eval loop of its own (no call is inlined,
       CALL_PY_EXACT_ARGS and BINARY_SUBSCR_GETITEM deoptimize), so a
       watched callee of an untraced frame gets its flag too.

       That makes each Python call a C call, where plain 3.11 inlines it: a
       recursion plain Python runs 100,000 deep (its limit raised) would
       overflow the C stack. So each thread's hooked frames may use only
       the top of its C stack (hixl_lt_floor); a frame that would start
       below it sets the function aside for as long as it runs: its calls
       are inlined again, and every thread's frames are traced meanwhile
       (a frame running untraced would inline a watched callee untraced). */
    static int hixl_lt_hooked = 0;
    static int hixl_lt_aside = 0;  /* the frames running with the function set aside */

    /* The most of a thread's C stack its hooked frames take: half of a
       small stack; 1 MiB of a larger one, more than 1,000 hooked frames
       (the default recursion limit) take, and the rest is left to what
       plain Python would use it for. */
    #define HIXL_LT_HOOK_STACK ((size_t)1 << 20)
    static __thread uintptr_t hixl_lt_floor = 0;  /* per thread: 0 until its first hooked frame */

    static uintptr_t hixl_lt_stack_floor(uintptr_t sp) {
        pthread_attr_t attr;
        void *lo = NULL;
        size_t size = 0;
        uintptr_t floor = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &lo, &size) == 0 && size > 0 && sp > (uintptr_t)lo &&
                sp <= (uintptr_t)lo + size)
                floor = (uintptr_t)lo + size - (size / 2 < HIXL_LT_HOOK_STACK ? size / 2 : HIXL_LT_HOOK_STACK);
            pthread_attr_destroy(&attr);
        }
        /* a stack it cannot place (not this thread's, as a coroutine library's): the least a thread has */
        if (floor == 0) floor = sp - 16 * 1024;
        return floor;
    }

    static PyObject *hixl_lt_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

    static void hixl_lt_set_aside(PyThreadState *tstate) {
        PyInterpreterState *interp = tstate->interp;
        hixl_lt_aside++;
        if (_PyInterpreterState_GetEvalFrameFunc(interp) == hixl_lt_eval)
            _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
        /* Each thread's running eval loop traced (the ones below it are
           when their hooked callee returns). Under the GIL, as CPython's
           own threads come and go; one tracing now gets the flag back as
           it stops. */
        for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t))
            if (t->c_tracefunc == hixl_lt_trace && t->tracing == 0 && t->cframe != NULL)
                t->cframe->use_tracing = 255;
    }

    static void hixl_lt_put_back(PyThreadState *tstate) {
        PyInterpreterState *interp = tstate->interp;
        if (--hixl_lt_aside > 0 || !hixl_lt_hooked || _PyInterpreterState_GetEvalFrameFunc(interp) != _PyEval_EvalFrameDefault)
            return;
        _PyInterpreterState_SetEvalFrameFunc(interp, hixl_lt_eval);
        /* another thread's running eval loop untraced again where it runs
           one frame (nothing inlined into it meanwhile) of unwatched code:
           a loop of a library's would otherwise stay traced */
        for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t)) {
            if (t == tstate || t->c_tracefunc != hixl_lt_trace || t->c_profilefunc != NULL || t->tracing != 0 ||
                t->cframe == NULL || t->cframe->current_frame == NULL || !t->cframe->current_frame->is_entry)
                continue;
            void *extra = NULL;
            if (HIXL_LT_GET_EXTRA((PyObject *)t->cframe->current_frame->f_code, hixl_lt_index, &extra) < 0)
                PyErr_Clear();
            else if (extra == Py_None)
                t->cframe->use_tracing = 0;
        }
    }

    static PyObject *hixl_lt_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag) {
        if (tstate->c_tracefunc != hixl_lt_trace || tstate->c_profilefunc != NULL || tstate->tracing)
            return _PyEval_EvalFrameDefault(tstate, frame, throwflag);  /* not ours to change */
        _PyCFrame *caller = tstate->cframe;
        uint8_t was = caller->use_tracing;  /* before a classification's tracing pause resets it */
        PyObject *table = NULL;
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        if (hixl_lt_floor == 0) hixl_lt_floor = hixl_lt_stack_floor(sp);
        int aside = sp < hixl_lt_floor;
        if (aside) {
            hixl_lt_set_aside(tstate);
        } else {
            void *extra = NULL;
            if (HIXL_LT_GET_EXTRA((PyObject *)frame->f_code, hixl_lt_index, &extra) == 0) table = (PyObject *)extra;
            else PyErr_Clear();
            if (table == NULL && !throwflag && !PyErr_Occurred()) {
                /* the first frame of this code: classify it now (its frames untraced) */
                PyThreadState_EnterTracing(tstate);
                table = hixl_lt_table(frame->f_code);
                PyThreadState_LeaveTracing(tstate);
                if (table == NULL) PyErr_Clear();  /* traced: the trace function asks again, and raises */
            }
        }
        caller->use_tracing = table == Py_None && !hixl_lt_aside ? 0 : 255;
        PyObject *r = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
        if (aside) hixl_lt_put_back(tstate);
        if (tstate->c_tracefunc == hixl_lt_trace && tstate->c_profilefunc == NULL)
            caller->use_tracing = hixl_lt_aside ? 255 : was;
        else
            caller->use_tracing = (tstate->c_tracefunc || tstate->c_profilefunc) ? 255 : 0;
        return r;
    }

    static void hixl_lt_hook(void) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        /* another frame evaluator (a JIT, a debugger's): leave it, and trace every frame */
        if (!hixl_lt_hooked && _PyInterpreterState_GetEvalFrameFunc(interp) == _PyEval_EvalFrameDefault) {
            _PyInterpreterState_SetEvalFrameFunc(interp, hixl_lt_eval);
            hixl_lt_hooked = 1;
        }
    }

    static void hixl_lt_unhook(void) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        if (hixl_lt_hooked && _PyInterpreterState_GetEvalFrameFunc(interp) == hixl_lt_eval)
            _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
        hixl_lt_hooked = 0;
    }

    static int hixl_lt_in_use(void) {
        return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == hixl_lt_eval;
    }
    #define HIXL_LT_HOOKS 1
    #else
    static void hixl_lt_hook(void) {}
    static void hixl_lt_unhook(void) {}
    static int hixl_lt_in_use(void) { return 0; }
    #define HIXL_LT_HOOKS 0
    #endif

    static int hixl_lt_configure(void) {
        if (hixl_lt_index < 0) hixl_lt_index = HIXL_LT_REQUEST_INDEX(hixl_lt_free);
        return hixl_lt_index < 0 ? -1 : 0;
    }
    static void hixl_lt_install(void) {
        hixl_lt_hook();
        PyEval_SetTrace(hixl_lt_trace, NULL);
    }
    static void hixl_lt_remove(void) { PyEval_SetTrace(NULL, NULL); }
    """
    PyObject *hixl_lt_classify
    PyObject *hixl_lt_on_line
    PyObject *hixl_lt_arrays
    int hixl_lt_configure()
    void hixl_lt_install()
    void hixl_lt_remove()
    void hixl_lt_unhook()
    int hixl_lt_in_use()
    int HIXL_LT_HOOKS
    int hixl_lt_mon_start(object code) except -1
    int hixl_lt_mon_line(object code, int line) except -1

cdef object _keep = None  # owns what the C globals point at


def configure(classify, on_line, arrays=None):
    """``classify(code)``: the code object's {lineno: entries} table, or None
    where nothing is to be watched (asked once per code object);
    ``on_line(frame)``: a line with entries is about to run; ``arrays``: a
    tuple of types: on_line is called only when a name of the line's
    entries ((name, how, ...), resolved as lines._resolve does) is bound to
    an instance of one (else it would look at nothing)."""
    global _keep, hixl_lt_classify, hixl_lt_on_line, hixl_lt_arrays
    if hixl_lt_configure() < 0:
        raise RuntimeError("no code-object extra slot left for the line watch")
    _keep = (classify, on_line, arrays)
    hixl_lt_classify = <PyObject *>classify
    hixl_lt_on_line = <PyObject *>on_line
    hixl_lt_arrays = <PyObject *>arrays if arrays is not None else NULL


def install():
    """Trace the calling thread with the C function (on 3.11 only the frames
    of code with a line to watch: see hixl_lt_eval)."""
    hixl_lt_install()


def remove():
    """Stop tracing the calling thread."""
    hixl_lt_remove()


def unhook():
    """Stop choosing, frame by frame, which frames are traced (every thread)."""
    hixl_lt_unhook()


def hooks():
    """Whether frames of code with nothing to watch run untraced (CPython 3.11)."""
    return bool(HIXL_LT_HOOKS)


def hooked():
    """Whether they do now: the frame evaluation function is set (not
    before install() or after unhook(), nor while a deep stack has it set
    aside)."""
    return bool(hixl_lt_in_use())


# ---------------------------------------------------------------- sys.monitoring (3.12+)
# A tool's LINE events are per code object and per line: a line with nothing
# to watch is disabled for good the first time it runs (it costs nothing
# after that, where 3.11's tracing ran every instruction of every frame on
# its slow path), and code with no line to watch gets no LINE event at all.

cdef object _mon = None  # (sys.monitoring, tool id, DISABLE, LINE), while the watch uses it
cdef list _lit = None  # the code objects whose LINE events it turned on


def _on_start(code, offset):
    """PY_START, PY_RESUME: classify the code object, once (the event is
    disabled where it came from after; a generator started before the
    watch comes here when it is resumed)."""
    mon, tool, disable, line = _mon
    if hixl_lt_mon_start(code):
        mon.set_local_events(tool, code, line)
        _lit.append(code)
    return disable


def _on_line(code, int line):
    """LINE of watched code: its line watched, or disabled for good where it has nothing to watch."""
    if hixl_lt_mon_line(code, line):
        return _mon[2]
    return None


def monitoring():
    """Whether this Python has sys.monitoring (3.12+), which start_monitoring uses."""
    import sys
    return hasattr(sys, "monitoring")


def start_monitoring(frames=()):
    """Watch every thread's lines through a sys.monitoring tool (configure()
    first); ``frames``: frames already running, whose code is classified now
    (no PY_START comes for them). False where no tool id is free."""
    global _mon, _lit
    import sys
    mon = sys.monitoring
    for tool in (4, 3, 5, 2, 1, 0):
        try:
            mon.use_tool_id(tool, "hixl_rma race detector")
        except ValueError:
            continue
        break
    else:
        return False
    _mon, _lit = (mon, tool, mon.DISABLE, mon.events.LINE), []
    mon.register_callback(tool, mon.events.PY_START, _on_start)
    mon.register_callback(tool, mon.events.PY_RESUME, _on_start)
    mon.register_callback(tool, mon.events.LINE, _on_line)
    for f in frames:
        code = f.f_code
        if hixl_lt_mon_start(code) and not any(c is code for c in _lit):
            mon.set_local_events(tool, code, mon.events.LINE)
            _lit.append(code)
    mon.set_events(tool, mon.events.PY_START | mon.events.PY_RESUME)
    return True


def stop_monitoring():
    """Give the tool id back, its events off."""
    global _mon, _lit
    if _mon is None:
        return
    mon, tool = _mon[0], _mon[1]
    mon.set_events(tool, 0)
    for code in _lit:
        mon.set_local_events(tool, code, 0)
    for event in (mon.events.PY_START, mon.events.PY_RESUME, mon.events.LINE):
        mon.register_callback(tool, event, None)
    mon.free_tool_id(tool)
    _mon = _lit = None
