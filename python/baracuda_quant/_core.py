"""The operations on framework-neutral views of device arrays: argument checks, descriptor
keys, bq_args, launch. ops.py (PyTorch) and dlpack.py (any __dlpack__ producer) wrap them.

Every check here runs before the library is called, so wrong dtypes, shapes and devices
raise InvalidArgumentError without touching the GPU."""
import ctypes
import operator

from . import _lib
from ._enums import Activation, DType, Direction, Granularity, Op, ScaleLayout
from ._lib import Args, invalid

FLOAT_TYPES = (DType.F32, DType.F64, DType.F16, DType.BF16)
INT_TYPES = (DType.S8, DType.U8)
FP8_TYPES = (DType.E4M3, DType.E5M2)  # symmetric storage: no q-range, no zero points
ITEMSIZE = {DType.F32: 4, DType.F64: 8, DType.F16: 2, DType.BF16: 2, DType.S8: 1, DType.U8: 1, DType.S32: 4,
            DType.E4M3: 1, DType.E5M2: 1, DType.UE8M0: 1, DType.UE8M0X4: 4}
MX_TYPES = (DType.E2M1, DType.E4M3, DType.E5M2)  # microscaling elements (E2M1: two codes a byte)
MX_LAYOUTS = {"row": 0, "mn": 1, "blocked": 2}
MX_RULES = {"default": 0, "floor": 1, "ceil": 2, "even": 3, "rceil": 4, "rceil_sat": 5, "torchao": 6, "te": 7}
QRANGE = {DType.S8: (-128, 127), DType.U8: (0, 255)}


class View:
    """A device array: ptr (int), shape and strides (elements), dtype (DType), device index."""
    __slots__ = ("ptr", "shape", "strides", "dtype", "device")

    def __init__(self, ptr, shape, strides, dtype, device):
        self.ptr, self.shape, self.strides = ptr, tuple(shape), tuple(strides)
        self.dtype, self.device = DType(dtype), device

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self):
        expect = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expect:
                return False
            expect *= size
        return True

    def __repr__(self):
        return "View(%#x, %s, %s, %s, cuda:%d)" % (self.ptr or 0, self.shape, self.strides, self.dtype.name,
                                                   self.device)


def check_float(name, v):
    if v.dtype not in FLOAT_TYPES:
        raise invalid("%s: dtype %s is not a float type (float32, float64, float16, bfloat16)" % (name, v.dtype.name))


def check_int(name, dtype):
    if DType(dtype) not in INT_TYPES:
        raise invalid("%s: dtype %s must be int8 or uint8" % (name, DType(dtype).name))


def check_storage(name, dtype):
    """An integer type or FP8 (quantize, dequantize, fake quantize and dynamic quantize)."""
    if DType(dtype) not in INT_TYPES + FP8_TYPES:
        raise invalid("%s: dtype %s must be int8, uint8, E4M3 or E5M2" % (name, DType(dtype).name))


def qrange(int_type, qmin, qmax):
    """The explicit [qmin, qmax] of int_type (None: its full range), checked; FP8 has none
    (0, 0 to the library)."""
    if DType(int_type) in FP8_TYPES:
        if qmin not in (None, 0) or qmax not in (None, 0):
            raise invalid("quant_min and quant_max: %s has no q-range (its range is the format's)"
                          % DType(int_type).name)
        return 0, 0
    lo, hi = QRANGE[DType(int_type)]
    qmin = lo if qmin is None else int(qmin)
    qmax = hi if qmax is None else int(qmax)
    if not (lo <= qmin <= qmax <= hi):
        raise invalid("quant_min (%d) and quant_max (%d) must satisfy %d <= quant_min <= quant_max <= %d for %s"
                      % (qmin, qmax, lo, hi, DType(int_type).name))
    if qmin == 0 and qmax == 0:
        raise invalid("quant_min == quant_max == 0 is not offered (the library reads both 0 as the full range)")
    return qmin, qmax


def int_type_for(qmin, qmax):
    """The storage type of a q-range given only as integers (fake quantize)."""
    if -128 <= qmin and qmax <= 127:
        return DType.S8
    if 0 <= qmin and qmax <= 255:
        return DType.U8
    raise _lib.NotSupportedError("[quant_min, quant_max] = [%d, %d] fits neither int8 nor uint8" % (qmin, qmax), 2)


_I64 = 1 << 63


def check_view(name, v):
    """What the library's int64 fields and its row strides can express: integer sizes in
    [0, 2^63), no zero or negative stride on a dimension of more than one element (a
    broadcast or flipped view: the library would read 0 as "dense" and run past the
    array), and a span whose bytes fit 2^63 from a 64-bit address. (One pass of plain
    comparisons: it runs on every view of every call. The strides of one-element
    dimensions are never passed on, so only the others are bounded, through the span.)"""
    shape, strides, ptr = v.shape, v.strides, v.ptr
    if len(strides) != len(shape):
        raise invalid("%s: %d strides for %d dimensions" % (name, len(strides), len(shape)))
    span, n = 0, 1
    for size, stride in zip(shape, strides):
        if size > 1:
            if stride <= 0:
                raise invalid("%s: stride %d on a dimension of %d elements (shape %s, strides %s): a %s view, "
                              "which the library cannot express" % (name, stride, size, shape, strides,
                                                                    "broadcast" if stride == 0 else "flipped"))
            span += (size - 1) * stride
        elif size < 0:
            raise invalid("%s: size %r in shape %s is negative" % (name, size, shape))
        n *= size
    if type(n) is not int or type(span) is not int:
        raise invalid("%s: shape %s and strides %s must be integers" % (name, shape, strides))
    if type(ptr) is not int or not 0 <= ptr < 1 << 64:
        raise invalid("%s: data pointer %r is not a 64-bit address" % (name, ptr))
    if n >= _I64:
        raise invalid("%s: shape %s has 2^63 elements or more (a size past 2^63)" % (name, shape))
    if n:
        end = (span + 1) * ITEMSIZE.get(v.dtype, 8)
        if end >= _I64 or ptr + end > 1 << 64:
            raise invalid("%s: shape %s and strides %s span more than 2^63 bytes" % (name, shape, strides))


def number(name, value):
    """A real number given as a scalar (int, float, or what float() takes but a string)."""
    if isinstance(value, (str, bytes, bytearray)) or value is None:
        raise invalid("%s (%r) is not a number" % (name, value))
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise invalid("%s (%r) is not a number" % (name, value)) from None


def integer(name, value):
    """An integer: an int, what operator.index takes, or a number with no fraction."""
    try:
        return operator.index(value)
    except TypeError:
        pass
    v = number(name, value)
    if not (v == v and abs(v) != float("inf") and v == int(v)):
        raise invalid("%s (%r) is not an integer" % (name, value))
    return int(v)


def same_device(*views):
    """Checks each view (check_view) and that all share one device, which it returns."""
    dev = None
    for name, v in views:
        if v is None:
            continue
        check_view(name, v)
        if dev is None:
            dev = v.device
        elif v.device != dev:
            raise invalid("%s is on cuda:%d, expected cuda:%d like the other inputs" % (name, v.device, dev))
    return dev


def granularity(scalar, axis, group_size, block_size):
    """(Granularity, its number) that the keyword arguments of dequantize, fake_quantize and
    the backward passes name: a scale that is a number (scalar) is per tensor; else per
    channel along axis, per group of group_size, per block of block_size x block_size, or
    per token (the number: the axis, G or B; else 0)."""
    given = [n for n, v in (("axis", axis), ("group_size", group_size), ("block_size", block_size)) if v is not None]
    if len(given) > 1:
        raise invalid("give at most one of axis, group_size and block_size (got %s)" % ", ".join(given))
    if scalar:
        if given:
            raise invalid("%s: a scale that is a number is per tensor" % given[0])
        return Granularity.PER_TENSOR, 0
    if axis is not None:
        return Granularity.PER_CHANNEL, integer("axis", axis)
    if group_size is not None:
        return Granularity.PER_GROUP, integer("group_size", group_size)
    if block_size is not None:
        return Granularity.PER_BLOCK, integer("block_size", block_size)
    return Granularity.PER_TOKEN, 0


GRANULARITIES = {"tensor": Granularity.PER_TENSOR, "token": Granularity.PER_TOKEN, "group": Granularity.PER_GROUP,
                 "block": Granularity.PER_BLOCK}


