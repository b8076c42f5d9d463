"""baracuda_quant: affine INT8 quantization for NVIDIA GPUs (NVRTC JIT), from Python.

The functions take torch.Tensor (through the torch.library ops in baracuda_quant.ops, which
torch.compile and CUDA graphs see) or any CUDA array with __dlpack__ (CuPy, JAX; through
baracuda_quant.dlpack, without importing torch). torch is imported only when a tensor is given."""
import sys as _sys

from ._enums import Activation, DType, Direction, Granularity, Op, Rounding, ScaleLayout, ScaleRule, Status
from ._lib import (Error, InvalidArgumentError, NotSupportedError, DeviceError, VERSION as _LIB_VERSION,
                   LIBRARY_PATH, cache_stats)

__version__ = _LIB_VERSION


def library_version():
    """bq_version_string() of the loaded shared library."""
    return _LIB_VERSION


def _is_torch(x):
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _front(x):
    name = __name__ + (".ops" if _is_torch(x) else ".dlpack")
    mod = _sys.modules.get(name)
    if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):  # absent, or being imported
        import importlib
        mod = importlib.import_module(name)
    return mod


# Once baracuda_quant.ops is imported it fills these: a plain torch.Tensor then goes straight
# to its function, with no module lookup a call
_tensor_type = None
_torch_fns = {}


def _dispatch(name):
    def f(x, *args, **kwargs):
        if type(x) is _tensor_type:
            return _torch_fns[name](x, *args, **kwargs)
        return getattr(_front(x), name)(x, *args, **kwargs)
    f.__name__ = name
    f.__doc__ = "%s: torch.Tensor -> baracuda_quant.ops.%s, a __dlpack__ array -> baracuda_quant.dlpack.%s" % (
        name, name, name)
    return f


_OPS = ("quantize_per_tensor", "quantize_per_channel", "quantize_per_token", "quantize_per_group",
        "quantize_per_block", "dequantize", "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
        "fake_quantize", "fake_quantize_backward", "quantize_backward", "dequantize_backward",
        "dynamic_per_token_quant", "dynamic_quant", "int8_linear", "quantized_linear", "linear_weight_sums",
        "fp8_linear", "fp8_quantized_linear", "rms_norm_quant", "silu_and_mul_quant", "gelu_tanh_and_mul_quant",
        "mx_quant", "mx_dequant", "mx_fake_quant", "mx_fake_quant_backward", "mx_quant_backward",
        "mx_dequant_backward", "rms_norm_mx_quant", "silu_and_mul_mx_quant", "gelu_tanh_and_mul_mx_quant", "hadamard")
for _name in _OPS:
    globals()[_name] = _dispatch(_name)


def __getattr__(name):
    import importlib
    if name in ("ops", "QuantizedLinear", "FP8QuantizedLinear"):
        ops = importlib.import_module(__name__ + ".ops")
        return ops if name == "ops" else getattr(ops, name)
    if name == "dlpack":
        return importlib.import_module(__name__ + ".dlpack")
    raise AttributeError("module 'baracuda_quant' has no attribute %r" % name)


__all__ = ["Error", "InvalidArgumentError", "NotSupportedError", "DeviceError", "Activation", "DType", "Direction",
           "Granularity", "Op", "Rounding", "ScaleLayout", "ScaleRule", "Status", "library_version", "cache_stats", "LIBRARY_PATH"
           ] + list(_OPS)
