"""tools/build/wheel_libs.py: a Python that lacks the wheel's run-time
dependencies is named as the cause, not left to auditwheel's "could not
locate" error after the build."""
import pathlib
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("elftools")

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "build" / "wheel_libs.py"


def _wheel(tmp_path, requires):
    """A wheel whose one ELF member is this Python's executable."""
    path = tmp_path / "demo-0.1-cp311-cp311-linux_x86_64.whl"
    meta = "Metadata-Version: 2.1\nName: demo\nVersion: 0.1\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo-0.1.dist-info/METADATA", meta)
        zf.write(sys.executable, "demo/prog")
    return path


def _excludes(wheel):
    return subprocess.run([sys.executable, str(SCRIPT), "excludes", str(wheel)], capture_output=True, text=True,
                          timeout=60)


def test_missing_runtime_dependency_is_named(tmp_path):
    r = _excludes(_wheel(tmp_path, ["numpy>=1.24", "hixl-rma-absent-dist>=1"]))
    assert r.returncode == 2, r
    assert "lacks the wheel's run-time dependencies hixl-rma-absent-dist" in r.stderr
    assert "-m pip install hixl-rma-absent-dist" in r.stderr
    assert r.stdout == ""


def test_missing_optional_dependency_is_not_required(tmp_path):
    r = _excludes(_wheel(tmp_path, ["numpy>=1.24", 'hixl-rma-absent-dist; extra == "absent"']))
    assert r.returncode == 0, r.stderr
