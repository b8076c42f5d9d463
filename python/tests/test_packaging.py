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
    """The package holds no CPython extension (the library is loaded with ctypes), so its wheel
    is py3-none-<platform>, not tied to one interpreter's ABI."""
    from importlib import metadata
    try:
        wheel = metadata.distribution("baracuda_quant").read_text("WHEEL")
    except metadata.PackageNotFoundError:
        pytest.skip("baracuda_quant is not installed from a wheel here")
    if wheel is None:
        pytest.skip("baracuda_quant is not installed from a wheel here")
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    assert tags and all(t.startswith("py3-none-") and not t.endswith("-any") for t in tags), wheel
