"""What the detector's modules share: the detector while on, its options,
and whether it is making a window of its own (not checked). Apart from
``races/__init__``, so that the modules it imports need not import it back."""
import threading

#: the detector of this process while on (races.detector.Detector); also ``hixl_rma.races.ACTIVE``
ACTIVE = None
options = {"keep_going": False, "json": None, "exit_code": 3}


class _Plain(threading.local):
    on = False


plain = _Plain()  # on while the detector makes a window of its own (not checked)
