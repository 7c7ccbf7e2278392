# The accumulate lock (MPI 12.7.1, the atomicity of accumulates) of a
# window's state (included by _engine.pyx): a target whose accumulates go
# under its lock word (ctrl.ACC) is updated by get, op, put while this rank
# holds that word, without the target's CPU.

cdef int _ACC_TRIES = 64  # tries at a taken accumulate lock before the Python layer waits for it
cdef int _WORD_KIND = -1  # WindowState._locked_update's word mode (the kinds of hx_acc_apply are 0 and up)


cdef inline uint64_t _acc_apply(int code, uint64_t cur, uint64_t value, uint64_t cmp) noexcept nogil:
    """What an 8-byte atomic of ``code`` (C_ADD ...) leaves in place of ``cur``."""
    if code == C_ADD:
        return cur + value
    if code == C_AND:
        return cur & value
    if code == C_OR:
        return cur | value
    if code == C_XOR:
        return cur ^ value
    if code == C_SWAP:
        return value
    if code == C_CSWAP:
        return value if cur == cmp else cur
    return cur


# The element-wise ops of an accumulate under the lock word, in C, for the
# common case: one contiguous run of a basic numpy type (WindowState.
# accumulate_small). Integers wrap as numpy's do (the arithmetic is made
# unsigned); floats take SUM, PROD, REPLACE and NO_OP only (MAX and MIN
# follow numpy's NaN rules in the Python layer).
cdef extern from *:
    """
    #include <cstdint>
    #include <cstring>
    #include <type_traits>

    enum { HX_SUM, HX_PROD, HX_MAX, HX_MIN, HX_LAND, HX_LOR, HX_LXOR, HX_BAND, HX_BOR, HX_BXOR, HX_REPLACE,
           HX_NOOP };

    template <typename T>
    static inline bool hx_acc_takes(int op) {
      return std::is_integral<T>::value ? op >= HX_SUM && op <= HX_NOOP
                                        : op == HX_SUM || op == HX_PROD || op == HX_REPLACE || op == HX_NOOP;
    }

    template <typename T, int OP>
    static inline T hx_acc_one(T a, T b) {
      if constexpr (std::is_integral<T>::value) {
        using U = typename std::conditional<sizeof(T) < 8, uint32_t, uint64_t>::type;
        if constexpr (OP == HX_SUM) return (T)((U)a + (U)b);
        if constexpr (OP == HX_PROD) return (T)((U)a * (U)b);
        if constexpr (OP == HX_MAX) return a > b ? a : b;
        if constexpr (OP == HX_MIN) return a < b ? a : b;
        if constexpr (OP == HX_LAND) return (T)(a != 0 && b != 0);
        if constexpr (OP == HX_LOR) return (T)(a != 0 || b != 0);
        if constexpr (OP == HX_LXOR) return (T)((a != 0) != (b != 0));
        if constexpr (OP == HX_BAND) return (T)(a & b);
        if constexpr (OP == HX_BOR) return (T)(a | b);
        if constexpr (OP == HX_BXOR) return (T)(a ^ b);
        if constexpr (OP == HX_REPLACE) return b;
        return a;
      } else {
        if constexpr (OP == HX_SUM) return a + b;
        if constexpr (OP == HX_PROD) return a * b;
        if constexpr (OP == HX_REPLACE) return b;
        return a;
      }
    }

    /* One op over a run, the op fixed at compile time so that the loop vectorizes. */
    template <typename T, int OP>
    static inline void hx_acc_loop(char *target, const char *origin, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        T a, b;
        std::memcpy(&a, target + i * sizeof(T), sizeof(T));
        std::memcpy(&b, origin + i * sizeof(T), sizeof(T));
        a = hx_acc_one<T, OP>(a, b);
        std::memcpy(target + i * sizeof(T), &a, sizeof(T));
      }
    }

    template <typename T>
    static inline void hx_acc_run(int op, char *target, const char *origin, size_t n) {
      switch (op) {
        case HX_SUM: hx_acc_loop<T, HX_SUM>(target, origin, n); break;
        case HX_PROD: hx_acc_loop<T, HX_PROD>(target, origin, n); break;
        case HX_MAX: hx_acc_loop<T, HX_MAX>(target, origin, n); break;
        case HX_MIN: hx_acc_loop<T, HX_MIN>(target, origin, n); break;
        case HX_LAND: hx_acc_loop<T, HX_LAND>(target, origin, n); break;
        case HX_LOR: hx_acc_loop<T, HX_LOR>(target, origin, n); break;
        case HX_LXOR: hx_acc_loop<T, HX_LXOR>(target, origin, n); break;
        case HX_BAND: hx_acc_loop<T, HX_BAND>(target, origin, n); break;
        case HX_BOR: hx_acc_loop<T, HX_BOR>(target, origin, n); break;
        case HX_BXOR: hx_acc_loop<T, HX_BXOR>(target, origin, n); break;
        case HX_REPLACE: std::memcpy(target, origin, n * sizeof(T)); break;
        default: break;
      }
    }

    /* The element kinds: 0-3 int8..int64, 4-7 uint8..uint64, 8 float32, 9 float64. */
    static inline bool hx_acc_ok(int kind, int op) {
      switch (kind) {
        case 0: return hx_acc_takes<int8_t>(op);
        case 1: return hx_acc_takes<int16_t>(op);
        case 2: return hx_acc_takes<int32_t>(op);
        case 3: return hx_acc_takes<int64_t>(op);
        case 4: return hx_acc_takes<uint8_t>(op);
        case 5: return hx_acc_takes<uint16_t>(op);
        case 6: return hx_acc_takes<uint32_t>(op);
        case 7: return hx_acc_takes<uint64_t>(op);
        case 8: return hx_acc_takes<float>(op);
        case 9: return hx_acc_takes<double>(op);
        default: return false;
      }
    }

    /* target[i] = op(target[i], origin[i]) for `bytes` bytes of elements of `kind`. */
    static inline void hx_acc_apply(int kind, int op, char *target, const char *origin, size_t bytes) {
      switch (kind) {
        case 0: hx_acc_run<int8_t>(op, target, origin, bytes); break;
        case 1: hx_acc_run<int16_t>(op, target, origin, bytes / 2); break;
        case 2: hx_acc_run<int32_t>(op, target, origin, bytes / 4); break;
        case 3: hx_acc_run<int64_t>(op, target, origin, bytes / 8); break;
        case 4: hx_acc_run<uint8_t>(op, target, origin, bytes); break;
        case 5: hx_acc_run<uint16_t>(op, target, origin, bytes / 2); break;
        case 6: hx_acc_run<uint32_t>(op, target, origin, bytes / 4); break;
        case 7: hx_acc_run<uint64_t>(op, target, origin, bytes / 8); break;
        case 8: hx_acc_run<float>(op, target, origin, bytes / 4); break;
        case 9: hx_acc_run<double>(op, target, origin, bytes / 8); break;
      }
    }
    """
    enum:
        HX_SUM, HX_PROD, HX_MAX, HX_MIN, HX_LAND, HX_LOR, HX_LXOR, HX_BAND, HX_BOR, HX_BXOR, HX_REPLACE, HX_NOOP
    bint hx_acc_ok(int kind, int op) noexcept nogil
    void hx_acc_apply(int kind, int op, char *target, const char *origin, size_t nbytes) noexcept nogil

