"""The C enums of baracuda_quant.h, in one place (the 0.2.0 values).

tests/test_layout.py checks every value here against the compiled header."""
import enum


class Status(enum.IntEnum):
    SUCCESS = 0
    ERROR_INVALID_ARGUMENT = 1
    ERROR_NOT_SUPPORTED = 2
    ERROR_NO_DRIVER = 3
    ERROR_DRIVER_TOO_OLD = 4
    ERROR_NO_DEVICE = 5
    ERROR_NO_NVRTC = 6
    ERROR_COMPILE_FAILED = 7
    ERROR_CUDA = 8
    ERROR_OUT_OF_MEMORY = 9
    ERROR_INSUFFICIENT_WORKSPACE = 10


class DType(enum.IntEnum):
    DEFAULT = 0
    F32 = 1
    F64 = 2
    F16 = 3
    BF16 = 4
    S8 = 5
    U8 = 6
    S32 = 7
    E4M3 = 8
    E5M2 = 9
    UE8M0 = 10
    UE8M0X4 = 11  # per-group scales: four UE8M0 bytes packed in an int32 along the group axis
    E2M1 = 12     # microscaling storage: OCP FP4, two codes a byte (the lower index in the low nibble)


class Op(enum.IntEnum):
    NONE = 0
    QUANTIZE = 1
    DEQUANTIZE = 2
    FAKE_QUANTIZE = 3
    DYNAMIC_QUANTIZE = 4
    QUANTIZED_LINEAR = 5
    SMOOTHQUANT_LINEAR = 6
    LINEAR_WEIGHT_SUMS = 7
    RMSNORM_QUANTIZE = 8
    GATED_QUANTIZE = 9
    HADAMARD = 10
    FP8_LINEAR = 11
    FP8_QUANTIZED_LINEAR = 12


class Activation(enum.IntEnum):
    """bq_desc.activation of BQ_GATED_QUANTIZE (0: SiLU)."""
    DEFAULT = 0
    SILU = 1
    GELU_TANH = 2


class Direction(enum.IntEnum):
    FORWARD = 0
    BACKWARD = 1


class Granularity(enum.IntEnum):
    DEFAULT = 0
    PER_TENSOR = 1
    PER_CHANNEL = 2
    PER_TOKEN = 3
    PER_GROUP = 4
    PER_BLOCK = 5


class ScaleLayout(enum.IntEnum):
    """bq_desc.scale_layout: where per-group scales (and zero points) live."""
    ROW_MAJOR = 0  # scales[r][g]
    MN_MAJOR = 1   # scales[g][r]
    BLOCKED = 2    # microscaling: the 128 x 4 tiles of block-scaled GEMMs


class ScaleRule(enum.IntEnum):
    """bq_desc.scale_rule: microscaling dynamic quantize's scale rule (UE8M0 1-5, NVFP4 6-7)."""
    DEFAULT = 0    # amax / max rounded up to a power of two
    FLOOR = 1      # the OCP MX spec, torchao's default
    CEIL = 2       # torchao
    EVEN = 3       # torchao
    RCEIL = 4      # cuBLAS, DeepGEMM
    RCEIL_SAT = 5  # Transformer Engine
    NVFP4_TORCHAO = 6  # NVFP4: torchao's steps
    NVFP4_TE = 7       # NVFP4: Transformer Engine's steps


class Rounding(enum.IntEnum):
    """bq_desc.rounding: how quantize and fake quantize (affine and microscaling) round into
    the storage type."""
    NEAREST_EVEN = 0
    STOCHASTIC = 1     # Philox4x32-10 draws keyed by args.seed at the element's index + args.offset


# bq_desc.device: BQ_DEVICE_CURRENT, or BQ_DEVICE(n) = n + 1 (device n's primary context)
DEVICE_CURRENT = 0


def DEVICE(n):
    return n + 1


# C enumerator name -> the value above (for the layout test)
C_NAMES = {}
for _cls, _prefix in ((Status, "BQ_"), (DType, "BQ_"), (Op, "BQ_"), (Direction, "BQ_")):
    for _m in _cls:
        C_NAMES[_prefix + _m.name] = int(_m)
C_NAMES["BQ_DTYPE_DEFAULT"] = C_NAMES.pop("BQ_DEFAULT")
del C_NAMES["BQ_NONE"]
C_NAMES["BQ_OP_NONE"] = 0
for _m in Activation:
    C_NAMES["BQ_ACTIVATION_DEFAULT" if _m.name == "DEFAULT" else "BQ_" + _m.name] = int(_m)
for _m in Granularity:
    C_NAMES["BQ_GRANULARITY_DEFAULT" if _m.name == "DEFAULT" else "BQ_" + _m.name] = int(_m)
for _m in ScaleLayout:
    C_NAMES["BQ_SCALES_" + _m.name] = int(_m)
for _m in ScaleRule:
    C_NAMES["BQ_SCALE_RULE_DEFAULT" if _m.name == "DEFAULT" else "BQ_SCALE_" + _m.name] = int(_m)
for _m in Rounding:
    C_NAMES["BQ_ROUND_" + _m.name] = int(_m)