def dynamic_granularity(name, group_size, block_size, scale_layout, fp8, symmetric):
    """dynamic_quant's arguments, checked: (Granularity, G or B (else 0), MN-major)."""
    gran = GRANULARITIES.get(name) if isinstance(name, str) else None
    if gran is None:
        raise invalid("granularity (%r) must be one of %s" % (name, ", ".join(GRANULARITIES)))
    for arg, v, want in (("group_size", group_size, Granularity.PER_GROUP),
                         ("block_size", block_size, Granularity.PER_BLOCK)):
        if (v is not None) != (gran == want):
            raise invalid("%s: given with granularity %r and only then" % (arg, want.name.lower()[4:]))
    size = integer("group_size", group_size) if group_size is not None else \
        integer("block_size", block_size) if block_size is not None else 0
    if gran == Granularity.PER_BLOCK and size < 1:
        raise invalid("block_size (%d) must be >= 1" % size)
    if scale_layout not in ("row", "mn"):
        raise invalid("scale_layout (%r) must be 'row' or 'mn'" % (scale_layout,))
    if scale_layout == "mn" and gran != Granularity.PER_GROUP:
        raise invalid("scale_layout 'mn' is per group only")
    if fp8 and not symmetric:
        raise invalid("symmetric: FP8 is symmetric only")
    return gran, size, scale_layout == "mn"


def check_vector(name, v, n, dtypes):
    if v.shape != (n,) and not (n == 1 and v.numel == 1):
        raise invalid("%s: shape %s, expected (%d,)" % (name, v.shape, n))
    if v.numel > 1 and v.strides[-1] != 1:
        raise invalid("%s: must be contiguous" % name)
    if v.dtype not in dtypes:
        raise invalid("%s: dtype %s, expected %s" % (name, v.dtype.name, " or ".join(d.name for d in dtypes)))


def scale_type_of(name, scales, float_type, gran=None, dynamic=False):
    """The scale_type of a scale array: float32, the data's float type, or (but per tensor)
    UE8M0 bytes; per group also int32 words, read as UE8M0X4 (four UE8M0 bytes along the
    group axis)."""
    t = scales.dtype
    if gran == Granularity.PER_GROUP and t == DType.S32:
        return DType.UE8M0X4
    if t in (float_type, DType.F32) or (t == DType.UE8M0 and (dynamic or gran != Granularity.PER_TENSOR)):
        return t
    raise invalid("%s: dtype %s must be float32, the data's type (%s)%s" % (
        name, t.name, DType(float_type).name, ", UE8M0 (float8_e8m0fnu) or, per group, int32 (UE8M0X4 words)"
        if gran != Granularity.PER_TENSOR else ""))


def _cdiv(a, b):
    return -(-a // b)


def group_scales(name, scales, zero_points, rows, cols, size, gran, scale_type):
    """Per group (size = G, which divides cols) or per block (B x B tiles, edge tiles
    partial): the scales' layout, checked, as (layout, group_row_stride). scales has the
    shape [rows of scales, scales a row] (per group [rows, cols / G], int32 UE8M0X4 words
    [rows, ceil(cols / G / 4)]; per block [ceil(rows / B), ceil(cols / B)]) and is
    row-major (last dimension contiguous) or, per group, MN-major: a transposed view whose
    rows are contiguous (strides (1, ld), ld >= rows), the layout FP8 GEMMs read. Zero
    points, when given, are int32 laid out like the scales."""
    size = integer("block_size" if gran == Granularity.PER_BLOCK else "group_size", size)
    if gran == Granularity.PER_BLOCK:
        if size < 1:
            raise invalid("block_size (%d) must be >= 1" % size)
        srows, ncol = _cdiv(rows, size), _cdiv(cols, size)
    else:
        if size < 1 or cols % size:
            raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (size, cols))
        srows, ncol = rows, cols // size
        if scale_type == DType.UE8M0X4:
            ncol = _cdiv(ncol, 4)
    if scales.shape != (srows, ncol):
        raise invalid("%s: shape %s, expected (%d, %d)" % (name, scales.shape, srows, ncol))
    st = scales.strides
    mn = gran == Granularity.PER_GROUP and ncol > 1 and st[1] != 1 and (srows == 1 or st[0] == 1)
    if mn:
        layout, lead = 1, st[1]
        if lead < srows:
            raise invalid("%s: MN-major (strides %s): the leading stride %d is smaller than the %d rows"
                          % (name, st, lead, srows))
    else:
        layout, lead = 0, (st[0] if srows > 1 else ncol)
        if ncol > 1 and st[1] != 1:
            raise invalid("%s: strides %s: expected the last dimension contiguous (row-major) or, per group, "
                          "the first (MN-major)" % (name, st))
        if srows > 1 and lead < ncol:
            raise invalid("%s: row stride %d is smaller than a row's %d %s (rows that overlap or are "
                          "broadcast)" % (name, lead, ncol, "blocks" if gran == Granularity.PER_BLOCK else "groups"))
    if zero_points is not None:
        if zero_points.dtype != DType.S32 or zero_points.shape != scales.shape or \
                any(a != b for a, b, n in zip(zero_points.strides, st, scales.shape) if n > 1):
            raise invalid("zero_points: must be int32 laid out like scales (shape %s, strides %s)"
                          % (scales.shape, st))
    return layout, lead


def rows_2d(name, v):
    if len(v.shape) != 2:
        raise invalid("%s: expected 2 dimensions [rows, cols], got shape %s" % (name, v.shape))
    if v.shape[1] > 1 and v.strides[1] != 1:
        raise invalid("%s: the last dimension must be contiguous (stride %d)" % (name, v.strides[1]))
    if v.shape[0] > 1 and v.strides[0] < v.shape[1]:
        raise invalid("%s: row stride %d is smaller than a row's %d elements (rows that overlap or are broadcast)"
                      % (name, v.strides[0], v.shape[1]))
    return v.shape[0], v.shape[1], (v.strides[0] if v.shape[0] > 1 else v.shape[1])


def _ptr(v):
    return None if v is None else v.ptr


class Prepared:
    """A validated call: its plan, its bq_args with every geometry field set, and its workspace
    size. Geometry (shapes, strides, dtypes, scalars, device) decides all of it, so a caller
    may keep one per geometry and launch it again with new pointers (launch), skipping the
    Python-side checks; the library still checks the arguments it is given on every run.
    args_address is where args lies, for the foreign calls that take it as a plain pointer."""
    __slots__ = ("plan", "args", "workspace_bytes", "args_address")

    def __init__(self, plan, args, workspace_bytes):
        self.plan, self.args, self.workspace_bytes = plan, args, workspace_bytes
        self.args_address = ctypes.addressof(args)

    def launch(self, ptrs, stream, alloc):
        """Run with the pointer fields in ptrs ({field: int or None}) on stream; alloc(n)
        gives (owner, pointer) for the workspace. Returns the workspace's owner (or None),
        which must live until the launch has run."""
        a = Args.from_buffer_copy(self.args)
        for field, p in ptrs.items():
            if p is not None:  # (None-ness is part of the geometry: the kept field is already NULL)
                setattr(a, field, p)
        keep, ws = None, None
        n = self.workspace_bytes
        if n:
            keep, ws = alloc(n)
        _lib.run(self.plan, a, ws, n, stream)
        return keep


def _launch(key, device, args, stream, alloc, prepare=False):
    """Select (or reuse) the plan and run args; with prepare, return the Prepared call instead
    (its pointer fields are the ones given here; launch replaces them)."""
    plan = _lib.plan_for(key, device)
    prep = Prepared(plan, args, _lib.workspace_size(plan, args))
    if prepare:
        return prep
    return prep.launch({}, stream, alloc)


def affine_sr(op, direction, rounding, seed, offset, signs=0):
    """sr_fields of an affine call: stochastic rounding is quantize's and fake quantize's,
    forward (dequantize and the backward passes round nothing into the storage type); signs:
    the fused rotation's random signs (a seed keys them)"""
    if rounding == "stochastic" and (Op(op) == Op.DEQUANTIZE or Direction(direction) == Direction.BACKWARD):
        raise invalid("rounding (\"stochastic\"): %s%s rounds nothing into the storage type; stochastic "
                      "rounding is quantize's and fake quantize's, forward" %
                      (Op(op).name.lower(), " backward" if Direction(direction) == Direction.BACKWARD else ""))
    return sr_fields(rounding, seed, offset, signs)