# The most bytes accumulate_small takes: the Python layer's chunk (it holds
# the lock for one chunk at a time); up to _ACC_STACK of them in a stack
# buffer.
cdef size_t _ACC_SMALL = 65536
cdef size_t _ACC_STACK = 4096


cdef inline int _acc_kind(cnp.ndarray a) noexcept:
    """accumulate_small's element kind of a native-order array, or -1."""
    cdef int t = cnp.PyArray_TYPE(a)
    if not cnp.PyArray_ISNOTSWAPPED(a):
        return -1
    if cnp.PyArray_ISINTEGER(a):
        if cnp.PyArray_ITEMSIZE(a) == 1:
            return 4 if cnp.PyArray_ISUNSIGNED(a) else 0
        if cnp.PyArray_ITEMSIZE(a) == 2:
            return 5 if cnp.PyArray_ISUNSIGNED(a) else 1
        if cnp.PyArray_ITEMSIZE(a) == 4:
            return 6 if cnp.PyArray_ISUNSIGNED(a) else 2
        if cnp.PyArray_ITEMSIZE(a) == 8:
            return 7 if cnp.PyArray_ISUNSIGNED(a) else 3
        return -1
    if t == cnp.NPY_FLOAT32:
        return 8
    if t == cnp.NPY_FLOAT64:
        return 9
    return -1


