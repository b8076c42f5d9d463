"""Packaging: `pip install ./python` (the package's source folder, not the repository's root)
fails with a message that says where to run it."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_pip_install_of_the_python_folder_says_where_to_run():
    pytest.importorskip("pip")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-cache-dir",
                        os.path.join(REPO, "python")], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "built from the repository's root" in out and "pip install ." in out, out


def test_installed_wheel_is_tagged_for_every_python3():
    """The library is loaded with ctypes, and the one extension module (the per-tensor fast
    path, built where Python's C headers are) is on the stable ABI, so the wheel is
    cp3X-abi3-<platform> with it (every CPython from the building one's version on) and
    py3-none-<platform> without it: never tied to one interpreter's ABI."""
    import importlib.util
    import re
    from importlib import metadata
    try:
        wheel = metadata.distribution("baracuda_quant").read_text("WHEEL")
    except metadata.PackageNotFoundError:
        pytest.skip("baracuda_quant is not installed from a wheel here")
    if wheel is None:
        pytest.skip("baracuda_quant is not installed from a wheel here")
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    ext = importlib.util.find_spec("baracuda_quant._fast") is not None
    want = r"cp3\d+-abi3-" if ext else r"py3-none-"
    assert tags and all(re.match(want, t) and not t.endswith("-any") for t in tags), wheel
