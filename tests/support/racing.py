"""Helpers of the tests that race a call against others in threads."""
import threading
import time


def attempt(outcomes, fn):
    """Run fn; record "ok" or the class name of what it raised (each outcome is checked by the test)."""
    try:
        fn()
        outcomes.append("ok")
    except Exception as exc:  # recorded, checked by the caller
        outcomes.append(type(exc).__name__)


def disconnect_under(engine, remote, workers, settle=0.02):
    """One round: a thread per ``workers`` entry runs it (``worker(stop)``,
    until ``stop`` is set) while ``engine`` disconnects from ``remote``; then
    they stop, and none may still be running 30 s later."""
    stop = threading.Event()
    threads = [threading.Thread(target=f, args=(stop,)) for f in workers]
    for t in threads:
        t.start()
    time.sleep(settle)
    engine.disconnect(remote)
    stop.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a call hung after Disconnect"
