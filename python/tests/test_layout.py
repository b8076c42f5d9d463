"""The ctypes mirrors and enum values against the compiled header (no GPU needed)."""
import ctypes

import baracuda_quant as bq
from baracuda_quant import _enums, _lib


def test_struct_sizes():
    for name, cls in (("bq_desc", _lib.Desc), ("bq_args", _lib.Args), ("bq_cache_stats", _lib.CacheStats)):
        assert _lib.bq_py_sizeof(name.encode()) == ctypes.sizeof(cls), name


def test_struct_offsets():
    for name, cls in (("bq_desc", _lib.Desc), ("bq_args", _lib.Args), ("bq_cache_stats", _lib.CacheStats)):
        for field, _ in cls._fields_:
            c = _lib.bq_py_offsetof(name.encode(), field.encode())
            assert c != ctypes.c_size_t(-1).value, "%s.%s unknown to the C probe" % (name, field)
            assert c == getattr(cls, field).offset, "%s.%s: C %d, ctypes %d" % (name, field, c,
                                                                                  getattr(cls, field).offset)


def test_enum_values():
    for cname, value in _enums.C_NAMES.items():
        c = _lib.bq_py_enum(cname.encode())
        assert c != -1000, cname + " unknown to the C probe"
        assert c == value, cname


def test_version():
    v = _lib.VERSION_NUMBER
    assert bq.__version__ == "%d.%d.%d" % (v >> 16, (v >> 8) & 0xff, v & 0xff)
    assert bq.library_version() == bq.__version__


def test_package_metadata_version():
    from importlib import metadata
    try:
        dist = metadata.version("baracuda_quant")
    except metadata.PackageNotFoundError:
        import pytest
        pytest.skip("package not installed (run from the source tree)")
    assert dist == bq.__version__