@cython.final
cdef class _AccLock:
    """This rank's hold of a target's accumulate lock word: the value it
    writes there (its world rank + 1, so that a rank that breaks the hold
    of a dead one knows whose it was)."""
    cdef uint64_t owner

    cdef bint take(self, uint64_t *lock):
        """A few tries at the lock word; False: another rank holds it."""
        cdef uint64_t expected
        cdef int tries
        for tries in range(_ACC_TRIES):
            expected = 0
            if __atomic_compare_exchange_n(lock, &expected, self.owner, False, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED):
                return True
            hixl_relax(tries)
        return False

    cdef bint give(self, uint64_t *lock):
        """Let go; False: the hold was not this rank's any more (broken)."""
        cdef uint64_t expected = self.owner
        return __atomic_compare_exchange_n(lock, &expected, 0, False, __ATOMIC_RELEASE, __ATOMIC_RELAXED)


# Who makes a small operation on a same-node target whose memory this rank
# cannot map (a Create window: its accumulates go under its lock word): an
# 8-byte atomic, or a Put or Get of at most _TARGET_MOVE bytes. This rank,
# with system calls (one per Put or Get; get and put under the lock word for
# an atomic), which need nothing of the target; or the target's engine (an
# active message its progress thread answers: TargetMoveTo, TargetAtomicTo,
# the latter under the same lock word, so every mix is atomic), which is
# faster while that thread polls (it does for a while after each piece of
# work) and slower when it must be woken first or waits for a core.
#
# A run of such operations to one target coming close together (each within
# _BURST_NS of the last) is what keeps the thread polling: after _FIRST_TRY
# of them this rank tries the target's way. Meanwhile it times its own way
# (a running mean, ``mine``). The target's way then gets a budget of
# _WINDOW times that mean for _WINDOW answers: it stays while the answers
# keep within it, window after window, and goes back as soon as a window's
# answers have spent more (a target that answers slowly, or often only after
# a scheduler time slice, costs more than it saves); one answer counts a
# quarter of the budget at most. The next try then waits for a run twice as
# long (at most _MAX_TRY), within the same phase of the program: a pause of
# _PHASE_NS without operations to the target (a barrier, a compute phase)
# starts a new one, whose first run of _FIRST_TRY tries again. Without that,
# a phase in which the target answered late (its thread in a Fence, busy or
# asleep) kept every later phase on this rank's way. A wrong guess costs one
# window's budget, or four late answers, once per phase at most. A Put
# posted to the target (not answered each) is timed until it is sent: a
# target that falls behind makes its sends wait.
cdef int64_t _BURST_NS = 100000
cdef int64_t _PHASE_NS = 10000000
cdef uint32_t _FIRST_TRY = 32
cdef uint32_t _MAX_TRY = 65536
cdef uint32_t _WINDOW = 256
cdef size_t _TARGET_MOVE = 4096


