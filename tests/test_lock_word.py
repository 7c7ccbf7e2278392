"""The passive-target lock word's encoding, written once (the extension's,
_window_state/locks.pxi) and read from there by epochs.py: bit 62 while a
writer holds the word, the writer's window rank + 1 in bits 32..61, the
count of shared holders in the low bits."""
import pytest

from hixl_rma import ParamError, _engine
from hixl_rma.window import epochs

pytestmark = pytest.mark.timeout(30)


def test_exclusive_word_names_its_writer():
    assert _engine.LOCK_EXCL == 1 << 62 == epochs.LOCK_EXCL
    for rank in (0, 1, 7, (1 << 30) - 2):
        word = _engine.lock_word_exclusive(rank)
        assert word == 1 << 62 | (rank + 1) << 32
        assert _engine.lock_word_writer(word) == rank
        assert _engine.lock_word_writer(word + 3) == rank  # shared lockers backing out, counted in it


def test_free_and_shared_words_name_no_writer():
    for word in (0, 1, 5, (1 << 32) - 1):
        assert _engine.lock_word_writer(word) == -1


def test_a_rank_past_the_owner_field_is_refused():
    for rank in (-1, (1 << 30) - 1):
        with pytest.raises(ParamError):
            _engine.lock_word_exclusive(rank)
