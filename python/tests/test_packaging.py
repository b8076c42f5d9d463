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