@cython.final
cdef class _TargetPath:
    """Per target: which way its small operations go (see above)."""
    cdef vector[uint8_t] mode     # _BY_ORIGIN, _BY_TARGET, _ALWAYS (by the target, chosen), _NEVER (by the origin)
    cdef vector[uint32_t] run     # operations this rank's way in the current run
    cdef vector[uint32_t] need    # the run that makes the next try
    cdef vector[int64_t] last     # when the last operation this rank's way started
    cdef vector[int64_t] mine     # running mean of this rank's way, ns (0: not timed yet)
    cdef vector[int64_t] spent    # the target's answers in the current window, ns
    cdef vector[uint32_t] answers  # the target's answers in the current window

    cdef void resize(self, Py_ssize_t n, uint8_t first):
        self.mode.assign(n, first)
        self.run.assign(n, 0)
        self.need.assign(n, _FIRST_TRY)
        self.last.assign(n, 0)
        self.mine.assign(n, 0)
        self.spent.assign(n, 0)
        self.answers.assign(n, 0)

    cdef inline bint by_target(self, Py_ssize_t r) noexcept nogil:
        """Whether the next operation to r goes the target's way (else this
        rank's, which then reports with mine_done). The clock is read only
        while the choice is open."""
        if self.mode[r] != _BY_ORIGIN:
            return self.mode[r] == _BY_TARGET or self.mode[r] == _ALWAYS
        return self.try_at(r, hixl_now_ns())

    cdef inline bint try_at(self, Py_ssize_t r, int64_t now) noexcept nogil:
        """by_target for an open choice (mode _BY_ORIGIN), the operation
        starting ``now`` (ns)."""
        cdef int64_t gap = now - self.last[r]
        if gap >= _PHASE_NS:
            self.need[r] = _FIRST_TRY
        self.run[r] = self.run[r] + 1 if gap < _BURST_NS else 1
        self.last[r] = now
        if self.run[r] < self.need[r] or self.mine[r] == 0:
            return False
        self.mode[r] = _BY_TARGET
        self.spent[r] = 0
        self.answers[r] = 0
        return True

    cdef inline void mine_done(self, Py_ssize_t r) noexcept nogil:
        """An operation to r made this rank's way (by_target said so) ended."""
        if self.mode[r] == _BY_ORIGIN:
            self.mine_done_at(r, hixl_now_ns())

    cdef inline void mine_done_at(self, Py_ssize_t r, int64_t now) noexcept nogil:
        """mine_done for an open choice, the operation ending ``now``."""
        cdef int64_t ns = now - self.last[r]
        self.mine[r] = ns if self.mine[r] == 0 else self.mine[r] + (ns - self.mine[r]) // 8

    cdef inline void answered(self, Py_ssize_t r, int64_t ns, int64_t now) noexcept nogil:
        """The target's engine answered after ``ns``, at ``now`` (the
        caller's clock reading that timed the answer)."""
        if self.mode[r] != _BY_TARGET:
            return
        # One late answer counts a quarter of the window's budget at most: a
        # scheduler time slice (which this rank's own way meets as well) does
        # not decide alone; four do, and a target that answers slowly every
        # time still spends the budget in a window.
        self.spent[r] += min(ns, <int64_t>(_WINDOW // 4) * self.mine[r])
        self.answers[r] += 1
        if self.spent[r] > <int64_t>_WINDOW * self.mine[r]:
            self.mode[r] = _BY_ORIGIN
            self.run[r] = 0
            self.need[r] = min(2 * self.need[r], _MAX_TRY)
            self.last[r] = now  # the phase goes on: the doubled run is needed in it
        elif self.answers[r] == _WINDOW:
            self.spent[r] = 0
            self.answers[r] = 0
            self.need[r] = _FIRST_TRY

    cdef inline void never(self, Py_ssize_t r) noexcept nogil:
        self.mode[r] = _NEVER


cdef uint8_t _BY_ORIGIN = 0
cdef uint8_t _BY_TARGET = 1
cdef uint8_t _NEVER = 2
cdef uint8_t _ALWAYS = 3
_TARGET_PATHS = {"auto": _BY_ORIGIN, "origin": _NEVER, "target": _ALWAYS}


def _target_path_trace(str first, list steps):
    """The way one target's _TargetPath (above) takes for each operation of
    ``steps`` (its tests: the policy on given times, none measured). Each
    step is ``(start_ns, mine_ns, answer_ns)``: an operation starting at
    start_ns that this rank's way makes in mine_ns and the target's engine
    answers in answer_ns. ``first``: ``auto``, ``target`` or ``origin`` (as
    HIXL_RMA_TARGET_OPS). Returns one bool per step, True: the target's way."""
    cdef _TargetPath tp = _TargetPath.__new__(_TargetPath)
    cdef int64_t start, mine, answer
    cdef list ways = []
    cdef bint by
    tp.resize(1, _TARGET_PATHS[first])
    for start, mine, answer in steps:
        by = tp.by_target(0) if tp.mode[0] != _BY_ORIGIN else tp.try_at(0, start)
        if by:
            tp.answered(0, answer, start + answer)
        elif tp.mode[0] == _BY_ORIGIN:
            tp.mine_done_at(0, start + mine)
        ways.append(by)
    return ways
