"""In-process A/B of per-group quantize kernels (bf16 -> s8, G = 128), timed as python/bench.py
times (its L2 flush and scrub, its interleaved blocks behind a spin kernel), each round's turns
starting one contender later than the last round's.

Contenders: this package's quantize_per_group ("ours"), torch.compile of the eager formula
("compile"), the copy of the same bytes, and kernels launched directly through the driver API
on torch's stream:
  - the micro-kernels of pergroup_ab.cu (PG_ONLY=k_ours,k_tri,... picks them; all by default),
    each a replica of bq_affine_pair's hot path or of torch.compile's kernel with one feature
    changed (the F_* flags), or with another launch shape (SHAPE: k_ours_b*, k_quad, k_tl; k_tl
    only where the tensor is whole blocks of 4096 elements);
  - PG_REAL=k_real_X,...: library cubins named real_X.cubin beside CUBIN, launched with a
    bq_affine_params block built here for G = 128 (a bq_pair_params block where X has
    "small": the cubins since the pair kernel took its own). tools/kernel_dump builds them:
      kernel_dump --out DIR --all --family affine
        --filter 'quantize.fwd.per_group.bf16.s8.q[-128,127].scale_f32.vec'
    writes one cubin per SKU that contains the text (fake and dynamic quantize too); copy
    DIR/quantize.fwd.per_group.bf16.s8.q_-128_127_.scale_f32.vec8x4.sm_90.cubin to real_X.cubin;
  - k_triton: torch.compile's Triton kernel from tri_y32.ptx beside CUBIN, where that file
    exists (its PTX from the inductor cache, XBLOCK 128 and YBLOCK 32; 4096 x 4096 only).
Before timing, each output's codes that differ from ours and from torch.compile's are
counted and printed (a replica of ours should print 0 and 19, torch.compile's kernel 19 and 0);
PG_SHARED_Y=1 gives every direct launch one output buffer, so that none gains from where its
output lies; PG_YBUFS=n instead runs each direct kernel into each of n outputs spaced apart
by other allocations (contenders NAME@i), to see how much where an output lies matters.
Run on the GPU host from the repository root, the package's library built:

  nvcc -cubin -arch=sm_90 -o pg.cubin tools/dev/pergroup_ab/pergroup_ab.cu   (or NVRTC)
  PYTHONPATH=python BARACUDA_QUANT_PYLIB=... PG_ROUNDS=9 python3 tools/dev/pergroup_ab/pergroup_ab.py pg.cubin 4096x4096

It prints each contender's median over the rounds and torch.compile's time over it. Each
round starts one place later, so every contender takes every place equally often when
PG_ROUNDS is a multiple of the number of contenders.
docs/design.md ("Measured and not kept") has what it found.
"""
import ctypes, os, sys, statistics
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import bench, l2_scrub
import baracuda_quant.ops as bqo

DEV = "cuda"
if len(sys.argv) < 2:
    sys.exit("usage: pergroup_ab.py CUBIN [MxK ...]  (see the top of this file)")
cu = ctypes.CDLL("libcuda.so.1")
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
torch.zeros(1, device=DEV)
torch.cuda.synchronize()
mod = ctypes.c_void_p()
r = cu.cuModuleLoad(ctypes.byref(mod), sys.argv[1].encode())
assert r == 0, r
NAMES = ["k_tri", "k_tri_exact", "k_ours", "k_ours_noapply", "k_ours_approx", "k_ours_noplain", "k_ours_noclamp",
         "k_ours_nofdiv", "k_ours_l1el", "k_ours_scalel1", "k_ours_nopolicy", "k_ours_big", "k_ours_split", "k_tri_plain",
         "k_tri_plain_split", "k_ours_b128", "k_ours_b512", "k_ours_b1024", "k_quad", "k_tl"]
only = os.environ.get("PG_ONLY")
if only:
    NAMES = only.split(",")
fns = {}
for n in NAMES:
    f = ctypes.c_void_p()
    r = cu.cuModuleGetFunction(ctypes.byref(f), mod, n.encode())
    assert r == 0, (n, r)
    fns[n] = f


class Big(ctypes.Structure):
    _fields_ = [("x", ctypes.c_void_p), ("s", ctypes.c_void_p), ("y", ctypes.c_void_p), ("np", ctypes.c_uint),
                ("magic", ctypes.c_uint), ("shift", ctypes.c_uint), ("pad", ctypes.c_uint * 50)]


