"""Status -> exception mapping and plan keys, with no GPU: the library validates a
descriptor before it looks for a driver."""
import os
import subprocess
import sys

import pytest

import baracuda_quant as bq
from baracuda_quant import _lib
from baracuda_quant._enums import DType, Granularity, Op, Status


def _select(**fields):
    key = _lib.desc_key(**fields)
    return _lib.plan_for(key, 0)


def test_invalid_descriptor_raises_value_error():
    before = _lib.cached_plan_keys()
    with pytest.raises(bq.InvalidArgumentError) as e:
        _select(op=Op.QUANTIZE, float_type=DType.S8)  # not a float type
    assert isinstance(e.value, ValueError) and isinstance(e.value, bq.Error)
    assert e.value.status == Status.ERROR_INVALID_ARGUMENT
    assert e.value.status_name == "BQ_ERROR_INVALID_ARGUMENT"
    assert "desc.float_type" in str(e.value), str(e.value)
    assert _lib.cached_plan_keys() == before


def test_op_out_of_range():
    with pytest.raises(ValueError, match="desc.op"):
        _select(op=99, float_type=DType.F32)


def test_qrange_message_names_field():
    with pytest.raises(bq.InvalidArgumentError, match=r"desc.qmax \(300\)"):
        _select(op=Op.QUANTIZE, float_type=DType.F32, int_type=DType.S8, qmin=-5, qmax=300)


def test_not_supported_raises_not_implemented():
    with pytest.raises(bq.NotSupportedError) as e:
        _select(op=Op.DYNAMIC_QUANTIZE, granularity=Granularity.PER_CHANNEL, float_type=DType.F32)
    assert isinstance(e.value, NotImplementedError)
    assert e.value.status == Status.ERROR_NOT_SUPPORTED
    assert "per_channel" in str(e.value)


def test_error_for_every_status():
    for st in Status:
        if st == Status.SUCCESS:
            continue
        err = _lib.error_for(st, "msg")
        assert isinstance(err, bq.Error) and err.status == st and str(err) == "msg"
        if st == Status.ERROR_INVALID_ARGUMENT:
            assert isinstance(err, ValueError)
        elif st == Status.ERROR_NOT_SUPPORTED:
            assert isinstance(err, NotImplementedError)
        else:
            assert isinstance(err, RuntimeError) and not isinstance(err, (ValueError, NotImplementedError))
    assert _lib.bq_status_name(Status.ERROR_NO_NVRTC) == b"BQ_ERROR_NO_NVRTC"


def test_no_driver_raises_runtime_error():
    # a valid descriptor needs the driver: point the library at a missing one (fresh process,
    # since the driver is opened once)
    code = ("import baracuda_quant as bq; from baracuda_quant import _lib; from baracuda_quant._enums import *\n"
            "try:\n"
            "    _lib.plan_for(_lib.desc_key(Op.QUANTIZE, float_type=DType.F32), 0)\n"
            "except bq.DeviceError as e:\n"
            "    assert isinstance(e, RuntimeError)\n"
            "    print(e.status.name, '|', e)\n")
    env = dict(os.environ, BARACUDA_QUANT_DRIVER="/nonexistent/libcuda.so.1", BARACUDA_QUANT_QUIET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERROR_NO_DRIVER |"), out.stdout
    assert "libcuda" in out.stdout or "driver" in out.stdout


def test_desc_key_and_struct():
    key = _lib.desc_key(Op.QUANTIZE, granularity=Granularity.PER_TOKEN, float_type=DType.BF16, int_type=DType.U8,
                        qmin=3, qmax=200, scale_type=DType.F32)
    assert key == (1, 0, 3, 4, 6, 3, 200, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    d = _lib.make_desc(key, 1)
    assert (d.op, d.float_type, d.int_type, d.qmin, d.qmax, d.scale_type) == (1, 4, 6, 3, 200, 1)
    assert d.granularity == _lib.bq_py_enum(b"BQ_PER_TOKEN")
    assert d.device == 2  # BQ_DEVICE(1)
    # plans are cached by (descriptor, device): distinct keys on distinct devices
    assert len({(key, 0), (key, 1)}) == 2


def test_plan_cache_reuses_plans():
    # no GPU: a failing select caches nothing, so the same error comes back each time
    for _ in range(2):
        with pytest.raises(bq.InvalidArgumentError):
            _select(op=Op.QUANTIZE, float_type=DType.F32, int_type=DType.U8, qmin=9, qmax=3)
    assert all(k[0][3] != DType.F32 or k[0][5] != 9 for k in _lib.cached_plan_keys())


def test_library_path_override(tmp_path):
    env = dict(os.environ, BARACUDA_QUANT_PYLIB=str(tmp_path / "missing.so"))
    out = subprocess.run([sys.executable, "-c", "import baracuda_quant"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and "missing.so" in out.stderr


def test_nvrtc_wheel_fallback(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cuda_nvrtc" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvrtc.so.12").write_bytes(b"")
    # ensure_nvrtc writes os.environ itself: setenv first makes monkeypatch restore the
    # caller's value (or its absence) afterwards, so no later test loads this empty file
    monkeypatch.setenv("BARACUDA_QUANT_NVRTC", "")
    monkeypatch.delenv("BARACUDA_QUANT_NVRTC")
    # loadable by name: left to the library
    assert _lib.ensure_nvrtc([str(tmp_path)], loadable=lambda n: True) is None
    assert "BARACUDA_QUANT_NVRTC" not in os.environ
    # not loadable: the wheel's library
    got = _lib.ensure_nvrtc([str(tmp_path / "nowhere"), str(tmp_path)], loadable=lambda n: False)
    assert got == str(lib / "libnvrtc.so.12") and os.environ["BARACUDA_QUANT_NVRTC"] == got
    # an explicit setting wins
    monkeypatch.setenv("BARACUDA_QUANT_NVRTC", "/x/libnvrtc.so.13")
    assert _lib.ensure_nvrtc([str(tmp_path)], loadable=lambda n: False) is None