def affine_rot(op, direction, rotation_block, random_signs):
    """rot_fields of an affine call: the fused rotation is quantize's (x rotated first),
    dequantize's (the output rotated back), forward, and fake quantize's either way (forward:
    x rotated, fake quantized, rotated back; backward: dy masked in the rotated domain, by
    the rotated x); the quantize and dequantize backward passes take none (compose hadamard
    with them)"""
    if (rotation_block is not None or random_signs) and \
            Op(op) != Op.FAKE_QUANTIZE and Direction(direction) == Direction.BACKWARD:
        raise invalid("%s: %s backward takes no fused rotation (quantize and dequantize forward, and fake quantize "
                      "either way, do); compose hadamard with it"
                      % ("rotation_block" if rotation_block is not None else "random_signs", Op(op).name.lower()))
    return rot_fields(rotation_block, random_signs)


def rotation_block_check(n, last):
    """The fused rotation's block: a power of two from 2 to 256 dividing the last dimension
    (last)"""
    if n < 2 or n > 256 or n & (n - 1) or last % n:
        raise invalid("rotation_block (%d) must be a power of two from 2 to 256 dividing the last dimension (%d)"
                      % (n, last))


def affine(op, direction, gran, *, fl, x, y, dy=None, dx=None, int_type, qmin, qmax, scale=None,
           zero_point=0, scales=None, zero_points=None, axis=0, group_size=0, mask=None, rounding="nearest",
           seed=None, offset=0, rotation_block=None, random_signs=False, stream=None, alloc=None, prepare=False):
    """Quantize, dequantize or fake quantize, forward or backward. fl is the float-side view
    (its dtype is the float type); the views have the shapes of the library's layout:
    per tensor and per channel dense (contiguous), per token and per group [rows, cols]
    with unit column stride. mask (fake quantize per tensor and per channel): int32 words, a
    bit an element, written by the forward pass and read by the backward pass instead of x.
    rounding "stochastic" (quantize and fake quantize forward; an int seed required) rounds
    each element up or down by a draw at its row-major index plus offset (docs/numerics.md,
    "Stochastic rounding"). rotation_block (quantize and dequantize forward, fake quantize
    either way): the fused rotation (docs/numerics.md, "Rotation"), quantize rotating x
    first, dequantize its output back and fake quantize both (its backward pass: dy and x
    rotated, dy masked by the rotated x, dx rotated back; no mask kept), in blocks of that
    many elements (a power of two from 2 to 256 dividing the last dimension; per tensor and
    per channel the blocks run along the flat array), random_signs keyed by seed (the
    backward pass takes the forward's seed for them)."""
    rot, rblock, signs = affine_rot(op, direction, rotation_block, random_signs)
    sr, seed, offset = affine_sr(op, direction, rounding, seed, offset, signs)
    check_float("float input/output", fl)
    check_storage("integer type", int_type)
    qmin, qmax = qrange(int_type, qmin, qmax)
    gran = Granularity(gran)
    float_type = fl.dtype
    a = Args()
    layout = 0
    views = [("x", x), ("y", y), ("dy", dy), ("dx", dx), ("scales", scales), ("zero_points", zero_points)]
    device = same_device(*(views + [("mask", mask)]))
    if mask is not None:
        if Op(op) != Op.FAKE_QUANTIZE or gran not in (Granularity.PER_TENSOR, Granularity.PER_CHANNEL):
            raise invalid("mask: only fake quantize per tensor and per channel keep a mask")
        if sr:
            raise invalid("mask: fake quantize with stochastic rounding keeps no mask (its backward pass reads x)")
        if rot:
            raise invalid("mask: fake quantize with the fused rotation keeps no mask (its backward pass reads x)")
        words = (fl.numel + 31) // 32
        if mask.dtype != DType.S32 or not mask.is_contiguous() or mask.numel < words:
            raise invalid("mask: %d contiguous int32 words expected, got %s %s" % (words, mask.dtype.name,
                                                                                  tuple(mask.shape)))
    if gran == Granularity.PER_TENSOR:
        scale = number("scale", scale)
        if not (scale > 0 and scale != float("inf")):
            raise invalid("scale (%r) must be finite and > 0" % scale)
        zero_point = integer("zero_point", zero_point)
        if not -2**31 <= zero_point < 2**31:
            raise invalid("zero_point (%d) must fit int32" % zero_point)
        for name, v in views[:4]:
            if v is not None and not v.is_contiguous():
                raise invalid("%s: must be contiguous for per tensor" % name)
        a.numel = fl.numel
        a.scale, a.zero_point = scale, zero_point
        scale_type = DType.DEFAULT
    else:
        if scales is None:
            raise invalid("scales are required for %s" % gran.name.lower())
        scale_type = scale_type_of("scales", scales, float_type, gran)
        if gran == Granularity.PER_CHANNEL:
            for name, v in views[:4]:
                if v is not None and not v.is_contiguous():
                    raise invalid("%s: must be contiguous for per channel" % name)
            rank = len(fl.shape)
            if not 1 <= rank <= _lib.BQ_MAX_RANK:
                raise invalid("per channel: rank %d must be in [1, %d]" % (rank, _lib.BQ_MAX_RANK))
            ax = axis + rank if axis < 0 else axis
            if not 0 <= ax < rank:
                raise invalid("axis (%d) is out of range for rank %d" % (axis, rank))
            check_vector("scales", scales, fl.shape[ax], (scales.dtype,))
            if zero_points is not None:
                check_vector("zero_points", zero_points, fl.shape[ax], (DType.S32,))
            a.rank, a.axis = rank, ax
            for i, s in enumerate(fl.shape):
                a.shape[i] = s
        else:
            xv = x if x is not None else dx
            yv = y if y is not None else dy
            rows, cols, xs = rows_2d("x", xv)
            r2, c2, ys = rows_2d("y", yv)
            if (r2, c2) != (rows, cols):
                raise invalid("input shape %s and output shape %s differ" % (xv.shape, yv.shape))
            for name, v in views[:4]:
                if v is not None and v is not xv and v is not yv:
                    rows_2d(name, v)
                    if v.shape != xv.shape or v.strides[0] != (xs if name in ("x", "dx") else ys) and rows > 1:
                        raise invalid("%s: shape %s and strides %s must match its partner's" % (name, v.shape, v.strides))
            a.rows, a.cols, a.x_row_stride, a.y_row_stride = rows, cols, xs, ys
            if gran == Granularity.PER_TOKEN:
                check_vector("scales", scales, rows, (scales.dtype,))
                if zero_points is not None:
                    check_vector("zero_points", zero_points, rows, (DType.S32,))
            else:
                layout, grs = group_scales("scales", scales, zero_points, rows, cols, group_size, gran, scale_type)
                a.group_size, a.group_row_stride = group_size, grs
        a.scales, a.zero_points = _ptr(scales), _ptr(zero_points)
    a.x, a.y, a.dy, a.dx = _ptr(x), _ptr(y), _ptr(dy), _ptr(dx)
    a.mask = _ptr(mask)
    a.seed, a.offset = seed, offset
    if rot:
        # the blocks run along the last dimension (per tensor and per channel: of the flat array)
        rotation_block_check(rblock, a.cols if gran not in (Granularity.PER_TENSOR, Granularity.PER_CHANNEL) else
                             fl.shape[-1] if fl.shape else 1)
        a.rotation_block = rblock
    key = _lib.desc_key(op, direction, gran, float_type, int_type, qmin, qmax, scale_type, scale_layout=layout,
                        rounding=sr, rotation=rot, random_signs=signs)
    return _launch(key, device, a, stream, alloc, prepare)