# launch shape by kernel: (threads a block, elements a thread)
SHAPE = {"k_ours_b128": (128, 16), "k_ours_b512": (512, 16), "k_ours_b1024": (1024, 16), "k_quad": (256, 32),
         "k_tl": (256, 16)}


def launcher(name, x, s, y):
    threads, per = SHAPE.get(name, (256, 16))
    np_ = x.numel() // per
    grid = (np_ + threads - 1) // threads
    # magic/shift for /128: (umulhi(e, magic) + e) >> shift with magic = 0, shift = 7
    if name == "k_ours_big":
        b = Big(x.data_ptr(), s.data_ptr(), y.data_ptr(), np_, 0, 7)
        args = [b]
    else:
        args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(s.data_ptr()), ctypes.c_void_p(y.data_ptr()),
                ctypes.c_uint(np_), ctypes.c_uint(0), ctypes.c_uint(7)]
    arr = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    f = fns[name]

    def go():
        r = cu.cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, 0, torch.cuda.current_stream().cuda_stream, arr, None)
        assert r == 0, r
    go.keep = (args, arr)
    return go


tfn = None
_tri = os.path.join(os.path.dirname(sys.argv[1]), "tri_y32.ptx")
if os.path.exists(_tri):
    tmod = ctypes.c_void_p()
    r = cu.cuModuleLoadData(ctypes.byref(tmod), open(_tri, "rb").read() + b"\0")
    assert r == 0, r
    tfn = ctypes.c_void_p()
    r = cu.cuModuleGetFunction(ctypes.byref(tfn), tmod, b"triton_poi_fused__to_copy_clamp_div_round_unsqueeze_view_0")
    assert r == 0, r


def triton_launcher(x, s, y):
    """torch.compile's per-group kernel (XBLOCK 128, YBLOCK 32, 8 warps; ynumel 131072 built in), launched raw"""
    args = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(s.data_ptr()), ctypes.c_void_p(y.data_ptr()),
            ctypes.c_int(131072), ctypes.c_int(128), ctypes.c_void_p(0), ctypes.c_void_p(0)]
    arr = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])

    def go():
        r = cu.cuLaunchKernel(tfn, 1, 4096, 1, 256, 1, 1, 0, torch.cuda.current_stream().cuda_stream, arr, None)
        assert r == 0, r
    go.keep = (args, arr)
    return go


class AP(ctypes.Structure):
    """bq_affine_params, field for field"""
    _fields_ = [("in0", ctypes.c_uint64), ("in1", ctypes.c_uint64), ("out", ctypes.c_uint64)] + \
        [(n, ctypes.c_int64) for n in "rows cols in0_stride in1_stride out_stride tiles tpw chunks group gmod grs".split()] + \
        [("scales", ctypes.c_uint64), ("zps", ctypes.c_uint64), ("scale", ctypes.c_double), ("fd_group", ctypes.c_uint32 * 3),
         ("fd_gmod", ctypes.c_uint32 * 3), ("fd_chunks", ctypes.c_uint32 * 3), ("zp", ctypes.c_int32), ("fast32", ctypes.c_int32),
         ("nblk", ctypes.c_int64), ("fd_parts", ctypes.c_uint32 * 3), ("gl", ctypes.c_int32), ("parts", ctypes.c_int32),
         ("mask", ctypes.c_uint64)]


class PP(ctypes.Structure):
    """bq_pair_params (the pair kernel's own block, where the cubin's name has "small")"""
    _fields_ = [("in0", ctypes.c_uint64), ("out", ctypes.c_uint64), ("scales", ctypes.c_uint64),
                ("pairs", ctypes.c_uint32), ("fd_group", ctypes.c_uint32 * 3)]


real_fns = {}


def real_module(name):
    if name in real_fns:
        return real_fns[name]
    data = open(os.path.join(os.path.dirname(sys.argv[1]), name[2:] + ".cubin"), "rb").read()
    m = ctypes.c_void_p()
    r = cu.cuModuleLoadData(ctypes.byref(m), data)
    assert r == 0, r
    f = ctypes.c_void_p()
    r = cu.cuModuleGetFunction(ctypes.byref(f), m, b"bq_affine_pair")
    assert r == 0, r
    real_fns[name] = (m, f)
    return real_fns[name]


