"""Python's thread synchronizations, made to carry the detector's clocks
(threads of one rank each have a clock of their own).

Carried: ``Thread.start`` (the new thread starts knowing what its starter
knew), ``Thread.join`` (the joiner learns what the thread did),
``Event.set``/``Event.wait``, ``Barrier.wait``. Not carried: locks,
conditions, queues, semaphores (C types, or built on them): threads
ordered only by those look unordered to the detector, which can report a
race between them that cannot happen (README says so).
"""
import threading

import numpy as np

_saved = {}


def install(det):
    if _saved:
        return
    T, E, B = threading.Thread, threading.Event, threading.Barrier
    _saved.update(start=T.start, join=T.join, set=E.set, wait=E.wait, bwait=B.wait)

    def start(self):
        det.threads_started()  # before it runs: the C record takes the mutex from now on
        self._race_parent = det.release()
        self._started._race_internal = True  # the Event start() waits on: not the program's
        return _saved["start"](self)

    def join(self, timeout=None):
        _saved["join"](self, timeout)
        c = getattr(self, "_race_clock", None)
        if c is not None and not self.is_alive():
            det.acquire(c.array())

    def set_(self):
        if getattr(self, "_race_internal", False):
            return _saved["set"](self)
        c = det.release()
        with det.mutex:
            old = getattr(self, "_race_set", None)
            self._race_set = c if old is None else np.maximum(old, c)
        return _saved["set"](self)

    def wait(self, timeout=None):
        if getattr(self, "_race_internal", False):
            return _saved["wait"](self, timeout)
        got = _saved["wait"](self, timeout)
        c = getattr(self, "_race_set", None)
        if got and c is not None:
            det.acquire(c)
        return got

    def bwait(self, timeout=None):
        c = det.release()
        with det.mutex:
            acc = getattr(self, "_race_acc", None)
            self._race_acc = c if acc is None else np.maximum(acc, c)
        out = _saved["bwait"](self, timeout)
        det.acquire(self._race_acc)
        return out

    T.start, T.join, E.set, E.wait, B.wait = start, join, set_, wait, bwait


def uninstall():
    if _saved:
        T, E, B = threading.Thread, threading.Event, threading.Barrier
        T.start, T.join, E.set, E.wait, B.wait = (_saved["start"], _saved["join"], _saved["set"], _saved["wait"],
                                                  _saved["bwait"])
        _saved.clear()