def dynamic(gran, *, x, y, out_scales, out_zero_points=None, qmin=None, qmax=None, group_size=0,
            pow2_scales=False, amax_bound=0.0, rounding="nearest", seed=None, offset=0, rotation_block=None,
            random_signs=False, stream=None, alloc=None, prepare=False):
    """Dynamic quantize of x into y: dense x per tensor, x [rows, cols] per token, per group
    (group_size G) or per block (B x B tiles, group_size B). Writes out_scales (float32, x's
    type, UE8M0 bytes, or per group int32 UE8M0X4 words; per group and per block laid out as
    group_scales reads them: per tensor one element, per token rows) and, when given, int32
    out_zero_points (asymmetric). pow2_scales rounds each scale up to a power of two (UE8M0
    implies it); amax_bound (symmetric; 0: none) caps each segment's max |x|. rounding
    "stochastic" (an int seed required): the scales as rounding to nearest computes them,
    then y quantized with the scales written, each element rounded up or down by a draw at
    its row-major index plus offset (per tensor: the flat index; docs/numerics.md,
    "Stochastic rounding"). rotation_block (per token): each row of x
    rotated first in blocks of that many elements, random_signs keyed by seed (docs/numerics.md,
    "Rotation"), the scales and codes those of the rotated values."""
    rot, rblock, signs = rot_fields(rotation_block, random_signs)
    sr, seed, offset = sr_fields(rounding, seed, offset, signs)
    check_float("x", x)
    check_storage("y", y.dtype)
    qmin, qmax = qrange(y.dtype, qmin, qmax)
    asym = 1 if out_zero_points is not None else 0
    gran = Granularity(gran)
    device = same_device(("x", x), ("y", y), ("out_scales", out_scales), ("out_zero_points", out_zero_points))
    scale_type = scale_type_of("out_scales", out_scales, x.dtype, gran, dynamic=True)
    amax_bound = number("amax_bound", amax_bound or 0.0)
    a = Args(amax_bound=amax_bound)
    layout = 0
    if gran == Granularity.PER_TENSOR:
        if not (x.is_contiguous() and y.is_contiguous()):
            raise invalid("x and y must be contiguous for per tensor")
        if x.shape != y.shape:
            raise invalid("x shape %s and y shape %s differ" % (x.shape, y.shape))
        a.numel = x.numel
        nscales = 1
    else:
        rows, cols, xs = rows_2d("x", x)
        r2, c2, ys = rows_2d("y", y)
        if (r2, c2) != (rows, cols):
            raise invalid("x shape %s and y shape %s differ" % (x.shape, y.shape))
        a.rows, a.cols, a.x_row_stride, a.y_row_stride = rows, cols, xs, ys
        nscales = rows
        if gran in (Granularity.PER_GROUP, Granularity.PER_BLOCK):
            layout, a.group_row_stride = group_scales("out_scales", out_scales, out_zero_points, rows, cols,
                                                      group_size, gran, scale_type)
            a.group_size = group_size
            nscales = None
    if nscales is not None:
        for name, v in (("out_scales", out_scales), ("out_zero_points", out_zero_points)):
            if v is not None and (v.numel != nscales or not v.is_contiguous()):
                raise invalid("%s: expected %d contiguous elements, got shape %s" % (name, nscales, v.shape))
        if out_zero_points is not None and out_zero_points.dtype != DType.S32:
            raise invalid("out_zero_points: dtype %s, expected S32" % out_zero_points.dtype.name)
    a.x, a.y, a.out_scales, a.out_zero_points = x.ptr, y.ptr, out_scales.ptr, _ptr(out_zero_points)
    a.seed, a.offset, a.rotation_block = seed, offset, rblock
    key = _lib.desc_key(Op.DYNAMIC_QUANTIZE, Direction.FORWARD, gran, x.dtype, y.dtype, qmin, qmax, scale_type, asym,
                        pow2_scales=1 if pow2_scales else 0, scale_layout=layout, rounding=sr, rotation=rot,
                        random_signs=signs)
    return _launch(key, device, a, stream, alloc, prepare)


