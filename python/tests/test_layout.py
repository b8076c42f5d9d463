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


def test_desc_rotation_is_the_last_field():
    assert [f for f, _ in _lib.Desc._fields_[-5:]] == ["scale_layout", "scale_rule", "random_signs", "rounding",
                                                        "rotation"]
    end = _lib.Desc.rotation.offset + _lib.Desc.rotation.size
    assert end == ctypes.sizeof(_lib.Desc) == _lib.bq_py_sizeof(b"bq_desc")
    assert _lib.Desc().scale_layout == _enums.ScaleLayout.ROW_MAJOR  # zero-initialized: the default
    assert _lib.Desc().scale_rule == _enums.ScaleRule.DEFAULT
    assert _lib.Desc().random_signs == 0
    assert _lib.Desc().rounding == _enums.Rounding.NEAREST_EVEN
    assert _lib.Desc().rotation == 0
    assert [f for f, _ in _lib.Args._fields_[-3:]] == ["seed", "offset", "rotation_block"]
    assert _lib.Args().offset == 0 and _lib.Args().rotation_block == 0


def test_block_layout_and_packed_values():
    assert _enums.Granularity.PER_BLOCK == 5
    assert _enums.DType.UE8M0X4 == 11
    assert (_enums.ScaleLayout.ROW_MAJOR, _enums.ScaleLayout.MN_MAJOR) == (0, 1)
    assert bq.ScaleLayout is _enums.ScaleLayout
    for name in ("BQ_PER_BLOCK", "BQ_UE8M0X4", "BQ_SCALES_ROW_MAJOR", "BQ_SCALES_MN_MAJOR"):
        assert name in _enums.C_NAMES, name


def _validate(desc, args):
    return _lib.bq_py_validate(ctypes.byref(desc), ctypes.byref(args))


def test_desc_mirror_carries_the_new_fields_to_the_library():
    """A Desc built here reaches the C validation with scale_layout, per block and ue8m0x4 intact:
    each accepted where the header offers it and refused, naming the field, where it does not."""
    E = _enums
    args = _lib.Args(x=0x10000, y=0x20000, scales=0x30000, rows=6, cols=64, group_size=16)
    ok = _lib.Desc(op=E.Op.QUANTIZE, granularity=E.Granularity.PER_GROUP, float_type=E.DType.F32,
                   scale_type=E.DType.UE8M0X4, scale_layout=E.ScaleLayout.MN_MAJOR)
    assert _validate(ok, args) == E.Status.SUCCESS, _last_error()
    args.group_row_stride = 5  # MN-major: at least args.rows (6)
    assert _validate(ok, args) == E.Status.ERROR_INVALID_ARGUMENT
    assert b"args.group_row_stride (5) is smaller than args.rows (6)" in _last_error()
    args.group_row_stride = 0
    token = _lib.Desc(op=E.Op.QUANTIZE, granularity=E.Granularity.PER_TOKEN, float_type=E.DType.F32,
                      scale_layout=E.ScaleLayout.MN_MAJOR)
    assert _validate(token, args) == E.Status.ERROR_INVALID_ARGUMENT
    assert b"desc.scale_layout (1, MN-major)" in _last_error()
    block = _lib.Desc(op=E.Op.DYNAMIC_QUANTIZE, granularity=E.Granularity.PER_BLOCK, float_type=E.DType.BF16,
                      int_type=E.DType.E4M3, scale_type=E.DType.UE8M0)
    args = _lib.Args(x=0x10000, y=0x20000, out_scales=0x30000, rows=40, cols=50, group_size=16)
    assert _validate(block, args) == E.Status.SUCCESS, _last_error()
    args.group_size = 32769
    assert _validate(block, args) == E.Status.ERROR_NOT_SUPPORTED
    assert b"args.group_size (32769) is larger than 32768" in _last_error()


def _last_error():
    return _lib.bq_last_error() or b""
