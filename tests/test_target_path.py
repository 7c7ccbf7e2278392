"""The choice between this rank's way and the target's engine for small
operations on a same-node Create window (HIXL_RMA_TARGET_OPS=auto; docs:
The engine, "Operations made by the target"), driven with given times: the
policy alone, no engine, no clock."""
import pytest

from hixl_rma import _engine

pytestmark = pytest.mark.timeout(60)

US = 1000
SPACING = 3 * US  # operations 3 us apart: a burst
MINE = 2 * US  # this rank's way takes 2 us
FAST, SLOW = 1 * US, 300 * US  # the target's answers


def steps(start, n, answer, spacing=SPACING):
    """n operations from start, spacing apart, each answered in ``answer``."""
    return [(start + i * spacing, MINE, answer) for i in range(n)]


def first_try(ways):
    """Index of the first operation made the target's way (None: none was)."""
    return next((i for i, by in enumerate(ways) if by), None)


def test_a_burst_tries_the_target_and_keeps_it_while_it_answers_fast():
    ways = _engine._target_path_trace("auto", steps(0, 1000, FAST))
    assert first_try(ways) == 31, "the 32nd operation of a run is the first try"
    assert all(ways[31:]), "answers faster than this rank's way keep the target's way"


def test_operations_further_apart_than_a_burst_stay_on_this_ranks_way():
    ways = _engine._target_path_trace("auto", steps(0, 200, FAST, spacing=150 * US))
    assert not any(ways)


def test_late_answers_send_it_back_and_the_next_try_waits_twice_as_long():
    first = steps(0, 40, SLOW)  # the try at the 32nd: late answers
    ways = _engine._target_path_trace("auto", first + steps(first[-1][0] + SPACING, 200, FAST))
    assert ways[31], "the first try"
    back = ways.index(False, 31)
    assert 31 < back <= 31 + 5, f"four or five late answers spend the window's budget (back at {back})"
    again = first_try(ways[back:])
    assert again is not None and again >= 63, f"the next try needs a run of 64 (tried after {again})"


def test_a_pause_starts_a_new_phase_that_tries_again_at_once():
    """A phase of late answers (the target in a Fence, busy or asleep)
    backs the tries off; a pause of 10 ms or more (a barrier, a compute
    phase) starts a new phase whose first run of 32 tries again. Without
    the pause the backoff holds."""
    late = []
    t = 0
    for _ in range(8):  # tries answered late: the run needed doubles after each
        late += steps(t, 40, SLOW)
        t = late[-1][0] + SPACING
    late_ways = _engine._target_path_trace("auto", late)
    assert sum(late_ways) >= 2, "a few tries while the run needed was short"

    after_pause = late + steps(t + 20_000 * US, 100, FAST)
    ways = _engine._target_path_trace("auto", after_pause)[len(late):]
    assert first_try(ways) == 31, f"a new phase tries at its 32nd operation, not {first_try(ways)}"

    no_pause = late + steps(t, 100, FAST)
    ways = _engine._target_path_trace("auto", no_pause)[len(late):]
    assert not any(ways), "within the phase, the longer run is needed"


@pytest.mark.parametrize(("first", "want"), [("target", True), ("origin", False)])
def test_a_fixed_way_is_never_changed(first, want):
    ways = _engine._target_path_trace(first, steps(0, 100, SLOW) + steps(10**9, 100, FAST))
    assert ways == [want] * 200