def mx_scales_shape(layout, rows, ngroups):
    """The scale array a microscaling call reads or writes, as (view shape, view strides,
    buffer shape): row-major [rows, G], MN-major a transposed view of [G, rows rounded up to
    4], blocked the padded tiles' bytes, flat."""
    if layout == 2:
        return ((-(-rows // 128) * 128 * (-(-ngroups // 4)) * 4,), (1,),
                (-(-rows // 128) * 128 * (-(-ngroups // 4)) * 4,))
    if layout == 1:
        ld = -(-rows // 4) * 4
        return (rows, ngroups), (1, ld), (ngroups, ld)
    return (rows, ngroups), (ngroups, 1), (rows, ngroups)


def mx_scales_of(scales, layout, rows, ngroups):
    """A microscaling call's scale array checked against its layout: (scale type, the
    leading dimension to pass, 0 for the layout's own)."""
    if scales.dtype not in (DType.UE8M0, DType.E4M3, DType.U8):
        raise invalid("scales: dtype %s, expected float8_e8m0fnu (UE8M0) or float8_e4m3fn (NVFP4)" % scales.dtype.name)
    scale_type = DType.UE8M0 if scales.dtype == DType.U8 else scales.dtype
    shape, _, _ = mx_scales_shape(layout, rows, ngroups)
    if layout == 2:
        if not scales.is_contiguous() or scales.numel != shape[0]:
            raise invalid("scales: %d contiguous bytes expected (the blocked layout), got shape %s" % (shape[0],
                                                                                                   scales.shape))
        return scale_type, 0
    if tuple(scales.shape) != shape:
        raise invalid("scales: shape %s, expected %s" % (scales.shape, shape))
    if layout == 1:
        if ngroups > 1 and scales.strides[1] < rows or rows > 1 and scales.strides[0] != 1:
            raise invalid("scales: an MN-major view needs unit row stride and a group stride >= rows")
        return scale_type, scales.strides[1] if ngroups > 1 else 0
    if ngroups > 1 and scales.strides[1] != 1 or rows > 1 and scales.strides[0] < ngroups:
        raise invalid("scales: a row-major view needs unit group stride and a row stride >= the groups")
    return scale_type, scales.strides[0] if rows > 1 else 0


def mx_codes_of(elem, codes):
    """A microscaling element type and the codes' array checked against it: (elem, is E2M1)."""
    elem = DType(elem)
    if elem not in MX_TYPES:
        raise invalid("dtype %s: the microscaling elements are E2M1, E4M3 and E5M2" % elem.name)
    e2 = elem == DType.E2M1
    if codes.dtype not in ((DType.U8, DType.S8) if e2 else (elem, DType.U8)):
        raise invalid("q: dtype %s, expected %s" % (codes.dtype.name, "uint8 (two E2M1 codes a byte)" if e2 else
                                                     elem.name + " or uint8"))
    return elem, e2


def sr_fields(rounding, seed, offset, signs=0):
    """Stochastic rounding's descriptor value and its (seed, offset) as uint64 (rounding
    "nearest" or "stochastic"; seed required with "stochastic" or the fused rotation's random
    signs (signs), any int, taken modulo 2^64)"""
    if rounding not in ("nearest", "stochastic"):
        raise invalid("rounding (%r) must be \"nearest\" or \"stochastic\"" % (rounding,))
    if signs and seed is None:
        raise invalid("seed: the random signs need one (an int)")
    if rounding == "nearest":
        if (seed is not None and not signs) or offset:
            raise invalid("seed and offset: stochastic rounding's (rounding is \"nearest\"; a seed also keys "
                          "random_signs)")
        return 0, integer("seed", seed) % (1 << 64) if signs else 0, 0
    if seed is None:
        raise invalid("seed: stochastic rounding needs one (an int; the same seed and offset give the same bits)")
    return 1, integer("seed", seed) % (1 << 64), integer("offset", offset) % (1 << 64)


def rot_fields(rotation_block, random_signs):
    """The fused rotation's (desc.rotation, args.rotation_block, desc.random_signs): none
    where rotation_block is None"""
    if rotation_block is None:
        if random_signs:
            raise invalid("random_signs: the fused rotation's (give rotation_block)")
        return 0, 0, 0
    return 1, integer("rotation_block", rotation_block), 1 if random_signs else 0


def mx(op, *, fl, codes, scales, elem, group_size, layout=0, rule=0, tensor_scale=None, out_tensor_scale=None,
       amax_bound=0.0, rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False, stream=None,
       alloc=None, prepare=False):
    """A microscaling call (docs/numerics.md, "Microscaling"): quantize (scales read) or dynamic
    quantize (scales written) of fl [rows, cols] into codes, or dequantize of codes into fl.
    codes: [rows, cols] bytes, or for E2M1 [rows, cols / 2] (two codes a byte, the view's
    dtype U8 or S8); scales: UE8M0 (float8_e8m0fnu) or E4M3 (NVFP4) bytes in the layout
    (mx_scales_shape: row-major [rows, G] with any row stride, MN-major [rows, G] with unit
    row stride, blocked the flat padded bytes); tensor_scale / out_tensor_scale: one float32
    (NVFP4). rounding "stochastic" (quantize, dynamic quantize) draws from seed at each
    element's row-major index plus offset (docs/numerics.md, "Stochastic rounding").
    rotation_block (quantize, dynamic quantize: x rotated first; dequantize: the output rotated
    back), random_signs keyed by seed: the fused rotation (docs/numerics.md, "Rotation")."""
    op = Op(op)
    rot, rblock, signs = rot_fields(rotation_block, random_signs)
    sr, seed, offset = sr_fields(rounding, seed, offset, signs)
    check_float("float input/output", fl)
    elem, e2 = mx_codes_of(elem, codes)
    rows, cols, fs = rows_2d("x" if op != Op.DEQUANTIZE else "y", fl)
    r2, cb, cs = rows_2d("q", codes)
    if (r2, cb * (2 if e2 else 1)) != (rows, cols):
        raise invalid("q shape %s does not hold %s [%d, %d]%s" % (codes.shape, elem.name, rows, cols,
                                                                 " two codes a byte" if e2 else ""))
    group_size = integer("group_size", group_size)
    if group_size < 1 or cols % group_size:
        raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (group_size, cols))
    ng = cols // group_size
    scale_type, grs = mx_scales_of(scales, layout, rows, ng)
    for name, v in (("tensor_scale", tensor_scale), ("out_tensor_scale", out_tensor_scale)):
        if v is not None and (v.dtype != DType.F32 or v.numel != 1):
            raise invalid("%s: one float32 expected, got %s %s" % (name, v.dtype.name, v.shape))
    device = same_device(("x", fl), ("q", codes), ("scales", scales), ("tensor_scale", tensor_scale),
                         ("out_tensor_scale", out_tensor_scale))
    a = Args(amax_bound=number("amax_bound", amax_bound or 0.0))
    a.rows, a.cols, a.group_size, a.group_row_stride = rows, cols, group_size, grs
    cstride = cs * (2 if e2 else 1)
    if op == Op.DEQUANTIZE:
        a.x, a.y, a.x_row_stride, a.y_row_stride, a.scales = codes.ptr, fl.ptr, cstride, fs, scales.ptr
    else:
        a.x, a.y, a.x_row_stride, a.y_row_stride = fl.ptr, codes.ptr, fs, cstride
        if op == Op.DYNAMIC_QUANTIZE:
            a.out_scales = scales.ptr
        else:
            a.scales = scales.ptr
    a.tensor_scale, a.out_tensor_scale = _ptr(tensor_scale), _ptr(out_tensor_scale)
    a.seed, a.offset, a.rotation_block = seed, offset, rblock
    key = _lib.desc_key(op, Direction.FORWARD, Granularity.PER_GROUP, fl.dtype, elem, 0, 0, scale_type,
                        scale_layout=layout, scale_rule=rule, rounding=sr, rotation=rot, random_signs=signs)
    return _launch(key, device, a, stream, alloc, prepare)


def mx_floats(op, direction, *, x, y=None, dy=None, dx=None, scales, elem, group_size, layout=0, tensor_scale=None,
              rounding="nearest", seed=None, offset=0, stream=None, alloc=None, prepare=False):
    """A microscaling call that moves floats alone: fake quantize forward (x -> y) and the
    backward passes (quantize and fake quantize read dy and x, dequantize dy alone (x None),
    each writes dx), every view [rows, cols] of one float type; scales read, as mx takes
    them (rounding, seed, offset: fake quantize forward's, as mx's)."""
    op, direction = Op(op), Direction(direction)
    sr, seed, offset = sr_fields(rounding, seed, offset)
    elem = DType(elem)
    if elem not in MX_TYPES:
        raise invalid("dtype %s: the microscaling elements are E2M1, E4M3 and E5M2" % elem.name)
    fl = x if x is not None else dy
    check_float("float input/output", fl)
    rows, cols, xs = rows_2d("x" if x is not None else "dx", x if x is not None else dx)
    views = (("x", x), ("y", y), ("dy", dy), ("dx", dx))
    ys = None
    for name, v in views:
        if v is None:
            continue
        r, c, st = rows_2d(name, v)
        if (r, c) != (rows, cols) or v.dtype != fl.dtype:
            raise invalid("%s: shape %s %s, expected [%d, %d] %s" % (name, v.shape, v.dtype.name, rows, cols,
                                                                     fl.dtype.name))
        if name in ("x", "dx"):
            xs = st
        else:
            ys = st
    group_size = integer("group_size", group_size)
    if group_size < 1 or cols % group_size:
        raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (group_size, cols))
    ng = cols // group_size
    scale_type, grs = mx_scales_of(scales, layout, rows, ng)
    if tensor_scale is not None and (tensor_scale.dtype != DType.F32 or tensor_scale.numel != 1):
        raise invalid("tensor_scale: one float32 expected")
    device = same_device(*(views + (("scales", scales), ("tensor_scale", tensor_scale))))
    a = Args()
    a.rows, a.cols, a.group_size, a.group_row_stride = rows, cols, group_size, grs
    a.x_row_stride, a.y_row_stride = xs, ys if ys is not None else cols
    a.x, a.y, a.dy, a.dx = _ptr(x), _ptr(y), _ptr(dy), _ptr(dx)
    a.scales, a.tensor_scale = scales.ptr, _ptr(tensor_scale)
    a.seed, a.offset = seed, offset
    key = _lib.desc_key(op, direction, Granularity.PER_GROUP, fl.dtype, elem, 0, 0, scale_type, scale_layout=layout,
                        rounding=sr)
    return _launch(key, device, a, stream, alloc, prepare)


def linear(op, *, x, w, w_scales, y, a_scales=None, a_scale=None, bias=None, a_zero_points=None, a_zero_point=0,
           w_sums=None, act_type=DType.S8, qmin=None, qmax=None, asymmetric=False, stream=None, alloc=None,
           prepare=False):
    """SmoothQuantLinear (x int8 or uint8 [M, K]; per-token a_scales[M] and, asymmetric,
    int32 a_zero_points[M], or per tensor a_scale and a_zero_point, numbers) or
    QuantizedLinear (x float [M, K], quantized per token into act_type's [qmin, qmax],
    asymmetric or not): y[M, N] = x W^T * scales (+ bias), W int8 [N, K] with K contiguous.
    Asymmetric activations need w_sums (int32 [N], weight_sums of W)."""
    op = Op(op)
    m, k, xs = rows_2d("x", x)
    m2, n, ys = rows_2d("y", y)
    if len(w.shape) != 2 or w.shape[1] != k or (k > 1 and w.strides[1] != 1) or (n > 1 and w.strides[0] != k):
        raise invalid("w: shape %s strides %s, expected a contiguous (N, %d) int8 weight" % (w.shape, w.strides, k))
    if w.dtype != DType.S8:
        raise invalid("w: dtype %s, expected int8" % w.dtype.name)
    if m2 != m or w.shape[0] != n:
        raise invalid("y: shape %s, expected (%d, %d)" % (y.shape, m, w.shape[0]))
    check_float("y", y)
    out_type = y.dtype
    st = w_scales.dtype
    if st not in (DType.F32, DType.F16, DType.BF16) and not (st == DType.F64 and out_type == DType.F64):
        raise invalid("w_scales: dtype %s must be float32, float16 or bfloat16 (float64 with a float64 output)"
                      % st.name)
    check_vector("w_scales", w_scales, n, (st,))
    if bias is not None:
        check_vector("bias", bias, n, (out_type,))
    device = same_device(("x", x), ("w", w), ("w_scales", w_scales), ("y", y), ("a_scales", a_scales),
                         ("bias", bias), ("a_zero_points", a_zero_points), ("w_sums", w_sums))
    a = Args(rows=m, cols=k, n=n, x_row_stride=xs, y_row_stride=ys)
    a.x, a.y, a.w, a.w_scales, a.bias = x.ptr, y.ptr, w.ptr, w_scales.ptr, _ptr(bias)
    if op == Op.SMOOTHQUANT_LINEAR:
        if x.dtype not in INT_TYPES:
            raise invalid("a: dtype %s, expected int8 or uint8" % x.dtype.name)
        act_type = x.dtype
        if a_scales is None and a_scale is None:
            raise invalid("a_scales is required")
        gran = Granularity.PER_TOKEN
        if a_scale is not None:  # per tensor: one host scale
            a_scale = number("a_scale", a_scale)
            if not (a_scale > 0 and a_scale != float("inf")):
                raise invalid("a_scale (%r) must be finite and > 0" % a_scale)
            a.scale, gran = a_scale, Granularity.PER_TENSOR
            a.zero_point = integer("a_zero_point", a_zero_point)
        else:
            check_vector("a_scales", a_scales, m, (st,))
            a.scales = a_scales.ptr
            if a_zero_points is not None:
                check_vector("a_zero_points", a_zero_points, m, (DType.S32,))
                a.zero_points = a_zero_points.ptr
        float_type = out_type
    else:
        check_float("x", x)
        if x.dtype != out_type:
            raise invalid("x (%s) and the output (%s) must have one dtype" % (x.dtype.name, out_type.name))
        check_int("activations", act_type)
        gran, float_type = Granularity.PER_TOKEN, x.dtype
    qmin, qmax = qrange(act_type, qmin, qmax)
    if asymmetric:
        if w_sums is None:
            raise invalid("w_sums: asymmetric activations need the weight's sums (linear_weight_sums)")
        check_vector("w_sums", w_sums, n, (DType.S32,))
        a.w_sums = w_sums.ptr
    key = _lib.desc_key(op, Direction.FORWARD, gran, float_type, act_type, qmin, qmax, st, 1 if asymmetric else 0,
                        out_type)
    return _launch(key, device, a, stream, alloc, prepare)


FP8_LINEAR_OUT = (DType.F32, DType.F16, DType.BF16)


def fp8_scales_mode(m, n, k, a_shape, b_shape):
    """fp8_linear's scale mode from the shapes of scale_a and scale_b: "tensorwise", one element
    each, of any shape; "rowwise", scale_a [M] or [M, 1] and scale_b [N] or [1, N] (as
    torch._scaled_mm reads them); "blockwise", scale_a [M, ceil(K / 128)] (a row's 1 x 128
    groups) and scale_b [ceil(N / 128), ceil(K / 128)] (the weight's 128 x 128 blocks) or its
    transpose (torch._scaled_mm's scale_b for w.t()). Shapes that fit several modes (a
    one-element scale where M = 1, say) take the first the other scale fits too, in that
    order. Raises naming the scale whose shape fits no mode, or both where they fit none
    together."""
    kb, nb = -(-k // 128), -(-n // 128)

    def fits(name, shape, count, rows_shapes, block_shapes, what):
        shape = tuple(shape)
        numel = 1
        for s in shape:
            numel *= s
        modes = [numel == 1, shape in rows_shapes or numel == 1 == count, shape in block_shapes]
        if not any(modes):
            raise invalid("%s: shape %s, expected one element (tensorwise) or %s (rowwise: %s) or %s (blockwise: "
                          "%s)" % (name, shape, " or ".join(str(list(s)) for s in rows_shapes), what[0],
                                   " or ".join(str(list(s)) for s in block_shapes), what[1]))
        return modes
    fa = fits("scale_a", a_shape, m, ((m,), (m, 1)), ((m, kb),), ("a scale per row of x, M = %d" % m,
                                                                   "a row's groups of 128 of K = %d" % k))
    fb = fits("scale_b", b_shape, n, ((n,), (1, n)), ((nb, kb), (kb, nb)),
              ("a scale per output channel, N = %d" % n, "the weight's 128 x 128 blocks, N = %d, K = %d" % (n, k)))
    names = ("tensorwise", "rowwise", "blockwise")
    for i in range(3):
        if fa[i] and fb[i]:
            return names[i]
    raise invalid("scale_a (shape %s, %s) and scale_b (shape %s, %s) differ: both scales are tensorwise (one "
                  "element each), both rowwise (scale_a [M] or [M, 1], scale_b [N] or [1, N]) or both blockwise "
                  "(scale_a [M, %d], scale_b [%d, %d]; M = %d, N = %d, K = %d)"
                  % (tuple(a_shape), names[fa.index(True)], tuple(b_shape), names[fb.index(True)], kb, nb, kb, m, n,
                     k))


def fp8_block_scales(m, n, k, scale_a, scale_b):
    """Blockwise scales as the library reads them: (scale_layout, group_row_stride) of scale_a
    [M, KB], row-major (K blocks contiguous, rows group_row_stride apart) or MN-major (rows
    contiguous, K blocks group_row_stride apart: torch._scaled_mm's layout); scale_b must hold
    block (nb, b) at nb * KB + b: [NB, KB] contiguous, or the transpose view of one."""
    kb, nb = -(-k // 128), -(-n // 128)
    for name, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        if v.dtype != DType.F32:
            raise invalid("%s: dtype %s, expected float32" % (name, v.dtype.name))
    if tuple(scale_a.shape) != (m, kb):
        raise invalid("scale_a: shape %s, expected (%d, %d): blockwise, a scale per row and 128 elements of K"
                      % (tuple(scale_a.shape), m, kb))
    sr, sc = scale_a.strides
    if m <= 1 and kb > 1 and sc != 1:  # one row of scales, spaced: MN-major, the blocks sc apart
        if sc >= 1:
            return ScaleLayout.MN_MAJOR, sc
    elif m <= 1:
        return ScaleLayout.ROW_MAJOR, 0
    elif kb <= 1:  # one column: rows sr apart
        if sr >= 1:
            return ScaleLayout.ROW_MAJOR, sr
    if sc == 1 and sr >= kb:
        return ScaleLayout.ROW_MAJOR, sr
    if sr == 1 and sc >= m:
        return ScaleLayout.MN_MAJOR, sc
    raise invalid("scale_a: strides %s: blockwise activation scales are row-major (K blocks contiguous, strides "
                  "(>= %d, 1)) or MN-major (rows contiguous, strides (1, >= %d))" % ((sr, sc), kb, m))


def _check_block_weight_scales(scale_b, n, k):
    kb, nb = -(-k // 128), -(-n // 128)
    shape, strides = tuple(scale_b.shape), tuple(scale_b.strides)

    def dense(st, sh):  # element (i, j) of shape sh at i * sh[1] + j, size-1 dimensions free
        return (sh[1] <= 1 or st[1] == 1) and (sh[0] <= 1 or st[0] == sh[1])
    ok = (shape == (nb, kb) and dense(strides, shape)) or \
        (shape == (kb, nb) and dense(strides[::-1], shape[::-1]))
    if not ok:
        raise invalid("scale_b: shape %s strides %s, expected the weight's block scales [%d, %d] contiguous (or "
                      "their transpose view [%d, %d], torch._scaled_mm's)" % (shape, strides, nb, kb, kb, nb))


def _check_fp8_weight_and_y(w, y, m, k):
    """the FP8 layers' weight (E4M3 [N, K], K contiguous) and output (float [M, N]) checks"""
    n = y.shape[1] if len(y.shape) == 2 else -1
    # (with K = 0 the weight holds nothing: its strides say nothing)
    if len(w.shape) != 2 or w.shape[1] != k or (k > 1 and w.strides[1] != 1) or \
            (k and w.shape[0] > 1 and w.strides[0] != k):
        raise invalid("w: shape %s strides %s, expected a contiguous (N, %d) weight" % (w.shape, w.strides, k))
    if w.dtype != DType.E4M3:
        raise invalid("w: dtype %s, expected E4M3 (float8_e4m3fn): the weights are E4M3" % w.dtype.name)
    if y.shape[0] != m or w.shape[0] != n:
        raise invalid("y: shape %s, expected (%d, %d)" % (y.shape, m, w.shape[0]))
    if y.dtype not in FP8_LINEAR_OUT:
        raise invalid("y: dtype %s, expected float32, float16 or bfloat16" % y.dtype.name)


def fp8_linear(*, x, w, scale_a, scale_b, y, bias=None, rowwise=False, blockwise=False, stream=None, alloc=None,
               prepare=False):
    """FP8Linear: y[M, N] = Tout((acc * sa) * sw (+ bias)), acc = x W^T summed by the FP8
    tensor cores (not IEEE f32 sums: the library's FP8 LINEAR LAYERS section bounds them), x
    E4M3 or E5M2 [M, K] with any row stride, W E4M3 [N, K] with K contiguous (nn.Linear's
    weight), y float32, float16 or bfloat16 [M, N], bias [N] of y's type. scale_a (sa,
    args.scales) and scale_b (sw, args.w_scales) are float32: tensorwise one element each,
    rowwise scale_a[M] (a row of x each) and scale_b[N] (an output channel each), as
    torch._scaled_mm takes them; blockwise scale_a [M, ceil(K / 128)] (row-major or MN-major,
    fp8_block_scales) and scale_b the weight's [ceil(N / 128), ceil(K / 128)] blocks, each
    K block's sum scaled by their product (y = Tout(acc + bias)). sm_89 and later (the plan's
    select refuses older devices)."""
    m, k, xs = rows_2d("x", x)
    _, n, ys = rows_2d("y", y)
    if x.dtype not in FP8_TYPES:
        raise invalid("x: dtype %s, expected E4M3 (float8_e4m3fn) or E5M2 (float8_e5m2)" % x.dtype.name)
    _check_fp8_weight_and_y(w, y, m, k)
    a = Args(rows=m, cols=k, n=n, x_row_stride=xs, y_row_stride=ys)
    layout, gran = ScaleLayout.ROW_MAJOR, Granularity.PER_TOKEN if rowwise else Granularity.PER_TENSOR
    if blockwise:
        layout, a.group_row_stride = fp8_block_scales(m, n, k, scale_a, scale_b)
        _check_block_weight_scales(scale_b, n, k)
        gran = Granularity.PER_BLOCK
    else:
        check_vector("scale_a", scale_a, m if rowwise else 1, (DType.F32,))
        check_vector("scale_b", scale_b, n if rowwise else 1, (DType.F32,))
    if bias is not None:
        check_vector("bias", bias, n, (y.dtype,))
    device = same_device(("x", x), ("w", w), ("scale_a", scale_a), ("scale_b", scale_b), ("y", y), ("bias", bias))
    a.x, a.y, a.w, a.scales, a.w_scales, a.bias = x.ptr, y.ptr, w.ptr, scale_a.ptr, scale_b.ptr, _ptr(bias)
    key = _lib.desc_key(Op.FP8_LINEAR, Direction.FORWARD, gran, y.dtype, x.dtype, 0, 0, DType.F32, 0, y.dtype,
                        scale_layout=layout)
    return _launch(key, device, a, stream, alloc, prepare)


def fp8_quantized_linear(*, x, w, scale_b, y, bias=None, act_dtype=DType.E4M3, blockwise=False, stream=None,
                         alloc=None, prepare=False):
    """FP8QuantizedLinear: x float32, float16 or bfloat16 [M, K] (any row stride) quantized on
    the GPU to act_dtype (E4M3 or E5M2) per token, or blockwise per 1 x 128 group (K a multiple
    of 128), as dynamic quantize does it, into the workspace; then fp8_linear with the E4M3
    weight w [N, K] (K contiguous) and scale_b: float32 per output channel [N], or blockwise
    the weight's 128 x 128 blocks [ceil(N / 128), K / 128] (contiguous). y float32, float16 or
    bfloat16 [M, N], bias [N] of y's type. The same bits as the two calls in turn."""
    m, k, xs = rows_2d("x", x)
    _, n, ys = rows_2d("y", y)
    if x.dtype not in FP8_LINEAR_OUT:
        raise invalid("x: dtype %s, expected float32, float16 or bfloat16" % x.dtype.name)
    if act_dtype not in FP8_TYPES:
        raise invalid("act_dtype %s: E4M3 (float8_e4m3fn) or E5M2 (float8_e5m2)" % DType(act_dtype).name)
    _check_fp8_weight_and_y(w, y, m, k)
    if blockwise:
        if k % 128:
            raise invalid("x: K = %d, expected a multiple of 128: blockwise activations are quantized in groups "
                          "of 128 along K" % k)
        if scale_b.dtype != DType.F32:
            raise invalid("scale_b: dtype %s, expected float32" % scale_b.dtype.name)
        _check_block_weight_scales(scale_b, n, k)
    else:
        check_vector("scale_b", scale_b, n, (DType.F32,))
    if bias is not None:
        check_vector("bias", bias, n, (y.dtype,))
    device = same_device(("x", x), ("w", w), ("scale_b", scale_b), ("y", y), ("bias", bias))
    a = Args(rows=m, cols=k, n=n, x_row_stride=xs, y_row_stride=ys)
    a.x, a.y, a.w, a.w_scales, a.bias = x.ptr, y.ptr, w.ptr, scale_b.ptr, _ptr(bias)
    gran = Granularity.PER_BLOCK if blockwise else Granularity.PER_TOKEN
    key = _lib.desc_key(Op.FP8_QUANTIZED_LINEAR, Direction.FORWARD, gran, x.dtype, act_dtype, 0, 0, DType.F32, 0,
                        y.dtype)
    return _launch(key, device, a, stream, alloc, prepare)


def weight_sums(*, w, y, stream=None, alloc=None, prepare=False):
    """y[n] = sum_k w[n, k] in int32, w int8 [N, K] with K contiguous: what asymmetric
    linear plans take as w_sums."""
    n, k, ws = rows_2d("w", w)
    if w.dtype != DType.S8 or (n > 1 and ws != k):
        raise invalid("w: shape %s strides %s dtype %s, expected a contiguous int8 (N, K) weight"
                      % (w.shape, w.strides, w.dtype.name))
    check_vector("y", y, n, (DType.S32,))
    device = same_device(("w", w), ("y", y))
    a = Args(cols=k, n=n)
    a.w, a.y = w.ptr, y.ptr
    return _launch(_lib.desc_key(Op.LINEAR_WEIGHT_SUMS), device, a, stream, alloc, prepare)


def _fused_producer(op, x, rows, d, residual, norm_weight, eps, out, activation):
    """A fused call's producer half checked into Args (x, residual, norm_weight, eps, out; the
    rows and strides): (name, args, activation, gated)."""
    name = "rms_norm_quant" if op == Op.RMSNORM_QUANTIZE else "gated_quant"
    r2, xcols, xs = rows_2d("x", x)
    gated = op == Op.GATED_QUANTIZE
    if r2 != rows or xcols != (2 * d if gated else d):
        raise invalid("%s: x shape %s, expected (%d, %d) for an output of %d rows of %d"
                      % (name, x.shape, rows, 2 * d if gated else d, rows, d))
    a = Args(rows=rows, cols=d, x_row_stride=xs)
    for vname, v in (("residual", residual), ("out", out)):
        if v is None:
            continue
        rv, cv, sv = rows_2d(vname, v)
        if (rv, cv) != (rows, d) or v.dtype != x.dtype:
            raise invalid("%s: %s: shape %s dtype %s, expected (%d, %d) of %s"
                          % (name, vname, v.shape, v.dtype.name, rows, d, x.dtype.name))
        setattr(a, vname + "_row_stride", sv)
    if gated:
        activation = int(activation) or int(Activation.SILU)
        if activation not in (int(Activation.SILU), int(Activation.GELU_TANH)):
            raise invalid("%s: activation (%d) must be SILU or GELU_TANH" % (name, activation))
        if residual is not None or norm_weight is not None:
            raise invalid("%s: residual and norm_weight belong to RMSNorm" % name)
    else:
        if activation:
            raise invalid("%s: activation (%d) belongs to the gated op" % (name, int(activation)))
        if norm_weight is None:
            raise invalid("%s: norm_weight is required" % name)
        check_vector("norm_weight", norm_weight, d, (x.dtype,))
        eps = number("%s: eps" % name, eps)
        if not (eps >= 0 and eps != float("inf")):
            raise invalid("%s: eps (%r) must be finite and >= 0" % (name, eps))
        a.eps = eps
    a.x, a.residual, a.norm_weight, a.out = x.ptr, _ptr(residual), _ptr(norm_weight), _ptr(out)
    return name, a, activation if gated else 0, gated


def _fused_op(op):
    op = Op(op)
    if op not in (Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE):
        raise invalid("op %s is not a fused producer" % op.name)
    return op


def fused(op, *, x, y, out_scales=None, out_zero_points=None, residual=None, norm_weight=None, eps=0.0,
          out=None, activation=0, qmin=None, qmax=None, group_size=0, scale=None, zero_point=0, rounding="nearest",
          seed=None, offset=0, rotation_block=None, random_signs=False, stream=None, alloc=None, prepare=False):
    """A fused producer quantized in the same pass (docs/numerics.md, "Fused producers"):
    Op.RMSNORM_QUANTIZE, x [rows, D] (with an optional residual [rows, D], which receives
    h = x + residual, and norm_weight [D]), or Op.GATED_QUANTIZE, x [rows, 2 D] (gate, then
    up; activation: Activation.SILU or GELU_TANH), into y [rows, D]. With scale (a number)
    the values are quantized per tensor with it and zero_point; else dynamically, per token
    (group_size 0) or per group, writing f32 out_scales (and int32 out_zero_points when
    given: asymmetric). out, when given, receives the values quantized ([rows, D] of x's type).
    rounding "stochastic" (an int seed required; integer and FP8 storage): the values
    quantized as the stochastic quantize does, with the static scale or the scales rounding
    to nearest computes, element (r, c) drawing at index offset + r D + c; the library then
    needs a workspace of rows D elements of x's type without out (bq_plan_workspace_size,
    which the launch allocates). rotation_block (per tensor and per token; a power of two
    from 2 to 256 dividing D), random_signs keyed by seed: the values rotated first, as
    hadamard does, then quantized by the same op (per token: the scales of the rotated
    values), either rounding; out still receives the values unrotated."""
    rot, rblock, signs = rot_fields(rotation_block, random_signs)
    sr, seed, offset = sr_fields(rounding, seed, offset, signs)
    op = _fused_op(op)
    check_float("x", x)
    check_storage("y", y.dtype)
    qmin, qmax = qrange(y.dtype, qmin, qmax)
    device = same_device(("x", x), ("y", y), ("out_scales", out_scales), ("out_zero_points", out_zero_points),
                         ("residual", residual), ("norm_weight", norm_weight), ("out", out))
    rows, d, ys = rows_2d("y", y)
    name, a, activation, gated = _fused_producer(op, x, rows, d, residual, norm_weight, eps, out, activation)
    a.y_row_stride = ys
    asym = 0
    if scale is not None:
        scale = number("%s: scale" % name, scale)
        if not (scale > 0 and scale != float("inf")):
            raise invalid("%s: scale (%r) must be finite and > 0" % (name, scale))
        zero_point = integer("%s: zero_point" % name, zero_point)
        if not -2**31 <= zero_point < 2**31:
            raise invalid("%s: zero_point (%d) must fit int32" % (name, zero_point))
        if out_scales is not None or out_zero_points is not None:
            raise invalid("%s: a static scale takes no out_scales or out_zero_points" % name)
        gran, scale_type = Granularity.PER_TENSOR, DType.DEFAULT
        a.scale, a.zero_point = scale, zero_point
    else:
        if out_scales is None:
            raise invalid("%s: out_scales is required without a static scale" % name)
        if out_scales.dtype not in (DType.F32, x.dtype):
            raise invalid("%s: out_scales: dtype %s, expected F32 or x's %s" % (name, out_scales.dtype.name,
                                                                              x.dtype.name))
        gran, scale_type, nscales = Granularity.PER_TOKEN, out_scales.dtype, rows
        group_size = integer("group_size", group_size or 0)
        if group_size:
            if group_size < 1 or d % group_size:
                raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (group_size, d))
            gran, nscales = Granularity.PER_GROUP, rows * (d // group_size)
            a.group_size = group_size
        for vname, v, t in (("out_scales", out_scales, scale_type), ("out_zero_points", out_zero_points, DType.S32)):
            if v is not None and (v.numel != nscales or not v.is_contiguous() or v.dtype != t):
                raise invalid("%s: expected %d contiguous %s elements, got shape %s" % (vname, nscales, t.name,
                                                                                       v.shape))
        asym = 1 if out_zero_points is not None else 0
    if rot:
        fused_rotation(rblock, gran, d)
    a.y, a.out_scales, a.out_zero_points = y.ptr, _ptr(out_scales), _ptr(out_zero_points)
    a.seed, a.offset, a.rotation_block = seed, offset, rblock
    key = _lib.desc_key(op, Direction.FORWARD, gran, x.dtype, y.dtype, qmin, qmax, scale_type, asym,
                        activation=activation, rounding=sr, rotation=rot, random_signs=signs)
    return _launch(key, device, a, stream, alloc, prepare)


def fused_rotation(rotation_block, gran, d):
    """The fused producers' rotation, checked: per tensor and per token (the library offers
    no per-group rotation into integer or FP8 storage), and for the microscaling formats
    (gran None), blocks of rotation_block (a power of two from 2 to 256) dividing the
    output's last dimension d"""
    if gran == Granularity.PER_GROUP:
        raise invalid("rotation_block: the fused producers rotate per token or per tensor (a static scale), not "
                      "per group (group_size); take the values (return_normed / return_act), hadamard them, then "
                      "dynamic_quant per group")
    rotation_block_check(rotation_block, d)


def fused_mx(op, *, x, codes, scales, elem, group_size, layout=0, rule=0, tensor_scale=None, out_tensor_scale=None,
             residual=None, norm_weight=None, eps=0.0, out=None, activation=0, rounding="nearest", seed=None,
             offset=0, rotation_block=None, random_signs=False, stream=None, alloc=None, prepare=False):
    """A fused producer emitting a microscaling format (docs/numerics.md, "Fused producers"
    and "Microscaling"): the producer as fused takes it, its values dynamic quantized per
    group of group_size into codes ([rows, D] bytes, or for E2M1 [rows, D / 2], two codes a
    byte) with one-byte scales (UE8M0, or E4M3 for NVFP4) in the layout (mx_scales_shape);
    NVFP4's tensor scale given (tensor_scale) or computed and written (out_tensor_scale),
    one float32 each. rounding "stochastic" (seed, offset) and rotation_block, random_signs:
    as mx's dynamic quantize takes them, bit for bit that op on the values (out, when given,
    receives them unrotated); the library then needs a workspace without out."""
    rot, rblock, signs = rot_fields(rotation_block, random_signs)
    sr, seed, offset = sr_fields(rounding, seed, offset, signs)
    op = _fused_op(op)
    check_float("x", x)
    elem, e2 = mx_codes_of(elem, codes)
    device = same_device(("x", x), ("q", codes), ("scales", scales), ("residual", residual),
                         ("norm_weight", norm_weight), ("out", out), ("tensor_scale", tensor_scale),
                         ("out_tensor_scale", out_tensor_scale))
    rows, cb, cs = rows_2d("q", codes)
    d = cb * (2 if e2 else 1)
    name, a, activation, gated = _fused_producer(op, x, rows, d, residual, norm_weight, eps, out, activation)
    group_size = integer("group_size", group_size)
    if group_size < 1 or d % group_size:
        raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (group_size, d))
    scale_type, grs = mx_scales_of(scales, layout, rows, d // group_size)
    for vname, v in (("tensor_scale", tensor_scale), ("out_tensor_scale", out_tensor_scale)):
        if v is not None and (v.dtype != DType.F32 or v.numel != 1):
            raise invalid("%s: one float32 expected, got %s %s" % (vname, v.dtype.name, v.shape))
    a.y, a.y_row_stride, a.out_scales = codes.ptr, cs * (2 if e2 else 1), scales.ptr
    a.group_size, a.group_row_stride = group_size, grs
    a.tensor_scale, a.out_tensor_scale = _ptr(tensor_scale), _ptr(out_tensor_scale)
    if rot:
        fused_rotation(rblock, None, d)
    a.seed, a.offset, a.rotation_block = seed, offset, rblock
    key = _lib.desc_key(op, Direction.FORWARD, Granularity.PER_GROUP, x.dtype, elem, 0, 0, scale_type,
                        activation=activation, scale_layout=layout, scale_rule=rule, rounding=sr, rotation=rot,
                        random_signs=signs)
    return _launch(key, device, a, stream, alloc, prepare)


def hadamard(*, x, y, block_size, inverse=False, seed=None, stream=None, alloc=None, prepare=False):
    """The block-diagonal Walsh-Hadamard rotation (docs/numerics.md, "Rotation") of x [rows,
    cols] into y (the same shape and float type), in blocks of block_size (a power of two, 2
    to 256, dividing cols) along the row; inverse: the inverse transform (the forward one's
    gradient); seed (an int): the random sign vector Philox4x32-10 draws from it, None: none."""
    check_float("x", x)
    rows, cols, xs = rows_2d("x", x)
    r2, c2, ys = rows_2d("y", y)
    if (r2, c2) != (rows, cols) or y.dtype != x.dtype:
        raise invalid("y: shape %s %s, expected x's %s %s" % (y.shape, y.dtype.name, x.shape, x.dtype.name))
    n = integer("block_size", block_size)
    if n < 2 or n > 256 or n & (n - 1) or cols % n:
        raise invalid("block_size (%d) must be a power of two from 2 to 256 dividing the last dimension (%d)"
                      % (n, cols))
    device = same_device(("x", x), ("y", y))
    a = Args(rows=rows, cols=cols, x_row_stride=xs, y_row_stride=ys, group_size=n)
    signs = seed is not None
    if signs:
        seed = integer("seed", seed)
        if not 0 <= seed < 2**64:
            raise invalid("seed (%d) must fit 64 bits, unsigned" % seed)
        a.seed = seed
    a.x, a.y = x.ptr, y.ptr
    key = _lib.desc_key(Op.HADAMARD, Direction.BACKWARD if inverse else Direction.FORWARD, Granularity.PER_GROUP,
                        x.dtype, random_signs=int(signs))
    return _launch(key, device, a, stream, alloc, prepare)
