"""Stochastic rounding's reference in Python (docs/numerics.md, "Stochastic rounding"): the
draws (Philox4x32-10, pure Python and vectorized with numpy) and the affine ops' rounding
written in torch on the CPU (integers and FP8). Shared by the GPU tests
(test_gpu_formats.py, test_gpu_affine_sr.py) and the host tests that check this reference
itself (test_sr_reference.py); torch and numpy are imported only where used."""
M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1


def philox(c, seed):
    """Philox4x32-10 of the counter c (four 32-bit words) keyed by seed's two halves"""
    c0, c1, c2, c3 = c
    k0, k1 = seed & M32, (seed >> 32) & M32
    for i in range(10):
        if i:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
    return c0, c1, c2, c3


def sr_draws(seed, first, n):
    """the 16-bit draws of elements first .. first + n - 1 (indices modulo 2^64), a list"""
    out, words, block = [], None, None
    for j in range(n):
        i = (first + j) & M64
        if i >> 3 != block:
            block = i >> 3
            words = philox((block & M32, block >> 32, 1, 0), seed)
        out.append((words[(i >> 1) & 3] >> (16 * (i & 1))) & 0xFFFF)
    return out


def sr_draws_np(seed, first, n):
    """sr_draws vectorized: a numpy uint64 array (each product of two 32-bit words fits 64 bits)"""
    import numpy as np
    u64 = np.uint64
    i = np.arange(n, dtype=np.uint64) + u64(first & M64)  # (wraps modulo 2^64)
    blk = i >> u64(3)
    c0, c1 = blk & u64(M32), blk >> u64(32)
    c2, c3 = np.ones(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)
    k0, k1 = seed & M32, (seed >> 32) & M32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = u64(0xD2511F53) * c0, u64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (((p1 >> u64(32)) ^ c1 ^ u64(k0)) & u64(M32), p1 & u64(M32),
                          ((p0 >> u64(32)) ^ c3 ^ u64(k1)) & u64(M32), p0 & u64(M32))
    words = np.stack([c0, c1, c2, c3])
    w = words[((i >> u64(1)) & u64(3)).astype(np.intp), np.arange(n)]
    return (w >> (u64(16) * (i & u64(1)))) & u64(0xFFFF)


def draws(seed, first, shape):
    """the draws of a tensor of this shape whose first element has index first (row-major): an
    int64 torch tensor (numpy's Philox where numpy is installed, else the pure Python one)"""
    import torch
    n = 1
    for s in shape:
        n *= s
    try:
        import numpy  # noqa: F401
    except ImportError:
        return torch.tensor(sr_draws(seed, first, n), dtype=torch.int64).view(shape)
    return torch.from_numpy(sr_draws_np(seed, first, n).astype("int64")).view(shape)


def compute_type(T):
    import torch
    return torch.float64 if T == torch.float64 else torch.float32


def sr_int(v, u):
    """v (a float tensor in C) rounded to an integer by its draws u: |v| = n + f goes to n + 1
    when (u + 1/2) 2^-16 < f, else n, the sign kept; NaN gives 0. float64 (exact)."""
    import torch
    vd = v.double()
    a = vd.abs()
    n = torch.floor(a)
    up = (u.double() + 0.5) * 2.0 ** -16 < a - n  # (an infinity: a - n is NaN, no step up)
    r = torch.copysign(n + up.double(), vd)
    return torch.where(torch.isnan(vd), torch.zeros_like(r), r)


FP8 = {"float8_e4m3fn": (3, -6, 448.0), "float8_e5m2": (2, -14, 57344.0)}  # mantissa bits, emin, max


def sr_fp8(v, u, Q):
    """The value (float64) v (in C) rounds to on FP8 type Q's grid by its draws u: q =
    2^(max(floor(log2 |v|), emin) - m), |v| / q = n + f, (n + up) q at most max, the sign
    kept; |v| >= max saturates to max; NaN stays NaN (the NaN code)."""
    import torch
    mbits, emin, mx = FP8[str(Q).split(".")[-1]]
    vd = v.double()
    a = vd.abs()
    _, fe = torch.frexp(a)  # a = m 2^fe, m in [0.5, 1)
    e = torch.clamp(fe.long() - 1, min=emin, max=20) - mbits
    pow2 = torch.tensor([2.0 ** k for k in range(emin - mbits, 21 - mbits)], dtype=torch.float64)
    q = pow2[e - (emin - mbits)]  # (exact powers of two)
    t = a / q
    n = torch.floor(t)
    up = (u.double() + 0.5) * 2.0 ** -16 < t - n
    r = torch.copysign(torch.clamp((n + up.double()) * q, max=mx), vd)
    r = torch.where(a >= mx, torch.copysign(torch.full_like(r, mx), vd), r)
    return torch.where(torch.isnan(vd), torch.full_like(r, float("nan")), r)


