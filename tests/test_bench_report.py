"""The benchmark's output as a user reads it: figures with significant
digits, and help that names nothing of a developer's machine."""
import subprocess
import sys

import pytest

from hixl_rma.bench import report


@pytest.mark.parametrize("x, text", [(0.0041, "0.0041"), (0.25, "0.25"), (0.000123, "0.000123"), (1.5, "1.50"),
                                     (12345.0, "12,345"), (0.0, "0.00"), (None, "-")])
def test_small_figures_keep_their_digits(x, text):
    """An 8 B row's GB/s read 0.00: below 1 a figure keeps significant digits."""
    assert report.fmt_num(x) == text


@pytest.mark.parametrize("args", [["--help"], ["rma", "--help"]])
def test_help_names_no_developer_paths(args):
    out = subprocess.run([sys.executable, "-m", "hixl_rma.bench", *args], capture_output=True, text=True,
                         timeout=60).stdout
    assert "usage" in out
    assert "/opt/venv" not in out and "DESIGN.md" not in out