def real_launcher(name, x, s, y, M, K, G):
    assert G == 128, "the parameter block below divides by 128"
    m, f = real_module(name)
    n = M * K
    if "small" in name:
        p = PP(x.data_ptr(), y.data_ptr(), s.data_ptr(), n // 16)
    else:
        p = AP()
        p.in0, p.out, p.scales = x.data_ptr(), y.data_ptr(), s.data_ptr()
        p.rows, p.cols, p.in0_stride, p.out_stride = M, K, K, K
        p.tiles, p.group, p.gmod, p.grs = n // 8, G, G, K // G
        p.fast32 = 1
    p.fd_group[0], p.fd_group[1], p.fd_group[2] = G, 0, 7  # n / 128
    args = [p]
    arr = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(p), ctypes.c_void_p))
    grid = (n // 16 + 255) // 256

    def go():
        r = cu.cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, torch.cuda.current_stream().cuda_stream, arr, None)
        assert r == 0, r
    go.keep = (args, arr)
    return go


def case(M, K, G=128, rounds=3):
    g = torch.Generator(device=DEV)
    g.manual_seed(1)
    xb = torch.randn(M, K, device=DEV, generator=g).bfloat16()
    sg = torch.rand(M, K // G, device=DEV, generator=g) * 0.01 + 0.01

    def t_quant_grp(x, s):
        xg = x.float().view(M, K // G, G)
        return torch.clamp(torch.round(xg / s[:, :, None]), -128, 127).to(torch.int8).view(M, K)
    comp = torch.compile(t_quant_grp, fullgraph=True)
    ref = bqo.quantize_per_group(xb, sg, None, G)
    contenders = {"ours": lambda: bqo.quantize_per_group(xb, sg, None, G), "compile": lambda: comp(xb, sg)}
    kernels = [n for n in NAMES if n != "k_tl" or M * K % 4096 == 0]  # (k_tl: whole blocks only)
    kernels += [n for n in os.environ.get("PG_REAL", "").split(",") if n]
    if tfn is not None and M * K == 4096 * 4096 and G == 128:
        kernels.append("k_triton")

    def make(n, y):  # a direct launch of kernel n into y
        if n.startswith("k_real"):
            return real_launcher(n, xb, sg, y, M, K, G)
        return triton_launcher(xb, sg, y) if n == "k_triton" else launcher(n, xb, sg, y)
    new_y = lambda: torch.full((M, K), 77, dtype=torch.int8, device=DEV)  # noqa: E731
    nbuf = int(os.environ.get("PG_YBUFS", "0"))
    if nbuf:  # each kernel into each of nbuf outputs, spaced apart by allocations
        ys, case.keep = {}, []
        for i in range(nbuf):
            case.keep.append(torch.empty((2 * i + 1) << 20, dtype=torch.uint8, device=DEV))
            ys["@%d" % i] = new_y()
            print("  output %d at %#x" % (i, ys["@%d" % i].data_ptr()))
    else:  # one output: shared by all (PG_SHARED_Y) or each kernel's own
        shared = new_y() if os.environ.get("PG_SHARED_Y") else None
        ys = {"": shared}
    outs, names = {}, []
    for at, y in ys.items():
        for n in kernels:
            names.append(n + at)
            outs[n + at] = y if y is not None else new_y()
            contenders[n + at] = make(n, outs[n + at])
    print("  ours writes to %#x, compile to %#x" % (contenders["ours"]().data_ptr(), contenders["compile"]().data_ptr()))
    nb = xb.numel() * 2 + M * K
    contenders["copy"] = bench.copy_fn(nb)
    cref = comp(xb, sg)
    for n in names:
        outs[n].fill_(77)
        contenders[n]()
        torch.cuda.synchronize()
        d = (outs[n] != ref).sum().item()
        dc = (outs[n] != cref).sum().item()
        print("  %-16s differs from ours in %d, from compile in %d of %d" % (n, d, dc, M * K))
    res = {k: [] for k in contenders}
    for r in range(rounds):
        keys = list(contenders)
        keys = keys[r % len(keys):] + keys[:r % len(keys)]  # each round starts one place later
        us = bench.time_gpu_multi({k: contenders[k] for k in keys})
        for k, v in us.items():
            res[k].append(v)
        print("  round %d: " % r + " ".join("%s=%.2f" % (k, us[k]) for k in contenders), flush=True)
    c = statistics.median(res["compile"])
    print("[%d x %d] median of rounds (us), ratio compile/x:" % (M, K))
    for k, v in res.items():
        m = statistics.median(v)
        print("  %-16s %7.2f  %.3f   (%s)" % (k, m, c / m, " ".join("%.2f" % u for u in v)))


bench._flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
bench._scrub = l2_scrub.make(DEV)
for spec in (sys.argv[2:] or ["4096x4096", "1x256"]):
    M, K = map(int, spec.split("x"))
    case(M, K, rounds=int(os.environ.get("PG_ROUNDS", "3")))