def fp8_codes(r, Q):
    """exact FP8 values (float64, on the grid) as Q's codes; NaN as the code 0x7F"""
    import torch
    c = r.float().to(Q).view(torch.uint8).clone()
    c[torch.isnan(r)] = 0x7F
    return c.view(Q)


def quantize_sr(x, s, zp, u, Q, qmin=None, qmax=None):
    """quantize with stochastic rounding, on the CPU: x (T), s and zp broadcast against x (s
    converted to C, zp int64; zp ignored for FP8), u the draws shaped like x; into Q (int8,
    uint8 with [qmin, qmax], or an FP8 type)"""
    import torch
    c = compute_type(x.dtype)
    v = x.cpu().to(c) / s.cpu().to(c)  # one IEEE division in C
    if str(Q).split(".")[-1] in FP8:
        return fp8_codes(sr_fp8(v, u, Q), Q)
    q = sr_int(v, u) + torch.as_tensor(zp).cpu().double()
    return q.clamp(qmin, qmax).to(Q)


def dequantize_ref(q, s, zp, T):
    """T(C(q - zp) * C(s)) (FP8: the code's value, NaN codes NaN)"""
    import torch
    c = compute_type(T)
    if str(q.dtype).split(".")[-1] in FP8:  # (torch's conversion: NaN codes NaN, E5M2's infinities inf)
        return (q.cpu().to(torch.float64).to(c) * s.cpu().to(c)).to(T)
    d = q.cpu().long() - torch.as_tensor(zp).cpu().long()
    return (d.to(c) * s.cpu().to(c)).to(T)


def mismatches(a, b):
    """how many elements differ (bytes of 1-byte types, else same_floats' rule), a short int
    for assertion messages"""
    import torch
    a, b = a.cpu(), b.cpu()
    if a.shape != b.shape or a.dtype != b.dtype:
        return -1
    if a.element_size() == 1:
        return int((a.view(torch.uint8) != b.view(torch.uint8)).sum())
    if not a.dtype.is_floating_point:
        return int((a != b).sum())
    na, nb = torch.isnan(a), torch.isnan(b)
    bad = (na != nb) | (~na & ~nb & ((a != b) | (torch.signbit(a) != torch.signbit(b))))
    return int(bad.sum())


def same_floats(a, b):
    """bit for bit but NaN payloads: equal or both NaN, and the same sign where not NaN"""
    import torch
    a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    na, nb = torch.isnan(a), torch.isnan(b)
    return bool(torch.equal(na, nb) and (a[~na] == b[~nb]).all() and
                torch.equal(torch.signbit(a[~na]), torch.signbit(b[~nb])))


def full_params(gran, shape, s, z=None, param=0):
    """(S, Z): the scale and the zero point of each element of x (shape), on the CPU, S in the
    scales' own type (a number: float64, which C converts as the library does) and Z int64.
    gran: "tensor" (s and z numbers), "channel" (param: the axis), "token", "group" (param:
    G) or "block" (param: B), the last three over x viewed [rows, K]."""
    import torch
    if gran == "tensor":
        return (torch.full(shape, float(s), dtype=torch.float64),
                torch.full(shape, int(z or 0), dtype=torch.int64))
    s = s.cpu()
    z = torch.zeros(s.shape, dtype=torch.int64) if z is None else z.cpu().long().view(s.shape)
    if gran == "channel":
        ax = param % len(shape)
        view = [1] * len(shape)
        view[ax] = -1
        return s.view(view).expand(shape), z.view(view).expand(shape)
    k = shape[-1]
    rows = 1
    for n in shape[:-1]:
        rows *= n

    def spread(t):
        if gran == "token":
            t = t.reshape(rows, 1).expand(rows, k)
        elif gran == "group":
            t = t.reshape(rows, -1).repeat_interleave(param, 1)
        else:
            t = t.repeat_interleave(param, 0).repeat_interleave(param, 1)[:rows, :k]
        return t.reshape(shape)
    return spread(s), spread(z)


def sr_data(shape, T, seed, specials=True):
    """x of type T on the CPU: values over several decades (FP8's subnormals and saturation),
    an eighth of them integers and halves, and NaN, +-inf, -0 and huge values first"""
    import torch
    g = torch.Generator().manual_seed(seed)
    mag = 10.0 ** (torch.rand(shape, generator=g, dtype=torch.float64) * 5 - 3)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * mag
    f = x.view(-1)
    n = f.numel()
    idx = torch.randperm(n, generator=g)[: n // 8]
    f[idx] = torch.randint(-400, 400, (idx.numel(),), generator=g).double() * 0.5
    if specials and n >= 6:
        big = 6e4 if T == torch.float16 else 1e30
        f[0], f[1], f[2], f[3], f[4], f[5] = float("nan"), float("inf"), -float("inf"), -0.0, big, -big
    return x.to(T)
