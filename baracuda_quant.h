/* baracuda_quant.h - affine INT8 quantization for NVIDIA GPUs, in one header.
   Version 0.2.0. No prebuilt GPU code: kernels are specialized CUDA source embedded below,
   compiled at run time with NVRTC for the GPU in use, cached on disk, launched through the
   CUDA driver API on your stream.

   USE
     In exactly one C or C++ file:
       #define BARACUDA_QUANT_IMPLEMENTATION
       #include "baracuda_quant.h"
     elsewhere just #include it. Link with -ldl -lpthread -lm: libcuda.so.1 and NVRTC
     (libnvrtc.so.13, else .12) are opened at first use, so a machine without a GPU gets
     an error from the first call that needs one, never a loader failure.
     BARACUDA_QUANT_STATIC makes every function static; BQ_MALLOC/BQ_REALLOC/BQ_FREE
     replace the allocator.

   QUICK START (quantize n floats to int8 on the GPU; x and q are device pointers)
       bq_desc d = {.op = BQ_QUANTIZE, .float_type = BQ_F32, .int_type = BQ_S8};
       bq_plan *plan;
       if (bq_plan_select(&d, &plan) != BQ_SUCCESS) { puts(bq_last_error()); return 1; }
       bq_args a = {.x = x, .y = q, .numel = n, .scale = 0.02, .zero_point = 0};
       bq_plan_run(plan, &a, NULL, 0, stream);          // async on `stream` (NULL: legacy)
       bq_plan_destroy(plan);
     A program that does not use the CUDA runtime can get memory from bq_malloc,
     bq_memcpy_to_device, bq_memcpy_to_host, bq_free and wait with bq_synchronize.

   PLANS (the cuBLASLt / CUTLASS lifecycle)
     bq_plan_select(desc, &plan)   validates the descriptor and compiles the kernel a
                                   typical problem takes (or takes it from the memory or
                                   disk cache) in desc.device's context (DEVICES)
     bq_plan_can_implement(plan, args)   validates one call's arguments
     bq_plan_workspace_size(plan, args, &bytes)  device bytes run needs (0 for most ops);
                                   validates the shape by the plan's own rules (the
                                   first of can_implement's: the same status and
                                   message); on an error *bytes = 0
     bq_plan_run(plan, args, ws, ws_bytes, stream)  validates, then launches in the plan's
                                   context; never allocates device memory for data and
                                   never synchronizes, but for a first-use tune (below;
                                   never under capture); works under CUDA graph capture;
                                   a zero-size problem succeeds and launches nothing
     bq_plan_destroy(plan);  bq_plan_sku(plan);  bq_plan_precision_guarantee(plan)
     Plans are immutable: one plan may run from many threads and streams at once.
     A plan's kernels are modules of one entry point each (named "<SKU>@<entry point>"):
     select loads the one (or two) that a [4096, 4096] dense problem takes, and a run whose
     shape needs another (odd sizes, misaligned or strided data, other M) loads it the
     first time, from the caches or NVRTC, in the plan's context; under stream capture that
     load enqueues nothing, so the capture stays valid. BARACUDA_QUANT_LAZY=0 makes select
     load them all; bq_cache_warm and `baracuda-quant warm` compile them all.
     Descriptors are zero-is-default: granularity 0 (BQ_GRANULARITY_DEFAULT) is per tensor,
     per token for QuantizedLinear; qmin == qmax == 0 the int type's full range; int_type 0
     s8; scale_type 0 BQ_F32 for every op and float type; device 0 the current context.

   OPS                          reads                         writes
     BQ_QUANTIZE   forward      x (T)                         y (I)
                   backward     dy (T), x (T)                 dx (T)
     BQ_DEQUANTIZE forward      x (I)                         y (T)
                   backward     dy (T)                        dx (T)
     BQ_FAKE_QUANTIZE fwd       x (T)                         y (T) (+ mask)
                   backward     dy (T), x (T) or mask         dx (T)
     BQ_DYNAMIC_QUANTIZE        x (T)                         y (I), out_scales,
                                                              out_zero_points (asymmetric)
     T: BQ_F32, BQ_F64, BQ_F16, BQ_BF16.  I: BQ_S8, BQ_U8 with any [qmin, qmax] inside,
     or FP8: BQ_E4M3 (OCP E4M3FN, max 448) or BQ_E5M2 (max 57344), symmetric (qmin, qmax,
     asymmetric and zero points left 0): q = fp8(C(x) / C(s)), one round to nearest even,
     saturating to +-max, NaN -> code 0x7F (cvt.rn.satfinite on sm_89+, the same in
     software on sm_80); dequantize y = T(C(q) * C(s)); backward mask |x / s| <= max;
     dynamic s = amax / max. Not for linear layers.
     Scale arrays (scale_type): BQ_F32 (the default), T, or BQ_UE8M0: a byte e meaning
     2^(e - 127), 255 NaN (not for a static per-tensor scale, a host double); per group
     also BQ_UE8M0X4, the same bytes four to an int32 along the group axis (group g in
     bits 8 (g % 4) of word g / 4; no zero points; dynamic quantize writes a row's unused
     bytes as 0). Dynamic quantize: desc.pow2_scales = 1 rounds each scale up to a power
     of two (implied by UE8M0, whose exponent is clamped to [-127, 127]; inf and NaN
     store 255);
     args.amax_bound (symmetric; 0 = none) caps each segment's max |x| at C(amax_bound).
     Granularity (which scale and zero point an element uses; 0 = per tensor):
       BQ_PER_TENSOR   numel elements; args.scale (host double, converted once to C) and
                       args.zero_point. Dynamic: one scale in out_scales[0]; needs a
                       workspace of bq_plan_workspace_size bytes.
       BQ_PER_CHANNEL  a dense tensor of args.rank (1..8) dims args.shape, channel index
                       along args.axis (negative counts from the end); scales[shape[axis]].
       BQ_PER_TOKEN    [rows, cols] with x_row_stride / y_row_stride (elements, 0 = cols;
                       x and dx use x's, y and dy use y's); scales[rows].
       BQ_PER_GROUP    [rows, cols], cols % group_size == 0; element (r, c) takes scale
                       [r][c / group_size] at r * group_row_stride + c / group_size
                       (0 = cols / group_size); with desc.scale_layout
                       BQ_SCALES_MN_MAJOR, [c / group_size][r] at
                       (c / group_size) * group_row_stride + r (0 = rows rounded up to
                       a multiple of 4: the layout TMA-fed FP8 GEMMs read). BQ_UE8M0X4
                       counts group_row_stride in int32 words (row-major: 0 = the row's
                       groups / 4 rounded up).
       BQ_PER_BLOCK    [rows, cols] (row strides as per token) in B x B tiles, B =
                       group_size; rows and cols need not be multiples of B. Element
                       (r, c) takes scale (r / B) * group_row_stride + c / B (0 = cols / B
                       rounded up).
     Scale arrays are device arrays of scale_type (BQ_F32, the default, or T); zero points
     are device int32 arrays, NULL meaning all zero. Pointers must be aligned to their element size;
     any other alignment, stride and length works (aligned shapes are just faster).
     Outputs must not overlap inputs.
     Stochastic rounding: desc.rounding = BQ_ROUND_STOCHASTIC on quantize, fake quantize
     (forward), dynamic quantize and the fused producers (any granularity, integer or FP8
     storage; FUSED PRODUCERS) rounds
     v = C(x) / C(s) down or up, up when (u + 1/2) 2^-16 < its distance from the value below
     (integers, or the FP8 grid), u element i's draw (MICROSCALING below says which bits);
     then the zero point and saturation as before. args.seed keys it, args.offset shifts i.
     Dynamic quantize computes and stores its scales as when rounding to nearest, then
     rounds with the stored ones.
     Fused rotation: desc.rotation = 1 on quantize (either rounding) rotates x first, as
     BQ_HADAMARD's forward pass would (blocks of args.rotation_block, a power of two from 2
     to 256 dividing the last dimension: per tensor and per channel the blocks run along the
     flat array; desc.random_signs keyed by args.seed; each rotated value rounded to T), then
     quantizes those values; on dequantize it rotates the output back (the inverse pass on
     the values of T it would have written). On dynamic quantize per token (either
     rounding) it rotates each row, then computes the scales of the rotated values and
     quantizes them; there rows start on the 16-byte grid, are whole accesses and blocks are
     at most 32 accesses (else BQ_ERROR_NOT_SUPPORTED: run BQ_HADAMARD, then dynamic
     quantize). Bit for bit the two ops in sequence, in one pass. On fake quantize it rotates
     x, fake-quantizes, and rotates the result back; its backward pass rotates x and dy,
     masks, and rotates dx back (no saved mask: args.mask is refused with it). Not on
     quantize or dequantize backward.

   MICROSCALING (MXFP8, MXFP4, NVFP4): groups of G elements along a row, a byte of scale each
     A quantize, dequantize, fake quantize (either direction) or dynamic quantize descriptor
     with granularity BQ_PER_GROUP and
       int_type BQ_E2M1 (OCP FP4: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, two codes a byte, the lower
                 index in the low nibble; G and the codes' row stride even), BQ_E4M3 or BQ_E5M2;
       scale_type BQ_UE8M0 (the default: MXFP8, MXFP4) or BQ_E4M3 (NVFP4, E2M1 only: each
                 group's E4M3 scale times the f32 tensor scale g at args.tensor_scale);
       scale_layout row-major, MN-major or BQ_SCALES_BLOCKED (the 128 x 4 tiles block-scaled
                 GEMMs read; dynamic quantize writes the padding as 0);
       scale_rule (dynamic): BQ_SCALE_RULE_DEFAULT (UE8M0: amax / max rounded up to a power
                 of two); UE8M0: BQ_SCALE_FLOOR (OCP, torchao), _CEIL, _EVEN, _RCEIL
                 (cuBLAS), _RCEIL_SAT (Transformer Engine); NVFP4: BQ_SCALE_NVFP4_TORCHAO,
                 BQ_SCALE_NVFP4_TE (each peer's steps).
     q = conv(C(x) / C(sc)) and y = T(C(q) * C(sc)), conv one round to nearest even,
     saturating; backward as FP8's, the mask |x / sc| <= max. NVFP4 dynamic quantize without
     args.tensor_scale computes g = amax / 2688 in a first pass (needs
     bq_plan_workspace_size bytes) and writes it to args.out_tensor_scale. G is any size up
     to 4096; 16 and 32 have kernels of their own. The fused producers emit the formats too
     (FUSED PRODUCERS). docs/numerics.md, "Microscaling".
     Stochastic rounding: desc.rounding = BQ_ROUND_STOCHASTIC (quantize, fake quantize and
     dynamic quantize forward; E4M3 and E5M2 per group with UE8M0 scales come here with it)
     takes v = C(x) / C(sc) to the type's value below |v| or the one above, the one above
     when (u + 1/2) 2^-16 < the distance from below over the gap, u 16 bits drawn for
     element i = args.offset + r cols + c from Philox4x32-10 keyed by args.seed, counter
     (i / 8, 1): bits 16 (i % 2) of word (i / 2) % 4. |v| at or past max saturates as
     before. The same bits on every GPU, kernel and batch split (docs/numerics.md,
     "Stochastic rounding").
     Fused rotation: desc.rotation = 1 on quantize and dynamic quantize rotates x first, as
     BQ_HADAMARD's forward pass would (blocks of args.rotation_block along the row, the
     random signs of desc.random_signs keyed by args.seed; the rotated values rounded to T),
     and on dequantize rotates the output back (the inverse): bit for bit the two ops in
     sequence, in one pass.
     It takes calls whose rows and streams are on the 16-byte grid with G 2^k 16-byte
     accesses of floats (k <= 5) and blocks of at most 32 such accesses (else
     BQ_ERROR_NOT_SUPPORTED: run BQ_HADAMARD, then quantize).

   W8A8 LINEAR LAYERS: y[M, N] = x[M, K] W^T (+ bias), W int8 [N, K] (nn.Linear.weight)
     BQ_QUANTIZED_LINEAR    x float (float_type), quantized per token on the GPU into the
                            workspace (bq_plan_workspace_size), then the int8 GEMM;
                            granularity per token (the default; per tensor is refused)
     BQ_SMOOTHQUANT_LINEAR  x already int8 (int_type); granularity BQ_PER_TENSOR (the
                            default: args.scale, args.zero_point, host scalars) or
                            BQ_PER_TOKEN (args.scales[M] of scale_type, zero_points[M]);
                            out_type or float_type names the output (either one will do)
     BQ_LINEAR_WEIGHT_SUMS  args.w [n, cols] -> args.y int32 [n]: run once per weight
                            and pass the result as args.w_sums to asymmetric plans
     args: rows = M, cols = K, n = N, x (row stride x_row_stride), y (y_row_stride), w,
     w_scales[N] (scale_type), bias[N] (out_type, or NULL), w_sums (asymmetric only).
     desc: float_type; out_type (default float_type; the bias's type too); int_type and
     [qmin, qmax] of the activations; asymmetric = 1 for activation zero points; scale_type
     BQ_F32 (the default), BQ_F16 or BQ_BF16 (BQ_F64 with an f64 output).
     acc = sum_k a[m,k] w[n,k] exact in int32 on tensor cores (mma.sync or wgmma), minus
     azp[m] * wsum[n] when asymmetric; y = Tout((C(acc) * C(sa[m])) * C(sw[n]) + C(bias[n]))
     in the epilogue, C = f64 for an f64 output, else f32. Validation bounds K so the
     accumulator cannot overflow (K * max|a| * 128 < 2^31; and K * (qmax - qmin) * 128 <
     2^31 when asymmetric; activations outside [qmin, qmax] are the caller's error).
     K == 0 writes the bias (or +0). Tiles by M: weight streaming with split K for M <= 64
     (16, 32 or 64 rows a pass; up to M = 256 in passes of 64 while the large tiles would
     not fill the GPU once), else 128x256 tiles. On an sm_90 device (compute capability 9.0) the plan's
     module is built for sm_90a and those tiles are warpgroup MMA (wgmma m64n256k32, two
     warpgroups, a 4-stage cp.async pipeline); elsewhere, or with BARACUDA_QUANT_WGMMA=0,
     they are mma.sync with a 3-stage pipeline. A GEMM's tiles compile for about a second
     the first time (then they are cached like every kernel). A QuantizedLinear plan
     holds two kernels: bq_plan_sku names both ("<gemm> + <dynamic>"), bq_sku the GEMM,
     and bq_cache_warm compiles both, in the form bq_plan_select would use. On sm_90 and
     later (driver 12.3 or newer) its weight streaming (M <= 64, or 256 in passes) is
     launched with programmatic stream serialization: it starts while the activations'
     kernel runs, streams the weight, and waits for that kernel before it reads the
     activations (BARACUDA_QUANT_PDL=0 turns this off).

   FP8 LINEAR LAYERS: y[M, N] = x[M, K] W^T (+ bias) on FP8 tensor cores (sm_89 and later;
     an older device's select is BQ_ERROR_NOT_SUPPORTED)
     BQ_FP8_LINEAR  x FP8 [M, K] (desc.int_type BQ_E4M3, the default, or BQ_E5M2), W e4m3
                    [N, K]; out_type or float_type names the output: BQ_F32, BQ_F16 or
                    BQ_BF16 (the bias's type too); scale_type BQ_F32 (the default).
                    granularity BQ_PER_TENSOR (the default, "tensorwise": args.scales and
                    args.w_scales each one f32 on the device), BQ_PER_TOKEN ("rowwise":
                    args.scales[M] per token, args.w_scales[N] per output channel) or
                    BQ_PER_BLOCK ("blockwise", KB = ceil(K / 128): args.scales[M][KB] per
                    1 x 128 group of x, or [KB][M] with scale_layout BQ_SCALES_MN_MAJOR,
                    args.group_row_stride apart (0: KB, or M rounded up to 4);
                    args.w_scales[ceil(N / 128)][KB] per 128 x 128 block of W, dense;
                    args.group_size 0 or 128).
     args: rows = M, cols = K, n = N, x (x_row_stride), y (y_row_stride), w, scales,
     w_scales, bias (or NULL). The tensor cores' FP8 sums are not IEEE f32 sums, so the
     result is not the CPU reference's bit for bit; what holds: acc takes, in order, one
     partial sum per 128 elements of K by an f32 fma with its scale (1; blockwise the
     block's sa * sw), so it is deterministic and the same for a row whatever M or the
     tile it falls in; |acc - exact| stays within docs/numerics.md's bound; y = Tout((acc *
     sa) * sw + bias) (blockwise Tout(acc + bias)), each step rounded to nearest even in
     f32. On sm_90 (an sm_90a module): M <= 64 streams the weight (wgmma m64n16k32, 64
     output columns and 16 rows of x a CTA), larger M takes 128 x 128 tiles (wgmma
     m64n128k32), both on the same partial sums; elsewhere 128 x 128 mma.sync tiles take
     every M.
     BQ_FP8_QUANTIZED_LINEAR  x float [M, K] (float_type BQ_F32, BQ_F16 or BQ_BF16; out_type
                    defaults to it), quantized on the GPU to int_type (BQ_E4M3, the default,
                    or BQ_E5M2) by dynamic quantize into the workspace
                    (bq_plan_workspace_size), then BQ_FP8_LINEAR's GEMM: granularity
                    BQ_PER_TOKEN (the default: per-token scales x args.w_scales[N]) or
                    BQ_PER_BLOCK (1 x 128 groups, K a multiple of 128, x
                    args.w_scales[ceil(N / 128)][K / 128]). The result is bit for bit the
                    two ops run one after the other. On sm_90 its weight streaming (M <= 64)
                    starts while the quantization runs, as QuantizedLinear's does.

   FUSED PRODUCERS: what feeds an int8 GEMM, produced and quantized in one pass
     BQ_RMSNORM_QUANTIZE  x [rows, cols] (T); with args.residual, h = T(x + residual) is
                          written back to residual (which may be x itself), else h = x;
                          n = T((h * rstd) * norm_weight), rstd = 1 / sqrt(mean(h^2) + eps)
     BQ_GATED_QUANTIZE    x [rows, 2 cols]: gate, then up; a = T(act(gate) * up) with
                          desc.activation BQ_SILU (the default) or BQ_GELU_TANH
     Then n or a goes to y (I) as the existing ops would quantize it: BQ_PER_TOKEN (the
     default) and BQ_PER_GROUP are dynamic quantize's (out_scales, out_zero_points,
     desc.asymmetric, group_size, group_row_stride); BQ_PER_TENSOR is quantize's, with a
     static args.scale and args.zero_point. I is any storage type, FP8 included (symmetric:
     no zero points). args.out, when set, receives n or a as well. Or a microscaling format
     (MICROSCALING: E2M1 storage, UE8M0 or E4M3 scales, the blocked layout or a scale rule
     make the descriptor one; per group, dynamic quantize's rules; NVFP4 without
     args.tensor_scale computes g in two launches first, which need bq_plan_workspace_size
     bytes, and writes it to args.out_tensor_scale). desc.rounding = BQ_ROUND_STOCHASTIC
     (args.seed, args.offset) quantizes the producer's values as the stochastic quantize
     would, with the scales rounding to nearest computes; desc.rotation (per tensor, per
     token, or a microscaling format; args.rotation_block, desc.random_signs) rotates them
     first, as BQ_HADAMARD would, and quantizes the rotated values (dynamic scales: theirs).
     Either is a second pass over args.out (or, without it, a workspace of rows * cols *
     sizeof(T) bytes, 256-byte rounded, plus the second op's own where it needs one).
     Bit for bit the producer followed by the existing quantize, and each row's result
     depends on that row alone, whatever the batch (docs/numerics.md, "Fused producers").
     A block of 256 threads takes a row and reads it from DRAM once: held in registers (up
     to 512 16-byte accesses), or staged in shared memory (longer rows whose streams start
     16-byte aligned, up to what two rows' slots of shared memory hold); other rows are
     read again from L2 for each pass. A row has at most 2^30 elements. With bf16 gates
     the activation is read from a 32 KiB table of its values in shared memory, which a
     module's first launch builds on the GPU (the same bits as computing it).

   ROTATION: BQ_HADAMARD, x [rows, cols] (T) -> y [rows, cols] (T), row strides x_row_stride and
     y_row_stride, in blocks of n = args.group_size elements along the row (a power of two,
     2 to 256, dividing cols). Forward: y = T(H (s * C(x)) / sqrt(n)) a block, H the Walsh-
     Hadamard matrix applied as a fixed butterfly (h = 1, 2, ..., n / 2: (a, b) -> (a + b,
     a - b), each rounded in C), then one product by C(1 / sqrt(n)); s the random sign vector
     of desc.random_signs (Philox4x32-10 keyed by args.seed; else all +1). Backward
     (desc.direction): the inverse, x = T(s * (H C(y) / sqrt(n))), which is also the forward
     pass's gradient. docs/numerics.md, "Rotation".

   DEVICES
     desc.device BQ_DEVICE_CURRENT (0) selects for the calling thread's current context, or
     device 0's primary context (then made current) when none is; BQ_DEVICE(n) selects for
     device n's primary context whatever is current, leaving the caller's context as it
     was. The plan keeps that context (primary contexts stay retained): bq_plan_run with no
     context current pushes it for the launch and pops it after, and with another context
     current fails with BQ_ERROR_INVALID_ARGUMENT naming both devices. bq_set_device(n)
     makes device n's primary context current on the calling thread (cudaSetDevice). The
     memory helpers use the current context, else device 0's primary context, as the CUDA
     runtime does.

   NUMERICS (the whole contract, every choice the tests pin: docs/numerics.md)
     C = f64 for f64 data, else f32. Every operation rounds once in C, to nearest even,
     with IEEE division (no reciprocal-multiply results, no FMA contraction, no fast math).
     Where only rne(x / s) is needed the kernels get the IEEE quotient's integer from a
     correctly rounded reciprocal plus an exact FMA correction (Markstein); values that are
     results (dequantize, backward) use IEEE division and products directly.
       quantize      q = sat(rne(C(x) / C(s)) + zp, qmin, qmax)   NaN -> zp, +-inf -> qmax/qmin
       dequantize    y = T(C(q - zp) * C(s))                       q - zp exact, no clamp
       fake quantize y = dequantize(quantize(x)), bit for bit
       backward      m = (qmin <= rne(x / s) + zp <= qmax), 0 when x / s is NaN;
                     quantize dx = m ? T(dy / s) : 0; dequantize dx = T(dy * s);
                     fake quantize dx = m ? dy : 0; per tensor and per channel the
                     forward pass may save m in args.mask (a bit an element), which the
                     backward pass then reads instead of x
       dynamic       symmetric s = max|x| / qmax (1 if 0), asymmetric
                     s = (max(0, max x) - min(0, min x)) / (qmax - qmin) (1 if 0),
                     zp = sat(qmin - rne(lo / s)); NaN elements ignored; the data is
                     quantized with the scale exactly as stored.
     Any int32 zero point works (no intermediate wraps). GPU results equal the CPU
     reference in tests/reference.h bit for bit (NaN payloads aside).

   ERRORS
     Every function returns a bq_status; bq_last_error() is this thread's message, naming
     the plan, the field and its value ("quantize_per_token: args.x_row_stride (7) is
     smaller than args.cols (8)"). Nothing invalid is launched. Distinct statuses for no
     driver, a driver older than CUDA 12, no device, no NVRTC; a GPU older than compute
     capability 8.0 is BQ_ERROR_NOT_SUPPORTED.

   THE KERNEL CACHE
     In memory per (SKU, context); on disk in $BARACUDA_QUANT_CACHE_DIR, else
     $XDG_CACHE_HOME/baracuda_quant, else ~/.cache/baracuda_quant. One file per module,
     named by its SKU and entry point, validated (magic, version, lengths, full key, checksum) before the
     driver sees it; anything wrong is a miss that recompiles and rewrites, with one
     warning. An unwritable directory means memory only, with one warning (without
     HOME, the user database's home directory is used). Only regular files are read,
     never through a link; created directories are 0700. In a directory others can
     write to (group or world writable, sticky or not, or another user's), files owned
     by neither you nor root are refused.
     bq_cache_get_stats, bq_cache_clear_memory, bq_cache_directory, bq_sku, and
     bq_cache_warm (compile for an arch without a GPU, e.g. while building a container).
     The installed tool baracuda-quant (tools/baracuda-quant.c) shows the setup (info) and
     warms, lists, verifies and clears the disk cache.

   THE FIRST-USE TUNE
     Where the rules cannot tell which of two kernels that compute the same bits is faster
     on the GPU in use (today: the lean one-access-a-thread kernels against the row kernels
     for forward quantize and dequantize of tensors larger than L2), a plan's first run on a
     shape class (the element count's power of two) times each once, a few milliseconds,
     on scratch buffers the library allocates, and keeps the faster (by 2% or more, else
     the rule's). The choice is kept in memory and in the cache directory (tune-*.txt),
     keyed by the GPU's name, SM count and memory clock, the driver, the SKU and the class,
     and checked like a kernel entry. Under stream capture, and where scratch cannot be
     allocated, the rule's kernel runs. Results never depend on it. `baracuda-quant tune`
     tunes SKUs and shapes ahead of time (container images); list shows the choices.

   ENVIRONMENT
     BARACUDA_QUANT_CACHE_DIR      the disk cache's directory
     BARACUDA_QUANT_DISABLE_CACHE  1: no disk cache
     BARACUDA_QUANT_NVRTC          path of the NVRTC library to load
     BARACUDA_QUANT_DRIVER         path of the CUDA driver library (default libcuda.so.1)
     BARACUDA_QUANT_FORCE_PTX      1: compile PTX for the driver to finish, not a cubin
     BARACUDA_QUANT_NVRTC_OPTIONS  one extra NVRTC option, for experiments (part of the
                                   cache key; no numerics guarantee under it)
     BARACUDA_QUANT_QUIET          1: no warnings on stderr (bq_set_warning_handler
                                   redirects them instead)
     BARACUDA_QUANT_WGMMA          0: linear plans selected on sm_90 devices use the
                                   mma.sync tiles of an sm_90 module instead of the
                                   sm_90a warpgroup-MMA tiles (the default there)
     BARACUDA_QUANT_PDL            0: QuantizedLinear plans selected with it launch their
                                   weight streaming after the activations' kernel ends,
                                   not overlapping it
     BARACUDA_QUANT_STATS          1: print this process's cache counters (hits, misses,
                                   compiles) on stderr once at exit, one line
     BARACUDA_QUANT_LAZY           0: select loads every entry point's module of a plan,
                                   not only those a typical problem takes
     BARACUDA_QUANT_TUNE           0: no first-use tune: the rules choose every kernel
   The on/off variables (DISABLE_CACHE, FORCE_PTX, QUIET, WGMMA, PDL, LAZY, TUNE) read 1,
   true, yes or on as on and 0, false, no or off as off, in any case; unset or empty means
   the default (off, but on for WGMMA, PDL, LAZY and TUNE); any other value means the
   default, with one warning.
*/
#ifndef BARACUDA_QUANT_H
#define BARACUDA_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define BQ_VERSION_MAJOR 0
#define BQ_VERSION_MINOR 2
#define BQ_VERSION_PATCH 0
#define BQ_VERSION_STRING "0.2.0"
#define BQ_MAX_RANK 8

#ifdef BARACUDA_QUANT_STATIC
#define BQ_API static
#else
#define BQ_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes (X-macro: name, description) ---------------------------- */
#define BQ__STATUS_LIST(X)                                                          \
  X(BQ_SUCCESS, "success")                                                          \
  X(BQ_ERROR_INVALID_ARGUMENT, "a descriptor or argument field is invalid")         \
  X(BQ_ERROR_NOT_SUPPORTED, "the combination is not supported")                     \
  X(BQ_ERROR_NO_DRIVER, "the NVIDIA driver (libcuda.so.1) was not found")           \
  X(BQ_ERROR_DRIVER_TOO_OLD, "the NVIDIA driver is too old")                        \
  X(BQ_ERROR_NO_DEVICE, "no usable CUDA device")                                    \
  X(BQ_ERROR_NO_NVRTC, "NVRTC (libnvrtc.so.13 or .12) was not found")               \
  X(BQ_ERROR_COMPILE_FAILED, "NVRTC failed to compile a kernel")                    \
  X(BQ_ERROR_CUDA, "a CUDA driver call failed")                                     \
  X(BQ_ERROR_OUT_OF_MEMORY, "out of host or device memory")                         \
  X(BQ_ERROR_INSUFFICIENT_WORKSPACE, "the workspace passed to run is too small")

typedef enum bq_status {
#define BQ__STATUS_ENUM(name, text) name,
  BQ__STATUS_LIST(BQ__STATUS_ENUM)
#undef BQ__STATUS_ENUM
  BQ__STATUS_COUNT
} bq_status;

/* ---- descriptors ----------------------------------------------------------- */
typedef enum bq_dtype {
  BQ_DTYPE_DEFAULT = 0,
  BQ_F32, BQ_F64, BQ_F16, BQ_BF16, /* float types T */
  BQ_S8, BQ_U8,                    /* integer storage types I */
  BQ_S32,
  BQ_E4M3, BQ_E5M2,                /* FP8 storage types I (OCP E4M3FN, E5M2) */
  BQ_UE8M0,                        /* scale_type: a power of two, its biased exponent in a byte */
  BQ_UE8M0X4,                      /* scale_type, per group: four UE8M0 bytes packed in an int32 along
                                      the group axis (group g in bits 8 (g % 4) of word g / 4) */
  BQ_E2M1                          /* storage type I of the microscaling formats: OCP FP4, values
                                      +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, two codes a byte (the lower
                                      index in the low nibble) */
} bq_dtype;

typedef enum bq_op {
  BQ_OP_NONE = 0,
  BQ_QUANTIZE,      /* T -> I */
  BQ_DEQUANTIZE,    /* I -> T */
  BQ_FAKE_QUANTIZE, /* T -> T, bit-identical to quantize then dequantize */
  BQ_DYNAMIC_QUANTIZE, /* T -> I, scales (and zero points) computed from the data on the GPU */
  BQ_QUANTIZED_LINEAR,  /* y = x W^T (+ bias): x float, quantized per token on the GPU, W int8 */
  BQ_SMOOTHQUANT_LINEAR, /* y = x W^T (+ bias): x already int8, per-tensor or per-token scales */
  BQ_LINEAR_WEIGHT_SUMS, /* y[n] = sum_k w[n, k] (int32), once per weight, for asymmetric x */
  BQ_RMSNORM_QUANTIZE,  /* T -> I: (residual add +) RMSNorm, then quantize, in one pass */
  BQ_GATED_QUANTIZE,    /* T -> I: act(gate) * up, then quantize, in one pass */
  BQ_HADAMARD,          /* T -> T: the block-diagonal Walsh-Hadamard rotation of each row (and its inverse) */
  BQ_FP8_LINEAR,        /* y = x W^T (+ bias): x and W FP8, scales per tensor, row and column, or block */
  BQ_FP8_QUANTIZED_LINEAR /* y = x W^T (+ bias): x float, quantized to FP8 per token or 1 x 128 group on the GPU */
} bq_op;

/* desc.activation of BQ_GATED_QUANTIZE (0: SiLU); every other op leaves it 0 */
typedef enum bq_activation {
  BQ_ACTIVATION_DEFAULT = 0,
  BQ_SILU = 1,      /* g / (1 + exp(-g)) */
  BQ_GELU_TANH = 2  /* (g / 2) (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) */
} bq_activation;

typedef enum bq_direction { BQ_FORWARD = 0, BQ_BACKWARD } bq_direction;

typedef enum bq_granularity {
  BQ_GRANULARITY_DEFAULT = 0, /* per token for QuantizedLinear, per tensor for every other op */
  BQ_PER_TENSOR = 1, /* one scale, one zero point: host scalars (args.scale, args.zero_point) */
  BQ_PER_CHANNEL = 2, /* dense tensor of rank 1..8; scales[shape[axis]] */
  BQ_PER_TOKEN = 3,   /* [rows, cols] with row strides; scales[rows] */
  BQ_PER_GROUP = 4,   /* [rows, cols], cols % group_size == 0; scales[rows][cols / group_size] */
  BQ_PER_BLOCK = 5    /* [rows, cols] in B x B tiles, B = group_size (edge tiles may be partial);
                         scales[ceil(rows / B)][ceil(cols / B)] */
} bq_granularity;

/* desc.scale_layout: where per-group scales (and zero points) live */
typedef enum bq_scale_layout {
  BQ_SCALES_ROW_MAJOR = 0, /* scales[r][g]: r * group_row_stride + g (the default) */
  BQ_SCALES_MN_MAJOR = 1,  /* scales[g][r]: g * group_row_stride + r, group_row_stride 0 meaning
                              rows rounded up to a multiple of 4 (16-byte columns for f32) */
  BQ_SCALES_BLOCKED = 2    /* microscaling: the 128 x 4 tiles of block-scaled GEMMs (cuBLASLt,
                              CUTLASS): byte ((r / 128) ceil(G / 4) + g / 4) 512 + (r % 32) 16 +
                              ((r % 128) / 32) 4 + g % 4 of G groups a row, rows padded to 128 and
                              groups to 4 (group_row_stride 0) */
} bq_scale_layout;

/* desc.scale_rule: how microscaling dynamic quantize turns a group's amax into its scale
   (docs/numerics.md, "Microscaling"): UE8M0 rules 1-5, NVFP4 rules 6-7; max is the element
   type's largest value and emax its exponent (E4M3 448 and 8, E5M2 57344 and 15, E2M1 6 and 2) */
typedef enum bq_scale_rule {
  BQ_SCALE_RULE_DEFAULT = 0, /* the library's: s = amax / max in C, rounded up to a power of two
                                (dynamic quantize's pow2_scales) */
  BQ_SCALE_FLOOR = 1,        /* the OCP MX spec and torchao's default: 2^(floor(log2 amax) - emax) */
  BQ_SCALE_CEIL = 2,         /* torchao's CEIL: 2^(ceil(log2 amax) - emax) */
  BQ_SCALE_EVEN = 3,         /* torchao's EVEN: amax rounded to the element's mantissa first */
  BQ_SCALE_RCEIL = 4,        /* cuBLAS, DeepGEMM, torchao's RCEIL: amax * f32(1 / max), rounded up */
  BQ_SCALE_RCEIL_SAT = 5,    /* Transformer Engine's: RCEIL, saturating at 2^127 */
  BQ_SCALE_NVFP4_TORCHAO = 6, /* NVFP4 (E4M3 scales): torchao's steps, on CUDA */
  BQ_SCALE_NVFP4_TE = 7      /* NVFP4: Transformer Engine's steps (the encode factor 2688 / amax) */
} bq_scale_rule;

/* desc.rounding: how quantize puts a value on its storage type's grid (docs/numerics.md,
   "Stochastic rounding") */
typedef enum bq_rounding {
  BQ_ROUND_NEAREST_EVEN = 0, /* the default */
  BQ_ROUND_STOCHASTIC = 1    /* down or up, up with probability the distance from the value below
                                (to 2^-16), from Philox4x32-10 keyed by args.seed at the element's
                                index plus args.offset: the same bits on every GPU and batch */
} bq_rounding;

/* desc.device: the calling thread's current context (else device 0's primary context), or
   device n's primary context whatever is current */
#define BQ_DEVICE_CURRENT 0
#define BQ_DEVICE(n) ((n) + 1)

/* Zero means default in every field (sokol style), so new fields never break callers. */
typedef struct bq_desc {
  bq_op op;                    /* required */
  bq_direction direction;      /* default BQ_FORWARD */
  bq_granularity granularity;  /* default: BQ_GRANULARITY_DEFAULT (per op, see the enum) */
  bq_dtype float_type;         /* BQ_F32, BQ_F64, BQ_F16 or BQ_BF16: required except by
                                  SmoothQuantLinear (its x is int8; default out_type) */
  bq_dtype int_type;           /* default BQ_S8; or BQ_U8 */
  int qmin, qmax;              /* both 0: the full range of int_type */
  bq_dtype scale_type;         /* device scale arrays: BQ_F32 (default) or float_type */
  int device;                  /* BQ_DEVICE_CURRENT (default) or BQ_DEVICE(n) */
  int asymmetric;              /* dynamic quantize: 0 symmetric (max |x|), 1 min/max + zero point;
                                  linear: 1 = activations carry zero points */
  bq_dtype out_type;           /* linear: the output (and bias) type; default float_type
                                  (SmoothQuantLinear: out_type or float_type required) */
  bq_activation activation;    /* BQ_GATED_QUANTIZE: BQ_SILU (default) or BQ_GELU_TANH */
  int pow2_scales;             /* dynamic quantize: 1 rounds each scale up to a power of two
                                  (implied by scale_type BQ_UE8M0 or BQ_UE8M0X4) */
  bq_scale_layout scale_layout; /* per group: BQ_SCALES_ROW_MAJOR (default) or BQ_SCALES_MN_MAJOR;
                                  microscaling also BQ_SCALES_BLOCKED */
  bq_scale_rule scale_rule;    /* microscaling dynamic quantize's scale rule (default: the library's) */
  int random_signs;            /* BQ_HADAMARD and desc.rotation: 1 multiplies by a random sign
                                  vector drawn from args.seed */
  bq_rounding rounding;        /* quantize, fake quantize (forward), dynamic quantize and the
                                  fused producers: BQ_ROUND_NEAREST_EVEN (default) or
                                  BQ_ROUND_STOCHASTIC */
  int rotation;                /* quantize, dynamic quantize (forward; integer and FP8 per
                                  token) and the fused producers (per tensor, per token,
                                  microscaling): 1 rotates the values first (BQ_HADAMARD's
                                  forward pass, blocks of args.rotation_block,
                                  desc.random_signs); dequantize: 1 rotates y back after;
                                  fake quantize (either direction): both */
} bq_desc;

/* One call's arguments. Device pointers are plain CUdeviceptr / cudaMalloc values. */
typedef struct bq_args {
  /* Forward: x is read, y is written. Backward: dy (shaped like the forward output) and x
     (the saved forward input, for the mask) are read, dx (shaped like x) is written. */
  const void *x;
  void *y;
  const void *dy;
  void *dx;
  /* per tensor */
  int64_t numel;
  /* per channel: a dense row-major tensor */
  int rank;
  int64_t shape[BQ_MAX_RANK];
  int axis;
  /* per token and per group: [rows, cols]; strides in elements between row starts,
     0 means cols. x_row_stride applies to x and dx, y_row_stride to y and dy. */
  int64_t rows, cols;
  int64_t x_row_stride, y_row_stride;
  int64_t group_size;          /* per group: G; per block: B */
  int64_t group_row_stride;    /* per group and per block: the scales' (and zero points')
                                  leading dimension, in elements (int32 words for BQ_UE8M0X4):
                                  between rows of scales (row-major; 0 means the groups or
                                  blocks a row holds) or between groups (MN-major; 0 means
                                  rows rounded up to a multiple of 4) */
  /* quantization parameters */
  double scale;                /* per tensor: finite and > 0, converted once to C */
  int32_t zero_point;          /* per tensor */
  const void *scales;          /* other granularities: device array of scale_type */
  const int32_t *zero_points;  /* other granularities: device int32 array, NULL = all 0 */
  /* dynamic quantize writes these: one scale (scale_type) and, when asymmetric, one int32
     zero point per tensor, row or group (per group laid out like scales above) */
  void *out_scales;
  int32_t *out_zero_points;
  /* linear layers: x is [rows = M, cols = K] (row stride x_row_stride), y is [M, n = N]
     (row stride y_row_stride), w is [N, K] int8 with K contiguous (nn.Linear.weight) */
  int64_t n;
  const void *w;               /* s8 [N, K] */
  const void *w_scales;        /* [N] of scale_type: one scale per output channel */
  const void *bias;            /* [N] of out_type, or NULL */
  const int32_t *w_sums;       /* [N] from BQ_LINEAR_WEIGHT_SUMS: needed when asymmetric */
  /* fused producers: x is [rows, cols] (RMSNorm) or [rows, 2 cols] (gated: gate, then up),
     row stride x_row_stride (0: dense); y [rows, cols] the integers (y_row_stride) */
  void *residual;              /* RMSNorm: [rows, cols] of T or NULL; read, then holds
                                  h = x + residual (may be x itself, with x's stride) */
  int64_t residual_row_stride; /* 0 means cols */
  const void *norm_weight;     /* RMSNorm: [cols] of T */
  double eps;                  /* RMSNorm: finite and >= 0, used as C(eps) */
  void *out;                   /* optional: [rows, cols] of T, the values quantized (n or a) */
  int64_t out_row_stride;      /* 0 means cols */
  /* dynamic quantize, symmetric: 0, or an upper bound on each segment's max |x| (finite and
     > 0 in C): amax = min(amax, C(amax_bound)), and elements beyond it saturate */
  double amax_bound;
  /* fake quantize per tensor and per channel: NULL, or ceil(numel / 32) 32-bit words (4-byte
     aligned) holding the straight-through mask, bit e % 32 of word e / 32 for element e
     (row-major). The forward pass writes it (1 where element e is in range; the last word's
     bits past numel are 0), and the backward pass then reads it instead of x: dx = dy where
     the bit is 1, else 0 (x may be NULL) */
  void *mask;
  /* microscaling with E4M3 group scales (NVFP4): the second-level f32 scale g on the device,
     read by quantize and dequantize, and by dynamic quantize where set; dynamic quantize
     without it computes g from the tensor in a first pass and writes it to out_tensor_scale */
  const void *tensor_scale;
  void *out_tensor_scale;
  /* BQ_HADAMARD with desc.random_signs: the seed of the sign vector; stochastic rounding:
     the seed of its draws (Philox4x32-10's key either way) */
  uint64_t seed;
  /* stochastic rounding: added to each element's index (row-major, r * cols + c) to make
     its draw's counter, so that a call on rows r0.. with offset r0 * cols draws what the
     whole tensor's call draws there (and a training step can advance it between calls) */
  uint64_t offset;
  /* with desc.rotation: the rotation's block (a power of two, 2 to 256) */
  int64_t rotation_block;
} bq_args;

typedef struct bq_plan bq_plan;

/* ---- plans ----------------------------------------------------------------- */
BQ_API bq_status bq_plan_select(const bq_desc *desc, bq_plan **plan);
BQ_API bq_status bq_plan_can_implement(const bq_plan *plan, const bq_args *args);
BQ_API bq_status bq_plan_workspace_size(const bq_plan *plan, const bq_args *args, size_t *bytes);
BQ_API bq_status bq_plan_run(const bq_plan *plan, const bq_args *args, void *workspace,
                             size_t workspace_bytes, void *stream);
BQ_API void bq_plan_destroy(bq_plan *plan);
BQ_API const char *bq_plan_sku(const bq_plan *plan);
BQ_API const char *bq_plan_precision_guarantee(const bq_plan *plan);

/* ---- errors, version, logging ----------------------------------------------- */
BQ_API const char *bq_last_error(void);          /* this thread's last error message */
BQ_API const char *bq_status_name(bq_status s);  /* "BQ_ERROR_INVALID_ARGUMENT" */
BQ_API const char *bq_status_description(bq_status s);
BQ_API unsigned bq_version(void);                /* (major << 16) | (minor << 8) | patch */
BQ_API const char *bq_version_string(void);
typedef void (*bq_warning_fn)(const char *message, void *user);
BQ_API void bq_set_warning_handler(bq_warning_fn fn, void *user); /* NULL: stderr */

/* ---- the kernel cache ----------------------------------------------------------- */
typedef struct bq_cache_stats {
  uint64_t memory_hits;    /* select served from memory */
  uint64_t disk_hits;      /* served from a valid disk entry */
  uint64_t misses;         /* neither: compiled */
  uint64_t compiles;       /* NVRTC compiles run */
  uint64_t corrupt;        /* disk entries rejected (bad header, key, length or checksum;
                              not a regular file; another user's; refused by the driver) */
  uint64_t write_failures; /* disk entries that could not be written */
} bq_cache_stats;
BQ_API void bq_cache_get_stats(bq_cache_stats *stats);
BQ_API void bq_cache_clear_memory(void);   /* forget in-memory entries and tuned choices (live plans
                                              keep their modules) */
BQ_API const char *bq_cache_directory(void); /* NULL when the disk cache is off */
/* The SKU desc gets from bq_plan_select on a device of arch sm (10 * major + minor, 10 to
   999; else BQ_ERROR_INVALID_ARGUMENT), written into buf: the target is chosen as select
   chooses it (NVRTC's archs, BARACUDA_QUANT_FORCE_PTX, BARACUDA_QUANT_WGMMA), so NVRTC's
   arch list is needed (memoized in the cache directory). An sm older than 80 (the oldest
   the kernels run on) or than every arch NVRTC supports is BQ_ERROR_NOT_SUPPORTED. */
BQ_API bq_status bq_sku(const bq_desc *desc, int sm, char *buf, size_t buf_size);
/* Compile, with NVRTC alone (no GPU needed), into the disk cache what bq_plan_select would
   load for desc on a device of arch sm (the same file and key; sm as for bq_sku). */
BQ_API bq_status bq_cache_warm(const bq_desc *desc, int sm);
/* bq_cache_warm for each of n descriptors, their modules compiled on up to `threads` threads
   at once (0: one a CPU). Every descriptor is tried; the first failure in the list is
   returned, its message naming the descriptor's index. */
BQ_API bq_status bq_cache_warm_many(const bq_desc *descs, int n, int sm, int threads);

/* ---- device memory helpers, for programs that do not use the CUDA runtime -------- */
BQ_API bq_status bq_malloc(void **ptr, size_t bytes);
BQ_API bq_status bq_free(void *ptr);
BQ_API bq_status bq_memcpy_to_device(void *dst, const void *src, size_t bytes);
BQ_API bq_status bq_memcpy_to_host(void *dst, const void *src, size_t bytes);
BQ_API bq_status bq_memset(void *dst, unsigned char value, size_t bytes);
BQ_API bq_status bq_synchronize(void *stream);
BQ_API bq_status bq_device_name(char *buf, size_t buf_size);
/* Make device `ordinal`'s primary context current on the calling thread (cudaSetDevice). */
BQ_API bq_status bq_set_device(int ordinal);

#ifdef __cplusplus
}
#endif
#endif /* BARACUDA_QUANT_H */

/* ==== src/impl_runtime.h ================================================================== */
#ifdef BARACUDA_QUANT_IMPLEMENTATION
#ifndef BARACUDA_QUANT_IMPLEMENTATION_DONE
#define BARACUDA_QUANT_IMPLEMENTATION_DONE
/* ============================================================================
   IMPLEMENTATION
   ========================================================================== */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Only what strict C11 plus POSIX.1 headers declare is used, so the implementation
   compiles wherever it is included, whatever feature macros the program set. */
#define BQ__PATH_MAX 4096
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#ifndef BQ_MALLOC
#define BQ_MALLOC(n) malloc(n)
#define BQ_REALLOC(p, n) realloc(p, n)
#define BQ_FREE(p) free(p)
#endif

#if defined(__GNUC__)
#define BQ__UNUSED __attribute__((unused))
#define BQ__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BQ__UNUSED
#define BQ__PRINTF(a, b)
#endif

#ifdef BARACUDA_QUANT_STATIC
#define BQ__DEF static BQ__UNUSED /* a program need not call every function */
#else
#define BQ__DEF
#endif
#define BQ__FN static

/* ---- minimal CUDA driver and NVRTC types (no CUDA headers needed) ----------- */
typedef int bq__CUresult;
typedef int bq__CUdevice;
typedef void *bq__CUcontext;
typedef void *bq__CUmodule;
typedef void *bq__CUfunction;
typedef void *bq__CUstream;
typedef void *bq__CUevent;
typedef void *bq__CUgraph;
typedef void *bq__CUgraphExec;
typedef unsigned long long bq__CUdeviceptr;
/* cuLaunchKernelEx's CUlaunchAttribute (an id, then a 64-byte value at offset 8) and
   CUlaunchConfig */
typedef struct bq__CUlaunchAttribute {
  int id, pad_;
  union { int i; char bytes[64]; } value;
} bq__CUlaunchAttribute;
typedef struct bq__CUlaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, smem;
  bq__CUstream stream;
  bq__CUlaunchAttribute *attrs;
  unsigned num_attrs;
} bq__CUlaunchConfig;
typedef int bq__nvrtcResult;
typedef void *bq__nvrtcProgram;

#define BQ__CU_DRIVER_ABI 12000 /* the driver ABI version entry points are resolved at */
enum {
  BQ__CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
  BQ__CU_ATTR_MULTIPROCESSOR_COUNT = 16,
  BQ__CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
  BQ__CU_ATTR_CC_MAJOR = 75,
  BQ__CU_ATTR_CC_MINOR = 76,
  BQ__CU_ATTR_MEMORY_CLOCK_RATE = 36, /* kHz */
  BQ__CU_ATTR_L2_CACHE_SIZE = 38,
  BQ__CU_ATTR_MAX_THREADS_PER_SM = 39,
  BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED = 8,
  BQ__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION = 6,
  BQ__CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  BQ__CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  BQ__CU_EVENT_DEFAULT = 0,
  BQ__CU_ERROR_DEINITIALIZED = 4,
  BQ__CU_ERROR_NO_DEVICE = 100,
  BQ__CU_ERROR_OUT_OF_MEMORY = 2
};

/* Every driver entry point the library and its tools use, resolved once with
   cuGetProcAddress at BQ__CU_DRIVER_ABI. X(name, return, params). */
#define BQ__DRIVER_FUNCS(X)                                                                    \
  X(cuInit, (unsigned flags))                                                                  \
  X(cuDriverGetVersion, (int *v))                                                              \
  X(cuGetErrorString, (bq__CUresult e, const char **s))                                        \
  X(cuDeviceGet, (bq__CUdevice * d, int ordinal))                                              \
  X(cuDeviceGetCount, (int *n))                                                                \
  X(cuDeviceGetName, (char *name, int len, bq__CUdevice d))                                    \
  X(cuDeviceGetAttribute, (int *v, int attr, bq__CUdevice d))                                  \
  X(cuDevicePrimaryCtxRetain, (bq__CUcontext * c, bq__CUdevice d))                             \
  X(cuCtxGetCurrent, (bq__CUcontext * c))                                                      \
  X(cuCtxSetCurrent, (bq__CUcontext c))                                                        \
  X(cuCtxGetDevice, (bq__CUdevice * d))                                                        \
  X(cuCtxSynchronize, (void))                                                                  \
  X(cuCtxPushCurrent, (bq__CUcontext c))                                                       \
  X(cuCtxPopCurrent, (bq__CUcontext * c))                                                      \
  X(cuModuleLoadData, (bq__CUmodule * m, const void *image))                                   \
  X(cuModuleUnload, (bq__CUmodule m))                                                          \
  X(cuModuleGetFunction, (bq__CUfunction * f, bq__CUmodule m, const char *name))               \
  X(cuFuncSetAttribute, (bq__CUfunction f, int attr, int value))                               \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, (int *n, bq__CUfunction f, int block, size_t smem)) \
  X(cuLaunchKernel, (bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,     \
                     unsigned by, unsigned bz, unsigned smem, bq__CUstream s, void **params,   \
                     void **extra))                                                            \
  X(cuLaunchKernelEx, (const bq__CUlaunchConfig *c, bq__CUfunction f, void **params, void **extra)) \
  X(cuThreadExchangeStreamCaptureMode, (int *mode))                                            \
  X(cuMemAlloc, (bq__CUdeviceptr * p, size_t n))                                               \
  X(cuMemFree, (bq__CUdeviceptr p))                                                            \
  X(cuMemcpyHtoD, (bq__CUdeviceptr dst, const void *src, size_t n))                            \
  X(cuMemcpyDtoH, (void *dst, bq__CUdeviceptr src, size_t n))                                  \
  X(cuMemcpyDtoDAsync, (bq__CUdeviceptr dst, bq__CUdeviceptr src, size_t n, bq__CUstream s))   \
  X(cuMemsetD8, (bq__CUdeviceptr dst, unsigned char v, size_t n))                              \
  X(cuMemsetD8Async, (bq__CUdeviceptr dst, unsigned char v, size_t n, bq__CUstream s))         \
  X(cuStreamCreate, (bq__CUstream * s, unsigned flags))                                        \
  X(cuStreamDestroy, (bq__CUstream s))                                                         \
  X(cuStreamSynchronize, (bq__CUstream s))                                                     \
  X(cuStreamBeginCapture, (bq__CUstream s, int mode))                                          \
  X(cuStreamEndCapture, (bq__CUstream s, bq__CUgraph * g))                                     \
  X(cuGraphInstantiateWithFlags, (bq__CUgraphExec * e, bq__CUgraph g, unsigned long long flags)) \
  X(cuGraphLaunch, (bq__CUgraphExec e, bq__CUstream s))                                        \
  X(cuGraphExecDestroy, (bq__CUgraphExec e))                                                   \
  X(cuGraphDestroy, (bq__CUgraph g))                                                           \
  X(cuGraphGetNodes, (bq__CUgraph g, void **nodes, size_t *n))                                 \
  X(cuEventCreate, (bq__CUevent * e, unsigned flags))                                          \
  X(cuEventDestroy, (bq__CUevent e))                                                           \
  X(cuEventRecord, (bq__CUevent e, bq__CUstream s))                                            \
  X(cuEventSynchronize, (bq__CUevent e))                                                       \
  X(cuEventElapsedTime, (float *ms, bq__CUevent a, bq__CUevent b))                           \
  X(cuStreamIsCapturing, (bq__CUstream s, int *status))                                     \
  X(cuTensorMapEncodeTiled, (void *map, int type, unsigned rank, void *base, const unsigned long long *dims, \
                             const unsigned long long *strides, const unsigned *box, const unsigned *estrides, \
                             int interleave, int swizzle, int l2, int fill))

typedef struct bq__driver_api {
#define BQ__DRV_MEMBER(name, params) bq__CUresult (*name) params;
  BQ__DRIVER_FUNCS(BQ__DRV_MEMBER)
#undef BQ__DRV_MEMBER
  int version; /* cuDriverGetVersion */
} bq__driver_api;

#define BQ__NVRTC_FUNCS(X)                                                                     \
  X(nvrtcVersion, (int *major, int *minor))                                                    \
  X(nvrtcGetNumSupportedArchs, (int *n))                                                       \
  X(nvrtcGetSupportedArchs, (int *archs))                                                      \
  X(nvrtcCreateProgram, (bq__nvrtcProgram * p, const char *src, const char *name, int nh,      \
                         const char *const *headers, const char *const *include_names))        \
  X(nvrtcDestroyProgram, (bq__nvrtcProgram * p))                                               \
  X(nvrtcCompileProgram, (bq__nvrtcProgram p, int nopt, const char *const *opts))              \
  X(nvrtcGetProgramLogSize, (bq__nvrtcProgram p, size_t *n))                                   \
  X(nvrtcGetProgramLog, (bq__nvrtcProgram p, char *log))                                       \
  X(nvrtcGetCUBINSize, (bq__nvrtcProgram p, size_t *n))                                        \
  X(nvrtcGetCUBIN, (bq__nvrtcProgram p, char *cubin))                                          \
  X(nvrtcGetPTXSize, (bq__nvrtcProgram p, size_t *n))                                          \
  X(nvrtcGetPTX, (bq__nvrtcProgram p, char *ptx))

typedef struct bq__nvrtc_api {
#define BQ__NVRTC_MEMBER(name, params) bq__nvrtcResult (*name) params;
  BQ__NVRTC_FUNCS(BQ__NVRTC_MEMBER)
#undef BQ__NVRTC_MEMBER
  int major, minor;
  int archs[64];
  int num_archs;
  char identity[512]; /* version plus the library file's path, size and mtime */
} bq__nvrtc_api;

/* ---- errors and warnings ---------------------------------------------------- */
static __thread char bq__err_buf[1024];
static pthread_mutex_t bq__warn_lock = PTHREAD_MUTEX_INITIALIZER;
static bq_warning_fn bq__warn_fn;
static void *bq__warn_user;

BQ__FN bq_status bq__fail(bq_status st, const char *fmt, ...) BQ__PRINTF(2, 3);
BQ__FN bq_status bq__fail(bq_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(bq__err_buf, sizeof bq__err_buf, fmt, ap);
  va_end(ap);
  return st;
}

BQ__FN void bq__warn(const char *fmt, ...) BQ__PRINTF(1, 2);
BQ__FN int bq__env_flag(const char *name);
BQ__FN void bq__warn(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The handler runs outside the lock, so that it may call the library (even
     bq_set_warning_handler); the default writes each message in one call under the lock. */
  pthread_mutex_lock(&bq__warn_lock);
  bq_warning_fn fn = bq__warn_fn;
  void *user = bq__warn_user;
  pthread_mutex_unlock(&bq__warn_lock);
  if (fn) {
    fn(msg, user);
    return;
  }
  if (bq__env_flag("BARACUDA_QUANT_QUIET")) return;
  char line[1100];
  int n = snprintf(line, sizeof line, "baracuda_quant: warning: %s\n", msg);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  pthread_mutex_lock(&bq__warn_lock);
  fwrite(line, 1, (size_t)n, stderr);
  fflush(stderr);
  pthread_mutex_unlock(&bq__warn_lock);
}

BQ__DEF void bq_set_warning_handler(bq_warning_fn fn, void *user) {
  pthread_mutex_lock(&bq__warn_lock);
  bq__warn_fn = fn;
  bq__warn_user = user;
  pthread_mutex_unlock(&bq__warn_lock);
}

BQ__DEF const char *bq_last_error(void) { return bq__err_buf; }

BQ__DEF const char *bq_status_name(bq_status s) {
  switch (s) {
#define BQ__STATUS_NAME(name, text) case name: return #name;
    BQ__STATUS_LIST(BQ__STATUS_NAME)
#undef BQ__STATUS_NAME
  default: return "BQ_STATUS_UNKNOWN";
  }
}

BQ__DEF const char *bq_status_description(bq_status s) {
  switch (s) {
#define BQ__STATUS_TEXT(name, text) case name: return text;
    BQ__STATUS_LIST(BQ__STATUS_TEXT)
#undef BQ__STATUS_TEXT
  default: return "unknown status";
  }
}

BQ__DEF unsigned bq_version(void) {
  return (BQ_VERSION_MAJOR << 16) | (BQ_VERSION_MINOR << 8) | BQ_VERSION_PATCH;
}
BQ__DEF const char *bq_version_string(void) { return BQ_VERSION_STRING; }

/* ---- small helpers ------------------------------------------------------------- */
/* 64-bit FNV-1a: file names and payload checksums (any single changed byte changes it). */
BQ__FN uint64_t bq__fnv1a(const void *data, size_t n, uint64_t h) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
#define BQ__FNV_SEED 0xcbf29ce484222325ULL

typedef struct bq__str { char *p; size_t n, cap; int oom; } bq__str;
BQ__FN void bq__str_put(bq__str *s, const char *t, size_t n) {
  if (s->oom) return;
  if (s->n + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + n + 1) cap *= 2;
    char *p = (char *)BQ_REALLOC(s->p, cap);
    if (!p) { s->oom = 1; return; }
    s->p = p;
    s->cap = cap;
  }
  memcpy(s->p + s->n, t, n);
  s->n += n;
  s->p[s->n] = 0;
}
BQ__FN void bq__str_cat(bq__str *s, const char *t) { bq__str_put(s, t, strlen(t)); }
BQ__FN void bq__str_fmt(bq__str *s, const char *fmt, ...) BQ__PRINTF(2, 3);
BQ__FN void bq__str_fmt(bq__str *s, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) bq__str_put(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* strlcpy: copies what fits, always terminates */
BQ__FN void bq__copy(char *dst, size_t n, const char *src) {
  size_t k = strlen(src);
  if (k >= n) k = n - 1;
  memcpy(dst, src, k);
  dst[k] = 0;
}

/* Boolean environment variables, all parsed alike: 0/false/no/off (any case) off,
   1/true/yes/on on, unset or empty the default; anything else is the default plus one
   warning for each variable and value. */
static pthread_mutex_t bq__env_lock = PTHREAD_MUTEX_INITIALIZER;
static char bq__env_warned[8][2][72]; /* variable, value: the last invalid value warned of */

BQ__FN int bq__env_word(const char *v, const char *w) {
  for (; *v && *w; v++, w++) {
    char c = *v >= 'A' && *v <= 'Z' ? (char)(*v - 'A' + 'a') : *v;
    if (c != *w) return 0;
  }
  return !*v && !*w;
}

BQ__FN int bq__env_bool(const char *name, int def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  if (bq__env_word(v, "0") || bq__env_word(v, "false") || bq__env_word(v, "no") || bq__env_word(v, "off")) return 0;
  if (bq__env_word(v, "1") || bq__env_word(v, "true") || bq__env_word(v, "yes") || bq__env_word(v, "on")) return 1;
  /* once per variable and value: marked before warning, since the warning itself reads
     BARACUDA_QUANT_QUIET */
  int warn = 1;
  pthread_mutex_lock(&bq__env_lock);
  size_t i = 0, n = sizeof bq__env_warned / sizeof bq__env_warned[0];
  for (; i < n && bq__env_warned[i][0][0] && strcmp(bq__env_warned[i][0], name); i++) {}
  if (i < n) {
    if (!strncmp(bq__env_warned[i][1], v, sizeof bq__env_warned[i][1] - 1)) warn = 0;
    bq__copy(bq__env_warned[i][0], sizeof bq__env_warned[i][0], name);
    bq__copy(bq__env_warned[i][1], sizeof bq__env_warned[i][1], v);
  }
  pthread_mutex_unlock(&bq__env_lock);
  if (warn)
    bq__warn("%s (\"%.64s\") is not a boolean: 0/false/no/off or 1/true/yes/on; using the default (%s)", name, v,
             def ? "on" : "off");
  return def;
}
BQ__FN int bq__env_flag(const char *name) { return bq__env_bool(name, 0); }

/* ---- run-time loading: the driver ------------------------------------------------- */
static pthread_once_t bq__drv_once = PTHREAD_ONCE_INIT;
static bq__driver_api bq__drv;
static bq_status bq__drv_status;
static char bq__drv_msg[768];

typedef bq__CUresult (*bq__getproc_v2_fn)(const char *, void **, int, unsigned long long, int *);

BQ__FN void bq__driver_load(void) {
  const char *env = getenv("BARACUDA_QUANT_DRIVER");
  const char *name = env && *env ? env : "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    bq__drv_status = BQ_ERROR_NO_DRIVER;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "no NVIDIA driver: dlopen(\"%s\") through the dynamic loader's search path "
             "(LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib; BARACUDA_QUANT_DRIVER overrides) "
             "failed: %s", name, dlerror());
    return;
  }
  bq__getproc_v2_fn getproc = (bq__getproc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!getproc) {
    bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "the NVIDIA driver in %s has no cuGetProcAddress_v2: CUDA 12.0 or newer "
             "driver required", name);
    return;
  }
#define BQ__DRV_RESOLVE(fname, params)                                                      \
  {                                                                                         \
    void *pfn = NULL;                                                                       \
    int found = -1;                                                                         \
    bq__CUresult r = getproc(#fname, &pfn, BQ__CU_DRIVER_ABI, 0, &found);                   \
    if (r != 0 || !pfn || found != 0) {                                                     \
      bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;                                             \
      snprintf(bq__drv_msg, sizeof bq__drv_msg,                                             \
               "the NVIDIA driver in %s does not provide %s at ABI %d (CUresult %d, "       \
               "symbol status %d)", name, #fname, BQ__CU_DRIVER_ABI, r, found);             \
      return;                                                                               \
    }                                                                                       \
    memcpy(&bq__drv.fname, &pfn, sizeof pfn);                                               \
  }
  BQ__DRIVER_FUNCS(BQ__DRV_RESOLVE)
#undef BQ__DRV_RESOLVE
  bq__CUresult r = bq__drv.cuInit(0);
  if (r != 0) {
    bq__drv_status = r == BQ__CU_ERROR_NO_DEVICE ? BQ_ERROR_NO_DEVICE : BQ_ERROR_CUDA;
    const char *s = NULL;
    bq__drv.cuGetErrorString(r, &s);
    snprintf(bq__drv_msg, sizeof bq__drv_msg, "cuInit failed in %s: CUresult %d (%s)", name,
             r, s ? s : "?");
    return;
  }
  bq__drv.cuDriverGetVersion(&bq__drv.version);
  if (bq__drv.version < BQ__CU_DRIVER_ABI) {
    bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "the NVIDIA driver in %s supports CUDA %d.%d; CUDA 12.0 or newer is required",
             name, bq__drv.version / 1000, bq__drv.version % 1000 / 10);
    return;
  }
  bq__drv_status = BQ_SUCCESS;
}

/* The driver table, or NULL with the error set (no driver, too old, no device). */
BQ__FN BQ__UNUSED const bq__driver_api *bq__driver_get(void) {
  pthread_once(&bq__drv_once, bq__driver_load);
  if (bq__drv_status != BQ_SUCCESS) {
    bq__fail(bq__drv_status, "%s", bq__drv_msg);
    return NULL;
  }
  return &bq__drv;
}

BQ__FN bq_status bq__cu_fail(bq__CUresult r, const char *what) {
  const char *s = NULL;
  if (bq__drv.cuGetErrorString) bq__drv.cuGetErrorString(r, &s);
  return bq__fail(r == BQ__CU_ERROR_OUT_OF_MEMORY ? BQ_ERROR_OUT_OF_MEMORY : BQ_ERROR_CUDA,
                  "%s failed: CUresult %d (%s)", what, r, s ? s : "unknown");
}

/* The primary context of device `ordinal` (the one the CUDA runtime uses, so the two
   interoperate), retained once per process and never released: plans and cached modules
   of that context stay valid for the program's life. */
#define BQ__MAX_PRIMARY 64
static bq__CUcontext bq__primary_ctx[BQ__MAX_PRIMARY];
static pthread_mutex_t bq__primary_lock = PTHREAD_MUTEX_INITIALIZER;
BQ__FN bq_status bq__primary(int ordinal, bq__CUcontext *out) {
  const bq__driver_api *d = bq__driver_get();
  if (!d) return bq__drv_status;
  int n = 0;
  d->cuDeviceGetCount(&n);
  if (ordinal < 0 || ordinal >= n || ordinal >= BQ__MAX_PRIMARY)
    return bq__fail(BQ_ERROR_NO_DEVICE, "device %d does not exist (%d CUDA devices)", ordinal, n);
  pthread_mutex_lock(&bq__primary_lock);
  bq__CUcontext c = bq__primary_ctx[ordinal];
  bq__CUresult r = 0;
  bq__CUdevice dev;
  if (!c && !(r = d->cuDeviceGet(&dev, ordinal)) && !(r = d->cuDevicePrimaryCtxRetain(&c, dev)))
    bq__primary_ctx[ordinal] = c;
  pthread_mutex_unlock(&bq__primary_lock);
  if (r) return bq__cu_fail(r, "cuDevicePrimaryCtxRetain");
  *out = c;
  return BQ_SUCCESS;
}

/* Make sure a context is current: the caller's if there is one, else the primary
   context of `device`, made current on this thread. */
BQ__FN bq_status bq__context(int device, bq__CUcontext *out) {
  const bq__driver_api *d = bq__driver_get();
  if (!d) return bq__drv_status;
  bq__CUcontext c = NULL;
  bq__CUresult r = d->cuCtxGetCurrent(&c);
  if (r != 0) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (!c) {
    bq_status st = bq__primary(device, &c);
    if (st) return st;
    if ((r = d->cuCtxSetCurrent(c)) != 0) return bq__cu_fail(r, "cuCtxSetCurrent");
  }
  if (out) *out = c;
  return BQ_SUCCESS;
}

/* The device ordinal of a context (-1 if the driver cannot tell): made current for the
   query when it is not. */
BQ__FN int bq__context_device(bq__CUcontext c) {
  bq__CUcontext cur = NULL;
  bq__CUdevice dev = -1;
  if (bq__drv.cuCtxGetCurrent(&cur)) return -1;
  if (cur == c) return bq__drv.cuCtxGetDevice(&dev) ? -1 : dev;
  if (bq__drv.cuCtxPushCurrent(c)) return -1;
  if (bq__drv.cuCtxGetDevice(&dev)) dev = -1;
  bq__drv.cuCtxPopCurrent(&cur);
  return dev;
}

/* ---- run-time loading: NVRTC ------------------------------------------------------- */
static pthread_once_t bq__nvrtc_once = PTHREAD_ONCE_INIT;
static bq__nvrtc_api bq__nv;
static bq_status bq__nv_status;
static char bq__nv_msg[1024];

BQ__FN void bq__nvrtc_load(void) {
  const char *env = getenv("BARACUDA_QUANT_NVRTC");
  const char *names[3] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
  void *lib = NULL;
  const char *tried = env && *env ? env : "libnvrtc.so.13, libnvrtc.so.12";
  if (env && *env) {
    lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
  } else {
    for (int i = 0; names[i] && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) {
    bq__nv_status = BQ_ERROR_NO_NVRTC;
    snprintf(bq__nv_msg, sizeof bq__nv_msg,
             "NVRTC not found: tried %s through the dynamic loader's search path "
             "(set BARACUDA_QUANT_NVRTC to the library's path): %s", tried, dlerror());
    return;
  }
#define BQ__NV_RESOLVE(fname, params)                                                      \
  {                                                                                        \
    void *pfn = dlsym(lib, #fname);                                                        \
    if (!pfn) {                                                                            \
      bq__nv_status = BQ_ERROR_NO_NVRTC;                                                   \
      snprintf(bq__nv_msg, sizeof bq__nv_msg, "NVRTC (%s) lacks %s", tried, #fname);       \
      return;                                                                              \
    }                                                                                      \
    memcpy(&bq__nv.fname, &pfn, sizeof pfn);                                               \
  }
  BQ__NVRTC_FUNCS(BQ__NV_RESOLVE)
#undef BQ__NV_RESOLVE
  bq__nv.nvrtcVersion(&bq__nv.major, &bq__nv.minor);
  int n = 0;
  bq__nv.nvrtcGetNumSupportedArchs(&n);
  if (n < 1 || n > 64) {
    bq__nv_status = BQ_ERROR_NO_NVRTC;
    snprintf(bq__nv_msg, sizeof bq__nv_msg, "NVRTC %d.%d reports %d supported archs",
             bq__nv.major, bq__nv.minor, n);
    return;
  }
  bq__nv.nvrtcGetSupportedArchs(bq__nv.archs);
  bq__nv.num_archs = n;
  /* nvrtcVersion has no build number: the library file's identity stands in for it. */
  /* dladdr is a GNU extension: fetched at run time so no feature macro is needed */
  struct { const char *fname; void *fbase; const char *sname; void *saddr; } info;
  struct stat st;
  memset(&info, 0, sizeof info);
  memset(&st, 0, sizeof st);
  void *sym, *self = dlopen(NULL, RTLD_LAZY), *dladdr_sym = self ? dlsym(self, "dladdr") : NULL;
  int (*dladdr_fn)(const void *, void *) = NULL;
  memcpy(&sym, &bq__nv.nvrtcVersion, sizeof sym);
  if (dladdr_sym) memcpy(&dladdr_fn, &dladdr_sym, sizeof dladdr_fn);
  if (dladdr_fn && dladdr_fn(sym, &info) && info.fname) stat(info.fname, &st);
  snprintf(bq__nv.identity, sizeof bq__nv.identity, "nvrtc %d.%d file %s size %lld mtime %lld",
           bq__nv.major, bq__nv.minor, info.fname ? info.fname : "?",
           (long long)st.st_size, (long long)st.st_mtime);
  bq__nv_status = BQ_SUCCESS;
}

BQ__FN const bq__nvrtc_api *bq__nvrtc_get(void) {
  pthread_once(&bq__nvrtc_once, bq__nvrtc_load);
  if (bq__nv_status != BQ_SUCCESS) {
    bq__fail(bq__nv_status, "%s", bq__nv_msg);
    return NULL;
  }
  return &bq__nv;
}

/* ==== the embedded kernel text's accessors (the text itself comes last) =================== */
BQ__FN const char *bq__text_affine_cu(void);
BQ__FN const char *bq__text_common_cuh(void);
BQ__FN const char *bq__text_dynamic_cu(void);
BQ__FN const char *bq__text_fused_cu(void);
BQ__FN const char *bq__text_linear_cu(void);
BQ__FN const char *bq__text_mx_cu(void);
BQ__FN const char *bq__text_rotate_cu(void);

/* ==== src/impl_core.h ===================================================================== */
/* ---- devices and targets ---------------------------------------------------------- */
typedef struct bq__device_info {
  int known, sm, num_sms, ordinal;
  int threads_sm;   /* the threads an SM holds (0: not reported) */
  int mem_khz;      /* the memory's peak clock (0: not reported) */
  int64_t l2_bytes; /* (0: not reported) */
  char name[96];
} bq__device_info;
#define BQ__MAX_DEVICES 64
static bq__device_info bq__devices[BQ__MAX_DEVICES];
static pthread_mutex_t bq__dev_lock = PTHREAD_MUTEX_INITIALIZER;

/* The current context and its device's compute capability, queried once per device. */
BQ__FN bq_status bq__current_device(int fallback_device, bq__CUcontext *ctx, bq__device_info *out) {
  bq_status st = bq__context(fallback_device, ctx);
  if (st) return st;
  const bq__driver_api *d = &bq__drv;
  bq__CUdevice dev;
  bq__CUresult r = d->cuCtxGetDevice(&dev);
  if (r) return bq__cu_fail(r, "cuCtxGetDevice");
  if (dev < 0 || dev >= BQ__MAX_DEVICES) return bq__fail(BQ_ERROR_NO_DEVICE, "device %d out of range", dev);
  pthread_mutex_lock(&bq__dev_lock);
  bq__device_info info = bq__devices[dev];
  pthread_mutex_unlock(&bq__dev_lock);
  if (!info.known) {
    int major = 0, minor = 0, sms = 0;
    if ((r = d->cuDeviceGetAttribute(&major, BQ__CU_ATTR_CC_MAJOR, dev)) ||
        (r = d->cuDeviceGetAttribute(&minor, BQ__CU_ATTR_CC_MINOR, dev)) ||
        (r = d->cuDeviceGetAttribute(&sms, BQ__CU_ATTR_MULTIPROCESSOR_COUNT, dev)))
      return bq__cu_fail(r, "cuDeviceGetAttribute");
    info.known = 1;
    info.sm = major * 10 + minor;
    info.num_sms = sms;
    /* what tells two GPUs of one arch apart for the tune (its entries are keyed by them);
       a driver that does not report one leaves it 0 */
    int clk = 0, l2 = 0, th = 0;
    if (d->cuDeviceGetAttribute(&th, BQ__CU_ATTR_MAX_THREADS_PER_SM, dev)) th = 0;
    if (d->cuDeviceGetAttribute(&clk, BQ__CU_ATTR_MEMORY_CLOCK_RATE, dev)) clk = 0;
    if (d->cuDeviceGetAttribute(&l2, BQ__CU_ATTR_L2_CACHE_SIZE, dev)) l2 = 0;
    info.threads_sm = th > 0 ? th : 0;
    info.mem_khz = clk > 0 ? clk : 0;
    info.l2_bytes = l2 > 0 ? l2 : 0;
    if (d->cuDeviceGetName(info.name, (int)sizeof info.name, dev)) bq__copy(info.name, sizeof info.name, "?");
    info.name[sizeof info.name - 1] = 0;
    for (char *c = info.name; *c; c++) /* (one word in the tune's key and file) */
      if (*c <= ' ' || *c > '~') *c = '_';
    pthread_mutex_lock(&bq__dev_lock);
    bq__devices[dev] = info;
    pthread_mutex_unlock(&bq__dev_lock);
  }
  info.ordinal = dev;
  *out = info;
  return BQ_SUCCESS;
}

/* A plan's context and its device: for BQ_DEVICE_CURRENT bq__context's (the current one,
   else device 0's primary context, made current); for BQ_DEVICE(n) device n's primary
   context, pushed (*pushed = 1) while the plan is built if another context or none is
   current, so selecting changes nothing the caller sees. */
BQ__FN bq_status bq__plan_context(int device, bq__CUcontext *ctx, int *pushed, bq__device_info *out) {
  *pushed = 0;
  if (device == BQ_DEVICE_CURRENT) return bq__current_device(0, ctx, out);
  bq_status st = bq__primary(device - 1, ctx);
  if (st) return st;
  bq__CUcontext cur = NULL;
  bq__CUresult r = bq__drv.cuCtxGetCurrent(&cur);
  if (r) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (cur != *ctx) {
    if ((r = bq__drv.cuCtxPushCurrent(*ctx))) return bq__cu_fail(r, "cuCtxPushCurrent");
    *pushed = 1;
  }
  return bq__current_device(0, &cur, out);
}

/* What NVRTC is asked for: a cubin for the device's own arch, or PTX for the newest
   virtual arch NVRTC supports when the device is newer (or BARACUDA_QUANT_FORCE_PTX). */
#define BQ__HAVE_MODULES 1 /* (for tools built against several headers) */
typedef struct bq__target {
  int arch;  /* 90 */
  int ptx;   /* 1: PTX for compute_<arch>, finished by the driver */
  int arch_a; /* 1: the arch-specific variant (sm_90a) */
  int module; /* 0: the plan's every entry point in one source (tools, the CPU emulator);
                 e + 1: the module of entry point e alone, which is what is compiled,
                 cached and loaded */
} bq__target;

BQ__FN void bq__target_name(const bq__target *t, char *buf, size_t n) {
  snprintf(buf, n, "%s_%d%s", t->ptx ? "compute" : "sm", t->arch, t->arch_a ? "a" : "");
}

/* ---- cache files: opened without blocking, following a link or trusting a stranger ------ */
/* Strict C11 without POSIX feature macros leaves some names undeclared: there glibc's own
   flag stands in for O_NOFOLLOW (else links are followed: the reader still checks the
   file's type, key and checksum), and getpwuid stands in for getpwuid_r. */
#if !defined(O_NOFOLLOW) && defined(__O_NOFOLLOW)
#define O_NOFOLLOW __O_NOFOLLOW
#endif
#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif
#if !defined(__STRICT_ANSI__) || defined(_POSIX_C_SOURCE) || defined(_XOPEN_SOURCE) || \
    defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE) || defined(_BSD_SOURCE)
#define BQ__HAVE_GETPWUID_R 1
#endif
/* the longest directory whose entry paths (SKU file name, hash, temporary suffix) still fit */
#define BQ__DIR_MAX (BQ__PATH_MAX - 400)

/* Each cause of a cache warning is told once per directory ("" where the directory does
   not matter); past 128 causes the cache stops warning rather than grow. */
static pthread_mutex_t bq__warned_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t bq__warned[128];
static int bq__num_warned;

BQ__FN int bq__first_warning(const char *cause, const char *dir) {
  uint64_t h = bq__fnv1a(dir, strlen(dir), bq__fnv1a(cause, strlen(cause) + 1, BQ__FNV_SEED));
  int first = 1;
  pthread_mutex_lock(&bq__warned_lock);
  for (int i = 0; i < bq__num_warned && first; i++) first = bq__warned[i] != h;
  if (first && bq__num_warned < 128) bq__warned[bq__num_warned++] = h;
  else first = 0;
  pthread_mutex_unlock(&bq__warned_lock);
  return first;
}

/* The directory part of path, into buf. */
BQ__FN void bq__dir_of(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  size_t k = slash ? (size_t)(slash - path) : 0;
  if (k >= n) k = n - 1;
  memcpy(buf, slash ? path : ".", slash ? k : 1);
  buf[slash ? k : 1] = 0;
  if (slash && k == 0) bq__copy(buf, n, "/");
}

/* A directory others can write to: group or world writable (sticky or not: anyone may
   create a file at an entry's name before its owner does), or owned by someone other
   than this user and root. Its files are read only when this user or root owns them. */
BQ__FN int bq__dir_shared(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) return 1;
  return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_uid != geteuid() && st.st_uid != 0);
}

/* Opens a cache file for reading: a regular file, not through a symbolic link, without
   blocking (a FIFO, device or socket there is refused before anything could wait on it),
   and, in a directory others can write to, owned by this user or root. Returns the
   descriptor with *st filled, or -1 with *why saying what is wrong (NULL when there is
   simply no such file). Costs the open and one fstat (and a geteuid) for a file of ours. */
BQ__FN int bq__open_cache_file(const char *path, struct stat *st, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) *why = "it is a symbolic link";
    else if (errno == ENXIO) *why = "it is a socket";
    else if (errno == EACCES) *why = "it is not readable";
    return -1;
  }
  if (fstat(fd, st) != 0) *why = "fstat failed";
  else if (S_ISDIR(st->st_mode)) *why = "it is a directory";
  else if (S_ISFIFO(st->st_mode)) *why = "it is a FIFO";
  else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) *why = "it is a device";
  else if (!S_ISREG(st->st_mode)) *why = "it is not a regular file";
  else if (st->st_uid != geteuid() && st->st_uid != 0) {
    char dir[BQ__PATH_MAX];
    bq__dir_of(path, dir, sizeof dir);
    if (bq__dir_shared(dir)) *why = "it belongs to another user and its directory is writable by others";
  }
  if (*why) { close(fd); return -1; }
  return fd;
}

/* Reads a whole small file; returns its length or -1. */
BQ__FN long bq__read_small(int fd, char *buf, size_t cap) {
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return (long)got;
    got += (size_t)r;
    if (got == cap) return -1; /* larger than any sane such file */
  }
}

/* A small cache file's whole text, NUL-terminated, into text (cap bytes, the NUL included):
   its length; -1 where there is no such file (*why NULL) or it cannot be read as one of
   ours (*why says why: bq__open_cache_file's checks, or too long) */
BQ__FN long bq__read_cache_text(const char *path, char *text, size_t cap, const char **why) {
  struct stat st;
  int fd = bq__open_cache_file(path, &st, why);
  if (fd < 0) return -1;
  long n = bq__read_small(fd, text, cap - 1);
  close(fd);
  if (n < 0) {
    *why = "unreadable or too long";
    return -1;
  }
  text[n] = 0;
  return n;
}

/* ---- NVRTC identity, memoized on disk so that a disk-cache hit never loads NVRTC ------ */
/* Loading libnvrtc costs milliseconds (its static initializers), far more than a cache
   hit may. The memo file records, for one way of finding NVRTC (BARACUDA_QUANT_NVRTC,
   LD_LIBRARY_PATH and the identity of /etc/ld.so.cache), the identity and supported
   archs of the library found, and is trusted only while that file's size and mtime hold:
     baracuda_quant nvrtc memo 1
     identity nvrtc 13.0 file /usr/local/cuda/lib64/libnvrtc.so.13 size N mtime M
     archs 75 80 86 ...            (ascending, each in 20..300, 1 to 64 of them)
     checksum <FNV-1a 64 of every byte above, 16 hex digits>
   A memo that does not read back exactly so is a miss (one warning) and is rewritten.
   Where NVRTC is loaded anyway (a compile, or a select that failed) the memo is checked
   against the library itself, and a select whose target came from a memo that differs
   chooses again. */
typedef struct bq__nvrtc_id {
  char identity[512];
  int archs[64];
  int num_archs;
  int from_memo; /* read from the memo and not yet checked against NVRTC itself */
} bq__nvrtc_id;

static pthread_mutex_t bq__id_lock = PTHREAD_MUTEX_INITIALIZER;
static bq__nvrtc_id bq__id;
static int bq__id_known;
static uint64_t bq__id_lookup_key;
static unsigned bq__id_gen; /* counts memos found wrong after use */
#define BQ__MEMO_MAGIC "baracuda_quant nvrtc memo 1\n"

BQ__FN uint64_t bq__nvrtc_lookup_key(void) {
  struct stat st;
  char buf[128];
  uint64_t h = BQ__FNV_SEED;
  const char *e = getenv("BARACUDA_QUANT_NVRTC");
  h = bq__fnv1a("N", 1, h);
  if (e) h = bq__fnv1a(e, strlen(e), h);
  e = getenv("LD_LIBRARY_PATH");
  h = bq__fnv1a("L", 1, h);
  if (e) h = bq__fnv1a(e, strlen(e), h);
  memset(&st, 0, sizeof st);
  stat("/etc/ld.so.cache", &st);
  snprintf(buf, sizeof buf, "C%lld.%lld.%lld", (long long)st.st_size, (long long)st.st_mtime,
           (long long)st.st_ino);
  return bq__fnv1a(buf, strlen(buf), h);
}

/* identity strings end with "file PATH size N mtime M": check that file still matches */
BQ__FN int bq__nvrtc_id_fresh(const char *identity) {
  const char *f = strstr(identity, " file ");
  const char *s = strstr(identity, " size ");
  if (!f || !s || s < f) return 0;
  char path[BQ__PATH_MAX];
  size_t n = (size_t)(s - (f + 6));
  if (n >= sizeof path) return 0;
  memcpy(path, f + 6, n);
  path[n] = 0;
  long long size = -1, mtime = -1;
  if (sscanf(s, " size %lld mtime %lld", &size, &mtime) != 2) return 0;
  struct stat st;
  return stat(path, &st) == 0 && (long long)st.st_size == size && (long long)st.st_mtime == mtime;
}

BQ__FN const char *bq__cache_dir_now(char *buf, size_t n); /* below */
BQ__FN int bq__write_atomic(const char *dir, const char *final_path, const void *a, size_t na,
                            const void *b, size_t nb, const void *c, size_t nc, int quiet);

BQ__FN void bq__memo_path(const char *dir, uint64_t key, char *path, size_t n) {
  snprintf(path, n, "%s/nvrtc-%016llx.id", dir, (unsigned long long)key);
}

/* Parses a memo's text (NUL-terminated, n bytes) into id; NULL if sane, else what is wrong. */
BQ__FN const char *bq__memo_parse(const char *text, size_t n, bq__nvrtc_id *id) {
  memset(id, 0, sizeof *id);
  size_t m = strlen(BQ__MEMO_MAGIC);
  if (n != strlen(text)) return "it holds a NUL byte";
  if (n < m || memcmp(text, BQ__MEMO_MAGIC, m) != 0) return "bad magic";
  const char *c = strstr(text, "checksum ");
  if (!c || c[-1] != '\n') return "no checksum";
  char want[32];
  snprintf(want, sizeof want, "checksum %016llx\n",
           (unsigned long long)bq__fnv1a(text, (size_t)(c - text), BQ__FNV_SEED));
  if (strcmp(c, want) != 0) return "checksum mismatch";
  const char *p = text + m;
  if (strncmp(p, "identity nvrtc ", 15) != 0) return "no identity line";
  const char *eol = strchr(p, '\n');
  size_t k = (size_t)(eol - (p + 9));
  if (k >= sizeof id->identity) return "identity too long";
  for (const char *q = p + 9; q < eol; q++)
    if (*q < 0x20 || *q > 0x7e) return "identity not printable";
  memcpy(id->identity, p + 9, k);
  if (!strstr(id->identity, " file ") || !strstr(id->identity, " size ") || !strstr(id->identity, " mtime "))
    return "identity incomplete";
  p = eol + 1;
  if (strncmp(p, "archs", 5) != 0) return "no archs line";
  p += 5;
  while (*p == ' ') {
    p++;
    int v = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 4) v = v * 10 + (*p++ - '0'), digits++;
    if (!digits || (*p != ' ' && *p != '\n')) return "archs not numbers";
    if (v < 20 || v > 300) return "arch out of range";
    if (id->num_archs == 64) return "too many archs";
    if (id->num_archs && v <= id->archs[id->num_archs - 1]) return "archs not ascending";
    id->archs[id->num_archs++] = v;
  }
  if (*p != '\n' || p + 1 != c) return "archs line malformed";
  if (!id->num_archs) return "no archs";
  id->from_memo = 1;
  return NULL;
}

/* 1 with id filled when the memo at path is sane and its library unchanged; else 0, with
   one warning when the file is there but not a memo that makes sense. */
BQ__FN int bq__memo_read(const char *path, const char *dir, bq__nvrtc_id *id) {
  const char *why = NULL;
  char text[2048];
  const long n = bq__read_cache_text(path, text, sizeof text, &why);
  /* the layout before this one (no magic, no checksum) is replaced without a word */
  if (n >= 0 && !strncmp(text, "identity ", 9)) return 0;
  if (n >= 0) why = bq__memo_parse(text, (size_t)n, id);
  if (why) {
    if (bq__first_warning("memo", dir))
      bq__warn("ignoring NVRTC memo %s (%s): asking NVRTC itself and rewriting it", path, why);
    return 0;
  }
  return n >= 0 && bq__nvrtc_id_fresh(id->identity);
}

BQ__FN void bq__memo_write(const char *dir, const char *path, const bq__nvrtc_id *id) {
  bq__str s;
  memset(&s, 0, sizeof s);
  bq__str_fmt(&s, "%sidentity %s\narchs", BQ__MEMO_MAGIC, id->identity);
  for (int i = 0; i < id->num_archs; i++) bq__str_fmt(&s, " %d", id->archs[i]);
  bq__str_cat(&s, "\n");
  if (!s.oom) bq__str_fmt(&s, "checksum %016llx\n", (unsigned long long)bq__fnv1a(s.p, s.n, BQ__FNV_SEED));
  /* quiet: a memo that cannot be written costs asking NVRTC again at the next start, and
     nothing else; "kernels are cached in memory only" would be false where they came from
     disk (a read-only cache warmed with another NVRTC lookup path) */
  if (!s.oom) bq__write_atomic(dir, path, s.p, s.n, NULL, 0, NULL, 0, 1);
  BQ_FREE(s.p);
}

BQ__FN void bq__id_from_nvrtc(const bq__nvrtc_api *nv, bq__nvrtc_id *id) {
  memset(id, 0, sizeof *id);
  memcpy(id->identity, nv->identity, sizeof id->identity);
  memcpy(id->archs, nv->archs, sizeof id->archs);
  id->num_archs = nv->num_archs;
}

BQ__FN bq_status bq__nvrtc_identity(bq__nvrtc_id *out) {
  uint64_t key = bq__nvrtc_lookup_key();
  pthread_mutex_lock(&bq__id_lock);
  if (bq__id_known && bq__id_lookup_key == key) {
    *out = bq__id;
    pthread_mutex_unlock(&bq__id_lock);
    return BQ_SUCCESS;
  }
  pthread_mutex_unlock(&bq__id_lock);
  bq__nvrtc_id id;
  memset(&id, 0, sizeof id);
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 64];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d) bq__memo_path(d, key, path, sizeof path);
  if (!d || !bq__memo_read(path, d, &id)) {
    const bq__nvrtc_api *nv = bq__nvrtc_get();
    if (!nv) return bq__nv_status;
    bq__id_from_nvrtc(nv, &id);
    if (d) bq__memo_write(d, path, &id);
  }
  pthread_mutex_lock(&bq__id_lock);
  bq__id = id;
  bq__id_known = 1;
  bq__id_lookup_key = key;
  pthread_mutex_unlock(&bq__id_lock);
  *out = id;
  return BQ_SUCCESS;
}

/* Checks an identity read from the memo against NVRTC itself (loading it). Where they
   differ the memo is rewritten, NVRTC's own answer replaces it in memory and bq__id_gen
   counts the change; returns 1 then. Leaves this thread's error message as it was. */
BQ__FN int bq__nvrtc_recheck(void) {
  pthread_mutex_lock(&bq__id_lock);
  int memo = bq__id_known && bq__id.from_memo;
  bq__nvrtc_id old = bq__id;
  uint64_t key = bq__id_lookup_key;
  pthread_mutex_unlock(&bq__id_lock);
  if (!memo) return 0;
  char saved[sizeof bq__err_buf];
  memcpy(saved, bq__err_buf, sizeof saved);
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  memcpy(bq__err_buf, saved, sizeof saved);
  if (!nv) return 0;
  bq__nvrtc_id id;
  bq__id_from_nvrtc(nv, &id);
  int same = !strcmp(id.identity, old.identity) && id.num_archs == old.num_archs &&
             !memcmp(id.archs, old.archs, sizeof id.archs[0] * (size_t)id.num_archs);
  pthread_mutex_lock(&bq__id_lock);
  if (bq__id_lookup_key == key && bq__id.from_memo) {
    if (same) bq__id.from_memo = 0;
    else bq__id = id, __atomic_add_fetch(&bq__id_gen, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&bq__id_lock);
  if (same) return 0;
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 64];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d) {
    bq__memo_path(d, key, path, sizeof path);
    if (bq__first_warning("memo differs", d))
      bq__warn("NVRTC memo %s disagrees with NVRTC itself (its identity or archs): rewritten", path);
    bq__memo_write(d, path, &id);
  }
  return 1;
}

BQ__FN unsigned bq__nvrtc_gen(void) { return __atomic_load_n(&bq__id_gen, __ATOMIC_ACQUIRE); }

/* ---- the disk cache ----------------------------------------------------------------- */
/* One file per kernel: <dir>/<sku>-<hash of the full key>.bqk
     offset 0  char[8]  magic "BQKCACHE"
            8  u32      format version (BQ__CACHE_FORMAT)
           12  u32      key length K
           16  u64      payload length P
           24  u64      FNV-1a 64 of the payload
           32  K bytes  the full key: format, library version, SKU, target, NVRTC identity,
                        options and the whole specialized source
         32+K  P bytes  the cubin (or NUL-terminated PTX)
   The file must be exactly 32 + K + P bytes, its key must equal the expected key byte for
   byte and the payload must match its checksum before anything reaches the driver.
   Integers are little-endian (the host's order; the cache is not shared across hosts).
   Writers write <entry>.tmp.<pid>.<n>.<hex>.<hex> and rename it over the entry. */
#define BQ__CACHE_FORMAT 1u
#define BQ__CACHE_MAGIC "BQKCACHE"
#define BQ__CACHE_HEADER 32
#define BQ__CACHE_MAX_PAYLOAD (256u << 20)
#define BQ__TEMP_MAX_AGE 600 /* seconds: older temporary files are a killed writer's */

static struct {
  uint64_t memory_hits, disk_hits, misses, compiles, corrupt, write_failures;
} bq__stats;
#define BQ__COUNT(field) __atomic_add_fetch(&bq__stats.field, 1, __ATOMIC_RELAXED)

BQ__DEF void bq_cache_get_stats(bq_cache_stats *s) {
  if (!s) return;
  s->memory_hits = __atomic_load_n(&bq__stats.memory_hits, __ATOMIC_RELAXED);
  s->disk_hits = __atomic_load_n(&bq__stats.disk_hits, __ATOMIC_RELAXED);
  s->misses = __atomic_load_n(&bq__stats.misses, __ATOMIC_RELAXED);
  s->compiles = __atomic_load_n(&bq__stats.compiles, __ATOMIC_RELAXED);
  s->corrupt = __atomic_load_n(&bq__stats.corrupt, __ATOMIC_RELAXED);
  s->write_failures = __atomic_load_n(&bq__stats.write_failures, __ATOMIC_RELAXED);
}

/* BARACUDA_QUANT_STATS=1: the counters on stderr once, at exit (registered by the first
   bq_plan_select or bq_cache_warm, so a forked child prints its own line). */
static pthread_once_t bq__stats_once = PTHREAD_ONCE_INIT;
BQ__FN void bq__stats_print(void) {
  bq_cache_stats s;
  bq_cache_get_stats(&s);
  fprintf(stderr, "baracuda_quant: cache: %llu memory hits, %llu disk hits, %llu misses, %llu compiles, "
          "%llu corrupt, %llu write failures (pid %ld)\n", (unsigned long long)s.memory_hits,
          (unsigned long long)s.disk_hits, (unsigned long long)s.misses, (unsigned long long)s.compiles,
          (unsigned long long)s.corrupt, (unsigned long long)s.write_failures, (long)getpid());
}
BQ__FN void bq__stats_register(void) {
  if (bq__env_flag("BARACUDA_QUANT_STATS")) atexit(bq__stats_print);
}

/* This user's home directory from the user database, for processes without HOME
   (services, containers); looked up once per effective user. NULL if there is none. */
BQ__FN const char *bq__passwd_home(void) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char home[BQ__PATH_MAX];
  static uid_t uid;
  static int known;
  uid_t me = geteuid();
  pthread_mutex_lock(&lock);
  if (!known || uid != me) {
    home[0] = 0;
#ifdef BQ__HAVE_GETPWUID_R
    struct passwd pw, *res = NULL;
    size_t cap = 16384;
    char *buf = (char *)BQ_MALLOC(cap);
    if (buf && getpwuid_r(me, &pw, buf, cap, &res) == 0 && res && res->pw_dir)
      bq__copy(home, sizeof home, res->pw_dir);
    BQ_FREE(buf);
#else
    struct passwd *res = getpwuid(me);
    if (res && res->pw_dir) bq__copy(home, sizeof home, res->pw_dir);
#endif
    uid = me;
    known = 1;
  }
  pthread_mutex_unlock(&lock);
  return home[0] == '/' ? home : NULL;
}

/* BARACUDA_QUANT_CACHE_DIR moves the cache, BARACUDA_QUANT_DISABLE_CACHE=1 turns it off.
   Read on every miss, so a program (or a test) may change them at any time. Without HOME
   the user database's home directory stands in; a directory that cannot be named (no
   home at all, or a path too long for its entries) means memory only, with one warning. */
BQ__FN const char *bq__cache_dir_now(char *buf, size_t n) {
  if (bq__env_flag("BARACUDA_QUANT_DISABLE_CACHE")) return NULL;
  const char *d = getenv("BARACUDA_QUANT_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  const char *base, *leaf;
  if (d && *d) base = d, leaf = "";
  else if (xdg && *xdg == '/') base = xdg, leaf = "/baracuda_quant";
  else if (home && *home) base = home, leaf = "/.cache/baracuda_quant";
  else if ((base = bq__passwd_home()) != NULL) {
    leaf = "/.cache/baracuda_quant";
    if (bq__first_warning("no HOME", base))
      bq__warn("HOME is not set: the kernel cache is in %s%s (the user database's home directory)",
               base, leaf);
  } else {
    if (bq__first_warning("no home", ""))
      bq__warn("HOME is not set and the user database has no home directory for uid %ld: "
               "kernels are cached in memory only (set BARACUDA_QUANT_CACHE_DIR)", (long)geteuid());
    return NULL;
  }
  size_t len = strlen(base) + strlen(leaf);
  if (len + 1 > n || len > BQ__DIR_MAX) {
    char what[64];
    snprintf(what, sizeof what, "%.40s", base);
    if (bq__first_warning("too long", base))
      bq__warn("the kernel cache directory path (%s...) is too long (%zu bytes, at most %d): "
               "kernels are cached in memory only", what, len, BQ__DIR_MAX);
    return NULL;
  }
  memcpy(buf, base, strlen(base) + 1);
  strcat(buf, leaf);
  return buf;
}

static __thread char bq__dir_tls[BQ__PATH_MAX];
BQ__DEF const char *bq_cache_directory(void) {
  return bq__cache_dir_now(bq__dir_tls, sizeof bq__dir_tls);
}

/* Creates dir and its missing parents, each 0700 (the cache holds code the process will
   run: others need not read it, let alone write it). 0, or -1 with errno set. */
BQ__FN int bq__mkdirs(const char *dir) {
  char tmp[BQ__PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof tmp) return errno = ENAMETOOLONG, -1;
  memcpy(tmp, dir, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
  struct stat st;
  if (stat(tmp, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) return errno = ENOTDIR, -1;
  return 0;
}

/* Whether name is one of this library's temporary files: <entry>.tmp.<digits>.<digits>.
   <hex>.<hex> with the entry a .bqk or .id file. */
BQ__FN int bq__is_temp_name(const char *name) {
  const char *t = strstr(name, ".tmp.");
  if (!t) return 0;
  while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
  size_t k = (size_t)(t - name);
  if (!((k > 4 && !memcmp(t - 4, ".bqk", 4)) || (k > 3 && !memcmp(t - 3, ".id", 3)))) return 0;
  const char *p = t + 5;
  for (int field = 0; field < 4; field++) {
    const char *start = p;
    while (field < 2 ? (*p >= '0' && *p <= '9') : (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) p++;
    if (p == start || *p != (field < 3 ? '.' : 0)) return 0;
    if (field < 3) p++;
  }
  return 1;
}

/* Removes temporary files that killed writers left: this library's names only, this
   user's regular files only, untouched for BQ__TEMP_MAX_AGE. Run after writing an entry. */
BQ__FN void bq__sweep_temps(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd) return;
  time_t now = time(NULL);
  uid_t me = geteuid();
  char path[BQ__PATH_MAX + 300];
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    if (!bq__is_temp_name(e->d_name)) continue;
    int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof path) continue;
    struct stat st;
    const char *why;
    int fd = bq__open_cache_file(path, &st, &why); /* never follows a link */
    if (fd < 0) continue;
    close(fd);
    if (st.st_uid == me && st.st_mtime + BQ__TEMP_MAX_AGE < now) unlink(path);
  }
  closedir(dd);
}

/* Write a+b+c to final_path through a unique temporary file in the same directory:
   created exclusively (never through a link), written, closed, then renamed, so readers
   see a whole file or none, and whatever stood at final_path (a FIFO, a link) is replaced,
   never written through; an empty directory there (debris: nothing the library writes) is
   removed first. 0 on success; a failure warns once per cause and directory (unless quiet),
   except where the reader already named the cause (a directory with files at final_path). */
BQ__FN int bq__write_atomic(const char *dir, const char *final_path, const void *a, size_t na,
                            const void *b, size_t nb, const void *c, size_t nc, int quiet) {
  static unsigned counter;
  char tmp[BQ__PATH_MAX + 400];
  const char *step = NULL;
  int fd = -1, err;
  if (bq__mkdirs(dir) != 0) step = "mkdir";
  if (!step) {
    unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int stack_marker;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u.%lx.%lx", final_path, (long)getpid(), k,
             (unsigned long)(uintptr_t)&stack_marker, (unsigned long)time(NULL));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) step = "create";
  }
  const void *parts[3] = {a, b, c};
  size_t sizes[3] = {na, nb, nc};
  for (int i = 0; !step && i < 3; i++) {
    const char *p = (const char *)parts[i];
    size_t left = sizes[i];
    while (!step && left) {
      ssize_t w = write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w == 0) errno = ENOSPC;
      if (w <= 0) step = "write";
      else p += w, left -= (size_t)w;
    }
  }
  if (fd >= 0 && close(fd) != 0 && !step) step = "write";
  if (!step && rename(tmp, final_path) != 0) {
    int e = errno;
    step = "rename";
    if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) {
      if (rmdir(final_path) != 0) errno = e; /* a directory with files: the reader named it */
      else if (rename(tmp, final_path) == 0) step = NULL;
    }
  }
  if (!step) return 0;
  err = errno;
  if (fd >= 0) unlink(tmp);
  const char *cause = strerror(err);
  char key[96];
  snprintf(key, sizeof key, "%s %d", step, err);
  if (!strcmp(step, "rename") && (err == EISDIR || err == ENOTEMPTY || err == EEXIST ||
                                   err == EPERM || err == EBUSY))
    return -1; /* a directory or another user's file stands there: the reader said so */
  if (quiet || !bq__first_warning(key, dir)) return -1;
  if (!strcmp(step, "mkdir"))
    bq__warn("kernel cache directory %s cannot be created (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "create") && (err == EACCES || err == EPERM || err == EROFS))
    bq__warn("kernel cache directory %s is not writable (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "create"))
    bq__warn("cannot create a file in kernel cache directory %s (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "write"))
    bq__warn("cannot write kernel cache file %s (%s): it is kept in memory only", final_path, cause);
  else
    bq__warn("cannot replace kernel cache file %s (%s): it is kept in memory only", final_path, cause);
  return -1;
}

BQ__FN void bq__put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
BQ__FN void bq__put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
BQ__FN uint32_t bq__get_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
BQ__FN uint64_t bq__get_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

BQ__FN void bq__cache_header(unsigned char h[BQ__CACHE_HEADER], size_t key_len, const void *payload,
                             size_t n) {
  memcpy(h, BQ__CACHE_MAGIC, 8);
  bq__put_u32(h + 8, BQ__CACHE_FORMAT);
  bq__put_u32(h + 12, (uint32_t)key_len);
  bq__put_u64(h + 16, (uint64_t)n);
  bq__put_u64(h + 24, bq__fnv1a(payload, n, BQ__FNV_SEED));
}

/* An entry's contents are wrong: counted, and told once per process. */
BQ__FN void bq__corrupt(const char *path, const char *why) {
  BQ__COUNT(corrupt);
  if (bq__first_warning("corrupt", ""))
    bq__warn("ignoring corrupt kernel cache entry %s (%s): recompiling", path, why);
}

/* Read and validate an entry. Returns the payload (caller frees) or NULL for a miss. */
BQ__FN void *bq__disk_read(const char *path, const char *key, size_t key_len, size_t *out_len) {
  struct stat st;
  const char *why = NULL;
  int fd = bq__open_cache_file(path, &st, &why);
  if (fd < 0) {
    if (why) { /* something that is not one of our entries stands there */
      char dir[BQ__PATH_MAX];
      bq__dir_of(path, dir, sizeof dir);
      BQ__COUNT(corrupt);
      if (bq__first_warning(why, dir))
        bq__warn("ignoring kernel cache entry %s (%s): recompiling", path, why);
    }
    return NULL;
  }
  unsigned char h[BQ__CACHE_HEADER];
  void *payload = NULL;
  char *kbuf = NULL;
  if (st.st_size < BQ__CACHE_HEADER || read(fd, h, sizeof h) != (ssize_t)sizeof h) why = "truncated header";
  else if (memcmp(h, BQ__CACHE_MAGIC, 8) != 0) why = "bad magic";
  else if (bq__get_u32(h + 8) != BQ__CACHE_FORMAT) why = "other format version";
  else if (bq__get_u32(h + 12) != key_len) why = "key length differs";
  else if (bq__get_u64(h + 16) == 0 || bq__get_u64(h + 16) > BQ__CACHE_MAX_PAYLOAD) why = "absurd payload length";
  else if ((uint64_t)st.st_size != BQ__CACHE_HEADER + key_len + bq__get_u64(h + 16)) why = "file length differs from header";
  if (!why) {
    size_t n = (size_t)bq__get_u64(h + 16);
    kbuf = (char *)BQ_MALLOC(key_len ? key_len : 1);
    payload = BQ_MALLOC(n + 1);
    if (!kbuf || !payload) why = "out of memory";
    else if (read(fd, kbuf, key_len) != (ssize_t)key_len) why = "truncated key";
    else if (memcmp(kbuf, key, key_len) != 0) why = "key differs";
    else if (read(fd, payload, n) != (ssize_t)n) why = "truncated payload";
    else if (bq__fnv1a(payload, n, BQ__FNV_SEED) != bq__get_u64(h + 24)) why = "payload checksum mismatch";
    else {
      ((char *)payload)[n] = 0;
      *out_len = n;
    }
  }
  close(fd);
  BQ_FREE(kbuf);
  if (why) {
    BQ_FREE(payload);
    bq__corrupt(path, why);
    return NULL;
  }
  return payload;
}

/* ---- compiling --------------------------------------------------------------------- */
#define BQ__MAX_KERNELS 14
typedef struct bq__kernel_src {
  char sku[256];      /* canonical identity */
  char file[256];     /* file-name-safe SKU */
  bq__target target;
  bq__str source;     /* the full specialized source */
  const char *kernels[BQ__MAX_KERNELS]; /* entry points by the family's enum; NULL: not in this module */
} bq__kernel_src;

/* NVRTC options, for the NVRTC whose identity string ("nvrtc 13.0 file ...") is given.
   NVRTC 12.4 and newer take -minimal: it leaves out the runtime API's declarations, which
   the kernels never use, and the machine code stays byte for byte the same (a third of the
   front end's time). BARACUDA_QUANT_NVRTC_OPTIONS adds one more, for experiments (it is
   part of the cache key; results under it carry no numerics guarantee). */
#define BQ__MAX_OPTIONS 6
BQ__FN void bq__options(const bq__target *t, const char *identity, char arch_opt[64],
                        const char *opts[BQ__MAX_OPTIONS], int *n) {
  char tn[32];
  bq__target_name(t, tn, sizeof tn);
  snprintf(arch_opt, 64, "--gpu-architecture=%s", tn);
  opts[0] = arch_opt;
  opts[1] = "--fmad=false";
  opts[2] = "--std=c++17";
  *n = 3;
  int major = 0, minor = 0;
  if (identity && sscanf(identity, "nvrtc %d.%d", &major, &minor) == 2 && major * 100 + minor >= 1204)
    opts[(*n)++] = "-minimal";
  const char *extra = getenv("BARACUDA_QUANT_NVRTC_OPTIONS");
  if (extra && *extra) opts[(*n)++] = extra;
}

BQ__FN bq_status bq__compile(const bq__kernel_src *k, void **out, size_t *out_len) {
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  if (!nv) return bq__nv_status;
  char arch_opt[64];
  const char *opts[BQ__MAX_OPTIONS];
  int nopt;
  bq__options(&k->target, nv->identity, arch_opt, opts, &nopt);
  bq__nvrtcProgram prog = NULL;
  bq__nvrtcResult r = nv->nvrtcCreateProgram(&prog, k->source.p, k->file, 0, NULL, NULL);
  if (r) return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: nvrtcCreateProgram failed (%d)", k->sku, r);
  BQ__COUNT(compiles);
  r = nv->nvrtcCompileProgram(prog, nopt, opts);
  if (r) {
    size_t n = 0;
    nv->nvrtcGetProgramLogSize(prog, &n);
    char *log = (char *)BQ_MALLOC(n + 1);
    if (log) { log[0] = 0; nv->nvrtcGetProgramLog(prog, log); log[n] = 0; }
    bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: NVRTC compile failed (%d): %.700s", k->sku, r,
             log ? log : "(no log)");
    BQ_FREE(log);
    nv->nvrtcDestroyProgram(&prog);
    return BQ_ERROR_COMPILE_FAILED;
  }
  size_t n = 0;
  if (k->target.ptx) r = nv->nvrtcGetPTXSize(prog, &n);
  else r = nv->nvrtcGetCUBINSize(prog, &n);
  char *buf = r ? NULL : (char *)BQ_MALLOC(n + 1);
  if (buf) r = k->target.ptx ? nv->nvrtcGetPTX(prog, buf) : nv->nvrtcGetCUBIN(prog, buf);
  nv->nvrtcDestroyProgram(&prog);
  if (!buf || r) {
    BQ_FREE(buf);
    return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: could not fetch NVRTC output (%d)", k->sku, r);
  }
  buf[n] = 0;
  *out = buf;
  *out_len = k->target.ptx ? strlen(buf) + 1 : n; /* PTX keeps its NUL */
  return BQ_SUCCESS;
}

/* The full key: everything that changes the compiled bytes. */
BQ__FN bq_status bq__full_key(const bq__kernel_src *k, bq__str *key) {
  bq__nvrtc_id id;
  bq_status st = bq__nvrtc_identity(&id);
  if (st) return st;
  char arch_opt[64], tn[32];
  const char *opts[BQ__MAX_OPTIONS];
  int nopt;
  bq__options(&k->target, id.identity, arch_opt, opts, &nopt);
  bq__target_name(&k->target, tn, sizeof tn);
  bq__str_fmt(key, "baracuda_quant kernel cache format %u\nlibrary %s\nsku %s\ntarget %s %s\n%s\noptions",
              BQ__CACHE_FORMAT, BQ_VERSION_STRING, k->sku, tn, k->target.ptx ? "ptx" : "cubin",
              id.identity);
  for (int i = 0; i < nopt; i++) bq__str_fmt(key, " %s", opts[i]);
  bq__str_fmt(key, "\nsource %zu bytes\n", k->source.n);
  bq__str_put(key, k->source.p, k->source.n);
  return key->oom ? bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory building a cache key") : BQ_SUCCESS;
}

BQ__FN void bq__entry_path(const bq__kernel_src *k, const bq__str *key, const char *dir, char *path,
                           size_t n) {
  snprintf(path, n, "%s/%s-%016llx.bqk", dir, k->file,
           (unsigned long long)bq__fnv1a(key->p, key->n, BQ__FNV_SEED));
}

/* Disk hit (flag BQ__READ), or compile, stored when flag BQ__WRITE is set. *from_disk
   says which. The payload is malloc'd. A compile first checks a memo-derived NVRTC
   identity against NVRTC itself (loaded for the compile anyway), so the key is right. */
#define BQ__READ 1
#define BQ__WRITE 2
static __thread int bq__retarget; /* set while a select may choose its target again */
BQ__FN bq_status bq__obtain(const bq__kernel_src *k, int flags, void **out, size_t *len, int *from_disk) {
  bq__str key;
  memset(&key, 0, sizeof key);
  bq_status st = bq__full_key(k, &key);
  if (st) { BQ_FREE(key.p); return st; }
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 300];
  const char *d = flags ? bq__cache_dir_now(dir, sizeof dir) : NULL;
  *from_disk = 0;
  if (d) bq__entry_path(k, &key, d, path, sizeof path);
  if (d && (flags & BQ__READ)) {
    *out = bq__disk_read(path, key.p, key.n, len);
    if (*out) {
      *from_disk = 1;
      BQ_FREE(key.p);
      return BQ_SUCCESS;
    }
  }
  if (bq__nvrtc_recheck()) { /* the identity changed: so did the key, and maybe the target */
    if (bq__retarget) {
      BQ_FREE(key.p);
      return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: the NVRTC memo was wrong", k->sku);
    }
    key.n = 0;
    if ((st = bq__full_key(k, &key))) { BQ_FREE(key.p); return st; }
    if (d) bq__entry_path(k, &key, d, path, sizeof path);
  }
  st = bq__compile(k, out, len);
  if (!st && d && (flags & BQ__WRITE)) {
    unsigned char h[BQ__CACHE_HEADER];
    bq__cache_header(h, key.n, *out, *len);
    if (bq__write_atomic(d, path, h, sizeof h, key.p, key.n, *out, *len, 0) != 0) BQ__COUNT(write_failures);
    else bq__sweep_temps(d);
  }
  BQ_FREE(key.p);
  return st;
}

BQ__FN bq_status bq__obtain_binary(const bq__kernel_src *k, int use_disk, void **out, size_t *len,
                                   int *from_disk) {
  return bq__obtain(k, use_disk ? BQ__READ | BQ__WRITE : 0, out, len, from_disk);
}

/* Stores a compiled binary the driver accepted (a miss in bq__load_module). */
BQ__FN void bq__store_binary(const bq__kernel_src *k, const void *bin, size_t len) {
  bq__str key;
  memset(&key, 0, sizeof key);
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 300];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d && !bq__full_key(k, &key)) {
    unsigned char h[BQ__CACHE_HEADER];
    bq__entry_path(k, &key, d, path, sizeof path);
    bq__cache_header(h, key.n, bin, len);
    if (bq__write_atomic(d, path, h, sizeof h, key.p, key.n, bin, len, 0) != 0) BQ__COUNT(write_failures);
    else bq__sweep_temps(d);
  }
  BQ_FREE(key.p);
}

/* ---- the in-memory cache: one loaded module per (SKU, context) ---------------------- */
/* A hit takes the lock for a lookup only. A miss inserts a "building" entry and builds
   it with the lock released, so hits on other keys never wait on a compile; another
   thread missing on the same key waits for that one build instead of compiling again. */
typedef struct bq__entry {
  struct bq__entry *next;
  uint64_t hash;
  char sku[256];
  bq__CUcontext ctx;
  int state; /* 0 building, 1 ready, 2 failed */
  int refs;  /* one for the map, one per plan or waiter */
  int in_map;
  bq_status status;
  char msg[512];
  bq__CUmodule module;
  bq__CUfunction fn[BQ__MAX_KERNELS];
} bq__entry;

static pthread_mutex_t bq__mem_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bq__mem_cond = PTHREAD_COND_INITIALIZER;
static bq__entry *bq__mem_head;

BQ__FN void bq__unlink_entry(bq__entry *e) { /* lock held */
  for (bq__entry **p = &bq__mem_head; *p; p = &(*p)->next)
    if (*p == e) { *p = e->next; break; }
  e->in_map = 0;
}

BQ__FN void bq__entry_free(bq__entry *e) { /* refs reached 0; lock not held */
  if (e->module) {
    bq__CUcontext cur = NULL;
    bq__drv.cuCtxGetCurrent(&cur);
    if (cur != e->ctx) bq__drv.cuCtxSetCurrent(e->ctx);
    bq__drv.cuModuleUnload(e->module);
    if (cur != e->ctx) bq__drv.cuCtxSetCurrent(cur);
  }
  BQ_FREE(e);
}

BQ__FN void bq__entry_release(bq__entry *e) {
  pthread_mutex_lock(&bq__mem_lock);
  int last = --e->refs == 0;
  pthread_mutex_unlock(&bq__mem_lock);
  if (last) bq__entry_free(e);
}

BQ__FN void bq__tune_forget(void); /* (the tune's choices in memory, below) */
BQ__DEF void bq_cache_clear_memory(void) {
  bq__entry *dead = NULL;
  pthread_mutex_lock(&bq__mem_lock);
  bq__entry **p = &bq__mem_head;
  while (*p) {
    bq__entry *e = *p;
    if (e->state == 0) { p = &e->next; continue; } /* being built: its builder owns it */
    *p = e->next;
    e->in_map = 0;
    if (--e->refs == 0) { e->next = dead; dead = e; }
  }
  pthread_mutex_unlock(&bq__mem_lock);
  while (dead) { bq__entry *n = dead->next; bq__entry_free(dead); dead = n; }
  bq__tune_forget();
}

/* Loads a disk entry, else a fresh compile, which is written to disk only once the driver
   has accepted it. An entry the driver refuses is recompiled and the accepted binary
   overwrites it; each message says which image was refused. */
BQ__FN bq_status bq__load_module(const bq__kernel_src *k, bq__entry *e) {
  bq__CUresult refused = 0;
  char where[BQ__PATH_MAX] = "";
  for (int attempt = 0; attempt < 2; attempt++) {
    void *bin = NULL;
    size_t len = 0;
    int from_disk = 0;
    bq_status st = bq__obtain(k, attempt == 0 ? BQ__READ : 0, &bin, &len, &from_disk);
    if (st) return st;
    bq__CUresult r = bq__drv.cuModuleLoadData(&e->module, bin);
    for (int i = 0; r == 0 && i < BQ__MAX_KERNELS; i++)
      if (k->kernels[i]) r = bq__drv.cuModuleGetFunction(&e->fn[i], e->module, k->kernels[i]);
    if (r == 0) {
      if (from_disk) BQ__COUNT(disk_hits);
      else BQ__COUNT(misses), bq__store_binary(k, bin, len);
      BQ_FREE(bin);
      if (refused) {
        if (bq__first_warning("refused", where))
          bq__warn("the driver refused the cached kernel %s in %s (CUresult %d); a fresh compile "
                   "loaded and replaced it", k->sku, where, refused);
      }
      return BQ_SUCCESS;
    }
    BQ_FREE(bin);
    if (e->module) { bq__drv.cuModuleUnload(e->module); e->module = NULL; }
    if (!from_disk) {
      char what[128];
      snprintf(what, sizeof what, "cuModuleLoadData of a freshly compiled %s image%s",
               k->target.ptx ? "PTX" : "cubin", refused ? " (the cached one was refused too)" : "");
      return bq__cu_fail(r, what);
    }
    refused = r;
    BQ__COUNT(corrupt);
    if (!bq__cache_dir_now(where, sizeof where)) bq__copy(where, sizeof where, "?");
  }
  return bq__fail(BQ_ERROR_CUDA, "%s: module load failed", k->sku);
}

/* A loaded function for the kernel whose SKU is k->sku, in context ctx. `build` fills in
   the source (only on a miss: a memory hit needs the SKU alone). */
typedef bq_status (*bq__build_fn)(const void *ctx_data, bq__kernel_src *k);

BQ__FN bq_status bq__get_entry(bq__kernel_src *k, bq__CUcontext ctx, bq__build_fn build,
                               const void *build_data, bq__entry **out) {
  uint64_t h = bq__fnv1a(k->sku, strlen(k->sku), BQ__FNV_SEED);
  pthread_mutex_lock(&bq__mem_lock);
  for (;;) {
    bq__entry *e = bq__mem_head;
    while (e && !(e->hash == h && e->ctx == ctx && !strcmp(e->sku, k->sku))) e = e->next;
    if (!e) break;
    e->refs++;
    while (e->state == 0) pthread_cond_wait(&bq__mem_cond, &bq__mem_lock);
    if (e->state == 1) {
      pthread_mutex_unlock(&bq__mem_lock);
      BQ__COUNT(memory_hits);
      *out = e;
      return BQ_SUCCESS;
    }
    /* its build failed: report that build's error to this waiter, and let a later
       select try again */
    if (e->in_map) bq__unlink_entry(e), e->refs--;
    bq_status st = e->status;
    char msg[512];
    memcpy(msg, e->msg, sizeof msg);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&bq__mem_lock);
    if (last) bq__entry_free(e);
    return bq__fail(st, "%s", msg);
  }
  bq__entry *e = (bq__entry *)calloc(1, sizeof *e);
  if (!e) { pthread_mutex_unlock(&bq__mem_lock); return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory"); }
  e->hash = h;
  bq__copy(e->sku, sizeof e->sku, k->sku);
  e->ctx = ctx;
  e->refs = 2; /* the map and this caller */
  e->in_map = 1;
  e->next = bq__mem_head;
  bq__mem_head = e;
  pthread_mutex_unlock(&bq__mem_lock);

  bq_status st = build(build_data, k);
  if (!st) st = bq__load_module(k, e);

  pthread_mutex_lock(&bq__mem_lock);
  e->status = st;
  e->state = st ? 2 : 1;
  if (st) {
    bq__copy(e->msg, sizeof e->msg, bq__err_buf);
    if (e->in_map) { bq__unlink_entry(e); e->refs--; }
  }
  pthread_cond_broadcast(&bq__mem_cond);
  int last = st && --e->refs == 0;
  pthread_mutex_unlock(&bq__mem_lock);
  if (st) {
    if (last) bq__entry_free(e);
    return st;
  }
  *out = e;
  return BQ_SUCCESS;
}

/* ---- descriptors: names, normalization ------------------------------------------------ */
/* The names kernel source reads for the public enums' values, so that a kernel says
   `#if BQ_OP == BQ_OP_QUANTIZE` and every family encodes a type alike: each prelude defines
   them all (bq__spec_names) and then its specialization in them (BQ_OP BQ_OP_QUANTIZE). */
#define BQ__SPEC_NAMES(X)                                                                          \
  X(OP, QUANTIZE, BQ_QUANTIZE) X(OP, DEQUANTIZE, BQ_DEQUANTIZE) X(OP, FAKE_QUANTIZE, BQ_FAKE_QUANTIZE)   \
  X(OP, DYNAMIC_QUANTIZE, BQ_DYNAMIC_QUANTIZE) X(OP, QUANTIZED_LINEAR, BQ_QUANTIZED_LINEAR)          \
  X(OP, SMOOTHQUANT_LINEAR, BQ_SMOOTHQUANT_LINEAR) X(OP, LINEAR_WEIGHT_SUMS, BQ_LINEAR_WEIGHT_SUMS)  \
  X(OP, RMSNORM_QUANTIZE, BQ_RMSNORM_QUANTIZE) X(OP, GATED_QUANTIZE, BQ_GATED_QUANTIZE)             \
  X(OP, HADAMARD, BQ_HADAMARD) X(OP, FP8_LINEAR, BQ_FP8_LINEAR)                                   \
  X(OP, FP8_QUANTIZED_LINEAR, BQ_FP8_QUANTIZED_LINEAR)                                             \
  X(ACT, SILU, BQ_SILU) X(ACT, GELU_TANH, BQ_GELU_TANH)                                            \
  X(DIR, FORWARD, BQ_FORWARD) X(DIR, BACKWARD, BQ_BACKWARD)                                         \
  X(GRAN, TENSOR, BQ_PER_TENSOR) X(GRAN, CHANNEL, BQ_PER_CHANNEL) X(GRAN, TOKEN, BQ_PER_TOKEN)      \
  X(GRAN, GROUP, BQ_PER_GROUP) X(GRAN, BLOCK, BQ_PER_BLOCK)                                        \
  X(TYPE, F32, BQ_F32) X(TYPE, F64, BQ_F64) X(TYPE, F16, BQ_F16) X(TYPE, BF16, BQ_BF16)            \
  X(TYPE, S8, BQ_S8) X(TYPE, U8, BQ_U8) X(TYPE, S32, BQ_S32)                                        \
  X(TYPE, E4M3, BQ_E4M3) X(TYPE, E5M2, BQ_E5M2) X(TYPE, UE8M0, BQ_UE8M0) X(TYPE, E2M1, BQ_E2M1)
typedef struct bq__spec_name { const char *kind, *name; int value; } bq__spec_name;
#define BQ__SPEC_ENTRY(kind, name, value) {#kind, "BQ_" #kind "_" #name, (int)(value)},
static const bq__spec_name bq__spec_names_list[] = {BQ__SPEC_NAMES(BQ__SPEC_ENTRY)};
#undef BQ__SPEC_ENTRY
/* "BQ_GRAN_TOKEN" for ("GRAN", BQ_PER_TOKEN) */
BQ__FN const char *bq__spec(const char *kind, int value) {
  for (size_t i = 0; i < sizeof bq__spec_names_list / sizeof bq__spec_names_list[0]; i++)
    if (bq__spec_names_list[i].value == value && !strcmp(bq__spec_names_list[i].kind, kind))
      return bq__spec_names_list[i].name;
  return "BQ_UNNAMED"; /* a normalized desc has none: the kernel then fails to compile */
}
/* every name, one #define a line */
BQ__FN void bq__spec_names(bq__str *s) {
  for (size_t i = 0; i < sizeof bq__spec_names_list / sizeof bq__spec_names_list[0]; i++)
    bq__str_fmt(s, "#define %s %d\n", bq__spec_names_list[i].name, bq__spec_names_list[i].value);
}

BQ__FN const char *bq__dtype_name(bq_dtype t) {
  switch (t) {
  case BQ_F32: return "f32";
  case BQ_F64: return "f64";
  case BQ_F16: return "f16";
  case BQ_BF16: return "bf16";
  case BQ_S8: return "s8";
  case BQ_U8: return "u8";
  case BQ_S32: return "s32";
  case BQ_E4M3: return "e4m3";
  case BQ_E5M2: return "e5m2";
  case BQ_UE8M0: return "ue8m0";
  case BQ_UE8M0X4: return "ue8m0x4";
  case BQ_E2M1: return "e2m1";
  case BQ_DTYPE_DEFAULT: return "default";
  default: return "invalid";
  }
}
BQ__FN int bq__dtype_size(bq_dtype t) {
  switch (t) {
  case BQ_F64: return 8;
  case BQ_F32: case BQ_S32: case BQ_UE8M0X4: return 4;
  case BQ_F16: case BQ_BF16: return 2;
  case BQ_S8: case BQ_U8: case BQ_E4M3: case BQ_E5M2: case BQ_UE8M0: return 1;
  default: return 0;
  }
}
/* k where n is 2^k with k from lo to hi, else -1 (block and group sizes that must be powers
   of two: a Hadamard block, bq_mx_lanes' group) */
BQ__FN int bq__pow2_log(int64_t n, int lo, int hi) {
  for (int k = lo; k <= hi; k++)
    if (((int64_t)1 << k) == n) return k;
  return -1;
}
/* a Hadamard block's log2 (BQ_HADAMARD's args.group_size, the fused rotation's
   args.rotation_block): n a power of two from 2 to 256, else -1 */
BQ__FN int bq__hadamard_log2(int64_t n) { return bq__pow2_log(n, 1, 8); }
/* The fused rotation's block (desc.rotation, args.rotation_block n): a power of two from 2 to
   256 dividing the row's cols (name: the plan's, for the message) */
BQ__FN bq_status bq__rotation_block_check(const char *name, int64_t n, int64_t cols) {
  if (bq__hadamard_log2(n) < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) must be a power of two from 2 to 256: "
                    "the fused rotation's block", name, (long long)n);
  if (cols % n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) does not divide args.cols (%lld)",
                    name, (long long)n, (long long)cols);
  return BQ_SUCCESS;
}
BQ__FN int bq__is_fp8(bq_dtype t) { return t == BQ_E4M3 || t == BQ_E5M2; }
BQ__FN int bq__is_float(bq_dtype t) { return t == BQ_F32 || t == BQ_F64 || t == BQ_F16 || t == BQ_BF16; }
/* The op's name ("quantize") and its label, as plans and SKUs name it (the gated op's by its
   activation): the family that serves the op gives both (defined after the families) */
BQ__FN const char *bq__op_name(bq_op op);
BQ__FN const char *bq__op_label(const bq_desc *d);
/* The index of a (resolved) granularity in the families' kernel lists: per tensor 0 to per
   block 4. */
BQ__FN int bq__gran_code(bq_granularity g) { return (int)g - (int)BQ_PER_TENSOR; }
BQ__FN const char *bq__gran_name(bq_granularity g) {
  switch (g) {
  case BQ_GRANULARITY_DEFAULT: return "default";
  case BQ_PER_TENSOR: return "per_tensor";
  case BQ_PER_CHANNEL: return "per_channel";
  case BQ_PER_TOKEN: return "per_token";
  case BQ_PER_GROUP: return "per_group";
  case BQ_PER_BLOCK: return "per_block";
  default: return "per_unknown";
  }
}
BQ__FN int bq__dtype_from_name(const char *s, bq_dtype *t) {
  for (int i = BQ_F32; i <= BQ_E2M1; i++)
    if (!strcmp(s, bq__dtype_name((bq_dtype)i))) { *t = (bq_dtype)i; return 1; }
  return 0;
}

/* "fake_quantize_per_channel_backward": the name errors are reported under, as the
   elementwise families give it (asym: the family names asymmetric plans so) */
BQ__FN void bq__plan_name_std(const bq_desc *d, int asym, char *buf, size_t n) {
  snprintf(buf, n, "%s_%s%s%s", bq__op_label(d), bq__gran_name(d->granularity),
           asym && d->asymmetric ? "_asymmetric" : "", d->direction == BQ_BACKWARD ? "_backward" : "");
}

/* ---- descriptor rules ----------------------------------------------------------------- */
/* The rules a descriptor's fields follow, each the same for every op that takes it: a
   family's `normalize` hook applies those of its ops, in its order (bq__normalize finds the
   family by desc.op, then hands the desc over). */

/* desc.activation: the gated op's (every other op leaves it 0) */
BQ__FN bq_status bq__rule_no_activation(const bq_desc *d) {
  if (d->activation != BQ_ACTIVATION_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.activation (%d) applies to gated quantize only",
                    bq__op_name(d->op), (int)d->activation);
  return BQ_SUCCESS;
}
/* desc.pow2_scales: dynamic quantize's */
BQ__FN bq_status bq__rule_no_pow2(const bq_desc *d) {
  if (d->pow2_scales != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) applies to dynamic quantize only",
                    bq__op_name(d->op), d->pow2_scales);
  return BQ_SUCCESS;
}
/* desc.granularity and desc.scale_layout name values of their enums; mn: the op offers
   MN-major scales */
BQ__FN bq_status bq__rule_enums(const bq_desc *d, int mn) {
  if (d->granularity < BQ_GRANULARITY_DEFAULT || d->granularity > BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) is not a bq_granularity",
                    bq__op_name(d->op), (int)d->granularity);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->scale_layout != BQ_SCALES_MN_MAJOR)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR or "
                    "BQ_SCALES_MN_MAJOR (BQ_SCALES_BLOCKED: a microscaling format's)", bq__op_name(d->op),
                    (int)d->scale_layout);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && !mn)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.scale_layout (MN-major) is offered for quantize, dequantize, "
                    "fake quantize and dynamic quantize only", bq__op_name(d->op));
  return BQ_SUCCESS;
}

/* Test hook: nonzero makes FP8 kernels convert with the software form (common.cuh's
   bq_f8_soft) on every GPU, under their own SKUs (".soft"), so that a test can check it
   against the hardware instruction. Set it before selecting plans, from one thread. */
static int bq__fp8_soft;

/* The rules for FP8 storage (desc.int_type BQ_E4M3 or BQ_E5M2), where the integer types'
   q-range rules stand; offered: the op takes FP8 storage (quantize, dequantize and fake
   quantize in either direction, dynamic quantize and the fused producers). Symmetric, with
   no q-range (qmin and qmax stay 0). */
BQ__FN bq_status bq__rule_fp8(const bq_desc *d, const char *name, int offered) {
  const char *t = bq__dtype_name(d->int_type);
  if (!offered)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.int_type (%s) is not offered for %s: FP8 storage serves "
                    "quantize, dequantize, fake quantize, dynamic quantize and the fused producers", name, t,
                    bq__op_name(d->op));
  if (d->qmin != 0 || d->qmax != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be 0: %s has no q-range "
                    "(it saturates to its largest finite value)", name, d->qmin, d->qmax, t);
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: %s storage is symmetric (no "
                    "zero points)", name, d->asymmetric, t);
  return BQ_SUCCESS;
}

/* desc.direction, desc.float_type, desc.int_type (default s8) with its q-range (default
   the type's), desc.device; fp8: the op offers FP8 storage */
BQ__FN bq_status bq__rule_types(bq_desc *d, const char *name, int fp8) {
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name,
                    (int)d->direction);
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16", name,
                    (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_S8;
  if (bq__is_fp8(d->int_type)) {
    bq_status st = bq__rule_fp8(d, name, fp8);
    if (st) return st;
  } else {
    if (d->int_type != BQ_S8 && d->int_type != BQ_U8)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_S8, BQ_U8, BQ_E4M3 or "
                      "BQ_E5M2", name, (int)d->int_type, bq__dtype_name(d->int_type));
    int lo = d->int_type == BQ_S8 ? -128 : 0, hi = d->int_type == BQ_S8 ? 127 : 255;
    if (d->qmin == 0 && d->qmax == 0) { d->qmin = lo; d->qmax = hi; }
    if (d->qmin < lo || d->qmin > hi)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) is outside %s [%d, %d]", name,
                      d->qmin, bq__dtype_name(d->int_type), lo, hi);
    if (d->qmax < lo || d->qmax > hi)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) is outside %s [%d, %d]", name,
                      d->qmax, bq__dtype_name(d->int_type), lo, hi);
    if (d->qmax < d->qmin)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) < desc.qmin (%d)", name, d->qmax,
                      d->qmin);
  }
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}

/* desc.out_type: the linear layers' (every other op leaves it 0); then desc.scale_type's
   default, BQ_F32 */
BQ__FN bq_status bq__rule_no_out_type(bq_desc *d, const char *name) {
  if (d->out_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) applies to linear layers only", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  return BQ_SUCCESS;
}

/* The scale-type, layout and power-of-two rules of the elementwise ops (d->scale_type
   defaulted already): scale arrays are BQ_F32, the float type or BQ_UE8M0 (device arrays
   only: a static per-tensor scale is a host double), and per group BQ_UE8M0X4 (no zero
   points); per-group scales may be MN-major; dynamic (the op computes its scales) may round
   its scales up to powers of two (pow2_scales, implied by UE8M0). */
BQ__FN bq_status bq__scale_rules(bq_desc *d, const bq_desc *in, const char *name, int dynamic) {
  if (d->scale_type != d->float_type && d->scale_type != BQ_F32 && d->scale_type != BQ_UE8M0 &&
      d->scale_type != BQ_UE8M0X4)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be the float type (%s), BQ_F32, "
                    "BQ_UE8M0 or BQ_UE8M0X4", name, (int)in->scale_type, bq__dtype_name(d->scale_type),
                    bq__dtype_name(d->float_type));
  if (d->scale_type == BQ_UE8M0 && d->granularity == BQ_PER_TENSOR && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (ue8m0) names a device array's type: a static "
                    "per-tensor scale is the host double args.scale", name);
  if (d->scale_type == BQ_UE8M0X4 && d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (ue8m0x4) packs per-group scales: desc.granularity "
                    "must be BQ_PER_GROUP", name);
  if (d->scale_type == BQ_UE8M0X4 && dynamic && d->asymmetric == 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (1) needs zero points, which packed scales "
                    "(desc.scale_type ue8m0x4) do not carry", name);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d, MN-major) applies to per-group scales only",
                    name, (int)d->scale_layout);
  if (d->pow2_scales != 0 && d->pow2_scales != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) must be 0 or 1", name, d->pow2_scales);
  if (d->pow2_scales && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (1) applies to dynamic quantize only", name);
  if (dynamic && (d->scale_type == BQ_UE8M0 || d->scale_type == BQ_UE8M0X4)) d->pow2_scales = 1;
  return BQ_SUCCESS;
}

/* desc.asymmetric is 0 or 1; the q-range leaves a scale to compute: qmax > 0 for symmetric
   (FP8 has no q-range) and qmax > qmin for asymmetric, `what` naming the scales' kind */
BQ__FN bq_status bq__rule_asymmetric(const bq_desc *d, const char *name) {
  if (d->asymmetric != 0 && d->asymmetric != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0 or 1", name, d->asymmetric);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__rule_qrange(const bq_desc *d, const char *name, const char *what) {
  if (!d->asymmetric && d->qmax <= 0 && !bq__is_fp8(d->int_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) must be > 0 for symmetric %s", name, d->qmax, what);
  if (d->asymmetric && d->qmax == d->qmin)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) must be > desc.qmin (%d) for asymmetric %s", name,
                    d->qmax, d->qmin, what);
  return BQ_SUCCESS;
}

/* ---- the elementwise families' SKU and specialization ------------------------------- */
/* The SKU of quantize, dequantize, fake quantize, dynamic quantize and the fused producers:
   op, direction, granularity, float and int types, q-range (FP8 has none; its test hook's
   software conversion is named), scale layout and type, variant (the family's: elements per
   chunk; symmetric or asymmetric) and target */
BQ__FN void bq__sku_std(const bq_desc *d, const char *variant, const char *tn, char *buf, size_t n) {
  char range[40] = "";
  if (!bq__is_fp8(d->int_type)) snprintf(range, sizeof range, ".q[%d,%d]", d->qmin, d->qmax);
  else if (bq__fp8_soft) snprintf(range, sizeof range, ".soft");
  snprintf(buf, n, "%s.%s.%s.%s.%s%s.scale_%s%s.%s.%s", bq__op_label(d), d->direction == BQ_BACKWARD ? "bwd" : "fwd",
           bq__gran_name(d->granularity), bq__dtype_name(d->float_type), bq__dtype_name(d->int_type), range,
           d->scale_layout == BQ_SCALES_MN_MAJOR ? "mn_" : "", bq__dtype_name(d->scale_type), variant, tn);
}
/* Their kernels' types: T, I, the q-range and the scales' type and layout (common.cuh's
   BQ_SL; packed UE8M0 scales are UE8M0 bytes to the kernels, which address them by layout) */
BQ__FN void bq__prelude_types(const bq_desc *d, bq__str *s) {
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (%d)\n#define BQ_QMAX (%d)\n"
              "#define BQ_ST %s\n#define BQ_SL %d\n%s", bq__spec("TYPE", d->float_type),
              bq__spec("TYPE", d->int_type), d->qmin, d->qmax,
              bq__spec("TYPE", d->scale_type == BQ_UE8M0X4 ? BQ_UE8M0 : d->scale_type),
              d->scale_type == BQ_UE8M0X4 ? (d->scale_layout == BQ_SCALES_MN_MAJOR ? 2 : 3)
                                          : d->scale_layout == BQ_SCALES_MN_MAJOR ? 1 : 0,
              bq__is_fp8(d->int_type) && bq__fp8_soft ? "#define BQ_FP8_SOFT 1\n" : "");
}

/* ---- plans and families ------------------------------------------------------------- */
/* A family is one kernel source and its host side, serving one op or a few: the affine ops
   (quantize, dequantize, fake quantize), dynamic quantize, the fused producers, the linear
   layers, their weight sums. The core asks the family a desc's op belongs to (bq__family_for)
   and never which op it holds: each op's rules, names, kernels and launches are its
   family's hooks. */
struct bq_plan;
enum { BQ__OWNS_MASK = 1, BQ__OWNS_AMAX_BOUND = 2, BQ__OWNS_TENSOR_SCALE = 4, BQ__OWNS_SEED = 8, BQ__OWNS_OFFSET = 16, BQ__OWNS_ROTATION = 32 }; /* bq__family.owns */
#define BQ__FAMILY_OPS 4
typedef struct bq__family {
  /* -- its ops and their descriptors -- */
  bq_op ops[BQ__FAMILY_OPS];            /* the ops it serves (0 ends the list) */
  const char *op_names[BQ__FAMILY_OPS]; /* their names, in plan names, SKUs and messages */
  const char *group;       /* its name to tools (warm --family, bq__all_descs) */
  /* *d, a copy of in whose op is the family's: its defaults filled in and the plan's name
     written, or a field refused by name */
  bq_status (*normalize)(const bq_desc *in, bq_desc *d, char *name, size_t name_size);
  const char *(*label)(const bq_desc *d); /* the op in plan names and SKUs (NULL: its name) */
  /* the SKU of a normalized desc for target t, named tn (bq__sku_of adds a module's entry) */
  void (*sku)(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n);
  /* the SKU's tokens (split at '.', the target's left off) back to a desc for bq__normalize,
     1 where they are this family's form; NULL: the elementwise form (bq__desc_from_sku) */
  int (*from_sku)(char *const *tok, int n, bq_desc *d);
  /* the tools' enumeration (bq__all_descs): how many variants op has beyond the fields every
     desc has, outside and inside them, and one applied to a desc (NULL: none) */
  void (*axes)(bq_op op, int *outer, int *inner);
  void (*vary)(bq_desc *in, int outer, int inner);
  unsigned (*owns)(const bq_desc *d);         /* the op-owned bq_args fields d takes (BQ__OWNS_*) */
  const char *(*guarantee)(const bq_desc *d); /* bq_plan_precision_guarantee (NULL: the elementwise one) */
  /* -- its kernels -- */
  const char *src_name;     /* kernels_src/ file */
  const char *(*src)(void); /* its embedded text (the kernel text closes the implementation) */
  /* the source's specialization after the SKU line and the names (bq__prelude) */
  void (*prelude)(const bq_desc *d, const bq__target *t, bq__str *s);
  int (*vec)(const bq_desc *d);
  int wgmma; /* on sm_90, an sm_90a module: the warpgroup-MMA tiles */
  /* the shape rules alone (what the workspace size depends on): the first thing `check`
     does, so bq_plan_workspace_size refuses a shape with check's very status and message */
  bq_status (*shape)(const struct bq_plan *p, const bq_args *a);
  bq_status (*check)(const struct bq_plan *p, const bq_args *a);
  size_t (*workspace)(const struct bq_plan *p, const bq_args *a);
  bq_status (*run)(const struct bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream);
  /* entry point e has code for d on t (the kernel source leaves an empty one where it does
     not); NULL: every entry point kernels[] names does */
  int (*has)(const bq_desc *d, const bq__target *t, int e);
  /* what entry point e needs once its module loads, before a run may take it (NULL: nothing) */
  bq_status (*setup)(struct bq_plan *p, int e, bq__CUfunction fn);
  const char *kernels[5][BQ__MAX_KERNELS]; /* by granularity (bq__gran_code), the entry points by the
                                              family's enum (NULL where the source has none) */
  /* -- its plans -- */
  /* 1 with *q filled where d's plans hold a plan of q, another family's kernel (select,
     warm and the enumeration take it along) */
  int (*sub)(const bq_desc *d, bq_desc *q);
  /* select's set-up of the plan in its device's context, before modules load (NULL: none) */
  bq_status (*plan_setup)(struct bq_plan *p);
  /* the fields of the typical problem (bq__typical_args) only d's ops read; ptr: a pointer
     to give one (NULL: none) */
  void (*typical)(const bq_desc *d, bq_args *a, void *ptr);
  int min_sm; /* the oldest compute capability its kernels run on (0: the library's, BQ__MIN_SM) */
} bq__family;

/* A plan is immutable but for its modules: each entry point's is loaded the first time a
   run takes it (select loads the ones a typical problem takes, bq__plan_prime), published
   with an atomic store once its set-up (the family's `setup`: attributes, occupancy) is
   done, so a run that sees a module also sees its set-up. */
struct bq_plan {
  bq_desc desc; /* normalized */
  char name[96];
  char sku[512];
  struct bq_plan *sub;  /* the plan of another family's kernel it holds (bq__family.sub) */
  struct bq_plan *rows; /* a plan its family's run selects on first use and keeps, published
                           once with an atomic store (per channel's per-token plan) */
  const bq__family *fam;
  bq__target target; /* its modules' target (module 0: bq__plan_load names each one's) */
  const char *kernels[BQ__MAX_KERNELS]; /* its entry points with code (bq__kernels_of) */
  bq__entry *mod[BQ__MAX_KERNELS];      /* each entry point's module, once loaded */
  pthread_mutex_t lock;                 /* held while a module is published */
  bq__CUcontext ctx; /* the context its modules live in: run needs it current, or none */
  int device;        /* ctx's device ordinal */
  int num_sms;
  int threads_sm;   /* the threads an SM holds (0: not reported; the launch rules take 2048) */
  int64_t l2_bytes; /* the device's L2 (0: not reported) */
  char gpu[160];    /* the device for the tune's keys: "<name> sms <n> mem <kHz>" */
  int vec;
  union { /* the family's own state, its plan_setup's and setup's */
    struct {
      int wgmma; /* the module is sm_90a and has the warpgroup-MMA tiles */
      int pdl;   /* QuantizedLinear: weight streaming starts while the activations' kernel runs */
    } linear;
    struct {
      int64_t smem_max;    /* the dynamic shared memory a block may opt into, less a margin */
      int64_t staged_smem; /* what bq_fused_staged was given (0 where the driver refused) */
      int tab_blocks[BQ__MAX_KERNELS]; /* with the activation's table: each entry's blocks an SM
                                          (found when it loads: the table's size is fixed) */
    } fused;
    struct {
      int64_t smem_max;    /* with the rotation: the dynamic shared memory a block may opt into */
      int64_t staged_smem; /* what bq_dynamic_staged was given (0: the default 48 KiB) */
    } dynamic;
  };
};

#define BQ__MAX_ELEMS ((int64_t)1 << 56)
#define BQ__MAX_CHANNELS ((int64_t)1 << 39) /* per channel: bq_affine_cols' grid x (256 lanes of 2 or more columns a block) fits */

BQ__FN bq_status bq__check_ptr(const bq_plan *p, const char *field, const void *ptr, int elem) {
  if (!ptr) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", p->name, field);
  if ((uintptr_t)ptr % (uintptr_t)elem)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: %s (%p) is not aligned to its element size (%d bytes)",
                    p->name, field, ptr, elem);
  return BQ_SUCCESS;
}

/* One call's problem as [rows, cols] with row strides, after the shape rules. */
typedef struct bq__view {
  int64_t rows, cols, xs, ys, numel;
  int64_t group, gmod, grs, ngroups;
} bq__view;

/* Per group, [rows, cols]: args.group_size divides cols; per block, B = args.group_size
   tiles it, edge tiles partial. The scales' leading dimension (group_row_stride; 0: the
   layout's own) holds a row of groups or blocks (row-major) or the rows (MN-major), and the
   array fits. *grs is the kernels' form of it: bytes for BQ_UE8M0X4 (common.cuh's bq_pbase). */
BQ__FN bq_status bq__group_shape(const char *n, const bq_desc *d, const bq_args *a, int64_t rows, int64_t *group,
                                 int64_t *ngroups, int64_t *grs) {
  const int block = d->granularity == BQ_PER_BLOCK, mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  const int x4 = d->scale_type == BQ_UE8M0X4;
  if (a->group_size < 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be >= 1", n, (long long)a->group_size);
  if (!block && a->cols % a->group_size)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) does not divide args.cols (%lld)", n,
                    (long long)a->group_size, (long long)a->cols);
  if (a->group_row_stride < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is negative", n,
                    (long long)a->group_row_stride);
  const int64_t B = a->group_size, ng = block ? a->cols / B + (a->cols % B != 0) : a->cols / B;
  const int64_t srows = block ? rows / B + (rows % B != 0) : rows; /* rows of scales */
  /* the leading dimension's least value and default, and how many of it the array spans */
  int64_t need, def, count;
  if (mn) need = srows, def = (srows + 3) / 4 * 4, count = x4 ? (ng + 3) / 4 : ng;
  else need = def = x4 ? (ng + 3) / 4 : ng, count = srows;
  const int64_t rs = a->group_row_stride ? a->group_row_stride : def;
  if (rs < need)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is smaller than %s (%lld)", n,
                    (long long)a->group_row_stride,
                    mn ? "args.rows" : block ? "cols / group_size rounded up" : x4 ? "the row's int32 words of packed "
                    "scales" : "cols / group_size", (long long)need);
  /* (packed: the kernels index bytes; bounded with no rows too, where it still scales) */
  if (rs > BQ__MAX_ELEMS / (x4 ? 4 : 1) / (count ? count : 1))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is too large", n, (long long)rs);
  *group = B;
  *ngroups = ng;
  *grs = x4 ? 4 * rs : rs;
  return BQ_SUCCESS;
}

BQ__FN bq_status bq__view_of(const bq_plan *p, const bq_args *a, bq__view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  switch (d->granularity) {
  case BQ_GRANULARITY_DEFAULT: /* resolved by normalization */
  case BQ_PER_TENSOR:
    if (a->numel < 0 || a->numel > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.numel (%lld) is negative or too large", n,
                      (long long)a->numel);
    v->rows = 1; v->cols = v->xs = v->ys = v->numel = a->numel;
    break;
  case BQ_PER_CHANNEL: {
    if (a->rank < 1 || a->rank > BQ_MAX_RANK)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rank (%d) must be in [1, %d]", n, a->rank, BQ_MAX_RANK);
    int axis = a->axis < 0 ? a->axis + a->rank : a->axis;
    if (axis < 0 || axis >= a->rank)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.axis (%d) is out of range for rank %d", n, a->axis, a->rank);
    int64_t total = 1, inner = 1;
    for (int i = 0; i < a->rank; i++) {
      if (a->shape[i] < 0)
        return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) is negative", n, i, (long long)a->shape[i]);
      if (a->shape[i] && total > BQ__MAX_ELEMS / a->shape[i])
        return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) makes the tensor too large", n, i,
                        (long long)a->shape[i]);
      total *= a->shape[i];
    }
    /* bq_affine_cols (the axis innermost) launches a block per 256 lanes of columns in a
       grid x of at most 2^31 - 1 blocks, with no stride: the channel count is bounded so
       that every non-empty per-channel call fits it, whichever kernel takes it */
    if (total && a->shape[axis] > BQ__MAX_CHANNELS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) has more than 2^39 channels (args.axis %d)",
                      n, axis, (long long)a->shape[axis], a->axis);
    for (int i = axis + 1; i < a->rank && total; i++) inner *= a->shape[i]; /* <= total */
    v->rows = 1; v->cols = v->xs = v->ys = v->numel = total;
    v->group = inner ? inner : 1;
    v->gmod = a->shape[axis] ? a->shape[axis] : 1;
    break;
  }
  case BQ_PER_TOKEN:
  case BQ_PER_GROUP:
  case BQ_PER_BLOCK: {
    if (a->rows < 0 || a->rows > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) is negative or too large", n, (long long)a->rows);
    if (a->cols < 0 || a->cols > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (%lld) is negative or too large", n, (long long)a->cols);
    v->rows = a->rows; v->cols = a->cols;
    v->xs = a->x_row_stride ? a->x_row_stride : a->cols;
    v->ys = a->y_row_stride ? a->y_row_stride : a->cols;
    if (v->xs < a->cols)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than args.cols (%lld)", n,
                      (long long)a->x_row_stride, (long long)a->cols);
    if (v->ys < a->cols)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.cols (%lld)", n,
                      (long long)a->y_row_stride, (long long)a->cols);
    if (v->rows && (v->xs > BQ__MAX_ELEMS / v->rows || v->ys > BQ__MAX_ELEMS / v->rows))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) times the row stride is too large", n,
                      (long long)a->rows);
    v->numel = v->rows * v->cols;
    if (d->granularity == BQ_PER_GROUP || d->granularity == BQ_PER_BLOCK) {
      bq_status st = bq__group_shape(n, d, a, v->rows, &v->group, &v->ngroups, &v->grs);
      if (st) return st;
    }
    break;
  }
  }
  return BQ_SUCCESS;
}

#define BQ__BLOCKS_MAX_GRID (((int64_t)1 << 24) - 1)
BQ__FN int64_t bq__grid(int64_t work, int teams) {
  int64_t blocks = (work + teams - 1) / teams;
  return blocks > 0x7fffffff ? 0x7fffffff : blocks;
}

/* Validation bounds every call so that its grid fits the launch limits; a grid that does
   not would run only part of the work, so it fails here rather than launch. */
BQ__FN int bq__grid_invalid(const bq_plan *p, int64_t blocks, int64_t blocks_y) {
  if (blocks >= 1 && blocks <= 0x7fffffff && blocks_y >= 1 && blocks_y <= 65535) return 0;
  bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: grid (%lld, %lld) exceeds the launch limits", p->name, (long long)blocks,
           (long long)blocks_y);
  return 1;
}

/* ---- a plan's modules: one an entry point, loaded on first use ------------------------------- */
BQ__FN void bq__sku_of(const bq_desc *d, const bq__target *t, bq__kernel_src *k);
BQ__FN bq_status bq__build_source(const void *data, bq__kernel_src *k);

/* Loads entry point e's module into the plan (the memory cache, the disk cache or NVRTC, as
   select does), runs the family's set-up for it and publishes it. A run that needs it
   first loads it here: under stream capture the thread's capture mode is relaxed for the
   load, which enqueues nothing. Two threads may load one module at once; the memory cache
   compiles it once, and one of them publishes it. */
BQ__FN bq_status bq__plan_load(bq_plan *p, int e, bq__entry **out) {
  if (e < 0 || e >= BQ__MAX_KERNELS || !p->kernels[e])
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: its kernels have no entry point %d", p->name, e);
  if (!p->ctx) return bq__fail(BQ_ERROR_NO_DEVICE, "%s: the plan has no device to load %s on", p->name, p->kernels[e]);
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__target t = p->target;
  t.module = e + 1;
  bq__sku_of(&p->desc, &t, &k);
  int mode = 2; /* CU_STREAM_CAPTURE_MODE_RELAXED */
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  bq__entry *got = NULL;
  bq_status st = bq__get_entry(&k, p->ctx, bq__build_source, &p->desc, &got);
  BQ_FREE(k.source.p);
  if (st) {
    char msg[sizeof bq__err_buf];
    memcpy(msg, bq__err_buf, sizeof msg);
    bq__fail(st, "%s: %s", p->name, msg);
  }
  pthread_mutex_lock(&p->lock);
  bq__entry *cur = p->mod[e];
  if (!st && !cur) {
    if (p->fam->setup) st = p->fam->setup(p, e, got->fn[e]);
    if (!st) {
      __atomic_store_n(&p->mod[e], got, __ATOMIC_RELEASE);
      cur = got;
      got = NULL;
    }
  }
  pthread_mutex_unlock(&p->lock);
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  if (got) bq__entry_release(got);
  if (st) return st;
  *out = cur;
  return BQ_SUCCESS;
}

/* Entry point e's function, its module loaded first where no run has taken it yet */
BQ__FN bq_status bq__plan_fn(const bq_plan *cp, int e, bq__CUfunction *fn) {
  bq_plan *p = (bq_plan *)cp; /* (the module table is filled in once per entry point) */
  bq__entry *m = e >= 0 && e < BQ__MAX_KERNELS ? __atomic_load_n(&p->mod[e], __ATOMIC_ACQUIRE) : NULL;
  if (!m) {
    bq_status st = bq__plan_load(p, e, &m);
    if (st) return st;
  }
  *fn = m->fn[e];
  return BQ_SUCCESS;
}

/* Select's dry run (bq__plan_prime): launches record which entry points the plan's own runs
   take, and launch nothing */
static __thread struct { const bq_plan *plan; unsigned taken; } bq__dry;

/* What launching entry point `which` over a [blocks, blocks_y] grid needs first: the grid
   within the launch limits, then in a dry run the entry point recorded (*dry set: launch
   nothing), else its function, its module loaded where no run has taken it yet */
BQ__FN bq_status bq__launch_prep(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, bq__CUfunction *f,
                                 int *dry) {
  *f = NULL;
  *dry = bq__dry.plan != NULL;
  if (bq__grid_invalid(p, blocks, blocks_y)) return BQ_ERROR_NOT_SUPPORTED;
  if (!*dry) return bq__plan_fn(p, which, f);
  if (bq__dry.plan == p) bq__dry.taken |= 1u << which;
  return BQ_SUCCESS;
}

/* Kernel `which` of the plan over a [blocks, blocks_y] grid, with `smem` bytes of dynamic
   shared memory; params is the kernel's one parameter block. */
BQ__FN bq_status bq__launch(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, int threads, unsigned smem,
                            void *params, void *stream) {
  void *args[1] = {params};
  bq__CUfunction f;
  int dry;
  bq_status st = bq__launch_prep(p, which, blocks, blocks_y, &f, &dry);
  if (st || dry) return st;
  bq__CUresult r = bq__drv.cuLaunchKernel(f, (unsigned)blocks, (unsigned)blocks_y, 1, (unsigned)threads, 1, 1, smem,
                                          (bq__CUstream)stream, args, NULL);
  return r ? bq__cu_fail(r, "cuLaunchKernel") : BQ_SUCCESS;
}
/* The same with programmatic stream serialization: the grid may start before the stream's
   previous kernel ends, once that kernel's blocks have all run bq_launch_dependents, and it
   must bq_wait_prior_grid before it reads what that kernel writes. */
BQ__FN bq_status bq__launch_overlapped(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, int threads,
                                       unsigned smem, void *params, void *stream) {
  void *args[1] = {params};
  bq__CUfunction f;
  int dry;
  bq_status st = bq__launch_prep(p, which, blocks, blocks_y, &f, &dry);
  if (st || dry) return st;
  bq__CUlaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = BQ__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
  at.value.i = 1;
  bq__CUlaunchConfig c = {(unsigned)blocks, (unsigned)blocks_y, 1, (unsigned)threads, 1, 1, smem, (bq__CUstream)stream,
                          &at, 1};
  bq__CUresult r = bq__drv.cuLaunchKernelEx(&c, f, args, NULL);
  return r ? bq__cu_fail(r, "cuLaunchKernelEx (programmatic stream serialization)") : BQ_SUCCESS;
}

/* The workspace a run was given against the `need` bytes bq_plan_workspace_size reports. */
BQ__FN bq_status bq__check_workspace(const bq_plan *p, const void *ws, size_t ws_bytes, size_t need) {
  if (!ws || ws_bytes < need)
    return bq__fail(BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s: workspace (%zu bytes at %p) is smaller than "
                    "bq_plan_workspace_size (%zu bytes)", p->name, ws_bytes, ws, need);
  if ((uintptr_t)ws % 16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: workspace (%p) is not 16-byte aligned", p->name, ws);
  return BQ_SUCCESS;
}

/* ---- the first-use tune ------------------------------------------------------------------
   Where the rules cannot tell which of a family's kernels is faster on this GPU, and every
   one of them computes the same bits (the GPU suites force each and compare), the family
   asks bq__tune_choice. The first run of a plan on a shape class times each candidate once,
   on scratch buffers the library allocates (the caller's scales and zero points are read,
   never written; the caller's input and output are not touched), on a stream of its own
   after the caller's stream has drained, and keeps the winner in memory and on disk beside
   the kernels (tune-<hash>.txt), keyed by the GPU (name, SMs, memory clock), the driver,
   the plan's SKU, the decision and the class. A run under stream capture, a dry run, a
   scratch allocation that fails, or BARACUDA_QUANT_TUNE=0 takes the rule's candidate (the
   first two without remembering anything, so a later plain run may still tune). The timing
   takes a warm-up launch and three alternating launches of each candidate, which for the
   DRAM-sized tensors tuned is a few milliseconds; a candidate's module is compiled (or read
   from the cache) first. A candidate replaces the rule's only when it is at least 2% faster,
   so that noise does not flip a choice between runs.
   The file, one entry each, checked in full before use (anything else is re-tuned and
   rewritten, with one warning):
     baracuda_quant tune 1
     key <gpu name> sms <n> mem <kHz> driver <version> sku <SKU> tune <decision> class <n>
     choice <k> of <n>
     us <each candidate's best time, microseconds>
     checksum <FNV-1a 64 of every byte above, 16 hex digits> */
#define BQ__TUNE_MAGIC "baracuda_quant tune 1\n"
#define BQ__TUNE_MAX 4 /* candidates a decision may have */
#define BQ__TUNE_MAX_SCRATCH ((size_t)1 << 30)
typedef struct bq__tuned {
  struct bq__tuned *next;
  uint64_t hash;
  int choice;
  char key[];
} bq__tuned;
static pthread_mutex_t bq__tune_lock = PTHREAD_MUTEX_INITIALIZER;
static bq__tuned *bq__tune_head;
static __thread int bq__tune_forced = -1; /* the candidate a timing launch takes */
static uint64_t bq__tune_count;           /* tunes timed by this process (for the tests) */

/* A decision: its name (part of the key), the shape class, the candidates and the rule's,
   and the scratch a timing needs: bytes[i] for buffer i, and point() making a copy of the
   caller's arguments that reads and writes those buffers instead. */
typedef struct bq__tune_req {
  const char *what;
  int cls, n, rule;
  size_t bytes[2];
  void (*point)(bq_args *s, const bq_args *a, void *const buf[2]);
} bq__tune_req;

BQ__FN int bq__tune_enabled(void) { return bq__env_bool("BARACUDA_QUANT_TUNE", 1); }

BQ__FN void bq__tune_key(const bq_plan *p, const bq__tune_req *r, bq__str *key) {
  bq__str_fmt(key, "%s driver %d sku %s tune %s class %d", p->gpu, bq__drv.version, p->sku, r->what, r->cls);
}

BQ__FN void bq__tune_path(const char *dir, uint64_t hash, char *path, size_t n) {
  snprintf(path, n, "%s/tune-%016llx.txt", dir, (unsigned long long)hash);
}

/* Parses an entry's text (NUL-terminated, n bytes): NULL when sane, with its key (up to
   key_cap bytes), its choice and its candidates' count; else what is wrong. */
BQ__FN const char *bq__tune_parse(const char *text, size_t n, char *key, size_t key_cap, int *choice, int *of) {
  const size_t m = strlen(BQ__TUNE_MAGIC);
  if (n != strlen(text)) return "it holds a NUL byte";
  if (n < m || memcmp(text, BQ__TUNE_MAGIC, m) != 0) return "bad magic";
  const char *c = strstr(text, "\nchecksum ");
  if (!c) return "no checksum";
  c++;
  char want[40];
  snprintf(want, sizeof want, "checksum %016llx\n", (unsigned long long)bq__fnv1a(text, (size_t)(c - text), BQ__FNV_SEED));
  if (strcmp(c, want) != 0) return "checksum mismatch";
  const char *p = text + m, *eol = strchr(p, '\n');
  if (strncmp(p, "key ", 4) != 0 || !eol || eol > c) return "no key line";
  if ((size_t)(eol - p - 4) >= key_cap) return "key too long";
  for (const char *q = p + 4; q < eol; q++)
    if (*q < 0x20 || *q > 0x7e) return "key not printable";
  memcpy(key, p + 4, (size_t)(eol - p - 4));
  key[eol - p - 4] = 0;
  p = eol + 1;
  int k = -1, cands = -1, used = 0;
  if (sscanf(p, "choice %d of %d\n%n", &k, &cands, &used) != 2 || used == 0) return "no choice line";
  if (cands < 2 || cands > BQ__TUNE_MAX || k < 0 || k >= cands) return "choice out of range";
  p += used;
  eol = strchr(p, '\n');
  if (strncmp(p, "us", 2) != 0 || !eol) return "no times line";
  if (eol + 1 != c) return "times line malformed";
  for (const char *q = p + 2; q < eol; q++)
    if (!(*q == ' ' || *q == '.' || (*q >= '0' && *q <= '9'))) return "times not numbers";
  *choice = k;
  *of = cands;
  return NULL;
}

/* 1 with *choice set where dir holds a sane entry for key, of n_cand candidates; one warning
   for a file there that is not one */
BQ__FN int bq__tune_read(const char *dir, const char *key, uint64_t hash, int n_cand, int *choice) {
  char path[BQ__PATH_MAX + 64], text[2048], got_key[1024];
  bq__tune_path(dir, hash, path, sizeof path);
  const char *why = NULL;
  int k = -1, of = -1;
  const long n = bq__read_cache_text(path, text, sizeof text, &why);
  if (n >= 0) {
    why = bq__tune_parse(text, (size_t)n, got_key, sizeof got_key, &k, &of);
    if (!why && strcmp(got_key, key) != 0) why = "another key";
    else if (!why && of != n_cand) why = "choice out of range";
  }
  if (why && bq__first_warning("tune", dir))
    bq__warn("ignoring tune entry %s (%s): tuning again and rewriting it", path, why);
  if (n < 0 || why) return 0;
  *choice = k;
  return 1;
}

BQ__FN void bq__tune_write(const char *dir, const char *key, uint64_t hash, int choice, int n, const double *us) {
  char path[BQ__PATH_MAX + 64];
  bq__tune_path(dir, hash, path, sizeof path);
  bq__str s;
  memset(&s, 0, sizeof s);
  bq__str_fmt(&s, "%skey %s\nchoice %d of %d\nus", BQ__TUNE_MAGIC, key, choice, n);
  for (int i = 0; i < n; i++) bq__str_fmt(&s, " %.2f", us[i]);
  bq__str_fmt(&s, "\n");
  if (!s.oom) bq__str_fmt(&s, "checksum %016llx\n", (unsigned long long)bq__fnv1a(s.p, s.n, BQ__FNV_SEED));
  if (!s.oom && bq__write_atomic(dir, path, s.p, s.n, NULL, 0, NULL, 0, 1) != 0) BQ__COUNT(write_failures);
  BQ_FREE(s.p);
}

BQ__FN int bq__tune_find(const char *key, uint64_t hash, int *choice) {
  int found = 0;
  pthread_mutex_lock(&bq__tune_lock);
  for (bq__tuned *t = bq__tune_head; t && !found; t = t->next)
    if (t->hash == hash && !strcmp(t->key, key)) *choice = t->choice, found = 1;
  pthread_mutex_unlock(&bq__tune_lock);
  return found;
}
/* keeps key's choice unless another thread kept one first */
BQ__FN void bq__tune_remember(const char *key, uint64_t hash, int choice) {
  size_t n = strlen(key);
  bq__tuned *t = (bq__tuned *)BQ_MALLOC(sizeof *t + n + 1);
  if (!t) return;
  t->hash = hash;
  t->choice = choice;
  memcpy(t->key, key, n + 1);
  pthread_mutex_lock(&bq__tune_lock);
  for (bq__tuned *o = bq__tune_head; o && t; o = o->next)
    if (o->hash == hash && !strcmp(o->key, key)) BQ_FREE(t), t = NULL;
  if (t) t->next = bq__tune_head, bq__tune_head = t;
  pthread_mutex_unlock(&bq__tune_lock);
}
BQ__FN void bq__tune_forget(void) {
  pthread_mutex_lock(&bq__tune_lock);
  bq__tuned *t = bq__tune_head;
  bq__tune_head = NULL;
  pthread_mutex_unlock(&bq__tune_lock);
  while (t) {
    bq__tuned *next = t->next;
    BQ_FREE(t);
    t = next;
  }
}

/* Times each candidate of r on scratch; 0 with us[] filled, else -1 (nothing timed). The
   caller's stream has drained; this thread's capture mode is relaxed meanwhile, so that the
   allocations do not disturb another thread's capture. */
BQ__FN int bq__tune_time(const bq_plan *p, const bq_args *a, const bq__tune_req *r, double *us) {
  const bq__driver_api *d = &bq__drv;
  bq__CUdeviceptr buf[2] = {0, 0};
  bq__CUstream ts = NULL;
  bq__CUevent ev[2] = {NULL, NULL};
  int ok = 1;
  for (int i = 0; i < 2 && ok; i++)
    if (r->bytes[i] && (d->cuMemAlloc(&buf[i], r->bytes[i]) || d->cuMemsetD8(buf[i], 0, r->bytes[i]))) ok = 0;
  if (ok && (d->cuStreamCreate(&ts, 1 /* non-blocking */) || d->cuEventCreate(&ev[0], BQ__CU_EVENT_DEFAULT) ||
             d->cuEventCreate(&ev[1], BQ__CU_EVENT_DEFAULT)))
    ok = 0;
  bq_args s;
  void *ptr[2] = {(void *)(uintptr_t)buf[0], (void *)(uintptr_t)buf[1]};
  r->point(&s, a, ptr);
  for (int i = 0; i < r->n; i++) us[i] = 1e30;
  for (int rep = 0; rep < 4 && ok; rep++) /* a warm-up round, then three timed */
    for (int c = 0; c < r->n && ok; c++) {
      float ms = 0;
      bq__tune_forced = c;
      ok = !d->cuEventRecord(ev[0], ts) && !p->fam->run(p, &s, NULL, 0, ts) && !d->cuEventRecord(ev[1], ts) &&
           !d->cuEventSynchronize(ev[1]) && !d->cuEventElapsedTime(&ms, ev[0], ev[1]);
      bq__tune_forced = -1;
      if (ok && rep > 0 && 1e3 * ms < us[c]) us[c] = 1e3 * ms;
    }
  if (ts) d->cuStreamSynchronize(ts);
  for (int i = 0; i < 2; i++)
    if (ev[i]) d->cuEventDestroy(ev[i]);
  if (ts) d->cuStreamDestroy(ts);
  for (int i = 0; i < 2; i++)
    if (buf[i]) d->cuMemFree(buf[i]);
  return ok ? 0 : -1;
}

/* Times r's candidates for p on a and keeps the winner: in memory, and in dir where there is
   one. Nothing happens under stream capture (the rule's candidate, not remembered, so a later
   plain run may still tune); an allocation or launch that fails keeps the rule's in memory. */
BQ__FN int bq__tune_now(const bq_plan *p, const bq_args *a, void *stream, const bq__tune_req *r, const char *key,
                        uint64_t hash, const char *dir) {
  int capturing = 1, mode = BQ__CU_STREAM_CAPTURE_MODE_RELAXED, choice = r->rule;
  if (bq__drv.cuStreamIsCapturing((bq__CUstream)stream, &capturing) || capturing) return r->rule;
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  double us[BQ__TUNE_MAX];
  const int timed = r->bytes[0] + r->bytes[1] <= BQ__TUNE_MAX_SCRATCH &&
                    !bq__drv.cuStreamSynchronize((bq__CUstream)stream) && bq__tune_time(p, a, r, us) == 0;
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  if (timed) {
    int best = r->rule;
    for (int c = 0; c < r->n; c++)
      if (us[c] < us[best]) best = c;
    choice = us[best] < 0.98 * us[r->rule] ? best : r->rule;
    __atomic_add_fetch(&bq__tune_count, 1, __ATOMIC_RELAXED);
    if (dir) bq__tune_write(dir, key, hash, choice, r->n, us);
  }
  bq__tune_remember(key, hash, choice);
  return choice;
}

/* The candidate a run of p on a takes for decision r: the tuned one (tuned now, on first
   use, where it may be), else the rule's */
BQ__FN int bq__tune_choice(const bq_plan *p, const bq_args *a, void *stream, const bq__tune_req *r) {
  if (bq__tune_forced >= 0) return bq__tune_forced < r->n ? bq__tune_forced : r->rule;
  if (bq__dry.plan || r->n < 2 || r->n > BQ__TUNE_MAX || !bq__tune_enabled()) return r->rule;
  bq__str key;
  memset(&key, 0, sizeof key);
  bq__tune_key(p, r, &key);
  if (key.oom) return r->rule;
  const uint64_t hash = bq__fnv1a(key.p, key.n, BQ__FNV_SEED);
  int choice = r->rule;
  char dirbuf[BQ__PATH_MAX];
  if (!bq__tune_find(key.p, hash, &choice)) {
    const char *dir = bq__cache_dir_now(dirbuf, sizeof dirbuf);
    if (dir && bq__tune_read(dir, key.p, hash, r->n, &choice)) bq__tune_remember(key.p, hash, choice);
    else choice = bq__tune_now(p, a, stream, r, key.p, hash, dir);
  }
  BQ_FREE(key.p);
  return choice;
}

/* ---- launch rules ------------------------------------------------------------------------
   The dispatch tables say what a kernel needs (registers a thread, waves of an SM's warps, a
   share of an SM); these rules turn that into counts for the device in use, read once per
   device: its SMs and the threads an SM holds. Launch bounds are compiled before any device
   is known, from the register file every arch from sm_80 on has. */
#define BQ__REGS_PER_SM 65536 /* 32-bit registers an SM, sm_80 to sm_120 */
/* The dynamic shared memory a block may opt into on the current context's device, less a
   margin for the kernels' static reductions (0 where the driver does not say) */
BQ__FN int64_t bq__smem_optin(void) {
  int optin = 0;
  bq__CUdevice cd = 0;
  bq__CUresult r = bq__drv.cuCtxGetDevice(&cd);
  if (!r) r = bq__drv.cuDeviceGetAttribute(&optin, BQ__CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN, cd);
  return !r && optin > 1024 ? optin - 1024 : 0;
}
/* The shared memory an SM of compute capability arch (10 * major + minor) gives its blocks,
   and what the driver reserves of it a block: a module is compiled for an arch, so its
   launch bounds follow the arch, every device of which has the same. */
#define BQ__SMEM_BLOCK_RESERVED 1024
BQ__FN int64_t bq__arch_smem_sm(int arch) {
  if (arch == 80 || arch == 87) return 164 * 1024;
  if (arch >= 90 && arch < 110) return 228 * 1024;
  return 100 * 1024; /* 8.6, 8.9, 12.x */
}
typedef struct bq__limits { int64_t sms, threads_sm; } bq__limits;
BQ__FN bq__limits bq__limits_of(const bq_plan *p) {
  bq__limits l = {p->num_sms > 0 ? p->num_sms : 1, p->threads_sm >= 256 ? p->threads_sm : 2048};
  return l;
}
/* the least blocks of `threads` an SM must hold for ptxas to give each thread at most `regs`
   registers: the launch bounds' second argument (0: none named) */
BQ__FN int bq__lb_blocks(int regs, int threads) { return regs > 0 ? BQ__REGS_PER_SM / (threads * regs) : 0; }
/* the warps of `waves` SM-fulls of resident warps, on one SM */
BQ__FN int64_t bq__wave_warps(const bq__limits *l, int waves) { return (int64_t)waves * (l->threads_sm / 32); }
/* the bytes of `waves` waves of 16-byte accesses, one access for every thread the SMs hold */
BQ__FN int64_t bq__wave_bytes(const bq__limits *l, int waves) { return (int64_t)waves * l->sms * l->threads_sm * 16; }

/* ==== src/family_affine.h ================================================================= */
/* ---- the affine family: quantize, dequantize, fake quantize ------------------------------ */
/* kernels_src/affine_abi.h - the affine family's host/kernel interface (quantize, dequantize,
   fake quantize), valid as C and as CUDA C++: its entry points and its parameter blocks.
   affine.cu and the host (src/family_affine.h) both include it. */
#ifndef BQ_AFFINE_ABI_H
#define BQ_AFFINE_ABI_H
/* kernels_src/abi.h - what the host and every kernel file share, valid as C and as CUDA C++:
   the integer types both sides write the parameter blocks in, and the divider the host
   prepares for the kernels. Each family's <family>_abi.h builds on it. The kernel files
   include it; tools/amalgamate.py inlines it into the header's host code and into the
   embedded kernel text, so both sides compile the one definition. */
#ifndef BQ_ABI_H
#define BQ_ABI_H
typedef unsigned char bq_u8;
typedef unsigned short bq_u16;
typedef unsigned int bq_u32;
typedef long long bq_i64;
typedef unsigned long long bq_u64;

/* n / d == (umulhi(n, magic) + n) >> shift for every n < 2^32 (the host's bq__make_fastdiv,
   the kernels' bq_div_u32) */
typedef struct bq_fastdiv {
  bq_u32 d, magic, shift;
} bq_fastdiv;

/* An entry point's name as the host looks it up: BQ_ENTRY_NAME(BQ_FN_AFFINE_COLS) is
   "bq_affine_cols" */
#define BQ_ENTRY_NAME_(fn) #fn
#define BQ_ENTRY_NAME(fn) BQ_ENTRY_NAME_(fn)
#endif

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function (each compiled where the prelude defines BQ_E_<NAME>) */
enum {
  BQ__AFFINE_ROW,    /* the row kernel, every granularity */
  BQ__AFFINE_COLS,   /* per channel, the channel axis innermost */
  BQ__AFFINE_ODD,    /* per channel and per group, straddling accesses in registers */
  BQ__AFFINE_BLOCKS, /* whole parameter blocks a lane */
  BQ__AFFINE_FLAT,   /* per group and per token over one flat array */
  BQ__AFFINE_NARROW, /* f64 quantize, blocks' layout over one-element accesses */
  BQ__AFFINE_MASK,   /* fake quantize per tensor and per channel with args.mask */
  BQ__AFFINE_LEAN,   /* forward quantize and dequantize over small dense tensors */
  BQ__AFFINE_PAIR,   /* bq_affine_lean's two accesses a thread (16-bit quantize) */
  BQ__AFFINE_SR,     /* stochastic rounding (quantize and fake quantize forward), alone in its SKUs */
  BQ__AFFINE_ENTRIES
};
#define BQ_FN_AFFINE bq_affine
#define BQ_FN_AFFINE_COLS bq_affine_cols
#define BQ_FN_AFFINE_ODD bq_affine_odd
#define BQ_FN_AFFINE_BLOCKS bq_affine_blocks
#define BQ_FN_AFFINE_FLAT bq_affine_flat
#define BQ_FN_AFFINE_NARROW bq_affine_narrow
#define BQ_FN_AFFINE_MASK bq_affine_mask
#define BQ_FN_AFFINE_LEAN bq_affine_lean
#define BQ_FN_AFFINE_PAIR bq_affine_pair
#define BQ_FN_AFFINE_SR bq_affine_sr

/* Every entry point but bq_affine_lean's and bq_affine_pair's */
typedef struct bq_affine_params {
  bq_u64 in0, in1, out;                    /* device pointers */
  bq_i64 rows, cols;                       /* [rows, cols] */
  bq_i64 in0_stride, in1_stride, out_stride;
  bq_i64 tiles, tpw, chunks;               /* warp tiles per row; per item; items per row */
  bq_i64 group;                            /* channel: inner size; group: G */
  bq_i64 gmod;                             /* channel: number of channels */
  bq_i64 grs;                              /* group, block: the scales' leading dimension (bq_pbase) */
  bq_u64 scales, zps;                      /* device arrays (zps may be 0: all zero) */
  double scale;                            /* per tensor: the scale, already a C value */
  bq_fastdiv fd_group, fd_gmod, fd_chunks; /* 32-bit dividers, valid when fast32 != 0 */
  int zp;                                  /* per tensor */
  int fast32;                              /* indices fit in 32 bits */
  /* bq_affine_blocks only: blocks a row, lanes a block (a power of two), parts a block */
  bq_i64 nblk;
  bq_fastdiv fd_parts;
  int gl, parts;
  bq_u64 mask; /* bq_affine_mask: the mask's 32-bit words */
} bq_affine_params;
/* bq_affine_sr's: the problem, the draws' key and first index (args.seed, args.offset), and
   the fused rotation's block log2 (args.rotation_block) and whether its signs are random
   (desc.random_signs, keyed by the seed too) */
typedef struct bq_affine_sr_params {
  bq_affine_params a;
  bq_u64 offset;
  bq_u32 seed_lo, seed_hi;
  int rlog2, rsigns;
} bq_affine_sr_params;
/* bq_affine_lean's and bq_affine_pair's own parameter blocks: only what each reads (a launch
   carries its kernel's parameters, and the pair kernel ran slower taking all of
   bq_affine_params) */
typedef struct bq_lean_params {
  bq_u64 in0, out, scales, zps; /* device pointers (zps may be 0: all zero) */
  double scale;                 /* per tensor: the scale, already a C value */
  bq_u32 accesses, n;           /* whole accesses; elements (fewer than 2^31) */
  bq_fastdiv fd_group;          /* per token the row length, per group G, per block B */
  int zp;                       /* per tensor */
} bq_lean_params;
typedef struct bq_pair_params {
  bq_u64 in0, out, scales; /* device pointers: the 16-bit input, its codes, the scales */
  bq_u32 pairs;            /* the threads with work: elements / (2 * BQ_P) */
  bq_fastdiv fd_group;     /* per token the row length, per group G, per block B */
} bq_pair_params;
/* Per block, the two kernels' blocks with the row's geometry after them: an element's block
   is (r / B) * grs + c / B for its row r and column c */
typedef struct bq_lean_block_params {
  bq_lean_params l;
  bq_fastdiv fd_cols; /* the row length */
  bq_u32 grs;         /* the scales' leading dimension, in scales */
} bq_lean_block_params;
typedef struct bq_pair_block_params {
  bq_pair_params l;
  bq_fastdiv fd_cols;
  bq_u32 grs;
} bq_pair_block_params;
#endif

/* n / d == (umulhi(n, magic) + n) >> shift for all n < 2^32, 1 <= d <= 2^31
   (Granlund-Montgomery with a 33-bit multiplier). */
BQ__FN bq_fastdiv bq__make_fastdiv(uint32_t d) {
  bq_fastdiv f;
  uint32_t l = 0;
  while (l < 31 && (1u << l) < d) l++;
  uint64_t m = (((uint64_t)1 << (32 + l)) + d - 1) / d; /* ceil(2^(32+l) / d) */
  f.d = d;
  f.magic = (uint32_t)(m - ((uint64_t)1 << 32));
  f.shift = l;
  return f;
}

/* The entry points each granularity has (per channel, per token, per group; per tensor all
   three 0): kernels[] of the family, by the enum */
#define BQ__AFFINE_NAMES(ch, tok, grp)                                                                          \
  {BQ_ENTRY_NAME(BQ_FN_AFFINE), (ch) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_COLS) : NULL,                               \
   (ch) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_ODD) : NULL,                                                    \
   (ch) || (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_BLOCKS) : NULL,                                        \
   (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_FLAT) : NULL,                                                  \
   (ch) || (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_NARROW) : NULL,                                        \
   (tok) || (grp) ? NULL : BQ_ENTRY_NAME(BQ_FN_AFFINE_MASK), (ch) ? NULL : BQ_ENTRY_NAME(BQ_FN_AFFINE_LEAN), \
   (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_PAIR) : NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_SR)}

/* The affine dispatch table: a row per op, direction, granularity and float type (the int
   type and q-range change no choice), in that order, each the fastest setting measured on
   the H100 at 256 MiB. Changing a tuning decision is changing its row. Where a column
   sizes a launch it holds what the kernel needs (registers a thread, waves of an SM's
   warps, a share of an SM), and the launch rules below turn it into counts for the device
   in use; on the H100 and the H200 they give the counts measured (tests/test_launch.c
   checks it). Columns:
   - u: accesses per lane per tile in the row kernels (affine.cu's BQ_U; it names the SKU's
     variant). f64 4, but 2 per token backward (its two f64 inputs); per tensor 2 (its
     kernel is the leanest); per channel and per group, 4 in the slot kernels (affine.cu's
     BQ_SLOTS: quantize and fake quantize forward, f64 backward) and 2 without (each
     access's parameters take registers); per token 4 (64 bytes of the lead stream in
     flight a lane), but 2 where a 16-bit type is read twice (quantize and fake quantize
     backward read dy and x: 4 would cost a quarter of the warps an SM holds).
   - ga: accesses a lane takes of its parameter block in bq_affine_blocks (affine.cu's
     BQ_GA), 0 where that kernel is never taken: the ops where it is faster than the row
     kernel. Quantize forward 4; quantize backward 2 for f64, f16 and bf16 (with 4, f64
     holds so many registers that an SM takes half the blocks), 4 for f32; fake quantize
     forward 4, f64 fake quantize backward 4; per token (a row one block), f16 and bf16
     quantize forward 4 (the row kernel's registers leave an SM 3 blocks; 16 M elements run
     faster, 256 MiB as fast or faster), f64 quantize and fake quantize backward, 2 and 4.
     Dequantize, and fake quantize backward of f32, f16 and
     bf16, keep the row kernel: their per-access lookups cost little (no reciprocal) and its
     lane-contiguous accesses are faster for them.
   - fr: accesses a lane takes in bq_affine_flat (affine.cu's BQ_FR), 0 where never taken;
     each the fastest for its ops on groups whose accesses straddle (against bq_affine_odd):
     forward 4 (8 is slower); backward 2, f64 1, dequantize 4; f64 quantize forward keeps
     bq_affine_odd, faster for it. Per token (contiguous rows off the 16-byte grid, against
     the row kernel) the same, except forward f16, bf16 and f64 quantize and fake quantize,
     which keep the row kernel, faster for them.
   - na: elements a lane takes in bq_affine_narrow (affine.cu's BQ_NA), f64 quantize only,
     0 elsewhere: forward 8, backward per token 2, else 4.
   - waves: the row kernel's items an SM, in SM-fulls of resident warps (bq__wave_warps;
     64 warps on the H100): more, shorter items balance the SMs' last wave better, fewer pay
     the row's set-up less often. Per token 4, per group 2, and 1 for f64 backward per
     token (its reciprocal is dearer) and f64 per group.
   - odd: 1 where straddling accesses take bq_affine_odd rather than the row kernel's
     element-by-element redo; not f64 dequantize forward, whose two elements an access
     straddle seldom (the odd kernel's registers cost more than redoing them).
   - slots: how the row kernels of per channel and per group give an access its parameters
     (affine.cu's BQ_SLOTS, BQ_ITEM_SLOTS). 1: each parameter block a tile touches is prepared
     once, a block a lane, in shared memory (quantize and fake quantize forward, f64
     backward); 2: the same, once an item for all its tiles (f64 quantize: per group, and
     per channel forward; in the other slot kernels that is slower, their spills grow); 0:
     each access looks its parameters up, faster for dequantize (no reciprocal to prepare)
     and for backward with 16- and 32-bit types (with slots they run out of registers).
   - items: the row kernel's item. 0: a tile (per tensor and per channel, one dense row;
     dequantize, more warps in flight); 1: several tiles of a row where there are several
     rows, so that a row's set-up (its scale's reciprocal) is paid once (per token and per
     group); 2: several tiles always (the per-channel rows with slots 2).
   - bcap: the share of an SM's threads bq_affine_blocks and bq_affine_narrow take at most,
     as 1/bcap (2: half, 4 blocks of 256 on the H100), each warp striding over the items
     (f64: fewer blocks than the SM could hold are faster); 0: one item a warp.
   - cwave: bq_affine_cols' grid. 1: one wave of blocks (as many as its launch bounds let
     an SM hold, bq__lb_blocks) striding down the rows (f16 and bf16 quantize and fake
     quantize forward, slower with more); 0: a block for every affine.cu BQ_R rows.
   - lean: where bq_affine_lean (an access a thread, its parameters prepared in registers)
     replaces the kernels above for dense data (bq__affine_lean): -1 at any size, else up to
     that many waves of the float stream (a wave: a 16-byte access for every thread the
     SMs hold, 4.1 MiB on the H100; bq__affine_lean_rule), 0 never. Its few registers let
     an SM hold many warps, which pays on tensors of a few waves; per token and per group it
     loses on the H100 from 64 MiB on (the row and blocks kernels prepare a scale once for
     many accesses), so only 16-bit quantize, measured faster at 32 MiB, takes it there (8
     waves: 33 MiB). Per tensor it is as fast or faster at every size measured, except f64
     (quantize at 256 MiB, dequantize at 8 MiB). Beyond L2, where the rule says no, the
     first-use tune decides (bq__affine_tuned).
     Where it is taken, 16-bit quantize without zero points over rows and groups of whole
     pairs of accesses runs bq_affine_pair, its form with two accesses a thread.
   - lu: accesses a thread of bq_affine_lean (affine.cu's BQ_LEAN_U), a block's width apart
     and all loaded before any is converted: 2 where that keeps more bytes in flight than
     its registers cost (quantize forward per tensor of f32 and f64, quantize and dequantize
     forward per token, dequantize forward per group: on the H100 2-9% faster than 1 at
     256 MiB), else 1 (per tensor 16-bit is 1% slower with 2; 4 was never faster than 2).
   - regs: each entry point's register budget a thread, which its launch bounds ask ptxas
     to meet as the least blocks of 256 an SM must hold (bq__lb_blocks: 80 registers are 3
     blocks, 64 are 4; 0: none named, which differs from a budget: that lets ptxas spend
     more registers). Row kernel: 80 for the forward slot kernels (left alone, ptxas gives
     some of them more registers and fewer blocks; backward ones would spill); 48 for
     per-tensor quantize backward of f16 and bf16 (left alone, its mask interval's registers
     cost it a block an SM, which is slower for integer codes).
     bq_affine_odd: as the row kernel, but 64 for dequantize of f32, f16 and bf16 (one more
     block than its registers would otherwise allow, which is faster; f64 spills so).
     bq_affine_blocks: 64 for per-group f64 quantize forward (its registers, a few over,
     would allow one block fewer). bq_affine_flat: 64 for forward quantize and fake
     quantize with f32 compute (one more block than their registers allow; dequantize is
     slower so, and f64 gains nothing). bq_affine_narrow: 64. bq_affine_cols: 80 (f16 and
     bf16 forward take one wave of them), but 64 for per-channel quantize forward of f32 and
     f64 and fake quantize forward of f16 and bf16 (a block more an SM: on the H200 6-8%
     faster, the others level or slower). bq_affine_mask: 64 for per-channel fake quantize
     forward (f32 takes 72 registers, 3 blocks, otherwise; 64 is faster though f32 then
     keeps 24 bytes on the stack).
     bq_affine_lean and bq_affine_pair: 0 (the rows leave them out). 0 also where the
     granularity has no such kernel. */
typedef struct bq__affine_row {
  bq_op op;
  bq_direction dir;
  bq_granularity gran;
  bq_dtype ft;
  int u, ga, fr, na, waves, odd, slots, items, bcap, cwave, lean, lu;
  int regs[BQ__AFFINE_ENTRIES]; /* by entry point: the registers a thread it is compiled for (bq__lb_blocks) */
} bq__affine_row;
static const bq__affine_row bq__affine_table[] = {
  /* op, direction, granularity, float type                 u ga fr na waves odd slots items bcap cwave lean lu  regs: row cols odd blocks flat narrow mask */
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,          2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  2, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,          4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    8,  2, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,          2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,         4, 4, 0, 0,   1, 1,   1,    0,   0,    0,    0,  1, {80, 64, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,         4, 4, 0, 8,   1, 1,   2,    2,   2,    0,    0,  1, {80, 64, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,         4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 80, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,        4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 80, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,           4, 0, 4, 0,   4, 0,   0,    1,   0,    0,    0,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,           4, 0, 0, 8,   4, 0,   0,    1,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,           4, 4, 0, 0,   4, 0,   0,    1,   0,    0,    8,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,          4, 4, 0, 0,   4, 0,   0,    1,   0,    0,    8,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,           4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,           4, 4, 0, 8,   1, 1,   2,    1,   2,    0,    0,  1, {80, 0, 80, 64, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,           4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    8,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,          4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    8,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,         4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {48, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {48, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,        2, 4, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,        4, 2, 0, 4,   1, 1,   1,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,        2, 2, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,       2, 2, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,          4, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,          2, 2, 1, 2,   1, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,          2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,         2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,          2, 4, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,          4, 2, 1, 4,   1, 1,   2,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,          2, 2, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,         2, 2, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,        4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,       2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,       4, 0, 0, 0,   1, 0,   0,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,       2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,         4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,         4, 0, 4, 0,   4, 0,   0,    0,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,         4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,         2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,         4, 0, 4, 0,   1, 0,   0,    0,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,         2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,       4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,      2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,      4, 0, 0, 0,   1, 1,   0,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,     2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,        2, 0, 4, 0,   1, 0,   0,    0,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,       4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,        4, 0, 4, 0,   1, 1,   0,    0,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,       2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,     2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,     4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,     2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,    4, 4, 0, 0,   1, 1,   1,    0,   0,    0,    0,  1, {80, 80, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,    4, 4, 0, 0,   1, 1,   1,    0,   2,    0,    0,  1, {80, 80, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,    4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 64, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,   4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 64, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,      4, 0, 4, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,      4, 0, 0, 0,   4, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,      4, 0, 0, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,     4, 0, 0, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,      4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,      4, 4, 4, 0,   1, 1,   1,    1,   2,    0,    0,  1, {80, 0, 80, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,      4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,     4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,    4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,   2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,   2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,   4, 4, 0, 0,   1, 1,   1,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,   2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,  2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,     4, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,     2, 4, 1, 0,   1, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,     2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,    2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,     2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,     4, 4, 1, 0,   1, 1,   1,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,     2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,    2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
};
#define BQ__AFFINE_ROWS ((int)(sizeof bq__affine_table / sizeof bq__affine_table[0]))
/* a normalized affine desc's row (the table's order is its key's) */
BQ__FN const bq__affine_row *bq__affine_row_of(const bq_desc *d) {
  int t = d->float_type == BQ_F64 ? 1 : d->float_type == BQ_F16 ? 2 : d->float_type == BQ_BF16 ? 3 : 0;
  /* per block is per group along a row (the block's row of scales aside): per group's row */
  int g = bq__gran_code(d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : d->granularity);
  int i = ((((int)d->op - BQ_QUANTIZE) * 2 + (d->direction == BQ_BACKWARD)) * 4 + g) * 4 + t;
  return &bq__affine_table[i];
}
/* elements per 16-byte access of the widest stream, always the float one: affine.cu's BQ_P */
BQ__FN int bq__affine_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }
BQ__FN int bq__affine_u(const bq_desc *d) { return bq__affine_row_of(d)->u; }
BQ__FN int bq__affine_ga(const bq_desc *d) { return bq__affine_row_of(d)->ga; }
BQ__FN int bq__affine_fr(const bq_desc *d) { return bq__affine_row_of(d)->fr; }
BQ__FN int bq__affine_na(const bq_desc *d) { return bq__affine_row_of(d)->na; }

/* A kernel's launch bounds as the prelude macro BQ_LB_<name>: 256 threads a block and, where
   min_blocks is not 0, at least that many blocks an SM (0 names none, which differs from 1) */
BQ__FN void bq__launch_bounds_define(bq__str *s, const char *name, int min_blocks) {
  if (min_blocks) bq__str_fmt(s, "#define BQ_LB_%s __launch_bounds__(256, %d)\n", name, min_blocks);
  else bq__str_fmt(s, "#define BQ_LB_%s __launch_bounds__(256)\n", name);
}

BQ__FN void bq__affine_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  static const char *const lb_names[BQ__AFFINE_ENTRIES] = {"ROW", "COLS", "ODD", "BLOCKS", "FLAT", "NARROW", "MASK", "LEAN",
                                                                  "PAIR", "SR"};
  const bq__affine_row *r = bq__affine_row_of(d);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_DIR %s\n#define BQ_GRAN %s\n#define BQ_U %d\n#define BQ_GA %d\n"
              "#define BQ_FR %d\n#define BQ_NA %d\n#define BQ_SLOTS %d\n#define BQ_ITEM_SLOTS %d\n#define BQ_ITEMS %d\n",
              bq__spec("OP", d->op), bq__spec("DIR", d->direction), bq__spec("GRAN", d->granularity), r->u, r->ga,
              r->fr, r->na, r->slots > 0, r->slots == 2, r->items > 0);
  bq__str_fmt(s, "#define BQ_LEAN_U %d\n#define BQ_SR %d\n", r->lu, d->rounding == BQ_ROUND_STOCHASTIC);
  if (d->rotation) bq__str_fmt(s, "#define BQ_AFF_ROT 1\n");
  for (int e = 0; e < BQ__AFFINE_ENTRIES; e++) bq__launch_bounds_define(s, lb_names[e], bq__lb_blocks(r->regs[e], 256));
}

/* FP8 storage is symmetric: a static per-tensor zero point (quantize's and the fused
   producers' args.zero_point) must be 0 */
BQ__FN bq_status bq__fp8_zero_point(const bq_plan *p, int32_t zp) {
  if (!bq__is_fp8(p->desc.int_type) || zp == 0) return BQ_SUCCESS;
  return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_point (%d) must be 0: %s storage is symmetric", p->name,
                  (int)zp, bq__dtype_name(p->desc.int_type));
}

BQ__FN bq_status bq__affine_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__view_of(p, a, &v);
}
/* the whole validation, giving the problem's view (check's, and run's first step) */
BQ__FN bq_status bq__affine_validate(const bq_plan *p, const bq_args *a, bq__view *vp) {
  bq__view v;
  bq_status st = bq__view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  const bq_desc *d = &p->desc;
  if (d->granularity == BQ_PER_TENSOR) {
    if (!(isfinite(a->scale) && a->scale > 0))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0", p->name, a->scale);
    if (d->float_type != BQ_F64 && !((float)a->scale > 0 && isfinite((float)a->scale)))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) is not a finite positive f32", p->name,
                      a->scale);
  }
  if (d->scale_type == BQ_UE8M0X4 && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: packed scales (ue8m0x4) carry "
                    "no zero points", p->name, (const void *)a->zero_points);
  if (d->granularity == BQ_PER_TENSOR && (st = bq__fp8_zero_point(p, a->zero_point))) return st;
  if (bq__is_fp8(d->int_type) && d->granularity != BQ_PER_TENSOR && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: %s storage is symmetric",
                    p->name, (const void *)a->zero_points, bq__dtype_name(d->int_type));
  if (d->rotation) { /* blocks along the last dimension (per tensor: of the flat array) */
    const int64_t last = d->granularity == BQ_PER_TENSOR ? v.numel
                         : d->granularity == BQ_PER_CHANNEL ? (a->rank > 0 ? a->shape[a->rank - 1] : 1) : v.cols;
    if ((st = bq__rotation_block_check(p->name, a->rotation_block, last))) return st;
  }
  if (v.numel == 0) return BQ_SUCCESS;
  int t = bq__dtype_size(d->float_type);
  if (a->mask && (st = bq__check_ptr(p, "args.mask", a->mask, 4))) return st;
  if (d->direction == BQ_FORWARD) {
    if ((st = bq__check_ptr(p, "args.x", a->x, d->op == BQ_DEQUANTIZE ? 1 : t))) return st;
    if ((st = bq__check_ptr(p, "args.y", a->y, d->op == BQ_QUANTIZE ? 1 : t))) return st;
  } else {
    if ((st = bq__check_ptr(p, "args.dy", a->dy, t))) return st;
    if ((st = bq__check_ptr(p, "args.dx", a->dx, t))) return st;
    /* x, for the mask, unless the forward pass saved it in args.mask */
    if (d->op != BQ_DEQUANTIZE && !a->mask && (st = bq__check_ptr(p, "args.x", a->x, t))) return st;
  }
  if (d->granularity != BQ_PER_TENSOR) {
    if ((st = bq__check_ptr(p, "args.scales", a->scales, bq__dtype_size(d->scale_type)))) return st;
    if (a->zero_points && (st = bq__check_ptr(p, "args.zero_points", a->zero_points, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__affine_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__affine_validate(p, a, &v);
}

BQ__FN size_t bq__no_workspace(const bq_plan *p, const bq_args *a) {
  (void)p;
  (void)a;
  return 0;
}

/* Per channel takes bq_affine_cols when the channel axis is innermost (inner size 1), C is a
   multiple of the cp columns a lane owns (affine.cu's BQ_CP) with at least 8 lanes' worth of
   them, and every stream the kernel reads or writes is aligned to a chunk of cp elements.
   Returns cp, or 0 where the kernel does not apply. */
BQ__FN int64_t bq__affine_cols_cp(const bq_plan *p, const bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t cp = p->vec < 4 ? p->vec : 4;
  if (d->granularity != BQ_PER_CHANNEL || v->group != 1 || v->gmod % cp || v->gmod / cp < 8) return 0;
  int t = bq__dtype_size(d->float_type), fwd = d->direction == BQ_FORWARD;
  uint64_t in0 = (uint64_t)cp * (fwd && d->op == BQ_DEQUANTIZE ? 1 : t);
  uint64_t out = (uint64_t)cp * (fwd && d->op == BQ_QUANTIZE ? 1 : t);
  int has_in1 = !fwd && d->op != BQ_DEQUANTIZE; /* x, for the backward mask */
  if (k->in0 % in0 || k->out % out || (has_in1 && k->in1 % ((uint64_t)cp * t))) return 0;
  return cp;
}

/* Whether an access can straddle two parameter blocks of `group` elements: the block is not
   a whole number of accesses, or a row of the stream that leads the accesses (y for
   dequantize forward, else x or dy) starts off its 16-byte grid. */
BQ__FN int bq__affine_straddles(const bq_plan *p, const bq_affine_params *k, const bq__view *v, int64_t group) {
  const bq_desc *d = &p->desc;
  int64_t t = bq__dtype_size(d->float_type);
  int out_leads = d->direction == BQ_FORWARD && d->op == BQ_DEQUANTIZE;
  uint64_t lead = out_leads ? k->out : k->in0;
  int64_t lead_stride = out_leads ? k->out_stride : k->in0_stride;
  return group % p->vec != 0 || lead % 16 != 0 || (v->rows > 1 && (lead_stride * t) % 16 != 0);
}

/* Per channel, per group and per token (a block a row) take bq_affine_blocks for the ops
   bq__affine_ga names, where no access straddles two parameter blocks and its 32-bit
   work-item arithmetic holds. Fills in k's fields for that kernel and returns 1, or returns
   0. */
/* The parameter block of bq_affine_blocks, bq_affine_narrow and bq_affine_flat: a group, a
   channel's run (both k->group), or per token a row. */
BQ__FN int64_t bq__affine_block_len(const bq_desc *d, const bq_affine_params *k, const bq__view *v) {
  return d->granularity == BQ_PER_TOKEN ? v->cols : k->group;
}

/* (bq_affine_blocks' and bq_affine_narrow's layout: blocks of g elements, gc accesses of
   them, up to ga a lane) */
BQ__FN int bq__affine_blocks_fill(bq_affine_params *k, const bq__view *v, int64_t g, int64_t gc, int64_t ga) {
  int64_t nblk = v->cols / g, lim = (int64_t)1 << 31;
  int64_t gl = 1, parts = 1, ipr;
  while (gl < 32 && gl * ga < gc) gl *= 2;
  if (gl * ga < gc) parts = (gc + 32 * ga - 1) / (32 * ga);
  ipr = parts > 1 ? nblk * parts : (nblk + 32 / gl - 1) / (32 / gl);
  if (gc >= lim || nblk >= lim || k->gmod >= lim || ipr >= lim || v->rows * ipr >= lim) return 0;
  k->group = g;
  k->nblk = nblk;
  k->gl = (int32_t)gl;
  k->parts = (int32_t)parts;
  k->chunks = ipr;
  k->fast32 = 1;
  k->fd_chunks = bq__make_fastdiv((uint32_t)ipr);
  /* per block: a row's row of blocks (affine.cu's bq_prow; the callers bound its B); elsewhere unused */
  k->fd_group = bq__make_fastdiv((uint32_t)(g < lim ? g : 1));
  k->fd_parts = bq__make_fastdiv((uint32_t)parts);
  k->fd_gmod = bq__make_fastdiv((uint32_t)k->gmod);
  return 1;
}
BQ__FN int bq__affine_blocks(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t ga = bq__affine_ga(d), g = bq__affine_block_len(d, k, v);
  if (!ga || bq__affine_straddles(p, k, v, g) || v->cols % g) return 0; /* (per block: a partial last block) */
  if (d->granularity == BQ_PER_BLOCK && g >= ((int64_t)1 << 31)) return 0; /* bq_prow divides in 32 bits */
  return bq__affine_blocks_fill(k, v, g, g / p->vec, ga);
}

/* f64 quantize takes bq_affine_narrow (bq_affine_blocks' layout over accesses of one element)
   for parameter blocks of at least 64 elements (a group; a row per token; a channel's run
   per channel): forward and per-token backward always, per-group and per-channel backward
   where 16-byte accesses straddle blocks (aligned blocks keep bq_affine_blocks). Per
   channel with the axis innermost keeps bq_affine_cols, which is taken first. Fills in k's
   fields and returns 1, or returns 0. It is faster than the row, odd-shape, flat and blocks
   kernels on those shapes, with the fastest count a lane for each (bq__affine_na): forward
   8, backward per token 2, backward per group 4. Backward on aligned blocks is slower here,
   so those keep bq_affine_blocks; per channel with straddling runs follows per group's
   rule. */
BQ__FN int bq__affine_narrow(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t na = bq__affine_na(d), g = bq__affine_block_len(d, k, v);
  if (!na || g < 64 || v->cols % g) return 0; /* (per block: a partial last block) */
  if (d->granularity == BQ_PER_BLOCK && g >= ((int64_t)1 << 31)) return 0; /* bq_prow divides in 32 bits */
  if (d->direction == BQ_BACKWARD && d->granularity != BQ_PER_TOKEN && !bq__affine_straddles(p, k, v, g)) return 0;
  return bq__affine_blocks_fill(k, v, g, g, na);
}

/* Per group (and per token, with G the row length) takes bq_affine_flat for the ops
   bq__affine_fr names where the data is one flat array (every row stride the row length
   and the parameter rows dense, or a single row), a
   warp's tile of 32 fr accesses touches at most 32 groups, and either an access can
   straddle two groups (as for bq_affine_odd below) or the op is not one bq_affine_blocks
   takes. Fills in k's fields for that kernel and returns the warps to launch (a tile each),
   or returns 0. */
BQ__FN int64_t bq__affine_flat(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int tok = d->granularity == BQ_PER_TOKEN; /* per token: a group a row */
  int64_t fr = bq__affine_fr(d), g = bq__affine_block_len(d, k, v), n = v->rows * v->cols;
  if (!fr || g >= ((int64_t)1 << 31) || 32 * fr * p->vec > 30 * g) return 0; /* (g bounded first: 30 g fits) */
  /* parameters at flat index e / G: row-major per-group scales (packed ones are their bytes) */
  if (d->granularity == BQ_PER_BLOCK || d->scale_layout == BQ_SCALES_MN_MAJOR) return 0;
  int fwd = d->direction == BQ_FORWARD, has_in1 = !fwd && d->op != BQ_DEQUANTIZE;
  if (v->rows > 1 && (k->in0_stride != v->cols || k->out_stride != v->cols ||
                      (has_in1 && k->in1_stride != v->cols) || (!tok && k->grs != v->cols / g)))
    return 0;
  /* where nothing straddles, the ops that take bq_affine_blocks keep it (it is faster
     there); the others take this kernel too. Per token, rows on the 16-byte grid keep the
     row kernels. */
  if ((tok || bq__affine_ga(d)) && !bq__affine_straddles(p, k, v, g)) return 0;
  k->group = g;
  k->fast32 = n <= ((int64_t)1 << 31);
  k->fd_group = bq__make_fastdiv((uint32_t)g);
  return n / (32 * fr * p->vec) + 1;
}

/* bq_affine_mask's and bq_affine_lean's view (affine.cu's bq_dense_params): the tensor as one
   dense array of n elements, parameter runs of k->group (k->gmod channels) */
BQ__FN void bq__affine_dense(bq_affine_params *k, int64_t n) {
  k->rows = 1;
  k->cols = n;
  k->fast32 = n <= ((int64_t)1 << 31);
  if (k->fast32) {
    k->fd_group = bq__make_fastdiv((uint32_t)k->group);
    k->fd_gmod = bq__make_fastdiv((uint32_t)k->gmod);
  }
}

/* Forward quantize and dequantize per tensor, per token, per group and per block take
   bq_affine_lean where the table's `lean` allows (-1: any size; else the tensor's float
   stream is at most that many MiB; 0: never), the tensor has fewer than 2^31 elements, the
   data is dense (every row stride the row length), the lead stream 16-byte aligned and the
   other on its accesses' grid, rows (per token and per block), groups and blocks whole
   accesses, per group the scales row-major and dense (not packed), and per block row-major
   and not packed (the run adds the row's geometry, bq_lean_block_params). Fills
   in k's fields the kernels' own blocks take (k->cols the element count, k->tiles the whole
   accesses, k->fd_group), sets
   *which to the entry point (BQ__AFFINE_LEAN, or BQ__AFFINE_PAIR where it applies) and
   returns the threads to launch, or returns 0. Forced (tests), the table is not asked. */
BQ__FN int64_t bq__affine_lean(const bq_plan *p, bq_affine_params *k, const bq__view *v, int *which) {
  const bq_desc *d = &p->desc;
  int64_t n = v->rows * v->cols, t = bq__dtype_size(d->float_type);
  int out_leads = d->op == BQ_DEQUANTIZE, tok = d->granularity == BQ_PER_TOKEN, blk = d->granularity == BQ_PER_BLOCK;
  if (d->direction != BQ_FORWARD || n >= ((int64_t)1 << 31)) return 0;
  if ((out_leads ? k->out : k->in0) % 16) return 0;
  /* the narrow stream's accesses (p->vec int elements) aligned too: no width check a thread */
  if ((out_leads ? k->in0 : k->out) % (uint64_t)(p->vec * bq__dtype_size(d->int_type))) return 0;
  if (v->rows > 1 && (k->in0_stride != v->cols || k->out_stride != v->cols)) return 0;
  if (d->granularity == BQ_PER_GROUP &&
      (k->group % p->vec || d->scale_layout == BQ_SCALES_MN_MAJOR || d->scale_type == BQ_UE8M0X4 ||
       (v->rows > 1 && k->grs != v->cols / k->group)))
    return 0;
  if (tok && v->cols % p->vec) return 0;
  if (blk && (k->group >= ((int64_t)1 << 31) || k->group % p->vec || v->cols % p->vec ||
              d->scale_layout == BQ_SCALES_MN_MAJOR || d->scale_type == BQ_UE8M0X4 ||
              (v->rows + k->group - 1) / k->group * k->grs >= ((int64_t)1 << 31)))
    return 0; /* (B and the kernels' block index are 32-bit) */
  k->group = tok ? v->cols : d->granularity == BQ_PER_GROUP || blk ? k->group : 1;
  bq__affine_dense(k, n);
  k->tiles = n / p->vec;
  /* quantize from 16-bit data without zero points, rows and groups whole pairs of accesses,
     the output 16-byte aligned: bq_affine_pair, a thread for two accesses under one scale
     (n is then whole pairs) */
  int pair = d->op == BQ_QUANTIZE && d->granularity != BQ_PER_TENSOR && t == 2 && !k->zps &&
             k->group % (2 * p->vec) == 0 && (!blk || v->cols % (2 * p->vec) == 0) && k->out % 16 == 0 &&
             p->kernels[BQ__AFFINE_PAIR];
  *which = pair ? BQ__AFFINE_PAIR : BQ__AFFINE_LEAN;
  return pair ? k->tiles / 2 : k->tiles + (n % p->vec != 0);
}

/* The table's lean column for n elements of the float type's t bytes on a device of limits
   l: the rule takes the lean route */
BQ__FN int bq__affine_lean_rule(const bq__affine_row *row, int64_t n, int64_t t, const bq__limits *l) {
  return row->lean < 0 || (row->lean > 0 && n * t <= bq__wave_bytes(l, row->lean));
}
/* the tune's scratch for bq__affine_tuned: x and y in buffers of their own */
BQ__FN void bq__affine_tune_point(bq_args *s, const bq_args *a, void *const buf[2]) {
  *s = *a;
  s->x = buf[0];
  s->y = buf[1];
}
/* Where the rule takes the row kernels but the lean route could serve a tensor larger than
   L2, which is faster depends on the GPU: on the H100 the row kernels, which prepare a scale
   once for many accesses, and on the H200 lean for per-group dequantize and most 16-bit and
   FP8 quantize, the row kernels for f32 and f64 per token. The tune decides: candidate 0 the
   rule's kernels, 1 the lean route. */
BQ__FN int bq__affine_tuned(const bq_plan *p, const bq_args *a, const bq__view *v, void *stream) {
  const bq_desc *d = &p->desc;
  const int64_t n = v->numel, tf = bq__dtype_size(d->float_type), ti = bq__dtype_size(d->int_type);
  if (p->l2_bytes <= 0 || n * tf < p->l2_bytes) return 0;
  int cls = 0;
  while (cls < 62 && ((int64_t)1 << (cls + 1)) <= n) cls++; /* floor(log2 n) */
  const int q = d->op == BQ_QUANTIZE;
  bq__tune_req r = {"affine_lean", cls, 2, 0, {(size_t)(n * (q ? tf : ti)), (size_t)(n * (q ? ti : tf))},
                    bq__affine_tune_point};
  return bq__tune_choice(p, a, stream, &r) == 1;
}

/* Tests: a BQ__AFFINE_* entry point the next runs take wherever its own rules let it (the
   other special kernels are then passed over); bq_affine_odd and bq_affine serve every shape
   of their granularities. -1: the host's choice. */
static int bq__affine_force_entry = -1;
/* Per channel with the channel axis outermost (every axis before it of size 1), forward
   quantize or dequantize, no mask: the tensor is [channels, inner] with a parameter block a
   row, which is per token over those rows (one contract, docs/numerics.md), and the
   per-token kernels run that layout faster than the per-channel ones (they prepare a row's
   scale once; the per-channel row kernel prepares parameter blocks in shared memory a tile
   at a time). Rows of at least BQ__ROWS_MIN_COLS elements take it, as the Python package's
   per-channel ops have. The per-token plan is selected on first use (under stream capture
   too: its modules load as a run's do) and kept. 1 with *q filled and *rp set where it
   applies; 0 where not; -1 with the status in *st where the plan could not be selected. */
#define BQ__ROWS_MIN_COLS 1024
BQ__FN int bq__affine_rows(const bq_plan *p, const bq_args *a, const bq__view *v, bq_args *q, const bq_plan **rp,
                           bq_status *st) {
  const bq_desc *d = &p->desc;
  if (d->granularity != BQ_PER_CHANNEL || d->direction != BQ_FORWARD || a->mask ||
      (d->op != BQ_QUANTIZE && d->op != BQ_DEQUANTIZE) || bq__affine_force_entry >= 0 || bq__dry.plan || !p->ctx)
    return 0; /* (select's dry run primes the plan's own kernels; the per-token plan comes on first use) */
  if (v->group < BQ__ROWS_MIN_COLS || v->group * v->gmod != v->numel) return 0; /* not outermost, or short rows */
  bq_plan *r = __atomic_load_n(&((bq_plan *)p)->rows, __ATOMIC_ACQUIRE);
  if (!r) {
    bq_desc t = *d;
    t.granularity = BQ_PER_TOKEN;
    if ((*st = bq_plan_select(&t, &r))) return -1;
    bq_plan *none = NULL;
    if (!__atomic_compare_exchange_n(&((bq_plan *)p)->rows, &none, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      bq_plan_destroy(r); /* another thread published one first */
      r = none;
    }
  }
  memset(q, 0, sizeof *q);
  q->x = a->x, q->y = a->y;
  q->rows = v->gmod, q->cols = v->group;
  q->scales = a->scales, q->zero_points = a->zero_points;
  *rp = r;
  return 1;
}

/* the parameter block every affine kernel but the lean ones reads: streams, shape, strides,
   parameters (the tiling and the dividers are the caller's) */
BQ__FN bq_affine_params bq__affine_params_of(const bq_plan *p, const bq_args *a, const bq__view *v) {
  bq_affine_params k;
  memset(&k, 0, sizeof k);
  const int fwd = p->desc.direction == BQ_FORWARD;
  k.in0 = (uint64_t)(uintptr_t)(fwd ? a->x : a->dy);
  k.in1 = (uint64_t)(uintptr_t)(fwd ? NULL : a->x);
  k.out = (uint64_t)(uintptr_t)(fwd ? a->y : a->dx);
  k.rows = v->rows;
  k.cols = v->cols;
  k.in0_stride = fwd ? v->xs : v->ys; /* dy is shaped like y */
  k.in1_stride = v->xs;
  k.out_stride = fwd ? v->ys : v->xs; /* dx is shaped like x */
  k.group = v->group ? v->group : 1;
  k.gmod = v->gmod ? v->gmod : 1;
  k.grs = v->grs;
  k.scales = (uint64_t)(uintptr_t)a->scales;
  k.zps = (uint64_t)(uintptr_t)a->zero_points;
  k.scale = p->desc.float_type == BQ_F64 ? a->scale : (double)(float)a->scale;
  k.zp = a->zero_point;
  return k;
}
/* Stochastic rounding and the fused rotation: bq_affine_sr, 16 elements a thread of 16-bit
   data, else 8 (affine.cu's BQ_SR_N), over [rows, cols] (per tensor and per channel one dense
   row), a grid of at most two SM-fulls of threads striding over them */
BQ__FN bq_status bq__affine_sr_run(const bq_plan *p, const bq_args *a, const bq__view *v, void *stream) {
  bq_affine_sr_params k;
  memset(&k, 0, sizeof k);
  k.a = bq__affine_params_of(p, a, v);
  k.offset = a->offset;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  if (p->desc.rotation) { /* (validated: a power of two) */
    k.rlog2 = bq__hadamard_log2(a->rotation_block);
    k.rsigns = p->desc.random_signs;
  }
  const bq__limits lim = bq__limits_of(p);
  const int64_t per = bq__dtype_size(p->desc.float_type) <= 2 ? 16 : 8;
  const int64_t threads = v->rows * ((v->cols + per - 1) / per), cap = 2 * lim.sms * (lim.threads_sm / 256);
  const int64_t blocks = bq__grid(threads, 256);
  return bq__launch(p, BQ__AFFINE_SR, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}

BQ__FN bq_status bq__affine_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws;
  (void)ws_bytes;
  bq__view v;
  bq_status st = bq__affine_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  const bq_desc *d = &p->desc;
  if (d->rounding == BQ_ROUND_STOCHASTIC || d->rotation) return bq__affine_sr_run(p, a, &v, stream);
  bq_args rq;
  const bq_plan *rp = NULL;
  const int rows = bq__affine_rows(p, a, &v, &rq, &rp, &st);
  if (rows < 0) return st;
  if (rows) return rp->fam->run(rp, &rq, NULL, 0, stream); /* (its context is this plan's, current) */
  bq_affine_params k = bq__affine_params_of(p, a, &v);
  const int f = bq__affine_force_entry;
  const bq__affine_row *row = bq__affine_row_of(d);
  if (a->mask) {
    /* fake quantize with a saved mask (bq_affine_mask): the tensor as one dense array of
       chunks of 32 accesses, two chunks a warp (affine.cu's BQ_MU), each warp striding */
    int64_t n = v.numel, chunks = (n + 32 * p->vec - 1) / (32 * p->vec);
    k.mask = (uint64_t)(uintptr_t)a->mask;
    bq__affine_dense(&k, n);
    return bq__launch(p, BQ__AFFINE_MASK, bq__grid((chunks + 1) / 2, 8), 1, 256, 0, &k, stream);
  }
  /* forcing BQ__AFFINE_LEAN forces the lean route: bq_affine_lean or bq_affine_pair; else
     the table's lean column takes it, or the tune where it is undecided */
  int lw = BQ__AFFINE_LEAN;
  bq_affine_params lk = k;
  int64_t lean = (f < 0 || f == BQ__AFFINE_LEAN) && p->kernels[BQ__AFFINE_LEAN] ? bq__affine_lean(p, &lk, &v, &lw) : 0;
  const bq__limits lim = bq__limits_of(p);
  if (lean && f < 0 && !bq__affine_lean_rule(row, v.numel, bq__dtype_size(d->float_type), &lim) &&
      !bq__affine_tuned(p, a, &v, stream))
    lean = 0;
  if (lean) k = lk;
  /* per block the kernels' blocks carry the row's geometry after them (the others' blocks
     are the first part, all their kernels read) */
  const bq_fastdiv fd_cols = lean && d->granularity == BQ_PER_BLOCK ? bq__make_fastdiv((uint32_t)v.cols) : k.fd_group;
  if (lean && lw == BQ__AFFINE_PAIR) { /* a pair a thread */
    bq_pair_block_params pp = {{k.in0, k.out, k.scales, (uint32_t)lean, k.fd_group}, fd_cols, (uint32_t)k.grs};
    return bq__launch(p, lw, bq__grid(lean, 256), 1, 256, 0, &pp, stream);
  }
  if (lean) { /* lu accesses a thread (the one past the last whole access takes the rest) */
    bq_lean_block_params lp = {{k.in0, k.out, k.scales, k.zps, k.scale, (uint32_t)k.tiles, (uint32_t)k.cols, k.fd_group,
                                k.zp},
                               fd_cols, (uint32_t)k.grs};
    return bq__launch(p, lw, bq__grid((lean + row->lu - 1) / row->lu, 256), 1, 256, 0, &lp, stream);
  }
  int64_t cp = f < 0 || f == BQ__AFFINE_COLS ? bq__affine_cols_cp(p, &k, &v) : 0;
  if (cp) {
    /* the channel axis innermost: [numel / C, C] with a scale per column (bq_affine_cols) */
    int64_t chunks = v.gmod / cp, rows = v.numel / v.gmod;
    /* x: strips of a chunk a thread, up to 8 warps a block (no more than C needs); y: a
       block for every affine.cu BQ_R rows (its rows in flight), up to 65535 (the blocks
       then stride), or where the table's cwave says so one wave of blocks (as many as the
       kernel's launch bounds let an SM hold) striding down the rows. */
    int64_t t = bq__dtype_size(d->float_type);
    int64_t wpb = (chunks + 31) / 32 < 8 ? (chunks + 31) / 32 : 8;
    int64_t gx = (chunks + 32 * wpb - 1) / (32 * wpb);
    int64_t r = (d->op == BQ_FAKE_QUANTIZE ? 32 : 64) / (cp * t), gy = (rows + r - 1) / r;
    if (row->cwave) {
      int64_t wave = lim.sms * bq__lb_blocks(row->regs[BQ__AFFINE_COLS], 256) * 8 / wpb / gx;
      if (gy > wave) gy = wave > 0 ? wave : 1;
    }
    if (gy > 65535) gy = 65535;
    k.rows = rows;
    k.cols = k.in0_stride = k.in1_stride = k.out_stride = v.gmod;
    return bq__launch(p, BQ__AFFINE_COLS, gx, gy, (unsigned)(32 * wpb), 0, &k, stream);
  }
  int narrow = (f < 0 || f == BQ__AFFINE_NARROW) && bq__affine_narrow(p, &k, &v);
  if (narrow || ((f < 0 || f == BQ__AFFINE_BLOCKS) && bq__affine_blocks(p, &k, &v))) {
    /* whole blocks a lane (bq_affine_narrow, f64 only, and bq_affine_blocks): an item a
       warp, or the table's bcap blocks an SM at most, each warp striding over the items */
    int64_t items = k.rows * k.chunks;
    int64_t blocks = bq__grid(items, 8), cap = row->bcap ? lim.sms * (lim.threads_sm / row->bcap / 256) : blocks;
    /* the kernel's 32-bit lane index (blockIdx.x * blockDim.x) must not wrap: fewer than
       2^24 blocks of 256, each warp striding over the items */
    if (cap > BQ__BLOCKS_MAX_GRID) cap = BQ__BLOCKS_MAX_GRID;
    return bq__launch(p, narrow ? BQ__AFFINE_NARROW : BQ__AFFINE_BLOCKS, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
  }
  int64_t flat = f < 0 || f == BQ__AFFINE_FLAT ? bq__affine_flat(p, &k, &v) : 0;
  if (flat) return bq__launch(p, BQ__AFFINE_FLAT, bq__grid(flat, 8), 1, 256, 0, &k, stream);
  int64_t accesses = (v.cols + p->vec - 1) / p->vec, tile = 32 * bq__affine_u(d); /* affine.cu's BQ_TILE */
  k.tiles = accesses > tile ? (accesses + tile - 1) / tile : 1;
  /* the table's items: an item takes several tiles of a row, which pays the row's scale (its
     reciprocal) once, while the grid keeps the table's `warps` items an SM */
  k.tpw = 1;
  int64_t warps = bq__wave_warps(&lim, row->waves);
  if (row->items == 2 || (row->items == 1 && v.rows > 1)) {
    int64_t per = v.rows * k.tiles / (lim.sms * warps);
    if (per > 1) k.tpw = per < k.tiles ? per : k.tiles;
  }
  k.chunks = (k.tiles + k.tpw - 1) / k.tpw;
  k.tpw = (k.tiles + k.chunks - 1) / k.chunks; /* the same count of tiles in every item */
  /* 32-bit index arithmetic when every index fits */
  const int64_t i31 = (int64_t)1 << 31;
  k.fast32 = v.cols <= i31 && k.group <= i31 && k.gmod <= i31 && v.rows * k.tiles <= i31;
  if (k.fast32) {
    k.fd_group = bq__make_fastdiv((uint32_t)k.group);
    k.fd_gmod = bq__make_fastdiv((uint32_t)k.gmod);
    k.fd_chunks = bq__make_fastdiv((uint32_t)k.chunks);
  }
  /* bq_affine_odd where the table says so and an access can straddle two parameter blocks
     (bq__affine_straddles) */
  int which = row->odd && bq__affine_straddles(p, &k, &v, k.group) ? BQ__AFFINE_ODD : BQ__AFFINE_ROW;
  if (f == BQ__AFFINE_ROW || (f == BQ__AFFINE_ODD && p->kernels[BQ__AFFINE_ODD])) which = f;
  return bq__launch(p, which, bq__grid(v.rows * k.chunks, 8), 1, 256, 0, &k, stream); /* a warp per item */
}

/* The entry points with code for d: the rest of affine.cu's are empty there (the table's
   ga, fr and na say where bq_affine_blocks, bq_affine_flat and bq_affine_narrow have a
   body; bq_affine_lean and bq_affine_pair exist for the forward ops named). */
BQ__FN int bq__affine_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  const int fwd = d->direction == BQ_FORWARD, g = d->granularity;
  const int half = d->float_type == BQ_F16 || d->float_type == BQ_BF16;
  if (d->rounding == BQ_ROUND_STOCHASTIC || d->rotation) return e == BQ__AFFINE_SR; /* (alone in its SKUs) */
  switch (e) {
  case BQ__AFFINE_BLOCKS: return bq__affine_ga(d) > 0;
  case BQ__AFFINE_FLAT: return bq__affine_fr(d) > 0;
  case BQ__AFFINE_NARROW: return bq__affine_na(d) > 0;
  case BQ__AFFINE_MASK: return d->op == BQ_FAKE_QUANTIZE;
  case BQ__AFFINE_LEAN: return fwd && d->op != BQ_FAKE_QUANTIZE;
  case BQ__AFFINE_PAIR:
    return fwd && d->op == BQ_QUANTIZE && half && (g == BQ_PER_TOKEN || g == BQ_PER_GROUP || g == BQ_PER_BLOCK);
  case BQ__AFFINE_SR: return 0;
  default: return 1;
  }
}

/* Quantize, dequantize and fake quantize: static scales (and zero points), any granularity,
   either direction, integer or FP8 storage */
BQ__FN bq_status bq__affine_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__plan_name_std(d, 0, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name)) || (st = bq__scale_rules(d, in, name, 0)))
    return st;
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.asymmetric (%d) applies to dynamic quantize only", name, d->asymmetric);
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rounding == BQ_ROUND_STOCHASTIC && (d->op == BQ_DEQUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (stochastic) applies where floats are rounded into "
                    "the storage type: quantize and fake quantize, forward", name);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->rotation && d->op != BQ_FAKE_QUANTIZE && d->direction == BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (1) applies to quantize and dequantize forward, "
                    "and to fake quantize either way", name);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  /* per tensor: the host scalar is in the compute type */
  if (d->granularity == BQ_PER_TENSOR) d->scale_type = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32;
  return BQ_SUCCESS;
}
/* the variant: elements per access, and accesses a lane (the table's u) */
BQ__FN void bq__affine_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  char variant[32] = "sr"; /* stochastic rounding: bq_affine_sr alone; with the rotation too ("rows" rounding
                             to nearest), then ".rot" */
  if (d->rounding != BQ_ROUND_STOCHASTIC && d->rotation) bq__copy(variant, sizeof variant, "rows");
  else if (d->rounding != BQ_ROUND_STOCHASTIC)
    snprintf(variant, sizeof variant, "vec%dx%d", bq__affine_vec(d), bq__affine_u(d));
  if (d->rotation) bq__copy(variant + strlen(variant), sizeof variant - strlen(variant), ".rot");
  bq__sku_std(d, variant, tn, buf, n);
}
/* args.mask: fake quantize's per tensor and per channel (rounding to nearest, unrotated: a
   mask of x); args.seed and args.offset: stochastic rounding's */
BQ__FN unsigned bq__affine_owns(const bq_desc *d) {
  return (d->op == BQ_FAKE_QUANTIZE && (d->granularity == BQ_PER_TENSOR || d->granularity == BQ_PER_CHANNEL) &&
                  d->rounding != BQ_ROUND_STOCHASTIC && !d->rotation
              ? BQ__OWNS_MASK
              : 0) |
         (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* the enumeration's variants: quantize and fake quantize round to nearest or stochastically;
   quantize and dequantize (forward) and fake quantize with the fused rotation or without
   (normalize refuses the rest) */
BQ__FN void bq__affine_axes(bq_op op, int *outer, int *inner) {
  *outer = 1;
  *inner = op == BQ_DEQUANTIZE ? 2 : 4;
}
BQ__FN void bq__affine_vary(bq_desc *in, int outer, int inner) {
  (void)outer;
  const int rounds = in->op == BQ_DEQUANTIZE ? 1 : 2;
  in->rounding = (bq_rounding)(inner % rounds);
  in->rotation = inner / rounds;
}

/* The affine plan a plan holds to quantize, rounding stochastically, values another kernel
   made or read with the scales it wrote (dynamic quantize's and the fused producers' stochastic
   rounding): quantize forward at granularity g, with d's types, q-range, scale type and layout */
BQ__FN void bq__affine_sr_of(const bq_desc *d, bq_granularity g, bq_desc *q) {
  memset(q, 0, sizeof *q);
  q->op = BQ_QUANTIZE;
  q->direction = BQ_FORWARD;
  q->granularity = g;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->qmin = d->qmin;
  q->qmax = d->qmax;
  q->scale_type = d->scale_type;
  q->scale_layout = d->scale_layout;
  q->rounding = BQ_ROUND_STOCHASTIC;
}
/* the typical problem's rotation blocks: 32 */
BQ__FN void bq__affine_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)ptr;
  if (d->rotation) a->rotation_block = 32;
}

static const bq__family bq__affine_family = {
  {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE}, {"quantize", "dequantize", "fake_quantize"}, "affine",
  bq__affine_normalize, NULL, bq__affine_sku, NULL, bq__affine_axes, bq__affine_vary, bq__affine_owns, NULL,
  "affine.cu", bq__text_affine_cu, bq__affine_prelude, bq__affine_vec, 0, bq__affine_shape, bq__affine_check,
  bq__no_workspace, bq__affine_run, bq__affine_has, NULL,
  {BQ__AFFINE_NAMES(0, 0, 0), BQ__AFFINE_NAMES(1, 0, 0), BQ__AFFINE_NAMES(0, 1, 0), BQ__AFFINE_NAMES(0, 0, 1),
   {BQ_ENTRY_NAME(BQ_FN_AFFINE), NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_ODD), BQ_ENTRY_NAME(BQ_FN_AFFINE_BLOCKS), NULL,
    BQ_ENTRY_NAME(BQ_FN_AFFINE_NARROW), NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_LEAN), BQ_ENTRY_NAME(BQ_FN_AFFINE_PAIR),
    BQ_ENTRY_NAME(BQ_FN_AFFINE_SR)}},
  NULL, NULL, bq__affine_typical, 0};

/* ==== src/family_dynamic.h ================================================================ */
/* ---- the dynamic family: scales computed on the device ------------------------------------ */
/* kernels_src/dynamic_abi.h - dynamic quantization's host/kernel interface, valid as C and
   as CUDA C++: its entry points and its parameter block. dynamic.cu and the host
   (src/family_dynamic.h) both include it. */
#ifndef BQ_DYNAMIC_ABI_H
#define BQ_DYNAMIC_ABI_H

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function. Per block's tiles take the first two indices. */
enum {
  BQ__DYN_ROW,    /* bq_dynamic: a team a segment (a row, or a group); per block bq_dynamic_tiles */
  BQ__DYN_LONG,   /* bq_dynamic_long: per token, long rows; per block bq_dynamic_tiles_rows; per
                     group bq_dynamic_groups (integer codes' fast groups) */
  BQ__DYN_REDUCE, /* bq_dynamic_reduce, then bq_dynamic_apply: per tensor */
  BQ__DYN_APPLY,
  BQ__DYN_STAGED  /* bq_dynamic_staged: per token, 16-bit rows staged in shared memory; per
                     group bq_dynamic_sets (fast groups of 2 or 4 accesses, two a lane) */
};
#define BQ__DYN_SETS BQ__DYN_STAGED
#define BQ_FN_DYNAMIC bq_dynamic
#define BQ_FN_DYNAMIC_LONG bq_dynamic_long
#define BQ_FN_DYNAMIC_STAGED bq_dynamic_staged
#define BQ_FN_DYNAMIC_GROUPS bq_dynamic_groups           /* per group, groups reduced across lanes */
#define BQ_FN_DYNAMIC_SETS bq_dynamic_sets               /* per group, the same, two groups a lane */
#define BQ_FN_DYNAMIC_REDUCE bq_dynamic_reduce
#define BQ_FN_DYNAMIC_APPLY bq_dynamic_apply
#define BQ_FN_DYNAMIC_TILES bq_dynamic_tiles           /* per block, rows 16-byte aligned, whole accesses */
#define BQ_FN_DYNAMIC_TILES_ROWS bq_dynamic_tiles_rows /* per block, any rows */

typedef struct bq_dynamic_params {
  bq_u64 x, y, scales, zps, partial;
  bq_i64 rows, cols, xs, ys;
  bq_i64 group, ngroups, grs;             /* per group (per block: B, blocks a row); grs as bq_pbase's ld */
  int tpr, fast_groups, nblocks, align_y; /* align_y: some segment's y starts off a 32-byte sector */
  int staged, pad;                        /* per block: tiles staged in shared memory (bq_tiles_staged);
                                             per token: bq_dynamic_staged's launch */
  double bound;                           /* args.amax_bound (0: none) */
  /* per block, the tiles' walk (bq_twalk): trows rows of tiles, tcols columns walked (the
     staged kernel's last column apart where it is not whole accesses), the grid's
     gridDim.x = tdq tcols + tdr */
  bq_i64 trows, tcols, tdq, tdr;
  /* per token, the fused rotation (BQ_DYN_ROT): blocks of 2^rlog2, rsigns the random signs
     keyed by the seed's words */
  int rlog2, rsigns;
  bq_u32 seed_lo, seed_hi;
} bq_dynamic_params;
#endif

/* elements per 16-byte input access: dynamic.cu's BQ_VEC */
BQ__FN int bq__dynamic_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

#define BQ__DYN_MAX_BLOCK 32768
/* The dynamic dispatch table: a row per granularity and float type (the int type, q-range
   and symmetry change no choice), each the fastest setting measured on the H100, per token
   f32 and f64 on the H200. The prelude gives the kernels its numbers. Columns:
   - cpt, block: bq_dynamic's accesses a thread kept on chip (dynamic.cu's BQ_CPT: 4 is 64
     bytes, 16 registers) and its largest team, which is also the per-tensor kernels' block
     (BQ_BLOCK). A segment that fits is read once; several accesses a thread keep enough
     bytes in flight at the occupancy the registers allow. Per token f32 and f64 keep 8: a
     row of half the threads, so twice the rows an SM holds in flight, which outweighs the
     registers it spills; f16 and bf16 rows ran slower so.
   - long_cpt, long_team: the same for bq_dynamic_long (BQ_LONG_CPT, BQ_LONG_TEAM).
   - long: 1 where rows longer than a block's accesses (block * cpt) take bq_dynamic_long:
     per token f16 and bf16, where fewer, fuller threads a row keep more rows on an SM (large
     teams of 4 accesses a thread leave few rows an SM, whose barriers stall the loads).
     Shorter rows, groups, and f32 and f64 rows keep bq_dynamic, faster for them. */
typedef struct bq__dynamic_row {
  bq_granularity gran;
  bq_dtype ft;
  int cpt, block, long_cpt, long_team, long_rows;
} bq__dynamic_row;
static const bq__dynamic_row bq__dynamic_table[] = {
  /* granularity, float type   cpt block long_cpt long_team long */
  {BQ_PER_TENSOR, BQ_F32,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_F64,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_F16,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_BF16,      4, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F32,        8, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F64,        8, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F16,        4, 1024, 8, 512, 1},
  {BQ_PER_TOKEN, BQ_BF16,       4, 1024, 8, 512, 1},
  {BQ_PER_GROUP, BQ_F32,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_F64,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_F16,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_BF16,       4, 1024, 8, 512, 0},
};
#define BQ__DYNAMIC_ROWS ((int)(sizeof bq__dynamic_table / sizeof bq__dynamic_table[0]))
/* per token f32 and f64 with the fused rotation keep 4 accesses a thread: at 8 the
   rotation's registers spill (bq_dynamic is held to 64) */
static const bq__dynamic_row bq__dynamic_rot_rows[] = {
  {BQ_PER_TOKEN, BQ_F32,        4, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F64,        4, 1024, 8, 512, 0},
};
/* a normalized dynamic desc's row (bq__normalize refuses per channel) */
BQ__FN const bq__dynamic_row *bq__dynamic_row_of(const bq_desc *d) {
  if (d->rotation && d->granularity == BQ_PER_TOKEN && (d->float_type == BQ_F32 || d->float_type == BQ_F64))
    return &bq__dynamic_rot_rows[d->float_type == BQ_F64];
  /* per block (bq_dynamic_tiles, whose sizes are its own) keeps per group's row */
  const bq_granularity g = d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : d->granularity;
  for (int i = 0; i < BQ__DYNAMIC_ROWS; i++)
    if (bq__dynamic_table[i].gran == g && bq__dynamic_table[i].ft == d->float_type)
      return &bq__dynamic_table[i];
  return &bq__dynamic_table[0];
}

BQ__FN void bq__dynamic_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  const bq__dynamic_row *r = bq__dynamic_row_of(d);
  bq__str_fmt(s, "#define BQ_ASYM %d\n#define BQ_GRAN %s\n#define BQ_CPT %d\n#define BQ_BLOCK %d\n"
              "#define BQ_LONG_CPT %d\n#define BQ_LONG_TEAM %d\n#define BQ_POW2 %d\n#define BQ_WRITE_Y %d\n",
              d->asymmetric, bq__spec("GRAN", d->granularity), r->cpt, r->block, r->long_cpt, r->long_team,
              d->pow2_scales, d->rounding != BQ_ROUND_STOCHASTIC);
  if (d->rotation) bq__str_fmt(s, "#define BQ_DYN_ROT 1\n");
}

BQ__FN bq_status bq__dynamic_view_of(const bq_plan *p, const bq_args *a, bq__view *v) {
  bq_status st = bq__view_of(p, a, v);
  if (!st && p->desc.granularity == BQ_PER_BLOCK && v->group > BQ__DYN_MAX_BLOCK) /* a tile's indices fit 32 bits */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.group_size (%lld) is larger than %d, the largest block "
                    "dynamic quantize offers", p->name, (long long)v->group, BQ__DYN_MAX_BLOCK);
  return st;
}
BQ__FN bq_status bq__dynamic_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__dynamic_view_of(p, a, &v);
}
/* The fused rotation (per token): blocks of args.rotation_block, a power of two from 2 up to
   a warp's accesses (32 of 16 bytes), dividing the row; rows on the 16-byte grid in whole
   accesses, so that a block's accesses sit in consecutive lanes (dynamic.cu's bq_dyn_rot) */
BQ__FN bq_status bq__dynamic_rotation_check(const bq_plan *p, const bq_args *a, const bq__view *v) {
  const int t = bq__dtype_size(p->desc.float_type);
  const int64_t n = a->rotation_block;
  const bq_status st = bq__rotation_block_check(p->name, n, v->cols);
  if (st) return st;
  if (n * t > 32 * 16 || (uintptr_t)a->x % 16 || (v->xs * t) % 16 || (v->cols * t) % 16)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: the fused rotation (desc.rotation) takes rows that start 16-byte "
                    "aligned (args.x %p, args.x_row_stride %lld) and are whole 16-byte accesses (args.cols %lld), in "
                    "blocks (args.rotation_block %lld) of at most 32 of them; BQ_HADAMARD, then this op, gives the "
                    "same bits", p->name, a->x, (long long)v->xs, (long long)v->cols, (long long)n);
  return BQ_SUCCESS;
}
/* the whole validation, giving the problem's view (check's, and run's first step) */
BQ__FN bq_status bq__dynamic_validate(const bq_plan *p, const bq_args *a, bq__view *vp) {
  bq__view v;
  bq_status st = bq__dynamic_view_of(p, a, &v);
  const bq_desc *d = &p->desc;
  if (st) return st;
  *vp = v;
  if (d->rotation && (st = bq__dynamic_rotation_check(p, a, &v))) return st;
  if (v.numel == 0) return st;
  if ((st = bq__check_ptr(p, "args.x", a->x, bq__dtype_size(d->float_type)))) return st;
  if ((st = bq__check_ptr(p, "args.y", a->y, 1))) return st;
  if ((st = bq__check_ptr(p, "args.out_scales", a->out_scales, bq__dtype_size(d->scale_type)))) return st;
  if (d->asymmetric && (st = bq__check_ptr(p, "args.out_zero_points", a->out_zero_points, 4))) return st;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__dynamic_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__dynamic_validate(p, a, &v);
}

/* per tensor: one partial (two C values) per block of the reduction pass, a wave of them (as
   many as the SMs hold of the table's block) */
BQ__FN int64_t bq__dynamic_blocks(const bq_plan *p) {
  const bq__limits l = bq__limits_of(p);
  const int64_t per = l.threads_sm / bq__dynamic_row_of(&p->desc)->block;
  return l.sms * (per > 0 ? per : 1);
}
BQ__FN size_t bq__dynamic_workspace(const bq_plan *p, const bq_args *a) {
  if (p->desc.granularity != BQ_PER_TENSOR || !a || a->numel <= 0) return 0;
  return (size_t)bq__dynamic_blocks(p) * 16;
}

/* team size for a segment of `chunks` accesses, each thread holding up to `cpt` of them:
   a warp, or a block of 64 threads up to `max` (dynamic.cu's teams). A segment that fits is
   read once; several accesses per thread keep enough bytes in flight at the occupancy the
   kernel's registers allow. */
BQ__FN int bq__dynamic_team(int64_t chunks, int cpt, int max) {
  int tpr = 32;
  while (tpr < max && (int64_t)tpr * cpt < chunks) tpr *= 2;
  return tpr;
}

/* The entry points with code for d: per group, bq_dynamic_groups for integer codes only
   (FP8's fast groups ran faster inside bq_dynamic), bq_dynamic_sets for every code; per
   token, bq_dynamic_staged for 16-bit data; every other one the table names */
BQ__FN int bq__dynamic_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  if (e == BQ__DYN_SETS && d->granularity == BQ_PER_GROUP) return 1;
  if (e == BQ__DYN_STAGED) return d->float_type == BQ_F16 || d->float_type == BQ_BF16;
  return d->granularity != BQ_PER_GROUP || e != BQ__DYN_LONG || !bq__is_fp8(d->int_type);
}

/* The staged kernels' persistent wave (bq_dynamic_tiles staged, bq_dynamic_staged): as
   many blocks of `threads` an SM as its registers (64 a thread) and its shared memory (a
   slot of smem bytes a block) let it hold at once; more would wait for a resident block to
   finish every tile or row it takes. (The SM's threads never bind first: at 64 registers
   its register file holds 1024, fewer than any SM from sm_80 on runs.) */
BQ__FN int64_t bq__staged_wave(const bq_plan *p, int threads, unsigned smem) {
  const bq__limits l = bq__limits_of(p);
  int64_t per = bq__lb_blocks(64, threads);
  const int64_t fit = bq__arch_smem_sm(p->target.arch) / (smem + BQ__SMEM_BLOCK_RESERVED);
  if (per > fit) per = fit;
  return l.sms * (per > 0 ? per : 1);
}
/* Tests: BQ__DYN_ROW or BQ__DYN_LONG for every per-token run (bq_dynamic_long serves any
   row), BQ__DYN_STAGED for rows it takes (whatever their count), -1: the host's choice. */
static int bq__dynamic_force_entry = -1;
/* Tests: 0 runs per-block tiles unstaged (bq_dynamic_tiles' own loop) */
static int bq__tiles_staged = 1;
/* Tests: 0 runs per-token rows unstaged (bq_dynamic's teams, never bq_dynamic_staged) */
static int bq__rows_staged = 1;
/* The scales' kernels: per tensor its two passes, per block the tiles, per token and per
   group the teams' kernels (rounding to nearest, they quantize in the same pass) */
BQ__FN bq_status bq__dynamic_scales_run(const bq_plan *p, const bq_args *a, const bq__view *vp, void *ws,
                                         size_t ws_bytes, void *stream) {
  const bq__view v = *vp;
  bq_status st;
  const bq_desc *d = &p->desc;
  int t = bq__dtype_size(d->float_type);
  const bq__dynamic_row *row = bq__dynamic_row_of(d);
  bq_dynamic_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.scales = (uint64_t)(uintptr_t)a->out_scales;
  k.zps = (uint64_t)(uintptr_t)a->out_zero_points;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.ys = v.ys;
  k.group = v.group;
  k.ngroups = v.ngroups;
  k.grs = v.grs;
  k.bound = a->amax_bound;
  if (d->rotation) {
    k.rlog2 = bq__hadamard_log2(a->rotation_block); /* (validated) */
    k.rsigns = d->random_signs;
    k.seed_lo = (uint32_t)a->seed;
    k.seed_hi = (uint32_t)(a->seed >> 32);
  }
  if (d->granularity == BQ_PER_TENSOR) {
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__dynamic_workspace(p, a)))) return st;
    int64_t chunks = v.numel / p->vec + 1, max_blocks = bq__dynamic_blocks(p);
    int64_t blocks = (chunks + row->block - 1) / row->block;
    k.nblocks = (int32_t)(blocks < max_blocks ? blocks : max_blocks);
    k.partial = (uint64_t)(uintptr_t)ws;
    k.tpr = row->block;
    st = bq__launch(p, BQ__DYN_REDUCE, k.nblocks, 1, row->block, 0, &k, stream);
    /* (stochastic rounding's apply pass writes the scale alone: one block) */
    if (!st) st = bq__launch(p, BQ__DYN_APPLY, d->rounding == BQ_ROUND_STOCHASTIC ? 1 : k.nblocks, 1, row->block, 0,
                             &k, stream);
    return st;
  }
  if (d->granularity == BQ_PER_BLOCK) {
    /* a thread block a tile (striding past the grid's limit): bq_dynamic_tiles where every
       row starts 16-byte aligned and a block is whole accesses, else bq_dynamic_tiles_rows */
    k.trows = (v.rows + v.group - 1) / v.group;
    const int64_t tiles = k.trows * v.ngroups;
    const int threads = 2048 / p->vec; /* dynamic.cu's BQ_TILE_THREADS, each BQ_TILE_CPT accesses */
    k.fast_groups = v.group % p->vec == 0 && (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0;
    /* 16-bit data whose tiles fit the threads' registers: staged, a persistent wave of
       blocks (as many as the kernel's launch bounds let an SM hold) */
    k.staged = k.fast_groups && p->vec == 8 && (v.group / p->vec) * v.group <= (int64_t)threads * 8 && bq__tiles_staged;
    int64_t grid = bq__grid(tiles, 1);
    if (k.staged) {
      const int64_t wave = bq__staged_wave(p, threads, (unsigned)threads * 8 * 16);
      grid = tiles < wave ? tiles : wave;
    }
    k.tcols = k.staged && (v.cols - (v.ngroups - 1) * v.group) % p->vec != 0 ? v.ngroups - 1 : v.ngroups;
    k.tdq = k.tcols ? grid / k.tcols : 0;
    k.tdr = k.tcols ? grid % k.tcols : 0;
    if (k.staged) return bq__launch(p, BQ__DYN_ROW, grid, 1, threads, (unsigned)threads * 8 * 16, &k, stream);
    return bq__launch(p, k.fast_groups ? BQ__DYN_ROW : BQ__DYN_LONG, grid, 1, threads, 0, &k, stream);
  }
  int64_t chunks, segs;
  if (d->granularity == BQ_PER_TOKEN) {
    chunks = (v.cols + p->vec - 1) / p->vec;
    segs = v.rows;
  } else {
    /* groups of a power-of-two number of whole accesses (<= 128: 32 lanes of 4), rows
       16-byte aligned: reduced by shuffles across the lanes holding them; otherwise each
       group runs as a row */
    int64_t gc = v.group / p->vec;
    k.fast_groups = v.group % p->vec == 0 && gc <= 32 * row->cpt && (gc & (gc - 1)) == 0 &&
                    (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0;
    chunks = k.fast_groups ? v.cols / p->vec : (v.group + p->vec - 1) / p->vec;
    segs = k.fast_groups ? v.rows : v.rows * v.ngroups;
  }
  /* bq_dynamic_long where the table says so and the row is longer than 256 threads' cpt
     accesses (its teams' first size past bq_dynamic's) */
  /* whether some segment's y may start off a 32-byte sector (bq_segment_prologue) */
  k.align_y = (uintptr_t)a->y % 32 != 0 || v.ys % 32 != 0 || (d->granularity == BQ_PER_GROUP && v.group % 32 != 0);
  /* (per token only: per group's second entry is bq_dynamic_groups) */
  int lng = d->granularity == BQ_PER_TOKEN && row->long_rows && chunks > 256 * row->cpt;
  if (d->granularity == BQ_PER_TOKEN && bq__dynamic_force_entry >= 0) lng = bq__dynamic_force_entry == BQ__DYN_LONG;
  k.tpr = lng ? bq__dynamic_team(chunks, row->long_cpt, row->long_team) : bq__dynamic_team(chunks, row->cpt, row->block);
  /* fast groups need no team-wide barrier, so a row's team is capped and loops over the
     row's groups: short blocks that retire in address order. Two warps, or four for FP8 from
     16-bit data, whose lighter arithmetic wants more bytes a pass (on an H200, f32 [32768,
     4096] into s8 took 173 us against 199 with the row's team of 256) */
  const int team_cap = bq__is_fp8(d->int_type) && t == 2 ? 128 : 64;
  if (k.fast_groups && k.tpr > team_cap) k.tpr = team_cap;
  /* per token, f16 and bf16 rows on the 16-byte grid in whole accesses that a block's team
     holds, more of them than a wave: bq_dynamic_staged, a persistent wave of blocks, as
     many as the registers (64 a thread) and shared memory (a row's slot) let an SM hold,
     each staging its next row while it works on one (with a row a block there is no next
     row, and the slot's round trip only adds latency) */
  const int stage_forced = bq__dynamic_force_entry == BQ__DYN_STAGED;
  /* With the rotation, two slots (the next row's beside this one's), in as much shared memory
     as the block may opt into (bq__dynamic_setup): rows up to a block's 4096 accesses stage so,
     bq_dynamic_long's included, whose rotation otherwise leaves it one block an SM. */
  const int slots = d->rotation ? 2 : 1;
  /* (a slot of the rotation's map is whole 128-byte lines: bq_staged_slot) */
  const int64_t slot_bytes = d->rotation ? (chunks + 7) / 8 * 128 : chunks * 16;
  int64_t smem_most = 48 * 1024;
  if (d->rotation && d->granularity == BQ_PER_TOKEN && p->vec == 8 && slot_bytes * slots > smem_most &&
      chunks <= (int64_t)row->block * row->cpt && p->dynamic.smem_max > smem_most && bq__rows_staged) {
    bq__CUfunction fn; /* (its set-up gives the opt-in; a dry run takes it as given) */
    if (!bq__dry.plan && (st = bq__plan_fn(p, BQ__DYN_STAGED, &fn))) return st;
    smem_most = bq__dry.plan ? p->dynamic.smem_max : p->dynamic.staged_smem > smem_most ? p->dynamic.staged_smem : smem_most;
    if (lng && slot_bytes * slots <= smem_most && bq__dynamic_force_entry < 0) {
      lng = 0;
      k.tpr = bq__dynamic_team(chunks, row->cpt, row->block);
    }
  }
  if (d->granularity == BQ_PER_TOKEN && p->vec == 8 && !lng && k.tpr > 32 && v.cols % p->vec == 0 &&
      slot_bytes * slots <= smem_most && (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0 && bq__rows_staged &&
      (bq__dynamic_force_entry < 0 || stage_forced)) {
    const unsigned smem = (unsigned)(slot_bytes * slots);
    const int64_t wave = bq__staged_wave(p, k.tpr, smem);
    if (segs > wave || stage_forced) {
      k.staged = 1;
      return bq__launch(p, BQ__DYN_STAGED, segs < wave ? segs : wave, 1, k.tpr, smem, &k, stream);
    }
  }
  int threads = k.tpr > 32 ? k.tpr : 256; /* a block per row, or 8 warps of 8 rows */
  /* per group into integer codes, the fast groups take bq_dynamic_groups (the per-group
     module's second entry, bq__dynamic_has); groups of 2 or 4 accesses (half or all of
     dynamic.cu's BQ_DU a lane), into any code, bq_dynamic_sets, whose lanes hold two groups
     each, so that as many bytes are in flight as the larger groups keep (on an H100, FP8
     bf16 groups of 32 took 8% less time so) */
  const int64_t gca = d->granularity == BQ_PER_GROUP ? v.group / p->vec : 0;
  const int e = lng ? BQ__DYN_LONG
                : k.fast_groups && (gca == 2 || gca == 4) ? BQ__DYN_SETS
                : k.fast_groups && bq__dynamic_has(d, NULL, BQ__DYN_LONG) ? BQ__DYN_LONG
                                                                            : BQ__DYN_ROW;
  return bq__launch(p, e, bq__grid(segs, threads / k.tpr), 1, threads, 0, &k, stream);
}

/* Stochastic rounding: the kernels write the scales (and zero points) alone (BQ_WRITE_Y 0),
   then the plan's affine plan quantizes with them as static ones (bq__dynamic_sub): the
   stored-scale rule makes that the contract's two steps exactly. Per tensor, the scale is
   on the device: the affine plan is per token over one row of numel. */
BQ__FN bq_status bq__dynamic_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__view v;
  bq_status st = bq__dynamic_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  if ((st = bq__dynamic_scales_run(p, a, &v, ws, ws_bytes, stream)) || p->desc.rounding != BQ_ROUND_STOCHASTIC) return st;
  bq_args q;
  memset(&q, 0, sizeof q);
  q.x = a->x;
  q.y = a->y;
  q.scales = a->out_scales;
  q.zero_points = p->desc.asymmetric ? a->out_zero_points : NULL;
  q.seed = a->seed; /* (with the random signs, theirs too: the scales' kernel drew the same) */
  q.offset = a->offset;
  q.rotation_block = a->rotation_block;
  if (p->desc.granularity == BQ_PER_TENSOR) {
    q.rows = 1;
    q.cols = v.numel;
  } else {
    q.rows = a->rows;
    q.cols = a->cols;
    q.x_row_stride = a->x_row_stride;
    q.y_row_stride = a->y_row_stride;
    q.group_size = a->group_size;
    q.group_row_stride = a->group_row_stride;
  }
  return bq_plan_run(p->sub, &q, NULL, 0, stream);
}
/* Dynamic quantize: the scales (and zero points) computed from the data, forward only */
BQ__FN bq_status bq__dynamic_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__plan_name_std(d, 1, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name)) || (st = bq__scale_rules(d, in, name, 1)))
    return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.direction (backward) is not defined for dynamic quantize", name);
  if (d->granularity == BQ_PER_CHANNEL)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED,
                    "%s: desc.granularity (per_channel) is not offered for dynamic quantize: "
                    "use per_token, per_group, per_block or per_tensor", name);
  if ((st = bq__rule_asymmetric(d, name))) return st;
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  /* the fused rotation is per token's (rounding either way): the other kernels' threads hold
     no whole blocks of a row (BQ_HADAMARD, then this op, gives the same bits) */
  if (d->rotation && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.rotation (1) is offered per token for integer and FP8 "
                    "dynamic quantize (and for the microscaling formats); BQ_HADAMARD, then this op, gives the same "
                    "bits", name);
  return bq__rule_qrange(d, name, "dynamic quantize");
}
/* Stochastic rounding's plans hold the affine plan that quantizes with the scales written
   (bq__dynamic_run): quantize forward at the same granularity (per tensor: per token over
   one row), float and storage types, q-range, scale type and layout, rounding stochastically,
   with the same rotation (per token: the scales are the rotated rows') */
BQ__FN int bq__dynamic_sub(const bq_desc *d, bq_desc *q) {
  if (d->rounding != BQ_ROUND_STOCHASTIC) return 0;
  bq__affine_sr_of(d, d->granularity == BQ_PER_TENSOR ? BQ_PER_TOKEN : d->granularity, q);
  q->rotation = d->rotation;
  q->random_signs = d->random_signs;
  return 1;
}
/* the variant: elements per access, symmetric or not, power-of-two scales */
BQ__FN void bq__dynamic_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  char variant[32];
  snprintf(variant, sizeof variant, "vec%d.%s%s%s%s", bq__dynamic_vec(d), d->asymmetric ? "asym" : "sym",
           d->pow2_scales ? ".pow2" : "", d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "");
  bq__sku_std(d, variant, tn, buf, n);
}
/* the enumeration's variants: pow2_scales 0 and 1, each rounding to nearest or stochastically,
   without the fused rotation and (per token; the others refused) with it */
BQ__FN void bq__dynamic_axes(bq_op op, int *outer, int *inner) {
  (void)op;
  *outer = 1, *inner = 8;
}
BQ__FN void bq__dynamic_vary(bq_desc *in, int outer, int inner) {
  (void)outer;
  in->pow2_scales = inner & 1;
  in->rounding = (inner >> 1) & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  in->rotation = inner >> 2;
}
BQ__FN unsigned bq__dynamic_owns(const bq_desc *d) {
  return BQ__OWNS_AMAX_BOUND | (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* With the rotation, per token from 16-bit data: the shared memory a block may opt into, and
   bq_dynamic_staged given it once it loads (where the driver refuses, 48 KiB: longer rows
   take bq_dynamic_long) */
BQ__FN bq_status bq__dynamic_plan_setup(bq_plan *p) {
  if (p->desc.rotation && p->vec == 8) p->dynamic.smem_max = bq__smem_optin();
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__dynamic_setup(bq_plan *p, int e, bq__CUfunction fn) {
  const int64_t most = p->dynamic.smem_max;
  if (e == BQ__DYN_STAGED && most > 48 * 1024)
    p->dynamic.staged_smem = !bq__drv.cuFuncSetAttribute(fn, BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)most) ? most : 0;
  return BQ_SUCCESS;
}
/* the typical problem's rotation blocks: 32 (every float type's rows take them) */
BQ__FN void bq__dynamic_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)ptr;
  if (d->rotation) a->rotation_block = 32;
}

static const bq__family bq__dynamic_family = {
  {BQ_DYNAMIC_QUANTIZE}, {"dynamic_quantize"}, "dynamic",
  bq__dynamic_normalize, NULL, bq__dynamic_sku, NULL, bq__dynamic_axes, bq__dynamic_vary, bq__dynamic_owns, NULL,
  "dynamic.cu", bq__text_dynamic_cu, bq__dynamic_prelude, bq__dynamic_vec, 0, bq__dynamic_shape, bq__dynamic_check,
  bq__dynamic_workspace, bq__dynamic_run, bq__dynamic_has, bq__dynamic_setup,
  {{NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_REDUCE), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_APPLY)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_LONG), NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_STAGED)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_GROUPS), NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_SETS)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC_TILES), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_TILES_ROWS)}},
  bq__dynamic_sub, bq__dynamic_plan_setup, bq__dynamic_typical, 0};

/* ==== src/family_mx.h ===================================================================== */
/* ---- the microscaling family: MXFP8, MXFP4 and NVFP4 ------------------------------------- */
/* kernels_src/mx_abi.h - the microscaling formats' host/kernel interface, valid as C and as
   CUDA C++: its entry points and its parameter block. mx.cu and the host (src/family_mx.h)
   both include it. */
#ifndef BQ_MX_ABI_H
#define BQ_MX_ABI_H

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name.
   bq_mx_lanes: a thread takes 16 bytes of floats and a group the 2^k lanes its floats span;
   the others: a thread takes a group, of 16 or 32 elements held in registers (the formats'
   sizes), or of any other size read twice (dynamic) from L1. */
enum {
  BQ__MX_G16,    /* bq_mx16: groups of 16 */
  BQ__MX_G32,    /* bq_mx32: groups of 32 */
  BQ__MX_ANY,    /* bq_mx_any: any group size */
  BQ__MX_AMAX,   /* bq_mx_amax: NVFP4 dynamic quantize's first passes, the tensor's amax */
  BQ__MX_LANES   /* bq_mx_lanes: groups of 2^k 16-byte accesses (k <= 5), all on the 16-byte grid */
};
#define BQ_FN_MX16 bq_mx16
#define BQ_FN_MX32 bq_mx32
#define BQ_FN_MX_ANY bq_mx_any
#define BQ_FN_MX_AMAX bq_mx_amax
#define BQ_FN_MX_LANES bq_mx_lanes

typedef struct bq_mx_params {
  bq_u64 x, y, scales;      /* y: E2M1 codes two a byte, else a byte an element */
  bq_u64 dy, dx;            /* backward: dy (y's strides) read, dx (x's strides) written */
  bq_u64 tensor_scale;      /* NVFP4: the f32 tensor scale g read (0: none) */
  bq_u64 out_tensor_scale;  /* NVFP4 dynamic: where g is written */
  bq_u64 amax;              /* NVFP4 dynamic: the workspace, a partial amax (f32) a block */
  bq_u64 enc;               /* NVFP4_TE with the tensor scale computed: its encode factor (f32,
                               in the workspace after the partials); 0: 1 / g */
  bq_i64 rows, cols, xs, ys; /* element strides between rows of x and y */
  bq_i64 group, ngroups, grs; /* G, groups a row, the scales' leading dimension (rows, MN) */
  bq_i64 items;             /* groups walked: rows x groups, or the blocked layout's padded
                               tiles (whose padding entries dynamic quantize writes 0) */
  bq_i64 pgroups;           /* blocked: groups a padded row (ngroups rounded up to 4) */
  double bound;             /* args.amax_bound (0: none) */
  int finish, nparts;       /* bq_mx_amax: 0 the partials' pass, 1 the pass that reduces nparts
                               partials and writes g */
  /* bq_mx_lanes: items are a lane's 2^lacc pieces (16 bytes of floats each), ppr pieces a
     row; a group takes 2^lshift pieces. fast: rows x ppr < 2^31, rows by fd (ppr's
     divider). prows: dynamic quantize into the blocked layout, the padded rows (whose scales
     it writes 0). avec: bq_mx_amax reads x by pieces too (x's rows on the 16-byte grid).
     lacc 1 (quantize forward without the rotation): two pieces a lane */
  bq_i64 ppr, prows;
  bq_fastdiv fd;
  int lshift, fast, avec, lacc;
  /* stochastic rounding (BQ_SR): the draws' key and the index of element (0, 0); the same
     key draws the fused rotation's signs */
  bq_u32 seed_lo, seed_hi;
  bq_u64 offset;
  /* the fused rotation (BQ_MX_ROT, bq_mx_lanes): blocks of 2^rlog2; rsigns: the random signs */
  int rlog2, rsigns;
} bq_mx_params;
#endif

/* A descriptor of quantize, dequantize, fake quantize or dynamic quantize is a microscaling
   one, and this family's, where it names what only the microscaling formats have: E2M1
   storage, E4M3 scales (NVFP4), the blocked scale layout or a UE8M0 rule. (E4M3 and E5M2
   per group with UE8M0 scales in the other layouts and the library's rule is MXFP8 too, and
   stays with the affine and dynamic families, which serve it already.) */
BQ__FN int bq__is_mx(const bq_desc *d) {
  if (d->op != BQ_QUANTIZE && d->op != BQ_DEQUANTIZE && d->op != BQ_FAKE_QUANTIZE && d->op != BQ_DYNAMIC_QUANTIZE)
    return 0;
  return d->int_type == BQ_E2M1 || d->scale_type == BQ_E4M3 || d->scale_layout == BQ_SCALES_BLOCKED ||
         d->scale_rule != BQ_SCALE_RULE_DEFAULT ||
         /* (stochastic rounding and the fused rotation are this family's: MXFP8 in the other
            layouts comes here with them) */
         ((d->rounding != BQ_ROUND_NEAREST_EVEN || d->rotation) && d->granularity == BQ_PER_GROUP &&
          d->scale_type == BQ_UE8M0 && (d->int_type == BQ_E4M3 || d->int_type == BQ_E5M2));
}
BQ__FN int bq__is_mx_elem(bq_dtype t) { return t == BQ_E2M1 || t == BQ_E4M3 || t == BQ_E5M2; }

BQ__FN const char *bq__mx_label(const bq_desc *d) {
  return d->op == BQ_DYNAMIC_QUANTIZE ? "mx_dynamic_quantize" : d->op == BQ_DEQUANTIZE ? "mx_dequantize"
         : d->op == BQ_FAKE_QUANTIZE ? "mx_fake_quantize" : "mx_quantize";
}
static const char *const bq__mx_rules[] = {"default", "floor", "ceil", "even", "rceil", "rceil_sat", "torchao", "te"};
#define BQ__MX_RULES 8
BQ__FN int bq__mx_nv_rule(bq_scale_rule r) { return r == BQ_SCALE_NVFP4_TORCHAO || r == BQ_SCALE_NVFP4_TE; }
static const char *const bq__mx_layouts[] = {"rows", "mn", "blocked"};

/* The rules of a microscaling descriptor (docs/numerics.md, "Microscaling"), shared by the
   fused producers that emit the formats: per group; storage E2M1 (the default), E4M3 or E5M2,
   symmetric with no q-range; scales UE8M0 (the default), or E4M3 for E2M1 (NVFP4); any
   layout; a scale rule where the op computes its scales (dynamic: nonzero), of the scales'
   kind. name: the plan's, for messages. */
BQ__FN bq_status bq__mx_desc_rules(const bq_desc *in, bq_desc *d, const char *name, int dynamic) {
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_E2M1;
  if (!bq__is_mx_elem(d->int_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_E2M1, BQ_E4M3 or BQ_E5M2 in a "
                    "microscaling format", name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->qmin != 0 || d->qmax != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be 0: %s has no q-range",
                    name, d->qmin, d->qmax, bq__dtype_name(d->int_type));
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: the microscaling formats are "
                    "symmetric", name, d->asymmetric);
  if (d->out_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) applies to linear layers only", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_UE8M0;
  if (d->scale_type != BQ_UE8M0 && d->scale_type != BQ_E4M3)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_UE8M0 (MXFP8, MXFP4) or "
                    "BQ_E4M3 (NVFP4, with E2M1 storage)", name, (int)in->scale_type, bq__dtype_name(d->scale_type));
  if (d->scale_type == BQ_E4M3 && d->int_type != BQ_E2M1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, e4m3) is NVFP4's, whose elements are E2M1: "
                    "desc.int_type is %s", name, (int)BQ_E4M3, bq__dtype_name(d->int_type));
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name,
                    (int)d->direction);
  if (d->direction == BQ_BACKWARD && dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not defined for %s", name,
                    d->op == BQ_DYNAMIC_QUANTIZE ? "dynamic quantize" : "fused producers");
  if (d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%s) must be BQ_PER_GROUP: the microscaling "
                    "formats scale groups along the row (desc.int_type %s, desc.scale_type %s, desc.scale_layout %d, "
                    "desc.scale_rule %d)", name, bq__gran_name(d->granularity), bq__dtype_name(d->int_type),
                    bq__dtype_name(d->scale_type), (int)d->scale_layout, (int)d->scale_rule);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->scale_layout != BQ_SCALES_MN_MAJOR &&
      d->scale_layout != BQ_SCALES_BLOCKED)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR, "
                    "BQ_SCALES_MN_MAJOR or BQ_SCALES_BLOCKED", name, (int)d->scale_layout);
  if ((int)d->scale_rule < BQ_SCALE_RULE_DEFAULT || d->scale_rule > BQ_SCALE_NVFP4_TE)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d) is not a bq_scale_rule", name,
                    (int)d->scale_rule);
  if (d->scale_rule != BQ_SCALE_RULE_DEFAULT && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) applies to dynamic quantize only (the "
                    "other ops read their scales)", name, (int)d->scale_rule, bq__mx_rules[d->scale_rule]);
  if (d->scale_rule != BQ_SCALE_RULE_DEFAULT && !bq__mx_nv_rule(d->scale_rule) && d->scale_type != BQ_UE8M0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) names a UE8M0 rule: desc.scale_type is %s",
                    name, (int)d->scale_rule, bq__mx_rules[d->scale_rule], bq__dtype_name(d->scale_type));
  if (bq__mx_nv_rule(d->scale_rule) && d->scale_type != BQ_E4M3)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) names an NVFP4 rule: desc.scale_type is %s",
                    name, (int)d->scale_rule, bq__mx_rules[d->scale_rule], bq__dtype_name(d->scale_type));
  if (d->pow2_scales != 0 && (d->pow2_scales != 1 || d->op != BQ_DYNAMIC_QUANTIZE || d->scale_type != BQ_UE8M0))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) must be 0 (UE8M0 scales are powers of two "
                    "already)", name, d->pow2_scales);
  d->pow2_scales = 0; /* (implied by UE8M0; one SKU either way) */
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rounding == BQ_ROUND_STOCHASTIC && (d->op == BQ_DEQUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (stochastic) applies where floats are rounded into "
                    "the format: quantize, fake quantize and dynamic quantize, forward", name);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->rotation && (d->op == BQ_FAKE_QUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (1) applies to quantize, dynamic quantize and "
                    "dequantize, forward", name);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  /* (plans are named by the op, as the other families' are: "quantize_per_group") */
  snprintf(name, name_size, "%s_%s%s", bq__op_name(d->op), bq__gran_name(d->granularity),
           d->direction == BQ_BACKWARD ? "_backward" : "");
  return bq__mx_desc_rules(in, d, name, d->op == BQ_DYNAMIC_QUANTIZE);
}

/* "mx_dynamic_quantize.fwd.bf16.e2m1.scale_ue8m0.blocked.floor.sm_90", with ".sr" before the
   target under stochastic rounding, then ".rot" with the fused rotation (its random signs are
   a run-time choice of the same kernel) */
BQ__FN void bq__mx_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  snprintf(buf, n, "%s.%s.%s.%s.scale_%s.%s.%s%s%s.%s", bq__mx_label(d), d->direction == BQ_BACKWARD ? "bwd" : "fwd",
           bq__dtype_name(d->float_type),
           bq__dtype_name(d->int_type), bq__dtype_name(d->scale_type), bq__mx_layouts[d->scale_layout],
           bq__mx_rules[d->scale_rule], d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "",
           d->rotation ? ".rot" : "", tn);
}
BQ__FN int bq__mx_from_sku(char *const *all, int n, bq_desc *d) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
  if (n >= 8 && !strcmp(all[n - 1], "rot")) d->rotation = 1, n--;
  if (n == 8 && !strcmp(all[7], "sr")) d->rounding = BQ_ROUND_STOCHASTIC, n = 7;
  if (n != 7 || (strcmp(all[1], "fwd") && strcmp(all[1], "bwd"))) return 0;
  d->direction = !strcmp(all[1], "bwd") ? BQ_BACKWARD : BQ_FORWARD;
  char *const tok[6] = {all[0], all[2], all[3], all[4], all[5], all[6]}; /* the label, then the types and form */
  int op = -1, lay = -1, rule = -1;
  for (int i = 0; i < 4; i++) {
    bq_desc l;
    memset(&l, 0, sizeof l);
    l.op = ops[i];
    if (!strcmp(tok[0], bq__mx_label(&l))) op = i;
  }
  for (int i = 0; i < 3; i++)
    if (!strcmp(tok[4], bq__mx_layouts[i])) lay = i;
  for (int i = 0; i < BQ__MX_RULES; i++)
    if (!strcmp(tok[5], bq__mx_rules[i])) rule = i;
  if (op < 0 || lay < 0 || rule < 0 || strncmp(tok[3], "scale_", 6)) return 0;
  d->op = ops[op];
  d->granularity = BQ_PER_GROUP;
  d->scale_layout = (bq_scale_layout)lay;
  d->scale_rule = (bq_scale_rule)rule;
  return bq__dtype_from_name(tok[1], &d->float_type) && bq__dtype_from_name(tok[2], &d->int_type) &&
         bq__dtype_from_name(tok[3] + 6, &d->scale_type);
}
/* the enumeration's variants (bq__all_descs): the element and scale types (E2M1 with UE8M0
   or E4M3, E4M3 and E5M2 with UE8M0) by the layouts; for dynamic quantize the rules, and
   the two roundings (stochastic where the op rounds) */
BQ__FN void bq__mx_axes(bq_op op, int *outer, int *inner) {
  *outer = 4 * 3;
  *inner = (op == BQ_DYNAMIC_QUANTIZE ? BQ__MX_RULES : 1) * 2 * 2;
}
BQ__FN void bq__mx_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype elem[] = {BQ_E2M1, BQ_E2M1, BQ_E4M3, BQ_E5M2}, scale[] = {BQ_UE8M0, BQ_E4M3, BQ_UE8M0, BQ_UE8M0};
  const int rules = in->op == BQ_DYNAMIC_QUANTIZE ? BQ__MX_RULES : 1;
  in->granularity = BQ_PER_GROUP;
  in->int_type = elem[outer % 4];
  in->scale_type = scale[outer % 4];
  in->scale_layout = (bq_scale_layout)(outer / 4);
  in->scale_rule = (bq_scale_rule)(inner % rules);
  in->rounding = (bq_rounding)(inner / rules % 2);
  in->rotation = inner / rules / 2;
  in->asymmetric = 0;
  in->qmin = in->qmax = 0;
}
/* args.amax_bound: dynamic quantize into UE8M0 scales (NVFP4's two levels take none); the
   tensor scales: NVFP4's */
BQ__FN unsigned bq__mx_owns(const bq_desc *d) {
  const unsigned sr = (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
                      (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
  if (d->scale_type == BQ_E4M3) return BQ__OWNS_TENSOR_SCALE | sr;
  return (d->op == BQ_DYNAMIC_QUANTIZE ? BQ__OWNS_AMAX_BOUND : 0) | sr;
}
BQ__FN const char *bq__mx_guarantee(const bq_desc *d) {
  if (d->rounding == BQ_ROUND_STOCHASTIC)
    return "microscaling (docs/numerics.md, \"Microscaling\"): each element rounded stochastically into its type "
           "(\"Stochastic rounding\": Philox4x32-10 keyed by args.seed at the element's index plus args.offset), "
           "saturating; scales by the plan's rule; bit-identical to the CPU reference";
  return "microscaling (docs/numerics.md, \"Microscaling\"): each element rounded once to nearest even into its "
         "type, saturating; scales by the plan's rule; bit-identical to the CPU reference";
}

BQ__FN void bq__mx_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_DIR %s\n#define BQ_GRAN BQ_GRAN_GROUP\n#define BQ_ASYM 0\n"
              "#define BQ_MX_LAYOUT %d\n#define BQ_MX_RULE %d\n#define BQ_SR %d\n#define BQ_MX_ROT %d\n",
              bq__spec("OP", d->op), bq__spec("DIR", d->direction), (int)d->scale_layout, (int)d->scale_rule,
              d->rounding == BQ_ROUND_STOCHASTIC, d->rotation);
}
BQ__FN int bq__mx_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* The problem: [rows, cols] in groups of G along the row (E2M1: G, cols and the row strides
   even, two codes a byte); the scales in the layout (blocked: group_row_stride 0, the
   layout's own padded extent) */
#define BQ__MX_MAX_GROUP 4096
BQ__FN bq_status bq__mx_view(const bq_plan *p, const bq_args *a, bq__view *v) {
  const bq_desc *d = &p->desc;
  if (a && d->scale_layout == BQ_SCALES_BLOCKED && a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 with desc.scale_layout "
                    "BQ_SCALES_BLOCKED (its extent is the padded tiles')", p->name, (long long)a->group_row_stride);
  bq_status st = bq__view_of(p, a, v);
  if (st) return st;
  if (v->group > BQ__MX_MAX_GROUP)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.group_size (%lld) is larger than %d, the largest microscaling "
                    "group offered", p->name, (long long)v->group, BQ__MX_MAX_GROUP);
  const int codes = d->direction == BQ_FORWARD && d->op != BQ_FAKE_QUANTIZE; /* the call moves codes */
  if (d->int_type == BQ_E2M1 && codes) {
    if (v->group % 2)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) is odd: E2M1 packs two elements a byte, "
                      "so groups must be even", p->name, (long long)v->group);
    const int64_t xs = d->op == BQ_DEQUANTIZE ? v->xs : v->ys; /* the codes' stride */
    if (xs % 2)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.%s_row_stride (%lld) is odd: E2M1 rows start on a byte", p->name,
                      d->op == BQ_DEQUANTIZE ? "x" : "y", (long long)xs);
  }
  if (d->scale_layout == BQ_SCALES_BLOCKED) v->grs = 0;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__mx_view(p, a, &v);
}
BQ__FN int bq__mx_nv(const bq_plan *p) { return p->desc.scale_type == BQ_E4M3; }
/* NVFP4 dynamic quantize computing the tensor scale: the amax passes, whose first has at
   most 8 blocks an SM (each a partial amax in the workspace) */
BQ__FN int bq__mx_two_pass(const bq_plan *p, const bq_args *a) {
  return bq__mx_nv(p) && p->desc.op == BQ_DYNAMIC_QUANTIZE && a && !a->tensor_scale;
}
BQ__FN int64_t bq__mx_amax_blocks(const bq_plan *p, const bq_args *a) {
  const int64_t blocks = bq__grid(a->rows * a->cols, 256), cap = (int64_t)bq__limits_of(p).sms * 8;
  return blocks < cap ? blocks : cap;
}
BQ__FN size_t bq__mx_workspace(const bq_plan *p, const bq_args *a) {
  if (!bq__mx_two_pass(p, a) || a->rows <= 0 || a->cols <= 0 || a->rows > BQ__MAX_ELEMS / a->cols) return 0;
  return (size_t)bq__mx_amax_blocks(p, a) * 4 + 4; /* the partials, then Transformer Engine's encode factor */
}
/* bq_mx_lanes takes a call (returning log2 of the lanes a group spans, else -1) where a
   group is 2^k (k <= 5) pieces of 16 bytes of floats, and every piece of each stream is
   aligned to its size: the floats' 16 bytes, the codes' 16 / T (E2M1: half that) */
BQ__FN int bq__mx_lanes(const bq_desc *d, const bq_args *a, const bq__view *v) {
  const int T = bq__dtype_size(d->float_type), E = 16 / T, cb = d->int_type == BQ_E2M1 ? E / 2 : E;
  const int k = v->group % E ? -1 : bq__pow2_log(v->group / E, 0, 5);
  if (k < 0) return -1;
  const int bwd = d->direction == BQ_BACKWARD, deq = d->op == BQ_DEQUANTIZE;
  const int codes = !bwd && d->op != BQ_FAKE_QUANTIZE; /* one stream is codes */
  /* each stream: its pointer and row stride in bytes, and the piece's size */
  const void *ptr[3] = {bwd ? a->dy : a->x, bwd ? (const void *)a->dx : a->y, bwd && !deq ? a->x : NULL};
  const int64_t st[3] = {bwd ? v->ys : v->xs, bwd ? v->xs : v->ys, v->xs};
  for (int i = 0; i < 3; i++) {
    if (!ptr[i]) continue;
    const int is_code = codes && i == (deq ? 0 : 1);
    const int64_t sb = is_code ? (d->int_type == BQ_E2M1 ? st[i] / 2 : st[i]) : st[i] * T, piece = is_code ? cb : 16;
    if ((uintptr_t)ptr[i] % (uintptr_t)piece || sb % piece) return -1;
  }
  return k;
}
/* bq_mx_lanes' pieces a lane, as a power of two: 1 (two) for quantize forward without the
   rotation where a group is two pieces or more and the codes' base and row stride lie on the
   grid of two pieces' codes, else 0 (one). Dequantize keeps one: two pieces a lane made
   its large rows a third slower */
static int bq__mx_force_lacc = -1; /* tests: 0 or 1 (where allowed) instead of the rule */
BQ__FN int bq__mx_lacc(const bq_desc *d, const bq_args *a, const bq__view *v, int lsh) {
  if (lsh < 1 || d->rotation || d->direction == BQ_BACKWARD || d->op != BQ_QUANTIZE) return 0;
  const int T = bq__dtype_size(d->float_type), E = 16 / T, cb = d->int_type == BQ_E2M1 ? E / 2 : E;
  const int64_t sb = d->int_type == BQ_E2M1 ? v->ys / 2 : v->ys;
  if ((uintptr_t)a->y % (uintptr_t)(2 * cb) || sb % (2 * cb)) return 0;
  return bq__mx_force_lacc >= 0 ? bq__mx_force_lacc : 1;
}
BQ__FN bq_status bq__mx_validate(const bq_plan *p, const bq_args *a, bq__view *v) {
  bq_status st = bq__mx_view(p, a, v);
  const bq_desc *d = &p->desc;
  if (st || v->numel == 0) return st;
  const int dyn = d->op == BQ_DYNAMIC_QUANTIZE, deq = d->op == BQ_DEQUANTIZE, bwd = d->direction == BQ_BACKWARD;
  const int T = bq__dtype_size(d->float_type), fake = d->op == BQ_FAKE_QUANTIZE;
  if (bwd) {
    if ((st = bq__check_ptr(p, "args.dy", a->dy, T))) return st;
    if ((st = bq__check_ptr(p, "args.dx", a->dx, T))) return st;
    if (!deq && (st = bq__check_ptr(p, "args.x", a->x, T))) return st;
  } else {
    if ((st = bq__check_ptr(p, "args.x", a->x, deq ? 1 : T))) return st;
    if ((st = bq__check_ptr(p, "args.y", a->y, deq || fake ? T : 1))) return st;
  }
  if ((st = bq__check_ptr(p, dyn ? "args.out_scales" : "args.scales", dyn ? a->out_scales : a->scales, 1))) return st;
  if (!dyn && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points must be NULL: the microscaling formats are "
                    "symmetric", p->name);
  if (d->rotation) {
    if ((st = bq__rotation_block_check(p->name, a->rotation_block, v->cols))) return st;
    if (bq__mx_lanes(d, a, v) < 0 || a->rotation_block > 32 * (16 / T))
      return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: the fused rotation (desc.rotation) takes rows whose streams start on "
                      "the 16-byte grid, groups (args.group_size %lld) of 2^k 16-byte accesses of floats (k <= 5) and "
                      "blocks (args.rotation_block %lld) of at most 32 of them; BQ_HADAMARD, then this op, gives the "
                      "same bits", p->name, (long long)v->group, (long long)a->rotation_block);
  }
  if (bq__mx_nv(p)) {
    if ((!dyn || a->tensor_scale) && (st = bq__check_ptr(p, "args.tensor_scale", a->tensor_scale, 4))) return st;
    if (bq__mx_two_pass(p, a) && (st = bq__check_ptr(p, "args.out_tensor_scale", a->out_tensor_scale, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__mx_validate(p, a, &v);
}

/* Tests: the entry point every run takes (BQ__MX_ANY serves every group size), -1: the
   host's choice */
static int bq__mx_force_entry = -1;

BQ__FN bq_status bq__mx_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__view v;
  bq_status st = bq__mx_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  const bq_desc *d = &p->desc;
  bq_mx_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.dy = (uint64_t)(uintptr_t)a->dy;
  k.dx = (uint64_t)(uintptr_t)a->dx;
  k.scales = (uint64_t)(uintptr_t)(d->op == BQ_DYNAMIC_QUANTIZE ? a->out_scales : a->scales);
  k.tensor_scale = (uint64_t)(uintptr_t)a->tensor_scale;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.ys = v.ys;
  k.group = v.group;
  k.ngroups = v.ngroups;
  k.grs = v.grs;
  k.bound = d->op == BQ_DYNAMIC_QUANTIZE ? a->amax_bound : 0;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  k.offset = a->offset;
  if (d->rotation) { /* (validated: a power of two, bq_mx_lanes' call) */
    k.rlog2 = bq__hadamard_log2(a->rotation_block);
    k.rsigns = d->random_signs;
  }
  /* dynamic quantize into the blocked layout walks the padded tiles, whose padding entries
     it writes 0 */
  const int pad = d->op == BQ_DYNAMIC_QUANTIZE && d->scale_layout == BQ_SCALES_BLOCKED;
  const int64_t wrows = pad ? (v.rows + 127) / 128 * 128 : v.rows;
  k.pgroups = pad ? (v.ngroups + 3) / 4 * 4 : v.ngroups;
  k.items = wrows * k.pgroups;
  /* the rows in pieces of 16 bytes of floats, where they hold whole ones (bq_mx_lanes, and
     bq_mx_amax where x's rows are on the 16-byte grid) */
  const int T = bq__dtype_size(d->float_type);
  if (v.cols % (16 / T) == 0) {
    k.ppr = v.cols / (16 / T);
    k.fast = v.rows * k.ppr < ((int64_t)1 << 31);
    if (k.fast) k.fd = bq__make_fastdiv((uint32_t)k.ppr);
    k.avec = (uintptr_t)a->x % 16 == 0 && (v.xs * T) % 16 == 0;
  }
  if (bq__mx_two_pass(p, a)) {
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__mx_workspace(p, a)))) return st;
    k.amax = (uint64_t)(uintptr_t)ws;
    k.out_tensor_scale = (uint64_t)(uintptr_t)a->out_tensor_scale;
    k.nparts = (int)bq__mx_amax_blocks(p, a);
    if ((st = bq__launch(p, BQ__MX_AMAX, k.nparts, 1, 256, 0, &k, stream))) return st;
    k.finish = 1;
    if ((st = bq__launch(p, BQ__MX_AMAX, 1, 1, 256, 0, &k, stream))) return st;
    k.finish = 0;
    k.tensor_scale = k.out_tensor_scale;
    k.enc = k.amax + 4 * (uint64_t)k.nparts; /* (the finishing block wrote it) */
  }
  int e = v.group == 16 ? BQ__MX_G16 : v.group == 32 ? BQ__MX_G32 : BQ__MX_ANY;
  /* bq_mx_lanes where its grid holds, but for dynamic quantize without the rotation: there the
     group kernels, whose thread reduces its group's amax alone, ran faster (MXFP8 bf16
     [8192, 4096] 32 us against 44 on the H200). A test may force either. */
  const int f = bq__mx_force_entry;
  const int lsh = bq__mx_lanes(d, a, &v);
  if (lsh >= 0 && (f >= 0 ? f == BQ__MX_LANES : d->op != BQ_DYNAMIC_QUANTIZE || d->rotation)) {
    e = BQ__MX_LANES;
    k.lshift = lsh;
    k.lacc = bq__mx_lacc(d, a, &v, lsh);
    k.items = v.rows * k.ppr >> k.lacc; /* (ppr and its divider set above: G is whole pieces) */
    k.prows = wrows;
  }
  if (f >= 0 && f != BQ__MX_LANES) e = f;
  const int64_t blocks = bq__grid(k.items, 256), cap = (int64_t)bq__limits_of(p).sms * 16;
  return bq__launch(p, e, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}
/* the amax pass is NVFP4 dynamic quantize's alone */
BQ__FN int bq__mx_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  return e != BQ__MX_AMAX || (d->scale_type == BQ_E4M3 && d->op == BQ_DYNAMIC_QUANTIZE);
}
/* the typical problem's groups are the format's (16 for NVFP4, 32 else), its rotation blocks 32 */
BQ__FN void bq__mx_typical(const bq_desc *d, bq_args *a, void *ptr) {
  a->group_size = d->scale_type == BQ_E4M3 ? 16 : 32;
  if (d->rotation) a->rotation_block = 32; /* (a block every float type's bq_mx_lanes takes) */
  if (d->scale_type == BQ_E4M3 && d->op != BQ_DYNAMIC_QUANTIZE) a->tensor_scale = ptr;
  if (d->scale_type == BQ_E4M3 && d->op == BQ_DYNAMIC_QUANTIZE) a->out_tensor_scale = ptr;
}

static const bq__family bq__mx_family = {
  {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE},
  {"quantize", "dequantize", "fake_quantize", "dynamic_quantize"}, "mx",
  bq__mx_normalize, bq__mx_label, bq__mx_sku, bq__mx_from_sku, bq__mx_axes, bq__mx_vary, bq__mx_owns,
  bq__mx_guarantee, "mx.cu", bq__text_mx_cu, bq__mx_prelude, bq__mx_vec, 0, bq__mx_shape, bq__mx_check,
  bq__mx_workspace, bq__mx_run, bq__mx_has, NULL,
  {{NULL}, {NULL}, {NULL},
   {BQ_ENTRY_NAME(BQ_FN_MX16), BQ_ENTRY_NAME(BQ_FN_MX32), BQ_ENTRY_NAME(BQ_FN_MX_ANY), BQ_ENTRY_NAME(BQ_FN_MX_AMAX),
    BQ_ENTRY_NAME(BQ_FN_MX_LANES)},
   {NULL}},
  NULL, NULL, bq__mx_typical, 0};

/* ==== src/family_fused.h ================================================================== */
/* ---- the fused family: a producer (RMSNorm, gated activation) and its quantize ------------- */
/* kernels_src/fused_abi.h - the fused producers' host/kernel interface (RMSNorm, gated
   activation, then quantize), valid as C and as CUDA C++: their entry points and their
   parameter block. fused.cu and the host (src/family_fused.h) both include it. */
#ifndef BQ_FUSED_ABI_H
#define BQ_FUSED_ABI_H

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function. bq_fused_c1 .. bq_fused_c8 hold a row of up to 256 * k
   accesses in registers (k = 1, 2, 4, 8), bq_fused_long takes any row in batches, and
   bq_fused_staged stages 16-byte aligned rows in shared memory, the next row's copy in
   flight while a row is worked on. bq_fused_m4, bq_fused_m8 and bq_fused_m16 hold a row of
   up to 512, 1024 or 2048 accesses in registers with 128 threads (4, 8 or 16 accesses each):
   a row's fixed work (its reductions, rstd and scale) is done by half as many warps.
   bq_fused_m4f and bq_fused_m8f are the same for rows of exactly 512 or 1024 accesses, whose
   accesses need no check against the row's end. bq_fused_c2d and bq_fused_c8d are
   bq_fused_c2 and bq_fused_c8 for dense rows (every stream 16-byte aligned, D whole
   accesses), a residual allowed: no element path. bq_fused_amax is NVFP4's first launch
   where the tensor scale is computed: the producer's amax over the tensor, nothing written. */
enum {
  BQ__FUSED_C1, BQ__FUSED_C2, BQ__FUSED_C4, BQ__FUSED_C8, BQ__FUSED_LONG, BQ__FUSED_STAGED,
  BQ__FUSED_M4, BQ__FUSED_M8, BQ__FUSED_M4F, BQ__FUSED_M8F, BQ__FUSED_M16, BQ__FUSED_C2D, BQ__FUSED_C8D,
  BQ__FUSED_AMAX, BQ__FUSED_ENTRIES
};
#define BQ_FN_FUSED_C1 bq_fused_c1
#define BQ_FN_FUSED_C2 bq_fused_c2
#define BQ_FN_FUSED_C4 bq_fused_c4
#define BQ_FN_FUSED_C8 bq_fused_c8
#define BQ_FN_FUSED_LONG bq_fused_long
#define BQ_FN_FUSED_STAGED bq_fused_staged
#define BQ_FN_FUSED_M4 bq_fused_m4
#define BQ_FN_FUSED_M8 bq_fused_m8
#define BQ_FN_FUSED_M4F bq_fused_m4f
#define BQ_FN_FUSED_M8F bq_fused_m8f
#define BQ_FN_FUSED_M16 bq_fused_m16
#define BQ_FN_FUSED_C2D bq_fused_c2d
#define BQ_FN_FUSED_C8D bq_fused_c8d
#define BQ_FN_FUSED_AMAX bq_fused_amax

typedef struct bq_fused_params {
  bq_u64 x, res, w, out, y, scales, zps;
  bq_i64 rows, cols, xs, rs, os, ys, group, grs; /* strides in elements; grs: per group */
  double scale, eps;                             /* per tensor's static scale; RMSNorm's eps */
  int zp, aligned, fast_groups;
  int slot, wstage; /* bq_fused_staged: a slot's bytes; the weight staged */
  /* microscaling output, NVFP4: the f32 tensor scale g read (0: computed), where a computed
     one is written, and the workspace's amax (f32): bq_fused_amax writes a partial a block,
     then (nparts > 0) one block reduces nparts partials into amax[nparts], which the
     producer's launch reads */
  bq_u64 tensor_scale, out_tensor_scale, amax;
  int nparts;
} bq_fused_params;
#endif

#define BQ__FUSED_THREADS 256 /* fused.cu's BQ_THREADS: the contract's reduction order */
/* each entry's (threads, accesses a thread): fused.cu's BQ_FUSED_ENTRY lines (the staged
   kernel's accesses a thread follow the row) */
static const int bq__fused_shapes[BQ__FUSED_ENTRIES][2] = {{256, 1}, {256, 2}, {256, 4}, {256, 8}, {256, 4},
                                                           {256, 0}, {128, 4}, {128, 8}, {128, 4}, {128, 8}, {128, 16},
                                                           {256, 2}, {256, 8}, {256, 0}};
/* the accesses an entry holds of a row at once (bq_fused_long: a batch; bq_fused_staged and
   bq_fused_amax: 0) */
BQ__FN int64_t bq__fused_held(int e) { return (int64_t)bq__fused_shapes[e][0] * bq__fused_shapes[e][1]; }
/* the narrow entries take RMSNorm per token and per group without a residual, in batches of
   at least this many rows an SM: there the fixed work a row is the largest share. (H100,
   bf16 [8192, 4096]: about 0.8 of the 256-thread kernel's time; for the gated op they were
   slower.) */
#define BQ__FUSED_NARROW_ROWS 16
#define BQ__FUSED_MAX_COLS ((int64_t)1 << 30)

/* The fused producers' kernel choice: the first row of bq__fused_rules whose facts hold
   (bq__fused_choose). A row names the facts it needs and those that rule it out, and how a
   row of the problem must fill the entry: up to what it holds, exactly that (a full row),
   or any. The facts, of a call: */
enum {
  BQ__FF_RMS = 1,      /* RMSNorm (not the gated op) */
  BQ__FF_RES = 2,      /* with a residual */
  BQ__FF_DENSE = 4,    /* every stream 16-byte aligned, whole accesses, y's rows aligned to a chunk of codes */
  BQ__FF_WHOLE = 8,    /* every T stream 16-byte aligned, whole accesses */
  BQ__FF_DYN = 16,     /* per token or per group (dynamic scales) */
  BQ__FF_MANY = 32,    /* at least BQ__FUSED_NARROW_ROWS rows an SM */
  BQ__FF_WIDE = 64,    /* f64 data: more registers an element */
  BQ__FF_ALIGNED = 128, /* every T stream 16-byte aligned */
  BQ__FF_LONG = 256,   /* more than two accesses a thread of 256 */
  BQ__FF_REG_C8 = 512, /* rows bq_fused_c8 holds but bq_fused_c4 does not, with the activation's
                          table or for 16-bit RMSNorm with a residual and dynamic scales */
  BQ__FF_STAGED = 1024 /* bq_fused_staged fits a block an SM or more (asked last: its module loads) */
};
enum { BQ__FILL_ANY, BQ__FILL_HELD, BQ__FILL_FULL }; /* bq__fused_rule.fill */
typedef struct bq__fused_rule {
  int entry;
  unsigned need, refuse; /* BQ__FF_* */
  int fill;
} bq__fused_rule;
static const bq__fused_rule bq__fused_rules[] = {
  /* narrow (128 threads): RMSNorm's dense rows, many of them, where a row's fixed work (its
     reductions, rstd, scale) is the largest share; bq_fused_m16 spills for f64 elements,
     the wider ones with a residual */
  {BQ__FUSED_M4F, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, 0, BQ__FILL_FULL},
  {BQ__FUSED_M4, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, 0, BQ__FILL_HELD},
  {BQ__FUSED_M8F, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES, BQ__FILL_FULL},
  {BQ__FUSED_M8, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES, BQ__FILL_HELD},
  {BQ__FUSED_M16, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES | BQ__FF_WIDE, BQ__FILL_HELD},
  /* long aligned rows staged in shared memory, the next row's copy in flight */
  {BQ__FUSED_STAGED, BQ__FF_ALIGNED | BQ__FF_LONG | BQ__FF_STAGED, BQ__FF_REG_C8, BQ__FILL_ANY},
  /* a row in registers, 256 threads; dense rows without the element path */
  {BQ__FUSED_C1, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C2D, BQ__FF_DENSE, 0, BQ__FILL_HELD},
  {BQ__FUSED_C2, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C4, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C8D, BQ__FF_WHOLE, 0, BQ__FILL_HELD},
  {BQ__FUSED_C8, 0, 0, BQ__FILL_HELD},
  /* any row, in batches */
  {BQ__FUSED_LONG, 0, 0, BQ__FILL_ANY},
};
#define BQ__FUSED_RULES ((int)(sizeof bq__fused_rules / sizeof bq__fused_rules[0]))

BQ__FN int bq__fused_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* gated with bf16 gates: act(g) comes from a table of its 8192 values that need the
   formula, copied into each block's shared memory (fused.cu, "the activation's table") */
#define BQ__FUSED_ACT_BYTES (8192 * 4)
BQ__FN int bq__fused_act_table(const bq_desc *d) { return d->op == BQ_GATED_QUANTIZE && d->float_type == BQ_BF16; }

/* A fused desc emits a microscaling format where it names what only those have (as
   bq__is_mx): E2M1 storage, UE8M0 or E4M3 scales, the blocked layout or a scale rule */
BQ__FN int bq__fused_mx(const bq_desc *d) {
  return (d->op == BQ_RMSNORM_QUANTIZE || d->op == BQ_GATED_QUANTIZE) &&
         (d->int_type == BQ_E2M1 || d->scale_type == BQ_UE8M0 || d->scale_type == BQ_E4M3 ||
          d->scale_layout == BQ_SCALES_BLOCKED || d->scale_rule != BQ_SCALE_RULE_DEFAULT);
}
BQ__FN int bq__fused_nv(const bq_desc *d) { return bq__fused_mx(d) && d->scale_type == BQ_E4M3; }

BQ__FN void bq__fused_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_ACT %s\n#define BQ_GRAN %s\n#define BQ_ASYM %d\n#define BQ_ACT_TAB %d\n",
              bq__spec("OP", d->op), d->op == BQ_GATED_QUANTIZE ? bq__spec("ACT", d->activation) : "0",
              bq__spec("GRAN", d->granularity), d->asymmetric, bq__fused_act_table(d));
  if (bq__fused_mx(d)) /* (common.cuh's microscaling part) */
    bq__str_fmt(s, "#define BQ_MX_LAYOUT %d\n#define BQ_MX_RULE %d\n", (int)d->scale_layout, (int)d->scale_rule);
}

/* One call's shape, strides (elements) and pointers, validated. */
typedef struct bq__fused_view {
  int64_t rows, cols, xs, ys, rs, os, group, ngroups, grs;
} bq__fused_view;

/* The shape rules: rows, cols, the row strides and the groups */
BQ__FN bq_status bq__fused_shape_of(const bq_plan *p, const bq_args *a, bq__fused_view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  const int rms = d->op == BQ_RMSNORM_QUANTIZE;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  if (a->rows < 0 || a->rows > BQ__MAX_ELEMS)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) is negative or too large", n, (long long)a->rows);
  if (a->cols < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (%lld) is negative", n, (long long)a->cols);
  if (a->cols > BQ__FUSED_MAX_COLS) /* the kernels index a row in 32 bits */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.cols (%lld) is larger than 2^30, the longest row offered", n,
                    (long long)a->cols);
  v->rows = a->rows;
  v->cols = a->cols;
  const int64_t in_cols = rms ? a->cols : 2 * a->cols;
  v->xs = a->x_row_stride ? a->x_row_stride : in_cols;
  v->ys = a->y_row_stride ? a->y_row_stride : a->cols;
  v->rs = a->residual_row_stride ? a->residual_row_stride : a->cols;
  v->os = a->out_row_stride ? a->out_row_stride : a->cols;
  if (v->xs < in_cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than %s (%lld)", n,
                    (long long)a->x_row_stride, rms ? "args.cols" : "2 * args.cols", (long long)in_cols);
  if (v->ys < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.cols (%lld)", n,
                    (long long)a->y_row_stride, (long long)a->cols);
  if (v->rs < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual_row_stride (%lld) is smaller than args.cols (%lld)",
                    n, (long long)a->residual_row_stride, (long long)a->cols);
  if (v->os < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.out_row_stride (%lld) is smaller than args.cols (%lld)", n,
                    (long long)a->out_row_stride, (long long)a->cols);
  if (v->rows && (v->xs > BQ__MAX_ELEMS / v->rows || v->ys > BQ__MAX_ELEMS / v->rows ||
                  v->rs > BQ__MAX_ELEMS / v->rows || v->os > BQ__MAX_ELEMS / v->rows))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) times a row stride is too large", n,
                    (long long)a->rows);
  if (d->granularity != BQ_PER_GROUP) return BQ_SUCCESS;
  if (d->scale_layout == BQ_SCALES_BLOCKED && a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 with desc.scale_layout "
                    "BQ_SCALES_BLOCKED (its extent is the padded tiles')", n, (long long)a->group_row_stride);
  bq_status st = bq__group_shape(n, d, a, v->rows, &v->group, &v->ngroups, &v->grs);
  if (st) return st;
  if (d->scale_layout == BQ_SCALES_BLOCKED) v->grs = 0;
  if (d->int_type == BQ_E2M1 && v->group % 2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) is odd: E2M1 packs two elements a byte, "
                    "so groups must be even", n, (long long)v->group);
  if (d->int_type == BQ_E2M1 && v->ys % 2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is odd: E2M1 rows start on a byte", n,
                    (long long)a->y_row_stride);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__fused_shape(const bq_plan *p, const bq_args *a) {
  bq__fused_view v;
  return bq__fused_shape_of(p, a, &v);
}
/* Then the scalars and the pointers */
BQ__FN bq_status bq__fused_view_of(const bq_plan *p, const bq_args *a, bq__fused_view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  const int rms = d->op == BQ_RMSNORM_QUANTIZE, t = bq__dtype_size(d->float_type);
  bq_status st = bq__fused_shape_of(p, a, v);
  if (st) return st;
  const int c64 = d->float_type == BQ_F64; /* scalars are used in C: f64, or rounded to f32 */
  if (d->granularity == BQ_PER_TENSOR &&
      !(isfinite(a->scale) && a->scale > 0 && (c64 || ((float)a->scale > 0 && isfinite((float)a->scale)))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0 in the compute type", n,
                    a->scale);
  if (d->granularity == BQ_PER_TENSOR && (st = bq__fp8_zero_point(p, a->zero_point))) return st;
  if (rms && !(isfinite(a->eps) && a->eps >= 0 && (c64 || isfinite((float)a->eps))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.eps (%g) must be finite and >= 0 in the compute type", n,
                    a->eps);
  if (!rms) {
    if (a->residual)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual (%p) applies to rmsnorm_quantize only", n, a->residual);
    if (a->norm_weight)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.norm_weight (%p) applies to rmsnorm_quantize only", n,
                      a->norm_weight);
    if (a->eps != 0)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.eps (%g) applies to rmsnorm_quantize only", n, a->eps);
  }
  if (rms && a->residual && a->residual == a->x && v->rs != v->xs)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual is args.x, but args.residual_row_stride (%lld) is "
                    "not x's (%lld)", n, (long long)v->rs, (long long)v->xs);
  if (d->rotation && (st = bq__rotation_block_check(n, a->rotation_block, v->cols))) return st;
  if (v->rows == 0 || v->cols == 0) return BQ_SUCCESS;
  if ((st = bq__check_ptr(p, "args.x", a->x, t))) return st;
  if ((st = bq__check_ptr(p, "args.y", a->y, 1))) return st;
  if (rms && (st = bq__check_ptr(p, "args.norm_weight", a->norm_weight, t))) return st;
  if (a->residual && (st = bq__check_ptr(p, "args.residual", a->residual, t))) return st;
  if (a->out && (st = bq__check_ptr(p, "args.out", a->out, t))) return st;
  if (d->granularity != BQ_PER_TENSOR) {
    if ((st = bq__check_ptr(p, "args.out_scales", a->out_scales, bq__fused_mx(d) ? 1 : bq__dtype_size(d->scale_type))))
      return st;
    if (d->asymmetric && (st = bq__check_ptr(p, "args.out_zero_points", a->out_zero_points, 4))) return st;
  }
  if (bq__fused_mx(d) && a->out_zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.out_zero_points must be NULL: the microscaling formats are "
                    "symmetric", n);
  if (bq__fused_nv(d)) { /* NVFP4: the tensor scale given, or computed and written */
    if (a->tensor_scale && (st = bq__check_ptr(p, "args.tensor_scale", a->tensor_scale, 4))) return st;
    if (!a->tensor_scale && (st = bq__check_ptr(p, "args.out_tensor_scale", a->out_tensor_scale, 4))) return st;
  }
  return BQ_SUCCESS;
}
/* NVFP4 without args.tensor_scale: bq_fused_amax first, a partial amax a block (at most 8
   blocks an SM) and their reduction after them in the workspace */
BQ__FN int bq__fused_two_pass(const bq_plan *p, const bq_args *a) {
  return bq__fused_nv(&p->desc) && a && !a->tensor_scale;
}
BQ__FN int64_t bq__fused_amax_blocks(const bq_plan *p, const bq_args *a) {
  const int64_t cap = (int64_t)(p->num_sms > 0 ? p->num_sms : 1) * 8;
  return a->rows < cap ? a->rows : cap;
}
/* A plan that quantizes the producer's values again with the plan it holds (bq__fused_sub):
   stochastic rounding, the fused rotation */
BQ__FN int bq__fused_holds(const bq_desc *d) { return d->rounding == BQ_ROUND_STOCHASTIC || d->rotation; }
/* ... and does so with a whole quantize op of its own (the rotation, or stochastic rounding
   into a microscaling format), not with the scales the producer wrote */
BQ__FN int bq__fused_composed(const bq_desc *d) {
  return d->rotation || (d->rounding == BQ_ROUND_STOCHASTIC && bq__fused_mx(d));
}
/* the producer's own workspace: NVFP4's partial amaxes and their reduction */
BQ__FN size_t bq__fused_amax_ws(const bq_plan *p, const bq_args *a) {
  if (!bq__fused_two_pass(p, a) || a->rows <= 0 || a->cols <= 0) return 0;
  return (size_t)bq__fused_amax_blocks(p, a) * 4 + 4;
}
/* the producer's values without args.out: [rows, cols] of T, dense */
BQ__FN size_t bq__fused_values(const bq_plan *p, const bq_args *a) {
  if (!bq__fused_holds(&p->desc) || a->out || a->rows <= 0 || a->cols <= 0) return 0;
  return (size_t)a->rows * (size_t)a->cols * (size_t)bq__dtype_size(p->desc.float_type);
}
/* The held plan's arguments: the values (at vals, row stride vs; 0: dense) quantized into y
   and the call's scales, with its seed, offset, rotation block and tensor scale */
BQ__FN void bq__fused_sub_args(const bq_plan *p, const bq_args *a, const void *vals, int64_t vs, bq_args *q) {
  memset(q, 0, sizeof *q);
  q->x = vals;
  q->y = a->y;
  q->rows = a->rows, q->cols = a->cols;
  q->x_row_stride = vs, q->y_row_stride = a->y_row_stride;
  q->out_scales = a->out_scales;
  q->out_zero_points = p->desc.asymmetric ? a->out_zero_points : NULL;
  q->group_size = a->group_size, q->group_row_stride = a->group_row_stride;
  q->tensor_scale = a->tensor_scale, q->out_tensor_scale = a->out_tensor_scale;
  q->seed = a->seed, q->offset = a->offset, q->rotation_block = a->rotation_block;
}
/* the values' bytes, then (rounded up to 256) the larger of the producer's and the held
   plan's own */
BQ__FN size_t bq__fused_workspace(const bq_plan *p, const bq_args *a) {
  const size_t own = bq__fused_amax_ws(p, a);
  if (!bq__fused_holds(&p->desc)) return own;
  const size_t vb = bq__fused_values(p, a);
  size_t sub = 0;
  if (bq__fused_composed(&p->desc) && p->desc.granularity != BQ_PER_TENSOR && p->sub && a->rows > 0 && a->cols > 0) {
    bq_args q;
    bq__fused_sub_args(p, a, NULL, 0, &q);
    sub = p->sub->fam->workspace(p->sub, &q);
  }
  const size_t rest = own > sub ? own : sub;
  return rest ? (vb + 255) / 256 * 256 + rest : vb;
}

/* The call's rules, then, where the plan holds a whole dynamic quantize, that op's rules over the values
   (args.out's, or the workspace's: dense, and aligned as bq_malloc's) */
BQ__FN bq_status bq__fused_check(const bq_plan *p, const bq_args *a) {
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0 || !p->sub || !bq__fused_composed(&p->desc) ||
      p->desc.granularity == BQ_PER_TENSOR)
    return st;
  bq_args q;
  bq__fused_sub_args(p, a, a->out ? a->out : (const void *)(uintptr_t)256, a->out ? a->out_row_stride : 0, &q);
  return p->sub->fam->check(p->sub, &q);
}

/* Tests: an entry point by index for every run (a register entry too small for the row,
   a narrow one given rows that are not dense, or a full one rows of another length, takes
   bq_fused_long); -1: the host's choice. */
static int bq__fused_force_entry = -1;
BQ__FN int bq__aligned16(const void *ptr, int64_t stride_bytes) {
  return (uintptr_t)ptr % 16 == 0 && stride_bytes % 16 == 0;
}
/* The staged kernel's blocks an SM for rows of nacc accesses (two slots of slot bytes, after
   the activation's table), with the weight staged too where that costs no block an SM
   (*wbytes its bytes, else 0); 0 where its shared memory is not given. Its module loads
   first (bq__fused_setup gives it its shared memory). */
BQ__FN bq_status bq__fused_staged_fit(const bq_plan *p, int64_t tab, int64_t slot, int rms, int64_t nacc,
                                      int *blocks, int64_t *wbytes) {
  *blocks = 0, *wbytes = 0;
  for (int ws_try = rms; ws_try >= 0; ws_try--) {
    int nb = 0;
    const int64_t wb = ws_try ? nacc * 16 : 0, bytes = tab + wb + 2 * slot;
    bq__CUfunction sf = NULL;
    if (bytes > p->fused.smem_max) continue;
    bq_status st = bq__plan_fn(p, BQ__FUSED_STAGED, &sf);
    if (st) return st;
    if (bytes <= p->fused.staged_smem &&
        bq__drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, sf, BQ__FUSED_THREADS, (size_t)bytes) == 0 &&
        nb > *blocks)
      *blocks = nb, *wbytes = wb;
  }
  return BQ_SUCCESS;
}
/* The producer and its quantize, rounding to nearest: the entry point the rules pick */
BQ__FN bq_status bq__fused_produce(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0) return st;
  const bq_desc *d = &p->desc;
  const int t = bq__dtype_size(d->float_type), rms = d->op == BQ_RMSNORM_QUANTIZE;
  bq_fused_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.res = rms ? (uint64_t)(uintptr_t)a->residual : 0;
  k.w = rms ? (uint64_t)(uintptr_t)a->norm_weight : 0;
  k.out = (uint64_t)(uintptr_t)a->out;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.scales = (uint64_t)(uintptr_t)a->out_scales;
  k.zps = (uint64_t)(uintptr_t)a->out_zero_points;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.rs = v.rs;
  k.os = v.os;
  k.ys = v.ys;
  k.group = v.group;
  k.grs = v.grs;
  k.scale = a->scale;
  k.eps = rms ? a->eps : 0;
  k.zp = a->zero_point;
  k.tensor_scale = (uint64_t)(uintptr_t)a->tensor_scale;
  /* 16-byte accesses when every T stream's rows start 16-byte aligned */
  k.aligned = bq__aligned16(a->x, v.xs * t) && (rms || (v.cols * t) % 16 == 0) &&
              (!rms || bq__aligned16(a->norm_weight, 0)) && (!k.res || bq__aligned16(a->residual, v.rs * t)) &&
              (!k.out || bq__aligned16(a->out, v.os * t));
  /* groups of a power-of-two number of whole accesses, up to a warp's width */
  const int64_t gc = v.group / p->vec;
  k.fast_groups = d->granularity == BQ_PER_GROUP && v.group % p->vec == 0 && gc <= 32 && (gc & (gc - 1)) == 0;
  const int64_t nacc = (v.cols + p->vec - 1) / p->vec;
  /* dense rows: every stream 16-byte aligned, D whole accesses, y's rows aligned to a chunk
     of codes (the narrow entries and bq_fused_c2d store y in one width) */
  const int whole = k.aligned && v.cols % p->vec == 0;
  const int yal = (uintptr_t)a->y % p->vec == 0 && v.ys % p->vec == 0;
  const int64_t tab = bq__fused_act_table(d) ? BQ__FUSED_ACT_BYTES : 0; /* first in shared memory */
  if (bq__fused_two_pass(p, a)) { /* NVFP4's tensor scale: the amax, partials then their reduction */
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__fused_amax_ws(p, a)))) return st;
    k.amax = (uint64_t)(uintptr_t)ws;
    const int64_t parts = bq__fused_amax_blocks(p, a);
    if ((st = bq__launch(p, BQ__FUSED_AMAX, parts, 1, BQ__FUSED_THREADS, (unsigned)tab, &k, stream))) return st;
    k.nparts = (int)parts;
    if ((st = bq__launch(p, BQ__FUSED_AMAX, 1, 1, BQ__FUSED_THREADS, (unsigned)tab, &k, stream))) return st;
    k.amax += 4 * (uint64_t)parts; /* (the reduction's word) */
    k.nparts = 0;
    k.out_tensor_scale = (uint64_t)(uintptr_t)a->out_tensor_scale;
  }
  unsigned facts = (rms ? BQ__FF_RMS : 0) | (k.res ? BQ__FF_RES : 0) | (whole && yal ? BQ__FF_DENSE : 0) |
                   (whole ? BQ__FF_WHOLE : 0) | (k.aligned ? BQ__FF_ALIGNED : 0) |
                   (nacc > 2 * BQ__FUSED_THREADS ? BQ__FF_LONG : 0) |
                   (t == 8 ? BQ__FF_WIDE : 0);
  if (d->granularity == BQ_PER_TOKEN || d->granularity == BQ_PER_GROUP) facts |= BQ__FF_DYN;
  if (v.rows >= (int64_t)BQ__FUSED_NARROW_ROWS * (p->num_sms > 0 ? p->num_sms : 1)) facts |= BQ__FF_MANY;
  /* rows that bq_fused_c8 holds but bq_fused_c4 does not are faster in registers than
     staged with the activation's table, and for 16-bit RMSNorm with a residual and dynamic
     scales, whose two slots leave the staged kernel one block an SM */
  if ((tab || (rms && k.res && t == 2 && (facts & BQ__FF_DYN))) && nacc > bq__fused_held(BQ__FUSED_C4) &&
      nacc <= bq__fused_held(BQ__FUSED_C8))
    facts |= BQ__FF_REG_C8;
  /* staged: two slots of a row's streams (x and the residual, or the gate and up) a block;
     the weight staged too where that costs no block an SM (else it is read through L1) */
  const int64_t slot = nacc * 16 * (rms && !k.res ? 1 : 2);
  const int forced = bq__fused_force_entry >= 0 && bq__fused_force_entry < BQ__FUSED_ENTRIES;
  int64_t wbytes = 0;
  int staged_blocks = 0, which = BQ__FUSED_LONG;
  for (int r = 0; r < BQ__FUSED_RULES; r++) {
    const bq__fused_rule *u = &bq__fused_rules[r];
    const int64_t held = bq__fused_held(u->entry);
    if ((u->fill == BQ__FILL_HELD && nacc > held) || (u->fill == BQ__FILL_FULL && nacc != held)) continue;
    if ((u->need & BQ__FF_STAGED) && !forced && (u->need & ~facts & ~(unsigned)BQ__FF_STAGED) == 0 &&
        !(u->refuse & facts)) {
      if ((st = bq__fused_staged_fit(p, tab, slot, rms, nacc, &staged_blocks, &wbytes))) return st;
      if (staged_blocks > 0) facts |= BQ__FF_STAGED;
    }
    if ((u->need & ~facts) == 0 && !(u->refuse & facts)) {
      which = u->entry;
      break;
    }
  }
  if (forced) { /* the test hook: the entry asked for where it can take the problem */
    const int dense = whole && yal;
    if (k.aligned && (st = bq__fused_staged_fit(p, tab, slot, rms, nacc, &staged_blocks, &wbytes))) return st;
    which = bq__fused_force_entry;
    if (which != BQ__FUSED_LONG && which != BQ__FUSED_STAGED && nacc > bq__fused_held(which)) which = BQ__FUSED_LONG;
    if (which == BQ__FUSED_STAGED && staged_blocks <= 0) which = BQ__FUSED_LONG;
    if (which >= BQ__FUSED_M4 && which <= BQ__FUSED_M16 && !dense) which = BQ__FUSED_LONG;
    if (k.res && which >= BQ__FUSED_M8 && which <= BQ__FUSED_M16 && which != BQ__FUSED_M4F) which = BQ__FUSED_LONG;
    if ((which == BQ__FUSED_C2D && !dense) || (which == BQ__FUSED_C8D && !whole)) which = BQ__FUSED_LONG;
    if ((which == BQ__FUSED_M4F || which == BQ__FUSED_M8F) && nacc != bq__fused_held(which)) which = BQ__FUSED_LONG;
  }
  if (which == BQ__FUSED_STAGED) { /* persistent blocks, as many as fit at once */
    k.slot = (int32_t)slot;
    k.wstage = wbytes > 0;
    int64_t blocks = (int64_t)staged_blocks * (p->num_sms > 0 ? p->num_sms : 1);
    return bq__launch(p, which, v.rows < blocks ? v.rows : blocks, 1, BQ__FUSED_THREADS,
                      (unsigned)(tab + wbytes + 2 * slot), &k, stream);
  }
  /* a block a row (a block takes several when rows exceed the grid's limit); with the
     activation's table, which each block copies in first, as many blocks as fit at once */
  int64_t blocks = v.rows < 0x7fffffff ? v.rows : 0x7fffffff;
  if (tab) { /* (its module loaded first: bq__fused_setup counts its blocks) */
    bq__CUfunction fn;
    if (!bq__dry.plan && (st = bq__plan_fn(p, which, &fn))) return st;
    const int64_t per_sm = p->fused.tab_blocks[which] > 0 ? p->fused.tab_blocks[which] : 1;
    const int64_t fit = per_sm * (p->num_sms > 0 ? p->num_sms : 1);
    if (blocks > fit) blocks = fit;
  }
  return bq__launch(p, which, blocks, 1, bq__fused_shapes[which][0], (unsigned)tab, &k, stream);
}

/* Stochastic rounding and the fused rotation: the producer's run as when rounding to nearest
   (its scales and codes written, and its values: args.out, else the workspace), then the plan
   it holds (bq__fused_sub) quantizes those values over y:
   - stochastic rounding alone into integer or FP8 storage: bq_affine_sr with the scales just
     written (per tensor the static scale on every row), at each element's index r cols + c
     plus args.offset: the contract's producer, then its quantize (the dynamic scales are
     those rounding to nearest computes, as dynamic quantize's rule has them);
   - with the rotation, or stochastic rounding into a microscaling format: the whole op over
     the values, quantize per tensor with the static scale, else dynamic quantize at the same
     granularity, rotating and rounding as the desc says (its scales replace the producer's).
   y (and the scales) are written twice: the price of reusing every tuned producer kernel. */
BQ__FN bq_status bq__fused_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  if (!bq__fused_holds(&p->desc)) return bq__fused_produce(p, a, ws, ws_bytes, stream);
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0) return st;
  if ((st = bq__fused_check(p, a))) return st; /* (the held op's rules before the workspace's, as can_implement) */
  const size_t need = bq__fused_workspace(p, a), vb = bq__fused_values(p, a);
  if (need && (st = bq__check_workspace(p, ws, ws_bytes, need))) return st;
  char *rest = need > vb ? (char *)ws + (vb + 255) / 256 * 256 : NULL;
  const size_t rest_bytes = rest ? ws_bytes - (size_t)(rest - (char *)ws) : 0;
  bq_args f = *a;
  if (!a->out) {
    f.out = ws;
    f.out_row_stride = 0; /* (cols: dense) */
  }
  bq_args q;
  bq__fused_sub_args(p, a, f.out, f.out_row_stride, &q);
  const int whole = bq__fused_composed(&p->desc) && p->desc.granularity != BQ_PER_TENSOR;
  if (whole && (st = p->sub->fam->check(p->sub, &q))) return st; /* (before the producer writes anything) */
  if ((st = bq__fused_produce(p, &f, rest, rest_bytes, stream))) return st;
  if (whole) return bq_plan_run(p->sub, &q, rest, rest_bytes, stream);
  q.scales = a->out_scales, q.out_scales = NULL;
  q.zero_points = q.out_zero_points, q.out_zero_points = NULL;
  q.scale = a->scale;
  q.zero_point = a->zero_point;
  bq__view w; /* [rows, cols] with the value's and y's row strides, whatever the granularity */
  memset(&w, 0, sizeof w);
  w.rows = v.rows, w.cols = v.cols, w.numel = v.rows * v.cols;
  w.xs = f.out_row_stride ? f.out_row_stride : v.cols;
  w.ys = v.ys;
  w.group = p->desc.granularity == BQ_PER_GROUP ? v.group : 0;
  w.grs = v.grs;
  return bq__affine_sr_run(p->sub, &q, &w, stream);
}
/* The plan a stochastic or rotating plan holds (bq__fused_run): quantize forward at the same
   granularity, types, q-range, scale type and layout, rounding stochastically; with the
   rotation, or into a microscaling format, the whole op: quantize per tensor, rotating, or
   dynamic quantize (the dynamic or the microscaling family) with the desc's rotation,
   rounding and scale rule */
BQ__FN int bq__fused_sub(const bq_desc *d, bq_desc *q) {
  if (!bq__fused_holds(d)) return 0;
  bq__affine_sr_of(d, d->granularity, q);
  q->rounding = d->rounding;
  q->rotation = d->rotation;
  q->random_signs = d->random_signs;
  if (bq__fused_composed(d) && d->granularity != BQ_PER_TENSOR) {
    q->op = BQ_DYNAMIC_QUANTIZE;
    q->scale_rule = d->scale_rule;
    q->asymmetric = d->asymmetric;
  }
  return 1;
}

/* bq_fused_staged gets the dynamic shared memory its rows may take (where the driver refuses,
   the register entries serve every row); with the activation's table, each register entry
   gets its blocks an SM */
BQ__FN bq_status bq__fused_setup(bq_plan *p, int e, bq__CUfunction fn) {
  const int64_t most = p->fused.smem_max;
  if (e == BQ__FUSED_STAGED)
    p->fused.staged_smem =
        most > 0 && !bq__drv.cuFuncSetAttribute(fn, BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)most) ? most : 0;
  else if (bq__fused_act_table(&p->desc) &&
           bq__drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&p->fused.tab_blocks[e], fn, bq__fused_shapes[e][0],
                                                               BQ__FUSED_ACT_BYTES))
    p->fused.tab_blocks[e] = 0; /* (then one block an SM) */
  return BQ_SUCCESS;
}

/* RMSNorm (with a residual or not) and the gated activations, then quantize: forward,
   per tensor (static), per token or per group (dynamic), integer or FP8 storage */
BQ__FN bq_status bq__fused_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  const int gated = d->op == BQ_GATED_QUANTIZE;
  bq_status st;
  if (!gated && (st = bq__rule_no_activation(d))) return st;
  if (gated && d->activation == BQ_ACTIVATION_DEFAULT) d->activation = BQ_SILU;
  if ((st = bq__rule_no_pow2(d))) return st;
  if (gated && d->activation != BQ_SILU && d->activation != BQ_GELU_TANH)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "gated_quantize: desc.activation (%d) must be BQ_SILU or BQ_GELU_TANH",
                    (int)d->activation);
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", bq__op_name(d->op),
                    (int)d->rounding);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", bq__op_name(d->op), d->rotation);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation",
                    bq__op_name(d->op), d->random_signs);
  if (bq__fused_mx(d)) { /* a microscaling format: per group (the default here), forward */
    if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_GROUP;
    if (d->granularity < BQ_GRANULARITY_DEFAULT || d->granularity > BQ_PER_BLOCK)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) is not a bq_granularity",
                      bq__op_name(d->op), (int)d->granularity);
    bq__plan_name_std(d, 0, name, name_size);
    if ((st = bq__mx_desc_rules(in, d, name, 1))) return st;
    return BQ_SUCCESS;
  }
  if ((st = bq__rule_enums(d, 0))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TOKEN;
  bq__plan_name_std(d, 1, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name))) return st;
  if (d->scale_type == BQ_UE8M0 || d->scale_type == BQ_UE8M0X4)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.scale_type (%s) is not offered for fused producers", name,
                    bq__dtype_name(d->scale_type));
  if (d->granularity == BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (per_block) is not offered for fused producers: "
                    "use per_token or per_group (dynamic) or per_tensor (static)", name);
  if ((st = bq__scale_rules(d, in, name, 0))) return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not offered for fused producers", name);
  if (d->granularity == BQ_PER_CHANNEL)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (per_channel) is not offered for fused producers: "
                    "use per_token or per_group (dynamic) or per_tensor (static)", name);
  if ((st = bq__rule_asymmetric(d, name))) return st;
  if (d->rotation && d->granularity == BQ_PER_GROUP) /* (dynamic quantize rotates per token only) */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.rotation (1) is offered per token and per tensor for integer "
                    "and FP8 storage (and for the microscaling formats); the producer's values (args.out), "
                    "BQ_HADAMARD, then dynamic quantize give the same bits", name);
  if (d->granularity != BQ_PER_TENSOR) return bq__rule_qrange(d, name, "scales");
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (1) applies to the dynamic granularities "
                    "(per_token, per_group): a static per-tensor scale takes args.zero_point", name);
  d->scale_type = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32; /* the host scalar is in the compute type */
  return BQ_SUCCESS;
}
/* the gated op by its activation */
BQ__FN const char *bq__fused_label(const bq_desc *d) {
  if (d->op == BQ_GATED_QUANTIZE) return d->activation == BQ_GELU_TANH ? "gelu_tanh_mul_quantize" : "silu_mul_quantize";
  return "rmsnorm_quantize";
}
/* the microscaling formats by name in SKUs: the element and scale types */
static const struct bq__fused_format {
  const char *name;
  bq_dtype it, st;
} bq__fused_formats[] = {{"mxfp4", BQ_E2M1, BQ_UE8M0}, {"nvfp4", BQ_E2M1, BQ_E4M3},
                         {"mxfp8_e4m3", BQ_E4M3, BQ_UE8M0}, {"mxfp8_e5m2", BQ_E5M2, BQ_UE8M0}};
#define BQ__FUSED_FORMATS 4
/* the variant: elements per access; static, symmetric or asymmetric scales. A microscaling
   format's: "rmsnorm_quantize.fwd.per_group.bf16.nvfp4.blocked.te.sm_90" (the format, the
   layout, the rule) */
BQ__FN void bq__fused_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  if (bq__fused_mx(d)) {
    const char *fmt = "?";
    for (int i = 0; i < BQ__FUSED_FORMATS; i++)
      if (bq__fused_formats[i].it == d->int_type && bq__fused_formats[i].st == d->scale_type) fmt = bq__fused_formats[i].name;
    snprintf(buf, n, "%s.fwd.%s.%s.%s.%s.%s%s%s.%s", bq__fused_label(d), bq__gran_name(d->granularity),
             bq__dtype_name(d->float_type), fmt, bq__mx_layouts[d->scale_layout], bq__mx_rules[d->scale_rule],
             d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "", tn);
    return;
  }
  char variant[32];
  snprintf(variant, sizeof variant, "vec%d.%s%s%s", bq__fused_vec(d),
           d->granularity == BQ_PER_TENSOR ? "static" : d->asymmetric ? "asym" : "sym",
           d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "");
  bq__sku_std(d, variant, tn, buf, n);
}
/* The microscaling form of a SKU's tokens (bq__fused_sku's, the target's left off); 0 for
   the others, which take the elementwise form */
BQ__FN int bq__fused_from_sku(char *const *tok, int n, bq_desc *d) {
  const int rot = n >= 8 && !strcmp(tok[n - 1], "rot"), sr = n - rot >= 8 && !strcmp(tok[n - rot - 1], "sr");
  if (n - rot - sr != 7 || strcmp(tok[1], "fwd")) return 0;
  int op = -1, fmt = -1, lay = -1, rule = -1;
  for (int i = 0; i < 3; i++) { /* RMSNorm, then the gated op with SiLU and GELU-tanh */
    bq_desc l;
    memset(&l, 0, sizeof l);
    l.op = i ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE;
    l.activation = i == 2 ? BQ_GELU_TANH : i ? BQ_SILU : BQ_ACTIVATION_DEFAULT;
    if (!strcmp(tok[0], bq__fused_label(&l))) op = i;
  }
  for (int i = 0; i < BQ__FUSED_FORMATS; i++)
    if (!strcmp(tok[4], bq__fused_formats[i].name)) fmt = i;
  for (int i = 0; i < 3; i++)
    if (!strcmp(tok[5], bq__mx_layouts[i])) lay = i;
  for (int i = 0; i < BQ__MX_RULES; i++)
    if (!strcmp(tok[6], bq__mx_rules[i])) rule = i;
  if (op < 0 || fmt < 0 || lay < 0 || rule < 0 || strcmp(tok[2], bq__gran_name(BQ_PER_GROUP))) return 0;
  d->op = op ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE;
  d->activation = op == 2 ? BQ_GELU_TANH : op ? BQ_SILU : BQ_ACTIVATION_DEFAULT;
  d->granularity = BQ_PER_GROUP;
  d->int_type = bq__fused_formats[fmt].it;
  d->scale_type = bq__fused_formats[fmt].st;
  d->scale_layout = (bq_scale_layout)lay;
  d->scale_rule = (bq_scale_rule)rule;
  d->rounding = sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d->rotation = rot;
  return bq__dtype_from_name(tok[3], &d->float_type);
}
/* the enumeration's variants: the gated op's two activations, each with its integer and FP8
   kernels (variant 0) and the microscaling formats by layout (1 + format + 4 layout), those by
   rule, rounding and rotation (inner: rule + BQ__MX_RULES (stochastic + 2 rotation)); a
   microscaling variant keeps one desc of the enumeration's other fields (its first values)
   and refuses the rest, which it would only repeat */
BQ__FN void bq__fused_axes(bq_op op, int *outer, int *inner) {
  *outer = (op == BQ_GATED_QUANTIZE ? 2 : 1) * (1 + BQ__FUSED_FORMATS * 3), *inner = BQ__MX_RULES * 4;
}
BQ__FN void bq__fused_vary(bq_desc *in, int outer, int inner) {
  const int acts = in->op == BQ_GATED_QUANTIZE ? 2 : 1, mx = outer / acts;
  if (in->op == BQ_GATED_QUANTIZE) in->activation = outer % acts ? BQ_GELU_TANH : BQ_SILU;
  const int first = in->granularity == BQ_PER_TENSOR && in->int_type == BQ_S8 && in->scale_type == BQ_F32 &&
                    in->scale_layout == BQ_SCALES_ROW_MAJOR && !in->asymmetric && in->direction == BQ_FORWARD;
  if (mx > 0 && !first) {
    in->op = BQ_OP_NONE; /* (a repeat: refused) */
    return;
  }
  if (mx == 0) { /* integer and FP8 storage: rounding to nearest (inner 0) or stochastically (1),
                    with the rotation (2, 3: per tensor and per token) */
    if (inner > 3 || (inner > 1 && in->granularity == BQ_PER_GROUP)) in->op = BQ_OP_NONE;
    in->rounding = inner & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
    in->rotation = inner >> 1 & 1;
    return;
  }
  const struct bq__fused_format *f = &bq__fused_formats[(mx - 1) % BQ__FUSED_FORMATS];
  in->granularity = BQ_PER_GROUP;
  in->int_type = f->it;
  in->scale_type = f->st;
  in->scale_layout = (bq_scale_layout)((mx - 1) / BQ__FUSED_FORMATS);
  in->scale_rule = (bq_scale_rule)(inner % BQ__MX_RULES);
  in->rounding = inner / BQ__MX_RULES & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  in->rotation = inner / BQ__MX_RULES >> 1;
  in->qmin = in->qmax = 0;
}
/* NVFP4's tensor scales (given or computed); stochastic rounding's seed and offset; the
   rotation's block, and the seed of its random signs */
BQ__FN unsigned bq__fused_owns(const bq_desc *d) {
  return (bq__fused_nv(d) ? BQ__OWNS_TENSOR_SCALE : 0) |
         (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* bq_fused_amax is NVFP4's alone */
BQ__FN int bq__fused_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  return e != BQ__FUSED_AMAX || bq__fused_nv(d);
}
BQ__FN const char *bq__fused_guarantee(const bq_desc *d) {
  if (bq__fused_mx(d))
    return "exact: the producer as the contract builds it, its values rounded to T, then microscaling dynamic "
           "quantize (docs/numerics.md, \"Microscaling\"); bit-identical to the CPU reference";
  return d->float_type == BQ_F64
             ? "exact: the producer in f64, each operation rounded to nearest even (exp and tanh as the "
               "contract builds them), its values rounded to T and quantized as the unfused ops would; "
               "bit-identical to the CPU reference of docs/numerics.md"
             : "exact: the producer in f32, each operation rounded to nearest even (no FMA; exp and tanh as "
               "the contract builds them), its values rounded to T and quantized as the unfused ops would; "
               "bit-identical to the CPU reference of docs/numerics.md";
}
/* bq_fused_staged: as much dynamic shared memory as a block may opt into, less its static
   reductions' and a margin (bq__fused_setup gives it) */
BQ__FN bq_status bq__fused_plan_setup(bq_plan *p) {
  p->fused.smem_max = bq__smem_optin(); /* (0: the register entries serve every row) */
  return BQ_SUCCESS;
}
/* RMSNorm's weight and epsilon; a microscaling format's groups (16 for NVFP4, 32 else) and
   NVFP4's tensor scale, given (a pointer past the weight's, never dereferenced); the
   rotation's blocks, 32 */
BQ__FN void bq__fused_typical(const bq_desc *d, bq_args *a, void *ptr) {
  a->norm_weight = d->op == BQ_RMSNORM_QUANTIZE ? ptr : NULL;
  a->eps = d->op == BQ_RMSNORM_QUANTIZE ? 1e-6 : 0.0;
  if (bq__fused_mx(d)) a->group_size = d->scale_type == BQ_E4M3 ? 16 : 32;
  if (bq__fused_nv(d)) a->tensor_scale = (char *)ptr + ((size_t)1 << 33);
  if (d->rotation) a->rotation_block = 32;
}

#define BQ__FUSED_KERNELS                                                                                   \
  {BQ_ENTRY_NAME(BQ_FN_FUSED_C1),  BQ_ENTRY_NAME(BQ_FN_FUSED_C2),   BQ_ENTRY_NAME(BQ_FN_FUSED_C4),                \
   BQ_ENTRY_NAME(BQ_FN_FUSED_C8),  BQ_ENTRY_NAME(BQ_FN_FUSED_LONG), BQ_ENTRY_NAME(BQ_FN_FUSED_STAGED),            \
   BQ_ENTRY_NAME(BQ_FN_FUSED_M4),  BQ_ENTRY_NAME(BQ_FN_FUSED_M8),   BQ_ENTRY_NAME(BQ_FN_FUSED_M4F),               \
   BQ_ENTRY_NAME(BQ_FN_FUSED_M8F), BQ_ENTRY_NAME(BQ_FN_FUSED_M16),  BQ_ENTRY_NAME(BQ_FN_FUSED_C2D),               \
   BQ_ENTRY_NAME(BQ_FN_FUSED_C8D), BQ_ENTRY_NAME(BQ_FN_FUSED_AMAX)}
static const bq__family bq__fused_family = {
  {BQ_RMSNORM_QUANTIZE, BQ_GATED_QUANTIZE}, {"rmsnorm_quantize", "gated_quantize"}, "fused",
  bq__fused_normalize, bq__fused_label, bq__fused_sku, bq__fused_from_sku, bq__fused_axes, bq__fused_vary,
  bq__fused_owns, bq__fused_guarantee, "fused.cu", bq__text_fused_cu, bq__fused_prelude, bq__fused_vec, 0,
  bq__fused_shape, bq__fused_check, bq__fused_workspace, bq__fused_run, bq__fused_has, bq__fused_setup,
  {BQ__FUSED_KERNELS, {NULL}, BQ__FUSED_KERNELS, BQ__FUSED_KERNELS},
  bq__fused_sub, bq__fused_plan_setup, bq__fused_typical, 0};
#undef BQ__FUSED_KERNELS

/* ==== src/family_linear.h ================================================================= */
/* ---- the linear family: int8 GEMM with a dequantizing epilogue -------------------------------- */
/* kernels_src/linear_abi.h - the linear layers' host/kernel interface (the int8 GEMM with
   its dequantizing epilogue, and the weight sums), valid as C and as CUDA C++: their entry
   points, their parameter block and its flags. linear.cu and the host (src/family_linear.h)
   both include it. */
#ifndef BQ_LINEAR_ABI_H
#define BQ_LINEAR_ABI_H

/* The GEMM's entry points: each one's index in a plan's module (bq__family.kernels, and
   the rows of the host's bq__linear_table) and its name, the kernel's extern "C" function;
   the weight sums' module has its one entry point at index 0. */
enum { BQ__GEMM_LARGE = 0, BQ__GEMV = 1, BQ__GEMV32 = 2, BQ__GEMV64 = 3, BQ__GEMM_WGMMA = 4, BQ__GEMM_CONFIGS };
#define BQ_FN_GEMM_LARGE bq_gemm_large /* 128 x 256 tiles on mma.sync */
#define BQ_FN_GEMV bq_gemv             /* weight streaming, passes of 16 activation rows */
#define BQ_FN_GEMV32 bq_gemv32         /* of 32 */
#define BQ_FN_GEMV64 bq_gemv64         /* of 64 */
#define BQ_FN_GEMM_WGMMA bq_gemm_wgmma /* 128 x 256 tiles on wgmma (an sm_90a module) */
#define BQ_FN_WEIGHT_SUMS bq_weight_sums
/* The FP8 layers' module: the mma.sync tiles elsewhere, or the wgmma tiles and weight
   streaming in an sm_90a module (the others trap) */
enum { BQ__FP8_GEMM = 0, BQ__FP8_WGMMA = 1, BQ__FP8_GEMV = 2, BQ__FP8_WGMMA_BLK = 3, BQ__FP8_GEMV_BLK = 4,
       BQ__FP8_TMA = 5, BQ__FP8_TMA_BLK = 6 };
#define BQ_FN_FP8_GEMM bq_fp8_gemm   /* 128 x 128 tiles on mma.sync (sm_89, sm_90) */
#define BQ_FN_FP8_WGMMA bq_fp8_wgmma /* 128 x 128 tiles on wgmma (an sm_90a module) */
#define BQ_FN_FP8_GEMV bq_fp8_gemv   /* M <= 64: 64 weight rows x 16 rows of x on wgmma (sm_90a) */
#define BQ_FN_FP8_WGMMA_BLK bq_fp8_wgmma_blk /* ... the two with blockwise scales */
#define BQ_FN_FP8_GEMV_BLK bq_fp8_gemv_blk
#define BQ_FN_FP8_TMA bq_fp8_tma         /* the wgmma tiles fed by the tensor memory accelerator */
#define BQ_FN_FP8_TMA_BLK bq_fp8_tma_blk /* ... with blockwise scales */

/* (FP8 layers have no weight sums: blockwise, w_sums holds the activation scales' leading
   dimension instead, so that the int8 kernels' parameter block stays as it was) */
typedef struct bq_linear_params {
  bq_u64 a, w, y, a_scales, a_zps, w_scales, w_sums, bias;
  bq_i64 m, n, k, lda, ldy;
  double a_scale; /* per-tensor activation scale, already rounded to C */
  int a_zp;       /* per-tensor activation zero point */
  int flags;      /* BQ_LF_* */
  int tiles_m, tiles_n;
} bq_linear_params;
#define BQ_LF_SA_ROW 1 /* per-token activation scales a_scales[m]; else a_scale (FP8: a_scales[0]) */
#define BQ_LF_ZP 2     /* asymmetric activations: subtract zp * wsum[n] */
#define BQ_LF_ZP_ROW 4 /* per-token zero points a_zps[m]; else a_zp */
#define BQ_LF_BIAS 8   /* add bias[n] */
#define BQ_LF_A16 16   /* a and lda allow 16-byte accesses */
#define BQ_LF_W16 32   /* w and k allow 16-byte accesses */
#define BQ_LF_Y2 64    /* y and ldy allow two-element stores */
#define BQ_LF_K0 128   /* K == 0: y = bias (or 0) */
#define BQ_LF_Y8 256   /* y and ldy allow eight-element stores */
#define BQ_LF_PDL 512  /* weight streaming launched while the activations' kernel runs */
#define BQ_LF_SW_ROW 1024 /* FP8: per-channel weight scales w_scales[n]; else w_scales[0] */
/* FP8 blockwise: a_scales[m][b] (m * lds + b, lds = w_sums) of 1 x 128 groups, w_scales[n / 128][b] of
   128 x 128 blocks (b < ceil(K / 128)), applied to each K block's partial sum */
#define BQ_LF_BLOCK 2048
#define BQ_LF_SA_MN 4096 /* ... the activation scales MN-major: a_scales[b][m] (b * lds + m) */

/* bq_fp8_tma's one parameter: the tensor maps (CUtensorMap, 128 bytes, 64-byte aligned,
   written by cuTensorMapEncodeTiled) of the activations [M, K] and the weights [N, K], both
   in boxes of 128 x 128 bytes in the 128-byte swizzle, then the usual parameter block */
#ifdef __cplusplus
#define BQ_ABI_ALIGN64 alignas(64)
#else
#define BQ_ABI_ALIGN64 _Alignas(64)
#endif
typedef struct bq_fp8_tma_params {
  BQ_ABI_ALIGN64 bq_u64 tmap_a[16];
  BQ_ABI_ALIGN64 bq_u64 tmap_w[16];
  bq_linear_params p;
} bq_fp8_tma_params;
#endif
#define BQ__GEMM_ENTRIES                                                                  \
  {BQ_ENTRY_NAME(BQ_FN_GEMM_LARGE), BQ_ENTRY_NAME(BQ_FN_GEMV), BQ_ENTRY_NAME(BQ_FN_GEMV32), \
   BQ_ENTRY_NAME(BQ_FN_GEMV64), BQ_ENTRY_NAME(BQ_FN_GEMM_WGMMA)}

/* The linear dispatch table: a row per entry point, by enum. rows: the activation rows a
   weight-streaming pass takes (0: a tile kernel, 128 x 256); up_to: the largest M it
   serves, the smallest such row winning (at these sizes the weight's bytes set the time,
   and tiles would leave most SMs idle); unfilled_up_to: the largest M it serves while the
   large tiles would not fill the SMs once (passes of 64 rows, the weight coming back from
   L2). Past both, the tiles (bq_gemm_wgmma in an sm_90a module). bq__linear_config.
   smem_bound: 1 where its __launch_bounds__ name as many CTAs an SM as the arch's shared
   memory holds of its own (bq__linear_min_blocks), which bq__linear_prelude writes as
   BQ_LB_<ENTRY>; 0: none named. The tiles and bq_gemv are held so; bq_gemv64 to the count
   at its largest M: the bound lets ptxas use the registers that leaves, where left to
   itself it spills. */
typedef struct bq__linear_row { int entry; int64_t rows, up_to, unfilled_up_to; int smem_bound; } bq__linear_row;
static const bq__linear_row bq__linear_table[BQ__GEMM_CONFIGS] = {
  /* entry           rows up_to unfilled_up_to smem_bound */
  {BQ__GEMM_LARGE,    0,   0,   0, 1},
  {BQ__GEMV,         16,  16,   0, 1},
  {BQ__GEMV32,       32,  32,   0, 0},
  {BQ__GEMV64,       64,  64, 256, 1},
  {BQ__GEMM_WGMMA,    0,   0,   0, 1},
};
/* the tiles' pipeline stages, then 256 columns and 128 rows of epilogue parameters
   (BQ_COLS_SMEM, BQ_ROWS_SMEM) */
#define BQ__GEMM_SMEM_LARGE (3 * (128 + 256) * 128 + 256 * 24 + 128 * 16)
#define BQ__GEMM_SMEM_WGMMA (4 * (128 + 256) * 128 + 1024 + 256 * 24 + 128 * 16) /* + alignment to 1024 bytes */
/* weight streaming, by the rows it takes (16, 32 or 64), and the dynamic shared memory of its
   cp.async stages for M rows: 2 to 4 stages of 16 weight rows and min(rows, M) activation
   rows, 576 bytes each, as many as fit in 56 KiB (BQ_GV_SMEM in linear.cu) */
BQ__FN int64_t bq__gemv_rows(int cfg) { return cfg >= 0 && cfg < BQ__GEMM_CONFIGS ? bq__linear_table[cfg].rows : 0; }
BQ__FN unsigned bq__gemv_smem(int cfg, int64_t m) {
  int64_t rows = bq__gemv_rows(cfg), xr = m < rows ? m : rows, stage = (16 + xr) * 576, s = 57344 / stage;
  return (unsigned)((s < 2 ? 2 : s > 4 ? 4 : s) * stage);
}
/* the most any M asks of it (the cuFuncSetAttribute bound) */
BQ__FN unsigned bq__gemv_smem_max(int cfg) {
  unsigned most = 0;
  for (int64_t m = 1; m <= bq__gemv_rows(cfg); m++)
    if (bq__gemv_smem(cfg, m) > most) most = bq__gemv_smem(cfg, m);
  return most;
}

/* the dynamic shared memory an entry point's pipeline takes at most */
BQ__FN int64_t bq__linear_smem(int e) {
  return e == BQ__GEMM_WGMMA ? BQ__GEMM_SMEM_WGMMA : e == BQ__GEMM_LARGE ? BQ__GEMM_SMEM_LARGE : bq__gemv_smem_max(e);
}
/* The launch bounds' CTAs an SM for linear entry point e on arch: as many as the arch's
   shared memory holds (at least 1) where the table's smem_bound says so, else 0 (none) */
BQ__FN int bq__linear_min_blocks(int e, int arch) {
  if (!bq__linear_table[e].smem_bound) return 0;
  int64_t b = bq__arch_smem_sm(arch) / (bq__linear_smem(e) + BQ__SMEM_BLOCK_RESERVED);
  return b > 1 ? (int)b : 1;
}

BQ__FN int bq__linear_vec(const bq_desc *d) { (void)d; return 16; }
/* per-token activation scales are f32 (QuantizedLinear's own) while weight scales are not */
BQ__FN int bq__linear_asf32(const bq_desc *d) { return d->op == BQ_QUANTIZED_LINEAR && d->scale_type != BQ_F32; }
/* BQ_OP: the weight sums, or the GEMM both linear layers share (QuantizedLinear's own work
   is its activations' kernel and run-time flags), named for SmoothQuantLinear */
/* One entry point's launch bounds, BQ_LB_<ENTRY> for entry point bq_<entry>: the block of
   256 threads every linear kernel runs (bq__linear_run), and min_blocks CTAs an SM (0:
   none named; bq__linear_min_blocks). */
BQ__FN void bq__linear_bounds(bq__str *s, const char *entry, int min_blocks) {
  char name[32];
  size_t n = 0;
  for (const char *c = entry + 3; *c && n + 1 < sizeof name; c++) /* past "bq_", upper case */
    name[n++] = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c;
  name[n] = 0;
  bq__launch_bounds_define(s, name, min_blocks);
}
BQ__FN void bq__linear_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  /* T is the output type, and so are common.cuh's scales (the GEMM reads its own, BQ_WST);
     the q-range is the host's business (the K bound) */
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST %s\n#define BQ_WGMMA %d\n", bq__spec("TYPE", d->out_type),
              bq__spec("TYPE", d->int_type), bq__spec("TYPE", d->out_type), t->arch_a);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_WST %s\n#define BQ_ASF32 %d\n",
              d->op == BQ_LINEAR_WEIGHT_SUMS ? "BQ_OP_LINEAR_WEIGHT_SUMS" : "BQ_OP_SMOOTHQUANT_LINEAR",
              bq__spec("TYPE", d->scale_type), bq__linear_asf32(d));
  /* the weight sums: a module of their own, outside the GEMM table; no minimum */
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS), 0);
    return;
  }
  static const char *const entries[] = BQ__GEMM_ENTRIES;
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    bq__linear_bounds(s, entries[bq__linear_table[i].entry], bq__linear_min_blocks(i, t->arch));
}

/* The largest K whose int32 accumulator cannot overflow: K * max|a| * 128 < 2^31 for
   activations in [qmin, qmax] and s8 weights, and, with zero points (which lie in
   [qmin, qmax]), K * (qmax - qmin) * 128 < 2^31 for acc - azp * wsum. */
BQ__FN int64_t bq__linear_max_k(const bq_desc *d) {
  int64_t amax = d->qmin < 0 ? -(int64_t)d->qmin : d->qmin;
  if (d->qmax > amax) amax = d->qmax;
  if (amax < 1) amax = 1;
  int64_t lim = 0x7fffffff / (amax * 128);
  if (d->asymmetric && d->qmax > d->qmin) {
    int64_t l2 = 0x7fffffff / ((int64_t)(d->qmax - d->qmin) * 128);
    if (l2 < lim) lim = l2;
  }
  return lim;
}

typedef struct bq__linear_view { int64_t m, n, k, lda, ldy; } bq__linear_view;
#define BQ__WSUM_MAX_K ((int64_t)1 << 24)

BQ__FN bq_status bq__linear_view_of(const bq_plan *p, const bq_args *a, bq__linear_view *v) {
  const char *nm = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", nm);
  int wsum = p->desc.op == BQ_LINEAR_WEIGHT_SUMS;
  if (!wsum && (a->rows < 0 || a->rows > 0x7fffffffLL))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) is negative or too large", nm, (long long)a->rows);
  if (a->n < 0 || a->n > 0x7fffffffLL)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.n (N = %lld) is negative or too large", nm, (long long)a->n);
  if (a->cols < 0 || a->cols > BQ__MAX_ELEMS)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) is negative or too large", nm, (long long)a->cols);
  v->m = wsum ? 0 : a->rows;
  v->n = a->n;
  v->k = a->cols;
  if (v->n && v->k > BQ__MAX_ELEMS / v->n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.n (N = %lld) times args.cols (K = %lld) is too large: the "
                    "weight holds more than 2^56 elements", nm, (long long)v->n, (long long)v->k);
  /* the sums: |w| <= 128, so K <= 2^24 keeps every int32 partial sum exact */
  if (wsum && v->k > BQ__WSUM_MAX_K)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) exceeds %lld, the largest K whose int32 "
                    "sums of s8 weights cannot overflow", nm, (long long)v->k, (long long)BQ__WSUM_MAX_K);
  if (wsum) return BQ_SUCCESS;
  int64_t max_k = p->desc.op == BQ_FP8_LINEAR ? BQ__MAX_ELEMS : bq__linear_max_k(&p->desc); /* f32 sums */
  if (v->k > max_k)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) exceeds %lld, the largest K whose int32 "
                    "accumulator cannot overflow for activations in [%d, %d] and s8 weights", nm, (long long)v->k,
                    (long long)max_k, p->desc.qmin, p->desc.qmax);
  v->lda = a->x_row_stride ? a->x_row_stride : v->k;
  v->ldy = a->y_row_stride ? a->y_row_stride : v->n;
  if (v->lda < v->k)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than args.cols (K = %lld)", nm,
                    (long long)a->x_row_stride, (long long)v->k);
  if (v->ldy < v->n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.n (N = %lld)", nm,
                    (long long)a->y_row_stride, (long long)v->n);
  if (v->m && (v->lda > BQ__MAX_ELEMS / v->m || v->ldy > BQ__MAX_ELEMS / v->m))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) times a row stride is too large", nm,
                    (long long)v->m);
  if (((v->m + 127) / 128) * ((v->n + 127) / 128) > 0x7fffffffLL) /* one CTA per tile, a 1-D grid */
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) times args.n (N = %lld) is too large", nm,
                    (long long)v->m, (long long)v->n);
  return BQ_SUCCESS;
}

/* Every rule of one call; the problem's view on success (run uses it, so it validates once). */
BQ__FN bq_status bq__linear_validate(const bq_plan *p, const bq_args *a, bq__linear_view *vp) {
  bq__linear_view v;
  bq_status st = bq__linear_view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  const bq_desc *d = &p->desc;
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    if (v.n == 0) return BQ_SUCCESS;
    if (v.k && (st = bq__check_ptr(p, "args.w", a->w, 1))) return st;
    return bq__check_ptr(p, "args.y", a->y, 4);
  }
  int sq = d->op == BQ_SMOOTHQUANT_LINEAR, per_tensor = sq && d->granularity == BQ_PER_TENSOR;
  if (!d->asymmetric && sq && (per_tensor ? a->zero_point != 0 : a->zero_points != NULL))
    return per_tensor ? bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_point (%d) must be 0: the plan is symmetric "
                                 "(desc.asymmetric = 0)", p->name, (int)a->zero_point)
                      : bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: the plan is "
                                 "symmetric (desc.asymmetric = 0)", p->name, (const void *)a->zero_points);
  if (per_tensor) {
    double c = d->out_type == BQ_F64 ? a->scale : (double)(float)a->scale;
    if (!(isfinite(c) && c > 0))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0 in the compute type",
                      p->name, a->scale);
  }
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  int ts = bq__dtype_size(d->out_type), ss = bq__dtype_size(d->scale_type);
  if ((st = bq__check_ptr(p, "args.y", a->y, ts))) return st;
  if ((st = bq__check_ptr(p, "args.w_scales", a->w_scales, ss))) return st;
  if (a->bias && (st = bq__check_ptr(p, "args.bias", a->bias, ts))) return st;
  if (v.k == 0) return BQ_SUCCESS; /* y = bias (or 0): nothing else is read */
  if ((st = bq__check_ptr(p, "args.x", a->x, sq ? 1 : bq__dtype_size(d->float_type)))) return st;
  if ((st = bq__check_ptr(p, "args.w", a->w, 1))) return st;
  if (sq && !per_tensor && (st = bq__check_ptr(p, "args.scales", a->scales, ss))) return st;
  if (d->asymmetric) {
    if (sq && !per_tensor && (st = bq__check_ptr(p, "args.zero_points", a->zero_points, 4))) return st;
    if ((st = bq__check_ptr(p, "args.w_sums", a->w_sums, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__linear_shape(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  return bq__linear_view_of(p, a, &v);
}
BQ__FN bq_status bq__linear_check(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  return bq__linear_validate(p, a, &v);
}

/* QuantizedLinear's workspace: the int8 activations (rows padded to 16 bytes), their f32
   scales and int32 zero points, each part 256-byte aligned. */
BQ__FN int64_t bq__al256(int64_t x) { return (x + 255) & ~(int64_t)255; }
BQ__FN int64_t bq__linear_lda_ws(int64_t k) { return (k + 15) & ~(int64_t)15; }
BQ__FN size_t bq__linear_workspace(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  if (p->desc.op != BQ_QUANTIZED_LINEAR || !a || a->rows <= 0 || a->n <= 0 || a->cols <= 0) return 0;
  if (bq__linear_view_of(p, a, &v)) return 0;
  return (size_t)(bq__al256(v.m * bq__linear_lda_ws(v.k)) + 2 * bq__al256(v.m * 4));
}

/* QuantizedLinear's activations (int8 and FP8): the held dynamic quantize plan run on x
   into the workspace, rows of bq__linear_lda_ws(K) bytes, then their scales (and zero
   points), each part 256-byte aligned; group: per group's G (0: per token). *q: the call. */
BQ__FN bq_status bq__linear_quantize_x(const bq_plan *p, const bq_args *a, const bq__linear_view *v, void *ws,
                                       int64_t group, void *stream, bq_args *q) {
  const int64_t lda = bq__linear_lda_ws(v->k);
  char *base = (char *)ws;
  memset(q, 0, sizeof *q);
  q->x = a->x;
  q->rows = v->m;
  q->cols = v->k;
  q->x_row_stride = v->lda;
  q->y = base;
  q->y_row_stride = lda;
  q->group_size = group;
  q->out_scales = base + bq__al256(v->m * lda);
  q->out_zero_points = p->desc.asymmetric ? (int32_t *)(base + bq__al256(v->m * lda) + bq__al256(v->m * 4)) : NULL;
  return bq_plan_run(p->sub, q, NULL, 0, stream);
}

/* The entry point for M rows and N columns: the linear dispatch table's choice. */
static int bq__linear_force_config = -1; /* tests: a BQ__GEMM_* / BQ__GEMV* to use where it applies */
BQ__FN int bq__linear_config(const bq_plan *p, int64_t m, int64_t n) {
  int f = bq__linear_force_config;
  if (p->linear.wgmma && f == BQ__GEMM_LARGE) f = BQ__GEMM_WGMMA; /* sm_90a tiles */
  if (f >= 0 && (f != BQ__GEMM_WGMMA || p->linear.wgmma) &&
      (bq__gemv_rows(f) == 0 || m <= bq__gemv_rows(f) || (f == BQ__GEMV64 && m <= 64 * 65535)))
    return f;
  int best = -1;
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    if (m <= bq__linear_table[i].up_to && (best < 0 || bq__linear_table[i].up_to < bq__linear_table[best].up_to))
      best = i;
  if (best >= 0) return bq__linear_table[best].entry;
  int64_t sms = p->num_sms > 0 ? p->num_sms : 1;
  int64_t tl = ((m + 127) / 128) * ((n + 255) / 256);
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    if (m <= bq__linear_table[i].unfilled_up_to && tl < sms) return bq__linear_table[i].entry;
  return p->linear.wgmma ? BQ__GEMM_WGMMA : BQ__GEMM_LARGE;
}

BQ__FN bq_status bq__linear_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__linear_view v;
  bq_status st = bq__linear_validate(p, a, &v);
  if (st) return st;
  const bq_desc *d = &p->desc;
  bq_linear_params k;
  memset(&k, 0, sizeof k);
  k.n = v.n;
  k.k = v.k;
  k.w = (uint64_t)(uintptr_t)a->w;
  if ((uintptr_t)a->w % 16 == 0 && v.k % 16 == 0) k.flags |= BQ_LF_W16;
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    if (v.n == 0) return BQ_SUCCESS;
    k.w_sums = (uint64_t)(uintptr_t)a->y;
    return bq__launch(p, 0, (v.n + 7) / 8, 1, 256, 0, &k, stream);
  }
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  k.m = v.m;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.ldy = v.ldy;
  k.w_scales = (uint64_t)(uintptr_t)a->w_scales;
  k.bias = (uint64_t)(uintptr_t)a->bias;
  k.w_sums = (uint64_t)(uintptr_t)a->w_sums;
  int ts = bq__dtype_size(d->out_type);
  if (a->bias) k.flags |= BQ_LF_BIAS;
  if ((uintptr_t)a->y % (2 * (uintptr_t)ts) == 0 && v.ldy % 2 == 0) k.flags |= BQ_LF_Y2;
  if ((uintptr_t)a->y % (8 * (uintptr_t)ts) == 0 && v.ldy % 8 == 0) k.flags |= BQ_LF_Y8;
  if (v.k == 0) k.flags |= BQ_LF_K0;
  if (d->asymmetric) k.flags |= BQ_LF_ZP;
  if (d->op == BQ_QUANTIZED_LINEAR) {
    k.flags |= BQ_LF_SA_ROW | (d->asymmetric ? BQ_LF_ZP_ROW : 0);
    if (v.k) {
      if ((st = bq__check_workspace(p, ws, ws_bytes, bq__linear_workspace(p, a)))) return st;
      bq_args q;
      if ((st = bq__linear_quantize_x(p, a, &v, ws, 0, stream, &q))) return st;
      k.a = (uint64_t)(uintptr_t)q.y;
      k.lda = q.y_row_stride;
      k.a_scales = (uint64_t)(uintptr_t)q.out_scales;
      k.a_zps = (uint64_t)(uintptr_t)q.out_zero_points;
      k.flags |= BQ_LF_A16;
    }
  } else {
    k.a = (uint64_t)(uintptr_t)a->x;
    k.lda = v.lda;
    if (k.a % 16 == 0 && v.lda % 16 == 0) k.flags |= BQ_LF_A16;
    if (d->granularity == BQ_PER_TOKEN) {
      k.flags |= BQ_LF_SA_ROW | (d->asymmetric ? BQ_LF_ZP_ROW : 0);
      k.a_scales = (uint64_t)(uintptr_t)a->scales;
      k.a_zps = (uint64_t)(uintptr_t)a->zero_points;
    } else {
      k.a_scale = d->out_type == BQ_F64 ? a->scale : (double)(float)a->scale;
      k.a_zp = a->zero_point;
    }
  }
  /* K == 0: y = bias; no activation scale, zero point or weight sum exists to be read */
  if (v.k == 0) k.flags &= ~(BQ_LF_SA_ROW | BQ_LF_ZP | BQ_LF_ZP_ROW);
  int cfg = bq__linear_config(p, v.m, v.n);
  if (bq__gemv_rows(cfg)) {
    /* QuantizedLinear: the weight streams while the activations' kernel runs (p->linear.pdl) */
    int64_t rows = bq__gemv_rows(cfg);
    int pdl = d->op == BQ_QUANTIZED_LINEAR && v.k && p->linear.pdl;
    if (pdl) k.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, cfg, (v.n + 15) / 16, (v.m + rows - 1) / rows, 256,
                                                     bq__gemv_smem(cfg, v.m), &k, stream);
  }
  k.tiles_m = (int32_t)((v.m + 127) / 128); /* 128 x 256 tiles, both kinds */
  k.tiles_n = (int32_t)((v.n + 255) / 256);
  return bq__launch(p, cfg, (int64_t)k.tiles_m * k.tiles_n, 1, 256,
                       cfg == BQ__GEMM_LARGE ? BQ__GEMM_SMEM_LARGE : BQ__GEMM_SMEM_WGMMA, &k, stream);
}

/* The dynamic shared memory each GEMM entry point's pipeline takes (over 48 KiB: an opt-in,
   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) */
BQ__FN bq_status bq__linear_setup(bq_plan *p, int e, bq__CUfunction fn) {
  (void)p;
  const int smem = (int)bq__linear_smem(e);
  bq__CUresult r = bq__drv.cuFuncSetAttribute(fn, 8, smem);
  return r ? bq__cu_fail(r, "cuFuncSetAttribute (dynamic shared memory of the GEMM kernels)") : BQ_SUCCESS;
}

/* An sm_90a module's GEMM tiles are bq_gemm_wgmma's; elsewhere bq_gemm_large's (the other
   is an empty entry point that traps) */
BQ__FN int bq__linear_has(const bq_desc *d, const bq__target *t, int e) {
  (void)d;
  if (e == BQ__GEMM_LARGE) return !t->arch_a;
  if (e == BQ__GEMM_WGMMA) return t->arch_a;
  return 1;
}

/* QuantizedLinear and SmoothQuantLinear: int8 activations (quantized per token by the
   layer, or given), s8 weights, an output type of float */
BQ__FN void bq__linear_name(const bq_desc *d, char *buf, size_t n) {
  snprintf(buf, n, "%s%s%s", bq__op_name(d->op),
           d->op == BQ_SMOOTHQUANT_LINEAR ? (d->granularity == BQ_PER_TOKEN ? "_per_token" : "_per_tensor") : "",
           d->asymmetric ? "_asymmetric" : "");
}
BQ__FN bq_status bq__linear_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  const int ql = d->op == BQ_QUANTIZED_LINEAR;
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 0))) return st;
  if (ql && d->granularity == BQ_PER_TENSOR)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "quantized_linear: desc.granularity (per_tensor) is not offered: "
                    "activations are quantized per token (leave it BQ_GRANULARITY_DEFAULT or BQ_PER_TOKEN)");
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = ql ? BQ_PER_TOKEN : BQ_PER_TENSOR;
  bq__linear_name(d, name, name_size);
  if (!ql) { /* x is int8: the float type is the output's */
    if (d->out_type == BQ_DTYPE_DEFAULT && d->float_type == BQ_DTYPE_DEFAULT)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (0, default) names the output type and "
                      "desc.float_type is not set either", name);
    if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
    if (!bq__is_float(d->out_type))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                      name, (int)d->out_type, bq__dtype_name(d->out_type));
    d->float_type = d->out_type; /* equal layers, equal descs and SKUs */
  }
  if ((st = bq__rule_types(d, name, 0))) return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not offered for linear layers", name);
  if (ql && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (%s) is not offered: activations are "
                    "quantized per token", name, bq__gran_name(d->granularity));
  if (!ql && d->granularity != BQ_PER_TENSOR && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (%s) must be per_tensor or per_token", name,
                    bq__gran_name(d->granularity));
  if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
  if (!bq__is_float(d->out_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->out_type, bq__dtype_name(d->out_type));
  /* scales convert exactly to C: f64 scales only when C is f64 */
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  if (!bq__is_float(d->scale_type) || (d->scale_type == BQ_F64 && d->out_type != BQ_F64))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16 "
                    "(or BQ_F64 with an f64 out_type)", name, (int)in->scale_type, bq__dtype_name(d->scale_type));
  if ((st = bq__rule_asymmetric(d, name))) return st;
  return ql ? bq__rule_qrange(d, name, "activations") : BQ_SUCCESS;
}
/* QuantizedLinear and SmoothQuantLinear share the GEMM: what differs is run-time */
BQ__FN void bq__linear_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  snprintf(buf, n, "linear_gemm.a_%s.w_s8.out_%s.scale_%s.ascale_%s.mma_m16n8k32%s.%s", bq__dtype_name(d->int_type),
           bq__dtype_name(d->out_type), bq__dtype_name(d->scale_type),
           bq__linear_asf32(d) ? "f32" : bq__dtype_name(d->scale_type), t->arch_a ? "+wgmma_m64n256k32" : "",
           tn);
}
/* A GEMM with f32 activation scales and other weight scales comes back as QuantizedLinear
   (whose SKU names its GEMM alone); every other GEMM as SmoothQuantLinear per token */
BQ__FN int bq__linear_from_sku(char *const *tok, int n, bq_desc *d) {
  bq_dtype a[4] = {BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT};
  if (n != 7 || strcmp(tok[0], "linear_gemm")) return 0;
  int ok = !strncmp(tok[1], "a_", 2) && bq__dtype_from_name(tok[1] + 2, &a[0]) && !strncmp(tok[3], "out_", 4) &&
           bq__dtype_from_name(tok[3] + 4, &a[1]) && !strncmp(tok[4], "scale_", 6) &&
           bq__dtype_from_name(tok[4] + 6, &a[2]) && !strncmp(tok[5], "ascale_", 7) &&
           bq__dtype_from_name(tok[5] + 7, &a[3]);
  d->op = ok && a[3] == BQ_F32 && a[2] != BQ_F32 ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
  d->granularity = BQ_PER_TOKEN;
  if (ok) d->int_type = a[0], d->out_type = d->float_type = a[1], d->scale_type = a[2];
  return ok;
}
/* the enumeration's variants: the output types */
BQ__FN void bq__linear_axes(bq_op op, int *outer, int *inner) {
  (void)op;
  *outer = 1, *inner = 4;
}
BQ__FN void bq__linear_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  (void)outer;
  in->out_type = fts[inner];
}
BQ__FN const char *bq__linear_guarantee(const bq_desc *d) {
  return d->out_type == BQ_F64
             ? "int32 accumulation (exact, tensor cores); epilogue in f64, each step rounded to nearest even "
               "(acc * sa * sw + bias, no FMA); bit-identical to the CPU reference of docs/numerics.md"
             : "int32 accumulation (exact, tensor cores); epilogue in f32, each step rounded to nearest even "
               "(acc * sa * sw + bias, no FMA), RNE to the output type; bit-identical to the CPU reference of "
               "docs/numerics.md";
}
/* QuantizedLinear's activations: dynamic quantize per token with f32 scales */
BQ__FN int bq__linear_activation_desc(const bq_desc *d, bq_desc *q) {
  if (d->op != BQ_QUANTIZED_LINEAR) return 0;
  memset(q, 0, sizeof *q);
  q->op = BQ_DYNAMIC_QUANTIZE;
  q->granularity = BQ_PER_TOKEN;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->qmin = d->qmin;
  q->qmax = d->qmax;
  q->scale_type = BQ_F32;
  q->device = d->device;
  q->asymmetric = d->asymmetric;
  return 1;
}
/* QuantizedLinear's weight streaming overlaps its activations' kernel (programmatic
   dependent launch) where the module is built for sm_90 or later (its griddepcontrol
   instructions) and the driver is 12.3 or newer (programmatic edges in captured graphs),
   unless BARACUDA_QUANT_PDL=0. */
BQ__FN int bq__pdl_wanted(const bq__target *t) {
  return t->arch >= 90 && bq__drv.version >= 12030 && bq__env_bool("BARACUDA_QUANT_PDL", 1);
}
BQ__FN bq_status bq__linear_plan_setup(bq_plan *p) {
  p->linear.wgmma = p->target.arch_a;
  p->linear.pdl = p->desc.op == BQ_QUANTIZED_LINEAR && bq__pdl_wanted(&p->target);
  return BQ_SUCCESS;
}

static const bq__family bq__linear_family = {
  {BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR}, {"quantized_linear", "smoothquant_linear"}, "linear",
  bq__linear_normalize, NULL, bq__linear_sku, bq__linear_from_sku, bq__linear_axes, bq__linear_vary, NULL,
  bq__linear_guarantee,
  "linear.cu", bq__text_linear_cu, bq__linear_prelude, bq__linear_vec, 1, bq__linear_shape, bq__linear_check,
  bq__linear_workspace, bq__linear_run, bq__linear_has, bq__linear_setup,
  {BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES},
  bq__linear_activation_desc, bq__linear_plan_setup, NULL, 0};

/* ---- the weight sums: int32 sums of the s8 weight rows (asymmetric activations' term) ---- */
/* Reads s8 weights, writes int32: no float type; every field but op left 0 (default), or
   its one meaningful value (s8 weights in their full range, int32 sums) */
BQ__FN bq_status bq__weight_sums_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 0))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__copy(name, name_size, "linear_weight_sums");
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) must be BQ_FORWARD", name, (int)d->direction);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  bq_desc z; /* the normalized desc, which is accepted again as it is */
  memset(&z, 0, sizeof z);
  z.op = d->op;
  z.granularity = BQ_PER_TENSOR;
  z.device = d->device;
  z.float_type = BQ_F32;
  z.int_type = BQ_S8;
  z.qmin = -128;
  z.qmax = 127;
  z.scale_type = BQ_F32;
  z.out_type = BQ_S32;
  if (d->granularity == z.granularity && d->float_type == z.float_type && d->int_type == z.int_type &&
      d->qmin == z.qmin && d->qmax == z.qmax && d->scale_type == z.scale_type && d->out_type == z.out_type &&
      !d->asymmetric) {
    *d = z;
    return BQ_SUCCESS;
  }
  if (in->granularity != BQ_GRANULARITY_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) must be left 0: one sum per weight row",
                    name, (int)in->granularity);
  if (d->float_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be left BQ_DTYPE_DEFAULT: the "
                    "sums read no float data", name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type != BQ_DTYPE_DEFAULT && d->int_type != BQ_S8)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_S8 (the weights) or default",
                    name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->out_type != BQ_DTYPE_DEFAULT && d->out_type != BQ_S32)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_S32 (the sums) or default",
                    name, (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be left BQ_DTYPE_DEFAULT: the "
                    "sums use no scales", name, (int)d->scale_type, bq__dtype_name(d->scale_type));
  if (!(d->qmin == 0 && d->qmax == 0) && !(d->qmin == -128 && d->qmax == 127))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be both 0 or the s8 "
                    "range [-128, 127]", name, d->qmin, d->qmax);
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: the sums serve both kinds of "
                    "layer", name, d->asymmetric);
  *d = z;
  return BQ_SUCCESS;
}
BQ__FN void bq__weight_sums_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)d, (void)t;
  snprintf(buf, n, "linear_weight_sums.s8.dp4a.%s", tn);
}
BQ__FN int bq__weight_sums_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 3 || strcmp(tok[0], "linear_weight_sums")) return 0;
  d->op = BQ_LINEAR_WEIGHT_SUMS;
  return 1;
}
/* the enumeration: its one desc, whatever the other fields (its validation refuses any
   field but op) */
BQ__FN void bq__weight_sums_vary(bq_desc *in, int outer, int inner) {
  (void)outer, (void)inner;
  memset(in, 0, sizeof *in);
  in->op = BQ_LINEAR_WEIGHT_SUMS;
}
BQ__FN const char *bq__weight_sums_guarantee(const bq_desc *d) {
  (void)d;
  return "exact: int32 sums of the s8 weights (K <= 2^24)";
}

static const bq__family bq__weight_sums_family = {
  {BQ_LINEAR_WEIGHT_SUMS}, {"linear_weight_sums"}, "linear",
  bq__weight_sums_normalize, NULL, bq__weight_sums_sku, bq__weight_sums_from_sku, bq__linear_axes,
  bq__weight_sums_vary, NULL, bq__weight_sums_guarantee,
  "linear.cu", bq__text_linear_cu, bq__linear_prelude, bq__linear_vec, 0, bq__linear_shape, bq__linear_check,
  bq__no_workspace, bq__linear_run, NULL, NULL,
  {{BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}, {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}, {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)},
   {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}},
  NULL, NULL, NULL, 0};

/* ---- FP8 linear layers: FP8 activations x e4m3 weights, f32 accumulators ------------------- */
/* One module, linear.cu with BQ_OP_FP8_LINEAR. In an sm_90a module: M <= 64 takes
   bq_fp8_gemv (weight streaming: passes of 16 rows, 64 output columns a CTA, which fills
   the GPU where tiles of 128 rows would leave most SMs idle), larger M 128 x 128 tiles:
   bq_fp8_tma's (192 rows) where x and w are 16-byte aligned (rows included: the tensor
   maps' rule), whose copies a producer warp issues, else bq_fp8_wgmma's, whose every
   thread copies;
   all form each output from the same 128-element partial sums in the
   same order, so a row's result does not depend on M. Elsewhere (sm_89, sm_90 without
   wgmma) bq_fp8_gemm's 128 x 128 mma.sync tiles take every M, on the same 128-element
   blocks. Tensorwise, rowwise and blockwise scales are run-time flags of one SKU. */
#define BQ__FP8_ENTRIES                                                                                            \
  {BQ_ENTRY_NAME(BQ_FN_FP8_GEMM), BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA), BQ_ENTRY_NAME(BQ_FN_FP8_GEMV),                      \
   BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA_BLK), BQ_ENTRY_NAME(BQ_FN_FP8_GEMV_BLK), BQ_ENTRY_NAME(BQ_FN_FP8_TMA),              \
   BQ_ENTRY_NAME(BQ_FN_FP8_TMA_BLK)}
#define BQ__FP8_GEMV_ROWS 64 /* the largest M bq_fp8_gemv takes */
/* bq_fp8_wgmma: BQ_F8_STAGES (5) stages of 128 + 128 rows of 128 bytes; bq_fp8_gemv:
   BQ_F8V_STAGES (8) of 16 + 64; each then the 1024-byte alignment and the columns' and rows'
   parameters; bq_fp8_gemm: BQ_F8G_STAGES (4) of 128 + 128 and the parameters. The blockwise
   entries add each stage's scales (BQ_F8_SCALES, BQ_F8V_SCALES floats). bq_fp8_tma:
   BQ_F8T_STAGES (5) of 192 + 128, the alignment, two mbarriers a stage (blockwise, then the
   consumers' scale rings: BQ_F8T_AHEAD (4) + 1 slots of 3 x 384 floats). */
#define BQ__FP8_SMEM_WGMMA (5 * (128 + 128) * 128 + 1024 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_GEMV (8 * (16 + 64) * 128 + 1024 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_GEMM (4 * (128 + 128) * 128 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_TMA (5 * (192 + 128) * 128 + 1024 + 2 * 5 * 8)
#define BQ__FP8_TMA_THREADS 512 /* three consumer warpgroups and the producer's */
#define BQ__FP8_TMA_ROWS 192    /* a tile's rows: 64 a consumer warpgroup */
BQ__FN int64_t bq__fp8_smem(int e) {
  switch (e) {
  case BQ__FP8_WGMMA: return BQ__FP8_SMEM_WGMMA;
  case BQ__FP8_GEMV: return BQ__FP8_SMEM_GEMV;
  case BQ__FP8_WGMMA_BLK: return BQ__FP8_SMEM_WGMMA + 5 * 144 * 4;
  case BQ__FP8_GEMV_BLK: return BQ__FP8_SMEM_GEMV + 8 * 20 * 4;
  case BQ__FP8_TMA: return BQ__FP8_SMEM_TMA;
  case BQ__FP8_TMA_BLK: return BQ__FP8_SMEM_TMA + (4 + 1) * 3 * 384 * 4; /* and linear.cu's scale rings */
  default: return BQ__FP8_SMEM_GEMM;
  }
}
/* tests: BQ__FP8_WGMMA, BQ__FP8_TMA (where x and w allow it) or BQ__FP8_GEMV (M <= 64), where
   the module has it */
static int bq__fp8_force_config = -1;
static int bq__fp8_force_pdl; /* tests: FP8_LINEAR's weight streaming takes QuantizedLinear's prologue */
/* Whether the TMA tiles' tensor maps can describe x [M, K] and w [N, K] (row strides lda and
   K bytes): cuTensorMapEncodeTiled takes dimensions up to 2^32 and strides under 2^40; a
   larger problem takes the cp.async tiles */
BQ__FN int bq__fp8_tma_fits(const bq__linear_view *v) {
  const int64_t dim = (int64_t)1 << 32, stride = (int64_t)1 << 40;
  return v->k <= dim && v->m <= dim && v->n <= dim && v->lda < stride; /* (w's stride is K) */
}
/* the entry point for M rows; aligned: x and w (and their rows) on the 16-byte grid, and
   within the tensor maps' limits */
BQ__FN int bq__fp8_config(const bq_plan *p, int64_t m, int aligned) {
  if (!p->linear.wgmma) return BQ__FP8_GEMM;
  int e = m <= BQ__FP8_GEMV_ROWS ? BQ__FP8_GEMV : aligned ? BQ__FP8_TMA : BQ__FP8_WGMMA;
  const int f = bq__fp8_force_config;
  if (f == BQ__FP8_WGMMA || (f == BQ__FP8_GEMV && m <= BQ__FP8_GEMV_ROWS)) e = f;
  if (f == BQ__FP8_TMA) e = aligned ? BQ__FP8_TMA : BQ__FP8_WGMMA; /* the tiles, the TMA's where they can */
  /* blockwise: the same tiles with the blocks' scales, the cp.async tiles unless the tests
     force the TMA's (docs/design.md says why) */
  if (p->desc.granularity == BQ_PER_BLOCK)
    e = e == BQ__FP8_GEMV ? BQ__FP8_GEMV_BLK : e == BQ__FP8_TMA && f == BQ__FP8_TMA ? BQ__FP8_TMA_BLK : BQ__FP8_WGMMA_BLK;
  return e;
}
/* bq_fp8_tma's grid: a CTA a tile, or (persistent) at most a CTA an SM, each taking every
   gridDim-th tile; tests cap it to give a CTA several tiles */
#define BQ__FP8_TMA_PERSISTENT 1
static int64_t bq__fp8_tma_cap; /* tests: at most this many CTAs (0: the rule) */
BQ__FN int64_t bq__fp8_tma_blocks(const bq_plan *p, int64_t tiles) {
  int64_t b = tiles;
  if (BQ__FP8_TMA_PERSISTENT && p->num_sms > 0 && b > p->num_sms) b = p->num_sms;
  if (bq__fp8_tma_cap > 0 && b > bq__fp8_tma_cap) b = bq__fp8_tma_cap;
  return b;
}
/* A CUtensorMap of the rows x k bytes at base (row stride ld bytes, 16-byte aligned) in
   boxes of box_rows x 128 bytes, 128-byte swizzle, zeros past the edges (the fill is 0) */
BQ__FN bq_status bq__fp8_tensor_map(const bq_plan *p, bq_u64 map[16], uint64_t base, int64_t rows, int64_t k,
                                    int64_t ld, unsigned box_rows) {
  const unsigned long long dims[2] = {(unsigned long long)k, (unsigned long long)rows}, strides[1] = {(unsigned long long)ld};
  const unsigned box[2] = {128, box_rows}, estrides[2] = {1, 1};
  /* CU_TENSOR_MAP_DATA_TYPE_UINT8 0, INTERLEAVE_NONE 0, SWIZZLE_128B 3, L2_PROMOTION_L2_256B 3, FLOAT_OOB_FILL_NONE 0 */
  bq__CUresult r = bq__drv.cuTensorMapEncodeTiled(map, 0, 2, (void *)(uintptr_t)base, dims, strides, box, estrides, 0, 3,
                                                  3, 0);
  if (!r) return BQ_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "cuTensorMapEncodeTiled (%s: %lld rows of %lld bytes, %lld bytes apart)", p->name,
           (long long)rows, (long long)k, (long long)ld);
  return bq__cu_fail(r, what);
}

BQ__FN void bq__fp8_linear_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST %s\n#define BQ_WGMMA %d\n#define BQ_OP BQ_OP_FP8_LINEAR\n#define BQ_WST BQ_TYPE_F32\n"
              "#define BQ_ASF32 0\n", bq__spec("TYPE", d->out_type), bq__spec("TYPE", d->int_type),
              bq__spec("TYPE", d->out_type), t->arch_a);
  /* one CTA an SM: the accumulators take most registers, the stages most shared memory */
  bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_FP8_GEMM), 1);
  bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA), 1);
}

/* Blockwise: args.group_size, 0 or the one group size there is */
BQ__FN bq_status bq__fp8_group_rule(const bq_plan *p, const bq_args *a) {
  if (a->group_size != 0 && a->group_size != 128)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be 128 or 0: blockwise scales are "
                    "1 x 128 activation groups and 128 x 128 weight blocks", p->name, (long long)a->group_size);
  return BQ_SUCCESS;
}
/* Blockwise: the activation scales' leading dimension (args.group_row_stride, 0 meaning
   ceil(K / 128) row-major, M rounded up to 4 MN-major, the quantizers' defaults) */
BQ__FN bq_status bq__fp8_block_lds(const bq_plan *p, const bq_args *a, const bq__linear_view *v, int64_t *lds) {
  const int mn = p->desc.scale_layout == BQ_SCALES_MN_MAJOR;
  const int64_t kb = (v->k + 127) / 128, least = mn ? v->m : kb;
  bq_status st = bq__fp8_group_rule(p, a);
  if (st) return st;
  if (a->group_row_stride < 0 || (a->group_row_stride > 0 && a->group_row_stride < least))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 or at least %s (%lld)",
                    p->name, (long long)a->group_row_stride, mn ? "M (MN-major activation scales)" :
                    "ceil(K / 128) (row-major activation scales)", (long long)least);
  *lds = a->group_row_stride ? a->group_row_stride : mn ? (v->m + 3) / 4 * 4 : kb;
  return BQ_SUCCESS;
}
/* FP8 QuantizedLinear's own rules: blockwise quantizes x in groups of 128 along K, and the
   activation scales are the layer's (in the workspace), so args.group_row_stride is 0 */
BQ__FN bq_status bq__fp8_ql_rules(const bq_plan *p, const bq_args *a, const bq__linear_view *v) {
  if (p->desc.granularity == BQ_PER_BLOCK && v->k % 128)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) must be a multiple of 128: the activations "
                    "are quantized in groups of 128 along K", p->name, (long long)v->k);
  bq_status st;
  if (p->desc.granularity == BQ_PER_BLOCK && (st = bq__fp8_group_rule(p, a))) return st;
  if (a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0: the activations' scales "
                    "are the layer's own, in the workspace", p->name, (long long)a->group_row_stride);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__fp8_linear_validate(const bq_plan *p, const bq_args *a, bq__linear_view *vp, int64_t *lds) {
  const int ql = p->desc.op == BQ_FP8_QUANTIZED_LINEAR;
  bq__linear_view v;
  bq_status st = bq__linear_view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  *lds = 0;
  if (ql && (st = bq__fp8_ql_rules(p, a, &v))) return st;
  if (!ql && p->desc.granularity == BQ_PER_BLOCK && (st = bq__fp8_block_lds(p, a, &v, lds))) return st;
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  int ts = bq__dtype_size(p->desc.out_type);
  if ((st = bq__check_ptr(p, "args.y", a->y, ts))) return st;
  if (!ql && (st = bq__check_ptr(p, "args.scales", a->scales, 4))) return st;
  if ((st = bq__check_ptr(p, "args.w_scales", a->w_scales, 4))) return st;
  if (a->bias && (st = bq__check_ptr(p, "args.bias", a->bias, ts))) return st;
  if (v.k == 0) return BQ_SUCCESS; /* y = bias (or 0) */
  if ((st = bq__check_ptr(p, "args.x", a->x, ql ? bq__dtype_size(p->desc.float_type) : 1))) return st;
  return bq__check_ptr(p, "args.w", a->w, 1);
}
/* FP8 QuantizedLinear's workspace: the FP8 activations (rows padded to 16 bytes), then
   their f32 scales (per token [M], blockwise [M][K / 128]), each part 256-byte aligned */
BQ__FN size_t bq__fp8_linear_workspace(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  if (p->desc.op != BQ_FP8_QUANTIZED_LINEAR || !a || a->rows <= 0 || a->n <= 0 || a->cols <= 0) return 0;
  if (bq__linear_view_of(p, a, &v)) return 0;
  const int64_t scales = p->desc.granularity == BQ_PER_BLOCK ? v.m * ((v.k + 127) / 128) : v.m;
  return (size_t)(bq__al256(v.m * bq__linear_lda_ws(v.k)) + bq__al256(scales * 4));
}
BQ__FN bq_status bq__fp8_linear_check(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  int64_t lds;
  return bq__fp8_linear_validate(p, a, &v, &lds);
}

BQ__FN bq_status bq__fp8_linear_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws, (void)ws_bytes;
  bq__linear_view v;
  int64_t lds;
  bq_status st = bq__fp8_linear_validate(p, a, &v, &lds);
  if (st || v.m == 0 || v.n == 0) return st;
  bq_linear_params k;
  memset(&k, 0, sizeof k);
  const int ts = bq__dtype_size(p->desc.out_type);
  k.m = v.m, k.n = v.n, k.k = v.k, k.lda = v.lda, k.ldy = v.ldy;
  k.a = (uint64_t)(uintptr_t)a->x;
  k.w = (uint64_t)(uintptr_t)a->w;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.a_scales = (uint64_t)(uintptr_t)a->scales;
  k.w_scales = (uint64_t)(uintptr_t)a->w_scales;
  k.bias = (uint64_t)(uintptr_t)a->bias;
  const int ql = p->desc.op == BQ_FP8_QUANTIZED_LINEAR;
  if (ql && v.k) { /* x quantized into the workspace (per token, or groups of 128), read from there */
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__fp8_linear_workspace(p, a)))) return st;
    const int blk = p->desc.granularity == BQ_PER_BLOCK;
    bq_args q;
    if ((st = bq__linear_quantize_x(p, a, &v, ws, blk ? 128 : 0, stream, &q))) return st;
    if (blk) lds = v.k / 128; /* row-major [M][K / 128] */
    k.a = (uint64_t)(uintptr_t)q.y;
    k.lda = v.lda = q.y_row_stride;
    k.a_scales = (uint64_t)(uintptr_t)q.out_scales;
  }
  if (p->desc.granularity == BQ_PER_TOKEN) k.flags |= BQ_LF_SA_ROW | BQ_LF_SW_ROW;
  if (p->desc.granularity == BQ_PER_BLOCK) k.flags |= BQ_LF_BLOCK;
  if (p->desc.scale_layout == BQ_SCALES_MN_MAJOR) k.flags |= BQ_LF_SA_MN;
  k.w_sums = (uint64_t)lds; /* (the activation scales' leading dimension: linear_abi.h) */
  if (a->bias) k.flags |= BQ_LF_BIAS;
  if (v.k == 0) k.flags |= BQ_LF_K0;
  if (k.a % 16 == 0 && v.lda % 16 == 0) k.flags |= BQ_LF_A16;
  if ((uintptr_t)a->w % 16 == 0 && v.k % 16 == 0) k.flags |= BQ_LF_W16;
  if ((uintptr_t)a->y % (2 * (uintptr_t)ts) == 0 && v.ldy % 2 == 0) k.flags |= BQ_LF_Y2;
  if ((uintptr_t)a->y % (8 * (uintptr_t)ts) == 0 && v.ldy % 8 == 0) k.flags |= BQ_LF_Y8;
  const int tma_ok = (k.flags & BQ_LF_A16) && (k.flags & BQ_LF_W16) && v.k && bq__fp8_tma_fits(&v);
  const int e = bq__fp8_config(p, v.m, tma_ok);
  /* FP8 QuantizedLinear: the weight streaming and the TMA tiles copy weights while the
     activations' kernel runs */
  const int pdl = (ql || bq__fp8_force_pdl) && v.k && p->linear.pdl;
  if (e == BQ__FP8_GEMV || e == BQ__FP8_GEMV_BLK) {
    if (pdl) k.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, e, (v.n + 63) / 64, (v.m + 15) / 16, 128,
                                                     (unsigned)bq__fp8_smem(e), &k, stream);
  }
  /* tiles of 128 columns, each in one weight block; 128 rows, the TMA's BQ__FP8_TMA_ROWS */
  const int tma = e == BQ__FP8_TMA || e == BQ__FP8_TMA_BLK, bm = tma ? BQ__FP8_TMA_ROWS : 128;
  k.tiles_m = (int32_t)((v.m + bm - 1) / bm);
  k.tiles_n = (int32_t)((v.n + 127) / 128);
  if (tma) {
    bq_fp8_tma_params t;
    memset(&t, 0, sizeof t);
    t.p = k;
    if ((st = bq__fp8_tensor_map(p, t.tmap_a, k.a, v.m, v.k, v.lda, BQ__FP8_TMA_ROWS)) ||
        (st = bq__fp8_tensor_map(p, t.tmap_w, k.w, v.n, v.k, v.k, 128)))
      return st;
    if (pdl) t.p.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, e, bq__fp8_tma_blocks(p, (int64_t)k.tiles_m * k.tiles_n), 1,
                                                     BQ__FP8_TMA_THREADS, (unsigned)bq__fp8_smem(e), &t, stream);
  }
  return bq__launch(p, e, (int64_t)k.tiles_m * k.tiles_n, 1, 256, (unsigned)bq__fp8_smem(e), &k, stream);
}
BQ__FN bq_status bq__fp8_linear_setup(bq_plan *p, int e, bq__CUfunction fn) {
  (void)p;
  bq__CUresult r = bq__drv.cuFuncSetAttribute(fn, 8, (int)bq__fp8_smem(e));
  return r ? bq__cu_fail(r, "cuFuncSetAttribute (dynamic shared memory of the FP8 GEMM tiles)") : BQ_SUCCESS;
}
BQ__FN int bq__fp8_linear_has(const bq_desc *d, const bq__target *t, int e) {
  (void)d;
  return e == BQ__FP8_GEMM ? !t->arch_a : t->arch_a;
}

BQ__FN bq_status bq__fp8_linear_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  const int ql = d->op == BQ_FP8_QUANTIZED_LINEAR;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = ql ? BQ_PER_TOKEN : BQ_PER_TENSOR;
  snprintf(name, name_size, "%s_%s", ql ? "fp8_quantized_linear" : "fp8_linear",
           d->granularity == BQ_PER_TOKEN   ? "rowwise"
           : d->granularity == BQ_PER_BLOCK ? "blockwise"
                                            : "tensorwise");
  if (ql && d->granularity != BQ_PER_TOKEN && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "fp8_quantized_linear: desc.granularity (%s) is not offered: "
                    "BQ_PER_TOKEN (activations quantized per token, weight scales per channel) or BQ_PER_BLOCK "
                    "(1 x 128 activation groups x 128 x 128 weight blocks)", bq__gran_name(d->granularity));
  if (ql && d->scale_layout != BQ_SCALES_ROW_MAJOR)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (MN-major) must be left 0: the activations' "
                    "scales are the layer's own", name);
  if (d->granularity != BQ_PER_TENSOR && d->granularity != BQ_PER_TOKEN && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "fp8_linear: desc.granularity (%s) is not offered: BQ_PER_TENSOR "
                    "(tensorwise), BQ_PER_TOKEN (rowwise: per token x per channel) or BQ_PER_BLOCK (blockwise: "
                    "1 x 128 activation groups x 128 x 128 weight blocks)", bq__gran_name(d->granularity));
  if (d->scale_layout == BQ_SCALES_MN_MAJOR && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (MN-major) applies to blockwise activation "
                    "scales only", name);
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) must be BQ_FORWARD", name, (int)d->direction);
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_E4M3;
  if (d->int_type != BQ_E4M3 && d->int_type != BQ_E5M2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_E4M3 or BQ_E5M2 (the "
                    "activations; the weights are e4m3)", name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->qmin != 0 || d->qmax != 0 || d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.%s (%d) must be 0: FP8 activations have no q-range or zero "
                    "points", name, d->qmin ? "qmin" : d->qmax ? "qmax" : "asymmetric",
                    d->qmin ? d->qmin : d->qmax ? d->qmax : d->asymmetric);
  if (ql && d->float_type != BQ_F32 && d->float_type != BQ_F16 && d->float_type != BQ_BF16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16 (x's "
                    "type)", name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->out_type == BQ_DTYPE_DEFAULT && d->float_type == BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (0, default) names the output type and "
                    "desc.float_type is not set either", name);
  if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
  if (d->out_type != BQ_F32 && d->out_type != BQ_F16 && d->out_type != BQ_BF16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (!ql && d->float_type != BQ_DTYPE_DEFAULT && d->float_type != d->out_type)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%s) and desc.out_type (%s) differ: both name the "
                    "output (set either)", name, bq__dtype_name(d->float_type), bq__dtype_name(d->out_type));
  if (!ql) d->float_type = d->out_type; /* equal layers, equal descs and SKUs */
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  if (d->scale_type != BQ_F32)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_F32", name,
                    (int)in->scale_type, bq__dtype_name(d->scale_type));
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
/* tensorwise and rowwise share the kernel: the SKU names it alone */
BQ__FN void bq__fp8_linear_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  snprintf(buf, n, "fp8_linear.a_%s.w_e4m3.out_%s.scale_f32.mma_m16n8k32%s.%s", bq__dtype_name(d->int_type),
           bq__dtype_name(d->out_type), t->arch_a ? "+wgmma_m64n128k32" : "", tn);
}
BQ__FN int bq__fp8_linear_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 6 || strcmp(tok[0], "fp8_linear")) return 0;
  bq_dtype a = BQ_DTYPE_DEFAULT, o = BQ_DTYPE_DEFAULT;
  int ok = !strncmp(tok[1], "a_", 2) && bq__dtype_from_name(tok[1] + 2, &a) && !strcmp(tok[2], "w_e4m3") &&
           !strncmp(tok[3], "out_", 4) && bq__dtype_from_name(tok[3] + 4, &o) && !strcmp(tok[4], "scale_f32");
  d->op = BQ_FP8_LINEAR;
  d->granularity = BQ_PER_TENSOR;
  if (ok) d->int_type = a, d->out_type = d->float_type = o;
  return ok;
}
/* the enumeration's variants: the activations' type, then the output type (FP8
   QuantizedLinear: x's type, per token or blockwise, whose activation kernels differ) */
BQ__FN void bq__fp8_linear_axes(bq_op op, int *outer, int *inner) {
  *outer = 2, *inner = op == BQ_FP8_QUANTIZED_LINEAR ? 6 : 3;
}
BQ__FN void bq__fp8_linear_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype ots[] = {BQ_F32, BQ_F16, BQ_BF16};
  in->int_type = outer ? BQ_E5M2 : BQ_E4M3;
  in->out_type = in->float_type = ots[inner % 3];
  if (in->op == BQ_FP8_QUANTIZED_LINEAR) in->granularity = inner >= 3 ? BQ_PER_BLOCK : BQ_PER_TOKEN;
  in->qmin = in->qmax = 0;
  in->asymmetric = 0;
  in->scale_type = BQ_F32;
}
BQ__FN const char *bq__fp8_linear_guarantee(const bq_desc *d) {
  if (d->op == BQ_FP8_QUANTIZED_LINEAR)
    return "x quantized by dynamic quantize (bit for bit that op), then FP8 tensor-core sums (not IEEE f32: the "
           "hardware's), one partial sum per 128 elements of K joining the f32 accumulator in order: "
           "deterministic and independent of M and the tile; error bound in docs/numerics.md; the FP8 linear "
           "layers' epilogue";
  return "FP8 tensor-core sums (not IEEE f32: the hardware's), one partial sum per 128 elements of K, each "
         "joining the f32 accumulator in order by fma with its scale (1, or blockwise sa * sw): deterministic "
         "and independent of M and the tile; error bound in docs/numerics.md; epilogue acc * sa * sw + bias "
         "(blockwise acc + bias) in f32, each step rounded to nearest even, RNE to the output type";
}
BQ__FN bq_status bq__fp8_linear_plan_setup(bq_plan *p) {
  p->linear.wgmma = p->target.arch_a;
  p->linear.pdl = p->desc.op == BQ_FP8_QUANTIZED_LINEAR && bq__pdl_wanted(&p->target);
  return BQ_SUCCESS;
}
/* FP8 QuantizedLinear's activations: dynamic quantize per token, or per group of 128 (row-major
   f32 scales), into the FP8 type */
BQ__FN int bq__fp8_linear_activation_desc(const bq_desc *d, bq_desc *q) {
  if (d->op != BQ_FP8_QUANTIZED_LINEAR) return 0;
  memset(q, 0, sizeof *q);
  q->op = BQ_DYNAMIC_QUANTIZE;
  q->granularity = d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : BQ_PER_TOKEN;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->scale_type = BQ_F32;
  q->device = d->device;
  return 1;
}

static const bq__family bq__fp8_linear_family = {
  {BQ_FP8_LINEAR, BQ_FP8_QUANTIZED_LINEAR}, {"fp8_linear", "fp8_quantized_linear"}, "linear",
  bq__fp8_linear_normalize, NULL, bq__fp8_linear_sku, bq__fp8_linear_from_sku, bq__fp8_linear_axes,
  bq__fp8_linear_vary, NULL, bq__fp8_linear_guarantee,
  "linear.cu", bq__text_linear_cu, bq__fp8_linear_prelude, bq__linear_vec, 1, bq__linear_shape, bq__fp8_linear_check,
  bq__fp8_linear_workspace, bq__fp8_linear_run, bq__fp8_linear_has, bq__fp8_linear_setup,
  {BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES},
  bq__fp8_linear_activation_desc, bq__fp8_linear_plan_setup, NULL, 89};

/* ==== src/family_rotate.h ================================================================= */
/* ---- the Hadamard rotation: a block-diagonal Walsh-Hadamard transform along each row ------ */
/* kernels_src/rotate_abi.h - the Hadamard rotation's host/kernel interface, valid as C and as
   CUDA C++: its entry points and its parameter block. rotate.cu and the host
   (src/family_rotate.h) both include it. */
#ifndef BQ_ROTATE_ABI_H
#define BQ_ROTATE_ABI_H

/* The entry points: a lane holds E = 2, 4 or 8 consecutive elements of a row (the host picks
   the larger of 16 bytes of T and n / 32), a warp 32 E of them, whole blocks of n */
enum { BQ__ROTATE_E2, BQ__ROTATE_E4, BQ__ROTATE_E8 };
#define BQ_FN_ROTATE2 bq_rotate2
#define BQ_FN_ROTATE4 bq_rotate4
#define BQ_FN_ROTATE8 bq_rotate8

typedef struct bq_rotate_params {
  bq_u64 x, y;
  bq_i64 rows, cols, xs, ys; /* element strides between rows */
  bq_i64 segs;               /* warps' segments a row: cols / (32 E) rounded up */
  bq_u32 seed_lo, seed_hi;   /* the sign vector's key (random_signs) */
  int log2n;                 /* the block: n = 2^log2n */
  int signs;                 /* 1: the random sign vector, 0: all +1 */
} bq_rotate_params;
#endif

/* BQ_HADAMARD: a float type, either direction (backward: the inverse), per group (the
   default: blocks of args.group_size along the row), random_signs 0 or 1; every other
   field at its default */
BQ__FN bq_status bq__rotate_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  (void)in;
  bq_status st;
  if ((st = bq__rule_no_activation(d))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_GROUP;
  snprintf(name, name_size, "hadamard%s", d->direction == BQ_BACKWARD ? "_backward" : "");
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name, (int)d->direction);
  if (d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) must be BQ_PER_GROUP (blocks of "
                    "args.group_size along the row) or the default", name, (int)d->granularity);
  if (d->random_signs != 0 && d->random_signs != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0 or 1", name, d->random_signs);
  const struct { const char *field; int value; } unused[] = {
      {"int_type", (int)d->int_type}, {"qmin", d->qmin}, {"qmax", d->qmax}, {"scale_type", (int)d->scale_type},
      {"asymmetric", d->asymmetric}, {"out_type", (int)d->out_type}, {"pow2_scales", d->pow2_scales},
      {"scale_layout", (int)d->scale_layout}, {"scale_rule", (int)d->scale_rule}};
  for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++)
    if (unused[i].value != 0)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.%s (%d) must be 0: the rotation moves floats and has no "
                      "quantization", name, unused[i].field, unused[i].value);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
BQ__FN const char *bq__rotate_label(const bq_desc *d) { (void)d; return "hadamard"; }
/* "hadamard.fwd.bf16.signs.sm_90" */
BQ__FN void bq__rotate_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  snprintf(buf, n, "hadamard.%s.%s.%s.%s", d->direction == BQ_BACKWARD ? "bwd" : "fwd", bq__dtype_name(d->float_type),
           d->random_signs ? "signs" : "plain", tn);
}
BQ__FN int bq__rotate_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 4 || strcmp(tok[0], "hadamard") || (strcmp(tok[1], "fwd") && strcmp(tok[1], "bwd")) ||
      (strcmp(tok[3], "signs") && strcmp(tok[3], "plain")))
    return 0;
  d->op = BQ_HADAMARD;
  d->direction = strcmp(tok[1], "bwd") ? BQ_FORWARD : BQ_BACKWARD;
  d->granularity = BQ_PER_GROUP;
  d->random_signs = !strcmp(tok[3], "signs");
  return bq__dtype_from_name(tok[2], &d->float_type);
}
/* the enumeration's variants: with and without the random signs, and the first values of
   the enumeration's other fields alone (the rest only repeat them) */
BQ__FN void bq__rotate_axes(bq_op op, int *outer, int *inner) { (void)op, *outer = 2, *inner = 1; }
BQ__FN void bq__rotate_vary(bq_desc *in, int outer, int inner) {
  (void)inner;
  if (in->granularity != BQ_PER_TENSOR || in->int_type != BQ_S8 || in->scale_type != BQ_F32 ||
      in->scale_layout != BQ_SCALES_ROW_MAJOR || in->asymmetric) {
    in->op = BQ_OP_NONE; /* (a repeat: refused) */
    return;
  }
  in->granularity = BQ_PER_GROUP;
  in->int_type = in->scale_type = BQ_DTYPE_DEFAULT;
  in->random_signs = outer;
}
BQ__FN unsigned bq__rotate_owns(const bq_desc *d) { return d->random_signs ? BQ__OWNS_SEED : 0; }
BQ__FN const char *bq__rotate_guarantee(const bq_desc *d) {
  (void)d;
  return "exact: the butterfly of docs/numerics.md (\"Rotation\"), each sum and difference rounded once in C, then "
         "one product by C(1 / sqrt(n)) and one rounding to T; bit-identical to the CPU reference";
}
BQ__FN void bq__rotate_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT BQ_TYPE_S8\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST BQ_TYPE_F32\n#define BQ_SL 0\n#define BQ_OP BQ_OP_HADAMARD\n#define BQ_DIR %s\n"
              "#define BQ_GRAN BQ_GRAN_GROUP\n#define BQ_ASYM 0\n", bq__spec("TYPE", d->float_type),
              bq__spec("DIR", d->direction));
}
BQ__FN int bq__rotate_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* [rows, cols] with row strides, blocks of n = group_size (a power of two, 2 to 256) */
typedef struct bq__rotate_view {
  int64_t rows, cols, xs, ys;
  int log2n;
} bq__rotate_view;
BQ__FN bq_status bq__rotate_view_of(const bq_plan *p, const bq_args *a, bq__rotate_view *v, int pointers) {
  const char *n = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  const int k = bq__hadamard_log2(a->group_size);
  if (k < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be a power of two from 2 to 256: the "
                    "rotation's block", n, (long long)a->group_size);
  bq__view bv; /* rows, cols, the row strides and the blocks as per group takes them */
  bq_status st = bq__view_of(p, a, &bv);
  if (st) return st;
  v->rows = bv.rows, v->cols = bv.cols, v->xs = bv.xs, v->ys = bv.ys, v->log2n = k;
  if (!pointers || v->rows == 0 || v->cols == 0) return BQ_SUCCESS;
  const int t = bq__dtype_size(p->desc.float_type);
  if ((st = bq__check_ptr(p, "args.x", a->x, t)) || (st = bq__check_ptr(p, "args.y", a->y, t))) return st;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__rotate_shape(const bq_plan *p, const bq_args *a) {
  bq__rotate_view v;
  return bq__rotate_view_of(p, a, &v, 0);
}
BQ__FN bq_status bq__rotate_check(const bq_plan *p, const bq_args *a) {
  bq__rotate_view v;
  return bq__rotate_view_of(p, a, &v, 1);
}
/* a lane's elements: 16 bytes of T, or more where a warp of them would not hold a block */
BQ__FN int bq__rotate_lane_elems(const bq_desc *d, int log2n) {
  const int v = bq__rotate_vec(d), e = log2n > 5 ? 1 << (log2n - 5) : 1;
  return v > e ? v : e;
}
/* Tests: the entry point every run takes where it can (-1: the host's) */
static int bq__rotate_force_entry = -1;
BQ__FN bq_status bq__rotate_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws, (void)ws_bytes;
  bq__rotate_view v;
  bq_status st = bq__rotate_view_of(p, a, &v, 1);
  if (st || v.rows == 0 || v.cols == 0) return st;
  int E = bq__rotate_lane_elems(&p->desc, v.log2n);
  if (bq__rotate_force_entry >= 0 && (2 << bq__rotate_force_entry) >= E) E = 2 << bq__rotate_force_entry;
  bq_rotate_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.rows = v.rows, k.cols = v.cols, k.xs = v.xs, k.ys = v.ys;
  k.segs = (v.cols + 32 * E - 1) / (32 * E);
  k.log2n = v.log2n;
  k.signs = p->desc.random_signs;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  const int e = E == 2 ? BQ__ROTATE_E2 : E == 4 ? BQ__ROTATE_E4 : BQ__ROTATE_E8;
  const int64_t blocks = bq__grid(v.rows * k.segs, 8), cap = (int64_t)bq__limits_of(p).sms * 8; /* 8 warps a block */
  return bq__launch(p, e, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}
/* the typical problem's blocks: 128 */
BQ__FN void bq__rotate_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)d, (void)ptr;
  a->group_size = 128;
}

static const bq__family bq__rotate_family = {
  {BQ_HADAMARD}, {"hadamard"}, "rotate",
  bq__rotate_normalize, bq__rotate_label, bq__rotate_sku, bq__rotate_from_sku, bq__rotate_axes, bq__rotate_vary,
  bq__rotate_owns, bq__rotate_guarantee, "rotate.cu", bq__text_rotate_cu, bq__rotate_prelude, bq__rotate_vec, 0,
  bq__rotate_shape, bq__rotate_check, bq__no_workspace, bq__rotate_run, NULL, NULL,
  {{NULL}, {NULL}, {NULL},
   {BQ_ENTRY_NAME(BQ_FN_ROTATE2), BQ_ENTRY_NAME(BQ_FN_ROTATE4), BQ_ENTRY_NAME(BQ_FN_ROTATE8)},
   {NULL}},
  NULL, NULL, bq__rotate_typical, 0};

/* ==== src/impl_plans.h ==================================================================== */
/* ---- the families ---------------------------------------------------------------------- */
/* Every family this header holds, in the order of their ops (the tools' enumeration's) */
static const bq__family *const bq__families[] = {&bq__affine_family, &bq__dynamic_family, &bq__linear_family,
                                                 &bq__weight_sums_family, &bq__fused_family, &bq__mx_family,
                                                 &bq__rotate_family, &bq__fp8_linear_family};
#define BQ__FAMILIES ((int)(sizeof bq__families / sizeof bq__families[0]))
/* The family serving op (NULL: op is no bq_op); *index: op's in its lists */
BQ__FN const bq__family *bq__family_for(bq_op op, int *index) {
  for (int f = 0; f < BQ__FAMILIES; f++)
    for (int i = 0; i < BQ__FAMILY_OPS && bq__families[f]->ops[i]; i++)
      if (bq__families[f]->ops[i] == op) {
        if (index) *index = i;
        return bq__families[f];
      }
  return NULL;
}
/* a desc's (normalized or not): the microscaling family's where it names a microscaling
   format (bq__is_mx), else its op's */
BQ__FN const bq__family *bq__family_of(const bq_desc *d) {
  return bq__is_mx(d) ? &bq__mx_family : bq__family_for(d->op, NULL);
}
BQ__FN const char *bq__op_name(bq_op op) {
  int i = 0;
  const bq__family *f = bq__family_for(op, &i);
  return f ? f->op_names[i] : "unknown_op";
}
BQ__FN const char *bq__op_label(const bq_desc *d) {
  const bq__family *f = bq__family_of(d);
  return f && f->label ? f->label(d) : bq__op_name(d->op);
}

/* Validate a descriptor and fill in its defaults: its family's rules. */
BQ__FN bq_status bq__normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  if (!in) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: desc is NULL");
  *d = *in;
  const bq__family *f = bq__family_of(d);
  if (!f) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: desc.op (%d) is not a bq_op", (int)d->op);
  if (f != &bq__mx_family && f != &bq__fused_family && d->scale_rule != BQ_SCALE_RULE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d) applies to microscaling dynamic quantize and "
                    "the fused producers only", bq__op_name(d->op), (int)d->scale_rule);
  if (f != &bq__mx_family && f != &bq__affine_family && f != &bq__dynamic_family && f != &bq__fused_family &&
      d->rounding != BQ_ROUND_NEAREST_EVEN)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) must be BQ_ROUND_NEAREST_EVEN: stochastic "
                    "rounding is offered by quantize, fake quantize, dynamic quantize (integer, FP8 and "
                    "microscaling storage) and the fused producers (integer and FP8)",
                    bq__op_name(d->op), (int)d->rounding);
  const int rotates = f == &bq__mx_family || f == &bq__dynamic_family || f == &bq__affine_family ||
                      f == &bq__fused_family;
  if (!rotates && d->rotation != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0: the fused rotation is quantize's, "
                    "dequantize's, dynamic quantize's and the fused producers'; BQ_HADAMARD rotates alone",
                    bq__op_name(d->op), d->rotation);
  if (f != &bq__rotate_family && d->random_signs != 0 && !(rotates && d->rotation == 1))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) applies to BQ_HADAMARD and the fused "
                    "rotation (desc.rotation) only", bq__op_name(d->op), d->random_signs);
  return f->normalize(in, d, name, name_size);
}

/* ---- kernel specialization ------------------------------------------------------------------ */
/* The entry points with code for d on t, by the family's enum (NULL: none); returns how many */
BQ__FN int bq__kernels_of(const bq_desc *d, const bq__target *t, const char *out[BQ__MAX_KERNELS]) {
  const bq__family *f = bq__family_of(d);
  const char *const *names = f->kernels[bq__gran_code(d->granularity)];
  int n = 0;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    out[e] = names[e] && (!f->has || f->has(d, t, e)) ? names[e] : NULL;
    n += out[e] != NULL;
  }
  return n;
}

/* A module's SKU: the plan's, then '@' and its entry point */
BQ__FN void bq__sku_module(const bq__target *t, bq__kernel_src *k) {
  const int m = t->module - 1;
  if (m < 0) return;
  const size_t n = strlen(k->sku);
  if (m >= BQ__MAX_KERNELS || !k->kernels[m]) k->sku[0] = 0;
  else snprintf(k->sku + n, sizeof k->sku - n, "@%s", k->kernels[m]);
}

/* The SKU names a plan's kernels: its family's form of the desc, and the target. A module
   (t->module = e + 1) holds entry point e alone, named after it: "<SKU>@bq_affine_lean".
   A module of an entry point d lacks gets no kernels and an empty SKU. */
BQ__FN void bq__sku_of(const bq_desc *d, const bq__target *t, bq__kernel_src *k) {
  char tn[32];
  bq__target_name(t, tn, sizeof tn);
  bq__kernels_of(d, t, k->kernels);
  k->target = *t;
  const int m = t->module - 1;
  if (m >= 0)
    for (int e = 0; e < BQ__MAX_KERNELS; e++)
      if (e != m) k->kernels[e] = NULL;
  bq__family_of(d)->sku(d, t, tn, k->sku, sizeof k->sku);
  bq__sku_module(t, k);
  size_t i = 0; /* the file name: the SKU with [ ] , made safe */
  for (; k->sku[i] && i + 1 < sizeof k->file; i++)
    k->file[i] = strchr("[],", k->sku[i]) ? '_' : k->sku[i];
  k->file[i] = 0;
}

/* The prelude: the SKU, the names (bq__spec_names), then the family's specialization. The
   emulated tests compile the very same text (tests/emu_prelude.c). */
BQ__FN void bq__prelude(const bq_desc *d, const bq__kernel_src *k, bq__str *s) {
  bq__str_fmt(s, "// %s\n", k->sku);
  bq__spec_names(s);
  bq__family_of(d)->prelude(d, &k->target, s);
}

/* The entry points a source compiles: BQ_E_<NAME> for each (bq_affine_lean: BQ_E_AFFINE_LEAN);
   the kernel files compile an entry point only where its macro is defined */
BQ__FN void bq__entry_defines(const char *const names[BQ__MAX_KERNELS], bq__str *s) {
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    if (!names[e]) continue;
    bq__str_cat(s, "#define BQ_E_");
    for (const char *c = names[e] + 3; *c; c++) bq__str_fmt(s, "%c", *c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    bq__str_cat(s, " 1\n");
  }
}

BQ__FN bq_status bq__build_source(const void *data, bq__kernel_src *k) {
  const bq_desc *d = (const bq_desc *)data;
  const bq__family *f = bq__family_of(d);
  bq__str *s = &k->source;
  bq__prelude(d, k, s);
  bq__entry_defines(k->kernels, s);
  bq__str_cat(s, "#line 1 \"common.cuh\"\n");
  bq__str_cat(s, bq__text_common_cuh());
  bq__str_fmt(s, "#line 1 \"%s\"\n", f->src_name);
  bq__str_cat(s, f->src());
  return s->oom ? bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory building kernel source") : BQ_SUCCESS;
}

/* ---- the compile target ------------------------------------------------------------ */
/* sm must be a compute capability, 10 * major + minor, and one the kernels run on (their
   bf16 conversions, cp.async and int8 mma.sync are sm_80's): checked before NVRTC is
   touched. An older one is a real GPU this library does not support, not a bad value. */
#define BQ__MIN_SM 80
BQ__FN bq_status bq__check_sm(int sm) {
  if (sm < 10 || sm > 999)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "sm (%d) is not a compute capability 10 * major + minor", sm);
  if (sm < BQ__MIN_SM)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED,
                    "sm (%d): compute capability %d.%d is older than %d.%d, the oldest this library supports", sm,
                    sm / 10, sm % 10, BQ__MIN_SM / 10, BQ__MIN_SM % 10);
  return BQ_SUCCESS;
}

/* The one choice of what NVRTC builds for a desc on an arch, shared by bq_plan_select (the
   device's sm), bq_cache_warm and bq_sku, so that what is warmed and named is what select
   loads. A cubin for sm itself when NVRTC supports that arch and force_ptx is off; the
   linear GEMMs get the arch-specific sm_90a (the warpgroup-MMA tiles) there on sm_90 when
   wgmma is on. Otherwise PTX for the newest virtual arch NVRTC supports at or below sm,
   which the driver finishes (devices newer than NVRTC). bq__target_for takes force_ptx
   and wgmma from the environment; tools may ask for either setting. */
BQ__FN bq_status bq__target_pick(const bq_desc *d, int sm, int force_ptx, int wgmma, bq__target *t) {
  memset(t, 0, sizeof *t);
  bq_status st = bq__check_sm(sm);
  if (st) return st;
  bq__nvrtc_id id;
  if ((st = bq__nvrtc_identity(&id))) return st;
  int exact = 0, best = -1, oldest = INT_MAX;
  for (int i = 0; i < id.num_archs; i++) {
    if (id.archs[i] == sm) exact = 1;
    if (id.archs[i] <= sm && id.archs[i] > best) best = id.archs[i];
    if (id.archs[i] < oldest) oldest = id.archs[i];
  }
  if (best < 0)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "sm (%d) is older than every arch NVRTC supports (oldest sm_%d)",
                    sm, oldest);
  const bq__family *f = bq__family_of(d);
  if (f && sm < f->min_sm)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "desc.op (%s) needs compute capability %d.%d or newer (the device "
                    "is sm_%d)", bq__op_name(d->op), f->min_sm / 10, f->min_sm % 10, sm);
  if (f && !(exact && !force_ptx) && best < f->min_sm)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "desc.op (%s) needs PTX for compute capability %d.%d or newer, and "
                    "the newest arch NVRTC supports at or below sm_%d is sm_%d", bq__op_name(d->op), f->min_sm / 10,
                    f->min_sm % 10, sm, best);
  if (exact && !force_ptx) {
    t->arch = sm;
    t->arch_a = wgmma && sm == 90 && bq__family_of(d)->wgmma;
  } else {
    t->arch = best;
    t->ptx = 1;
  }
  return BQ_SUCCESS;
}

/* BARACUDA_QUANT_WGMMA=0 turns the warpgroup-MMA tiles off */
BQ__FN int bq__wgmma_env(void) { return bq__env_bool("BARACUDA_QUANT_WGMMA", 1); }

BQ__FN bq_status bq__target_for(const bq_desc *d, int sm, bq__target *t) {
  return bq__target_pick(d, sm, bq__env_flag("BARACUDA_QUANT_FORCE_PTX"), bq__wgmma_env(), t);
}

/* Prefix this thread's error message with who */
BQ__FN bq_status bq__refail(bq_status st, const char *who) {
  char msg[sizeof bq__err_buf];
  memcpy(msg, bq__err_buf, sizeof msg);
  return bq__fail(st, "%s: %s", who, msg);
}

/* ---- plans --------------------------------------------------------------------------- */
BQ__DEF bq_status bq_sku(const bq_desc *desc, int sm, char *buf, size_t buf_size) {
  bq_desc d;
  char name[96];
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  if (st) return st;
  if (!buf || buf_size == 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_sku: buf is NULL");
  bq__target t;
  if ((st = bq__target_for(&d, sm, &t))) return bq__refail(st, "bq_sku");
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&d, &t, &k);
  if (strlen(k.sku) >= buf_size) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_sku: buf_size (%zu) is too small", buf_size);
  memcpy(buf, k.sku, strlen(k.sku) + 1);
  return BQ_SUCCESS;
}

/* The kernel source and full disk key a desc gets on an arch, for tools and tests. */
BQ__FN BQ__UNUSED bq_status bq__kernel_for(const bq_desc *desc, const bq__target *t, bq__kernel_src *k) {
  bq_desc d;
  char name[96];
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  memset(k, 0, sizeof *k);
  if (st) return st;
  bq__sku_of(&d, t, k);
  return bq__build_source(&d, k);
}

/* One module (t->module > 0) of the normalized desc d into the disk cache (a disk hit does
   nothing); *compiled says whether NVRTC ran. */
BQ__FN bq_status bq__warm_module(const bq_desc *d, const bq__target *t, int *compiled) {
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(d, t, &k);
  if (!k.sku[0]) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "the kernel has no entry point %d", t->module - 1);
  bq_status st = bq__build_source(d, &k);
  if (!st) {
    void *bin = NULL;
    size_t len = 0;
    int from_disk = 0;
    st = bq__obtain_binary(&k, 1, &bin, &len, &from_disk);
    if (!st) { if (from_disk) BQ__COUNT(disk_hits); else BQ__COUNT(misses); }
    if (!st && compiled) *compiled = !from_disk;
    BQ_FREE(bin);
  }
  BQ_FREE(k.source.p);
  return st;
}

/* Every module of d (t->module 0) or the one t names into the disk cache; *compiled counts
   the modules NVRTC compiled */
BQ__FN bq_status bq__warm_one(const bq_desc *d, const bq__target *t, int *compiled) {
  int c = 0;
  if (compiled) *compiled = 0;
  if (t->module) {
    bq_status st = bq__warm_module(d, t, &c);
    if (compiled) *compiled = c;
    return st;
  }
  const char *names[BQ__MAX_KERNELS];
  bq__kernels_of(d, t, names);
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    if (!names[e]) continue;
    bq__target m = *t;
    m.module = e + 1;
    bq_status st = bq__warm_module(d, &m, &c);
    if (st) return st;
    if (compiled) *compiled += c;
  }
  return BQ_SUCCESS;
}

BQ__DEF bq_status bq_cache_warm(const bq_desc *desc, int sm) {
  pthread_once(&bq__stats_once, bq__stats_register);
  bq_desc d, q0, q;
  char name[96];
  bq__target t;
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  if (st) return st;
  if ((st = bq__target_for(&d, sm, &t))) return bq__refail(st, "bq_cache_warm");
  /* the kernels of the plans it holds too, nested, as select would load them */
  const bq_desc *h = &d;
  for (int depth = 0; depth < 2; depth++) {
    const bq__family *f = bq__family_of(h);
    if (!f->sub || !f->sub(h, &q0)) break;
    bq__target tq;
    if ((st = bq__normalize(&q0, &q, name, sizeof name))) return st;
    if ((st = bq__target_for(&q, sm, &tq))) return bq__refail(st, "bq_cache_warm");
    if ((st = bq__warm_one(&q, &tq, NULL))) return st;
    h = &q;
  }
  return bq__warm_one(&d, &t, NULL);
}

/* bq_cache_warm_many: the modules of the list, then threads that take them in turn (NVRTC
   13 compiles on several threads of a process at once) */
typedef struct bq__warm_job {
  bq_desc d;
  bq__target t; /* one module */
  int index;    /* its descriptor's */
  bq_status st;
  char msg[256];
} bq__warm_job;
typedef struct bq__warm_pool {
  bq__warm_job *jobs;
  int n, next;
} bq__warm_pool;
BQ__FN void *bq__warm_worker(void *arg) {
  bq__warm_pool *w = (bq__warm_pool *)arg;
  for (int i; (i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n;) {
    bq__warm_job *j = &w->jobs[i];
    if ((j->st = bq__warm_module(&j->d, &j->t, NULL))) bq__copy(j->msg, sizeof j->msg, bq__err_buf);
  }
  return NULL;
}
/* the modules of desc on sm (and of the plans it holds, nested: QuantizedLinear's
   activations', a fused producer's dynamic quantize and that one's stochastic rounding)
   appended to *jobs */
BQ__FN bq_status bq__warm_jobs(const bq_desc *desc, int index, int sm, bq__warm_job **jobs, int *n, int *cap) {
  bq_desc d[3], q;
  char name[96];
  bq__target t[3];
  bq_status st = bq__normalize(desc, &d[0], name, sizeof name);
  if (!st) st = bq__target_for(&d[0], sm, &t[0]);
  int nd = 1;
  while (!st && nd < 3 && bq__family_of(&d[nd - 1])->sub && bq__family_of(&d[nd - 1])->sub(&d[nd - 1], &q)) {
    if (!(st = bq__normalize(&q, &d[nd], name, sizeof name))) st = bq__target_for(&d[nd], sm, &t[nd]);
    nd++;
  }
  if (st) return bq__refail(st, "bq_cache_warm_many");
  for (int k = 0; k < nd; k++) {
    const char *names[BQ__MAX_KERNELS];
    bq__kernels_of(&d[k], &t[k], names);
    for (int e = 0; e < BQ__MAX_KERNELS; e++) {
      if (!names[e]) continue;
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        bq__warm_job *grown = (bq__warm_job *)BQ_REALLOC(*jobs, (size_t)*cap * sizeof **jobs);
        if (!grown) return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "bq_cache_warm_many: out of memory");
        *jobs = grown;
      }
      bq__warm_job *j = &(*jobs)[(*n)++];
      memset(j, 0, sizeof *j);
      j->d = d[k];
      j->t = t[k];
      j->t.module = e + 1;
      j->index = index;
    }
  }
  return BQ_SUCCESS;
}
BQ__DEF bq_status bq_cache_warm_many(const bq_desc *descs, int n, int sm, int threads) {
  pthread_once(&bq__stats_once, bq__stats_register);
  if (n < 0 || (n > 0 && !descs))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_cache_warm_many: descs (%p) and n (%d) name no list",
                    (const void *)descs, n);
  if (threads < 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_cache_warm_many: threads (%d) is negative", threads);
  bq_status st = bq__check_sm(sm);
  if (st) return st;
  bq__warm_pool w = {NULL, 0, 0};
  int cap = 0, bad = -1;
  bq_status first = BQ_SUCCESS;
  char msg[sizeof bq__err_buf];
  for (int i = 0; i < n; i++)
    if ((st = bq__warm_jobs(&descs[i], i, sm, &w.jobs, &w.n, &cap)) && bad < 0) {
      if (st == BQ_ERROR_OUT_OF_MEMORY) { BQ_FREE(w.jobs); return st; }
      bad = i, first = st;
      memcpy(msg, bq__err_buf, sizeof msg);
    }
  if (threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    threads = c > 0 ? (int)c : 1;
  }
  if (threads > w.n) threads = w.n;
  if (threads > 64) threads = 64;
  pthread_t th[64];
  int started = 0;
  for (; started < threads - 1; started++) /* (this thread is the last worker) */
    if (pthread_create(&th[started], NULL, bq__warm_worker, &w)) break;
  bq__warm_worker(&w);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < w.n; i++) /* the first failure in the list */
    if (w.jobs[i].st && (bad < 0 || w.jobs[i].index < bad)) {
      bad = w.jobs[i].index, first = w.jobs[i].st;
      bq__copy(msg, sizeof msg, w.jobs[i].msg);
    }
  BQ_FREE(w.jobs);
  if (bad >= 0) return bq__fail(first, "bq_cache_warm_many: descs[%d]: %s", bad, msg);
  return BQ_SUCCESS;
}


/* Everything about a plan that needs no device: the normalized desc, its name, the
   kernel's shape. (The tests build plans this way to check argument validation on
   machines without a GPU; such a plan has no kernel and must never reach a launch.) */
BQ__FN bq_status bq__plan_init(const bq_desc *desc, bq_plan *p) {
  memset(p, 0, sizeof *p);
  bq_status st = bq__normalize(desc, &p->desc, p->name, sizeof p->name);
  if (st) return st;
  p->fam = bq__family_of(&p->desc);
  p->vec = p->fam->vec(&p->desc);
  bq__kernels_of(&p->desc, &p->target, p->kernels); /* (select names them again for its target) */
  pthread_mutex_init(&p->lock, NULL);
  return BQ_SUCCESS;
}

/* A typical problem for the dry run: [4096, 4096] (per tensor its 2^24 elements, per channel
   4096 channels of 4096, per group and per block 128), dense, every pointer 2^34 bytes from
   the next and aligned to 2^40, never dereferenced. */
BQ__FN size_t bq__typical_args(const bq_plan *p, bq_args *a) {
  memset(a, 0, sizeof *a);
  uintptr_t next = (uintptr_t)1 << 40;
#define BQ__FAKE_PTR() ((void *)(next += (uintptr_t)1 << 34))
  a->x = BQ__FAKE_PTR();
  a->y = BQ__FAKE_PTR();
  a->dy = BQ__FAKE_PTR();
  a->dx = BQ__FAKE_PTR();
  a->numel = (int64_t)4096 * 4096;
  a->rank = 2;
  a->shape[0] = a->shape[1] = 4096;
  a->rows = a->cols = a->n = 4096;
  a->group_size = 128;
  a->scale = 1.0;
  a->scales = BQ__FAKE_PTR();
  a->out_scales = BQ__FAKE_PTR();
  a->out_zero_points = p->desc.asymmetric ? (int32_t *)BQ__FAKE_PTR() : NULL;
  a->w = BQ__FAKE_PTR();
  a->w_scales = BQ__FAKE_PTR();
  a->w_sums = p->desc.asymmetric ? (const int32_t *)BQ__FAKE_PTR() : NULL;
  void *spare = BQ__FAKE_PTR();
  if (p->fam->typical) p->fam->typical(&p->desc, a, spare); /* (RMSNorm's weight) */
#undef BQ__FAKE_PTR
  return p->fam->workspace(p, a);
}
/* The entry points the plan's own run takes on the typical problem: a dry run, whose
   launches record and launch nothing (0 where the run refuses the problem) */
BQ__FN unsigned bq__plan_typical(const bq_plan *p) {
  bq_args a;
  const size_t ws = bq__typical_args(p, &a);
  bq__dry.plan = p;
  bq__dry.taken = 0;
  const bq_status st = p->fam->run(p, &a, ws ? (void *)((uintptr_t)1 << 39) : NULL, ws, NULL);
  const unsigned taken = bq__dry.taken;
  bq__dry.plan = NULL;
  return st ? 0 : taken;
}
/* Select loads the modules of the entry points a typical problem takes (bq__plan_typical);
   the others load when a run first takes them. Every one with BARACUDA_QUANT_LAZY=0, or
   where the dry run takes none. */
BQ__FN int bq__lazy(void) { return bq__env_bool("BARACUDA_QUANT_LAZY", 1); }
BQ__FN bq_status bq__plan_prime(bq_plan *p) {
  const unsigned want = bq__lazy() ? bq__plan_typical(p) : 0;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    bq__CUfunction f;
    if (!p->kernels[e] || (want && !(want >> e & 1))) continue;
    bq_status st = bq__plan_fn(p, e, &f);
    if (st) return st;
  }
  return BQ_SUCCESS;
}

BQ__FN bq_status bq__select(const bq_desc *desc, bq_plan **out, int *pushed) {
  if (!out) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: plan is NULL");
  *out = NULL;
  bq_plan *p = (bq_plan *)BQ_MALLOC(sizeof *p);
  if (!p) return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "bq_plan_select: out of memory");
  pthread_once(&bq__stats_once, bq__stats_register);
  bq_status st = bq__plan_init(desc, p);
  bq__device_info dev;
  memset(&dev, 0, sizeof dev);
  if (!st) st = bq__plan_context(p->desc.device, &p->ctx, pushed, &dev);
  p->device = dev.ordinal;
  bq__target t;
  if (!st && (st = bq__target_for(&p->desc, dev.sm, &t))) bq__refail(st, p->name);
  if (st) { BQ_FREE(p); return st; }
  p->target = t;
  bq__kernels_of(&p->desc, &t, p->kernels);
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&p->desc, &t, &k);
  bq__copy(p->sku, sizeof p->sku, k.sku);
  p->num_sms = dev.num_sms;
  p->threads_sm = dev.threads_sm;
  p->l2_bytes = dev.l2_bytes;
  snprintf(p->gpu, sizeof p->gpu, "%s sms %d mem %d", dev.name[0] ? dev.name : "?", dev.num_sms, dev.mem_khz);
  if (p->fam->plan_setup) st = p->fam->plan_setup(p);
  bq_desc q;
  if (!st && p->fam->sub && p->fam->sub(&p->desc, &q)) { /* the plan it holds */
    int sub_pushed = 0; /* (this plan's context is current: the sub-plan's is the same) */
    bq__CUcontext c;
    st = bq__select(&q, &p->sub, &sub_pushed);
    if (sub_pushed) bq__drv.cuCtxPopCurrent(&c);
    if (!st) {
      size_t n = strlen(p->sku);
      snprintf(p->sku + n, sizeof p->sku - n, " + %s", p->sub->sku);
    }
  }
  if (!st) st = bq__plan_prime(p);
  if (st) { /* (the message names the plan: bq__plan_load's, or the sub-plan's select's) */
    bq_plan_destroy(p);
    return st;
  }
  *out = p;
  return BQ_SUCCESS;
}

/* The target comes from NVRTC's archs, read from the memo without loading NVRTC. Where
   that memo proves wrong (found by a compile, or checked here after a failure that a
   wrong arch list could cause), the select runs again on NVRTC's own list. */
BQ__DEF bq_status bq_plan_select(const bq_desc *desc, bq_plan **out) {
  unsigned gen = bq__nvrtc_gen();
  int outer = bq__retarget, pushed = 0;
  bq__retarget = 1;
  bq_status st = bq__select(desc, out, &pushed);
  bq__CUcontext c;
  if (pushed) bq__drv.cuCtxPopCurrent(&c);
  bq__retarget = outer;
  int suspect = st == BQ_ERROR_NOT_SUPPORTED || st == BQ_ERROR_COMPILE_FAILED || st == BQ_ERROR_CUDA;
  if (gen != bq__nvrtc_gen() || (suspect && bq__nvrtc_recheck())) {
    bq_plan_destroy(st ? NULL : *out);
    pushed = 0;
    st = bq__select(desc, out, &pushed);
    if (pushed) bq__drv.cuCtxPopCurrent(&c);
  }
  return st;
}

/* The fields one op owns: args.amax_bound (dynamic quantize's, symmetric, 0 or finite and
   > 0 in C; 0 elsewhere), args.mask (fake quantize's per tensor and per channel; NULL
   elsewhere), args.tensor_scale and out_tensor_scale (NVFP4's; NULL elsewhere), args.seed
   (random signs, stochastic rounding) and args.offset (stochastic rounding; 0 elsewhere) */
BQ__FN bq_status bq__check_op_fields(const bq_plan *p, const bq_args *a) {
  const bq_desc *d = &p->desc;
  const double b = a->amax_bound;
  const unsigned owns = p->fam->owns ? p->fam->owns(d) : 0;
  if (a->mask && !(owns & BQ__OWNS_MASK))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.mask (%p) must be NULL: only fake quantize per tensor and "
                    "per channel keep a mask (rounding to nearest, unrotated)", p->name, a->mask);
  if ((a->tensor_scale || a->out_tensor_scale) && !(owns & BQ__OWNS_TENSOR_SCALE))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.%s (%p) must be NULL: the tensor scale is NVFP4's "
                    "(microscaling, desc.scale_type BQ_E4M3)", p->name,
                    a->tensor_scale ? "tensor_scale" : "out_tensor_scale",
                    a->tensor_scale ? a->tensor_scale : a->out_tensor_scale);
  if (a->seed && !(owns & BQ__OWNS_SEED))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.seed (%llu) must be 0: it keys BQ_HADAMARD's random signs "
                    "(desc.random_signs) and stochastic rounding (desc.rounding)", p->name,
                    (unsigned long long)a->seed);
  if (a->rotation_block && !(owns & BQ__OWNS_ROTATION))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) must be 0: it is the fused "
                    "rotation's block (desc.rotation)", p->name, (long long)a->rotation_block);
  if (a->offset && !(owns & BQ__OWNS_OFFSET))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.offset (%llu) must be 0: it places stochastic rounding's "
                    "draws (desc.rounding)", p->name, (unsigned long long)a->offset);
  if (b == 0) return BQ_SUCCESS;
  if (!(owns & BQ__OWNS_AMAX_BOUND))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) applies to dynamic quantize only", p->name, b);
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) applies to symmetric plans only", p->name, b);
  if (!(isfinite(b) && b > 0) || (d->float_type != BQ_F64 && !((float)b > 0 && isfinite((float)b))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) must be 0 (none) or finite and > 0 in %s",
                    p->name, b, d->float_type == BQ_F64 ? "f64" : "f32");
  return BQ_SUCCESS;
}

BQ__DEF bq_status bq_plan_can_implement(const bq_plan *p, const bq_args *a) {
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_can_implement: plan is NULL");
  if (a) {
    bq_status st = bq__check_op_fields(p, a);
    if (st) return st;
  }
  return p->fam->check(p, a);
}

/* Validates what the size depends on (the problem's shape, by the family's own rules, the
   first of its check's), not the pointers, which a caller may not have allocated yet. */
BQ__DEF bq_status bq_plan_workspace_size(const bq_plan *p, const bq_args *a, size_t *bytes) {
  if (bytes) *bytes = 0;
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_workspace_size: plan is NULL");
  if (!bytes) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: bq_plan_workspace_size: bytes is NULL", p->name);
  bq_status st = p->fam->shape(p, a);
  if (!st) *bytes = p->fam->workspace(p, a);
  return st;
}

/* A plan runs in its own context: where another is current its modules' handles mean
   nothing (the driver would say "invalid resource handle"), so that is refused by name. */
BQ__FN bq_status bq__context_mismatch(const bq_plan *p, bq__CUcontext cur) {
  int cd = bq__context_device(cur);
  if (cd == p->device)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: plan selected in a context of device %d, current context is "
                    "another context of device %d: make the plan's context current (or none), or select a plan "
                    "in this one", p->name, p->device, cd);
  return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: plan selected on device %d, current context is device %d's: make "
                  "device %d current (bq_set_device) or none, or select a plan for device %d", p->name, p->device,
                  cd, p->device, cd);
}

BQ__DEF bq_status bq_plan_run(const bq_plan *p, const bq_args *a, void *workspace, size_t workspace_bytes,
                              void *stream) {
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_run: plan is NULL");
  if (a) {
    bq_status st = bq__check_op_fields(p, a);
    if (st) return st;
  }
  if (!p->ctx) return p->fam->run(p, a, workspace, workspace_bytes, stream); /* built without a device: validates */
  bq__CUcontext cur = NULL;
  bq__CUresult r = bq__drv.cuCtxGetCurrent(&cur);
  if (r) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (cur == p->ctx) return p->fam->run(p, a, workspace, workspace_bytes, stream);
  if (cur) return bq__context_mismatch(p, cur);
  if ((r = bq__drv.cuCtxPushCurrent(p->ctx))) return bq__cu_fail(r, "cuCtxPushCurrent");
  bq_status st = p->fam->run(p, a, workspace, workspace_bytes, stream);
  bq__drv.cuCtxPopCurrent(&cur);
  return st;
}

BQ__DEF void bq_plan_destroy(bq_plan *p) {
  if (!p) return;
  for (int e = 0; e < BQ__MAX_KERNELS; e++)
    if (p->mod[e]) bq__entry_release(p->mod[e]);
  bq_plan_destroy(p->sub);
  bq_plan_destroy(p->rows);
  pthread_mutex_destroy(&p->lock);
  BQ_FREE(p);
}

BQ__DEF const char *bq_plan_sku(const bq_plan *p) { return p ? p->sku : ""; }

BQ__DEF const char *bq_plan_precision_guarantee(const bq_plan *p) {
  if (!p) return "";
  if (p->fam->guarantee) return p->fam->guarantee(&p->desc);
  if (p->desc.float_type == BQ_F64)
    return "exact: f64 arithmetic throughout (IEEE division and product, round half to even); "
           "bit-identical to the CPU reference of docs/numerics.md";
  return "exact: f32 arithmetic (IEEE division and product, round half to even, no FMA "
         "contraction), RNE to the storage type; bit-identical to the CPU reference of docs/numerics.md";
}

/* ==== src/tools.h ========================================================================= */
/* ---- SKUs back to descriptors, and every kernel, for tools --------------------------- */
/* Compiled where the including file defines BARACUDA_QUANT_TOOLS as well: the CLI, the
   Python package's shim, the kernel dumper and the tests that walk every kernel. */
#ifdef BARACUDA_QUANT_TOOLS
/* op belongs to the family the tools name group ("linear": the GEMMs and the weight sums) */
BQ__FN BQ__UNUSED int bq__op_in(bq_op op, const char *group) {
  const bq__family *f = bq__family_for(op, NULL);
  return f && !strcmp(f->group, group);
}
/* The normalized desc and target a SKU (as bq_sku and bq_plan_sku print it, or a module's,
   "<SKU>@<entry point>", which sets t->module) names: the inverse of bq__sku_of, for tools:
   the family's own form (its from_sku), or the elementwise families' (bq__sku_std). The
   result's SKU must be the very string given. */
BQ__FN BQ__UNUSED bq_status bq__desc_from_sku(const char *sku, bq_desc *out, bq__target *t) {
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  char buf[256], *tok[16];
  int n = 0, ok = 0;
  bq_desc d;
  memset(&d, 0, sizeof d);
  memset(t, 0, sizeof *t);
  if (!sku || !*sku || strlen(sku) >= sizeof buf)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%.60s) is empty or too long", sku ? sku : "NULL");
  memcpy(buf, sku, strlen(sku) + 1);
  char *entry = strchr(buf, '@'); /* a module: "<SKU>@<entry point>" */
  if (entry) *entry++ = 0;
  for (char *p = buf; n < 16;) {
    tok[n++] = p;
    if (!(p = strchr(p, '.'))) break;
    *p++ = 0;
  }
  /* the target: sm_90, sm_90a or compute_90 */
  const char *tn = tok[n - 1], *num = !strncmp(tn, "sm_", 3) ? tn + 3 : !strncmp(tn, "compute_", 8) ? tn + 8 : NULL;
  char *end = NULL;
  long arch = num && *num >= '0' && *num <= '9' ? strtol(num, &end, 10) : -1;
  t->ptx = num == tn + 8;
  t->arch_a = end && !strcmp(end, "a") && !t->ptx;
  int target_ok = arch > 0 && arch < 1000 && end && (!*end || t->arch_a);
  t->arch = (int)arch;
  static char no_range[] = "q[0,0]"; /* FP8 SKUs name no q-range: parse them as if they did */
  bq_dtype it = BQ_DTYPE_DEFAULT;
  if (n >= 8 && n < 16 && bq__dtype_from_name(tok[4], &it) && bq__is_fp8(it)) {
    memmove(&tok[6], &tok[5], (size_t)(n - 5) * sizeof tok[0]);
    tok[5] = no_range;
    n++;
  }
  const bq__family *fam = NULL; /* the family whose form the tokens have, and d.op */
  for (int f = 0; target_ok && f < BQ__FAMILIES && !fam; f++)
    if (bq__families[f]->from_sku && bq__families[f]->from_sku(tok, n - 1, &d)) fam = bq__families[f], ok = 1;
  const int own = fam != NULL; /* (else the elementwise form, which a family with a form of its own may use too) */
  for (int f = 0; target_ok && f < BQ__FAMILIES && !fam; f++) /* the elementwise form: the op by its label */
    for (int i = 0; i < BQ__FAMILY_OPS && bq__families[f]->ops[i] && !fam && n >= 9 && n <= 13; i++)
      for (int act = BQ_ACTIVATION_DEFAULT; act <= BQ_GELU_TANH && !fam; act++) {
        bq_desc l;
        memset(&l, 0, sizeof l);
        l.op = bq__families[f]->ops[i];
        l.activation = (bq_activation)act;
        if (!strcmp(tok[0], bq__op_label(&l))) fam = bq__families[f], d.op = l.op, d.activation = l.activation;
      }
  if (fam && !own) {
    for (int g = 0; g < 5; g++)
      if (!strcmp(tok[2], bq__gran_name(grans[g]))) d.granularity = grans[g], ok = 1;
    const int mn = !strncmp(tok[6], "scale_mn_", 9); /* an MN-major layout */
    if (mn) d.scale_layout = BQ_SCALES_MN_MAJOR;
    char tail = 0;
    if (n >= 10 && !strcmp(tok[n - 2], "rot")) /* the fused rotation, before the target */
      d.rotation = 1, tok[n - 2] = tok[n - 1], n--;
    if (n >= 11 && !strcmp(tok[n - 2], "sr")) /* dynamic quantize's rounding, before the target */
      d.rounding = BQ_ROUND_STOCHASTIC, tok[n - 2] = tok[n - 1], n--;
    if (n == 11 && !strcmp(tok[9], "pow2")) d.pow2_scales = 1, n = 10;
    ok = ok && n <= 10 && (!strcmp(tok[1], "fwd") || !strcmp(tok[1], "bwd")) &&
         bq__dtype_from_name(tok[3], &d.float_type) && bq__dtype_from_name(tok[4], &d.int_type) &&
         sscanf(tok[5], "q[%d,%d]%c", &d.qmin, &d.qmax, &tail) == 2 && !strncmp(tok[6], "scale_", 6) &&
         bq__dtype_from_name(tok[6] + (mn ? 9 : 6), &d.scale_type) &&
         (n == 9 || !strcmp(tok[8], "sym") || !strcmp(tok[8], "asym") || !strcmp(tok[8], "static"));
    d.direction = !strcmp(tok[1], "bwd") ? BQ_BACKWARD : BQ_FORWARD;
    d.asymmetric = n == 10 && !strcmp(tok[8], "asym");
    if (n == 9 && !strcmp(tok[7], "sr")) d.rounding = BQ_ROUND_STOCHASTIC; /* (the affine family's variant) */
  }
  char name[96];
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  if (ok && bq__normalize(&d, out, name, sizeof name) == BQ_SUCCESS) {
    const char *names[BQ__MAX_KERNELS];
    bq__kernels_of(out, t, names);
    for (int e = 0; entry && e < BQ__MAX_KERNELS; e++)
      if (names[e] && !strcmp(names[e], entry)) t->module = e + 1;
    if (!entry || t->module) bq__sku_of(out, t, &k);
  }
  if (strcmp(k.sku, sku) != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%s) is not one this library (%s) names", sku, BQ_VERSION_STRING);
  return BQ_SUCCESS;
}

/* The families by name, for tools: bit i of bq__all_descs' set is bq__family_names[i]
   (each bq__family's group) */
static const char *const bq__family_names[] = {"affine", "dynamic", "linear", "fused", "mx", "rotate"};
#define BQ__ALL_FAMILIES 63u
#define BQ__FAMILY_LIST "affine, dynamic, linear, fused, mx or rotate"
#define BQ__FAMILY_LIST_COMMAS "affine,dynamic,linear,fused,mx,rotate"
BQ__FN BQ__UNUSED unsigned bq__family_bit(const char *name) {
  for (unsigned i = 0; i < sizeof bq__family_names / sizeof bq__family_names[0]; i++)
    if (!strcmp(name, bq__family_names[i])) return 1u << i;
  return 0;
}

/* Every kernel of the families asked for (1: quantize, dequantize, fake quantize; 2: dynamic
   quantize; 4: the linear layers' GEMMs, the weight sums and QuantizedLinear's activation
   kernels; 8: the fused producers) with each int type's full q-range: one normalized desc per
   SKU, each naming one kernel (warm it with bq__warm_one). Every field each desc has, by
   value, then the family's variants (bq__family.axes); the plans a plan holds come along.
   Writes at most cap into out; returns how many. */
BQ__FN BQ__UNUSED int bq__all_descs(unsigned families, bq_desc *out, int cap) {
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16}, its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  const bq__target t = {80, 0, 0, 0}; /* SKUs differ in their target alone across targets */
  int n = 0, nseen = 0, seen_cap = 0;
  char(*seen)[256] = NULL;
  int *slot = NULL; /* an open-addressed set over seen (2 seen_cap slots, -1 empty) */
  for (int fi = 0; fi < BQ__FAMILIES; fi++) {
    const bq__family *fam = bq__families[fi];
    if (!(families & bq__family_bit(fam->group))) continue;
    for (int oi = 0; oi < BQ__FAMILY_OPS && fam->ops[oi]; oi++) {
      const bq_op op = fam->ops[oi];
      int outer = 1, inner = 1;
      if (fam->axes) fam->axes(op, &outer, &inner);
      /* every combination, the variant inside fastest, the outer variant slowest */
      const int combos = outer * 2 * 5 * 4 * 4 * 6 * 2 * 2 * inner;
      for (int c = 0; c < combos; c++) {
        int r = c;
        const int y = r % inner;
        r /= inner;
        const int asym = r % 2, lay = r / 2 % 2, s = r / 4 % 6, i = r / 24 % 4, f = r / 96 % 4, g = r / 384 % 5,
                  dir = r / 1920 % 2, x = r / 3840;
        bq_desc in, d[3];
        char name[96];
        memset(&in, 0, sizeof in);
        in.op = op;
        in.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
        in.granularity = grans[g];
        in.float_type = fts[f];
        in.int_type = its[i];
        in.scale_type = s < 4 ? fts[s] : s == 4 ? BQ_UE8M0 : BQ_UE8M0X4;
        in.scale_layout = (bq_scale_layout)lay;
        in.asymmetric = asym;
        if (fam->vary) fam->vary(&in, x, y);
        if (bq__normalize(&in, &d[0], name, sizeof name) != BQ_SUCCESS) continue;
        /* and the plans it holds, nested (a fused producer's dynamic quantize holds its
           stochastic rounding's quantize) */
        int nd = 1;
        while (nd < 3) {
          const bq__family *hf = bq__family_of(&d[nd - 1]);
          if (!hf || !hf->sub || !hf->sub(&d[nd - 1], &in) || bq__normalize(&in, &d[nd], name, sizeof name) != BQ_SUCCESS)
            break;
          nd++;
        }
        for (int j = 0; j < nd; j++) {
          bq__kernel_src k;
          memset(&k, 0, sizeof k);
          bq__sku_of(&d[j], &t, &k);
          if (nseen == seen_cap) { /* grow both, and rehash */
            seen_cap = seen_cap ? 2 * seen_cap : 256;
            char(*grown)[256] = (char(*)[256])BQ_REALLOC(seen, (size_t)seen_cap * sizeof *seen);
            int *slots = (int *)BQ_MALLOC((size_t)(2 * seen_cap) * sizeof *slots);
            if (!grown || !slots) { BQ_FREE(grown ? grown : seen); BQ_FREE(slots); BQ_FREE(slot); return -1; }
            seen = grown;
            BQ_FREE(slot);
            slot = slots;
            for (int m = 0; m < 2 * seen_cap; m++) slot[m] = -1;
            for (int m = 0; m < nseen; m++) {
              size_t h = (size_t)bq__fnv1a(seen[m], strlen(seen[m]), BQ__FNV_SEED) % (size_t)(2 * seen_cap);
              while (slot[h] >= 0) h = (h + 1) % (size_t)(2 * seen_cap);
              slot[h] = m;
            }
          }
          size_t h = (size_t)bq__fnv1a(k.sku, strlen(k.sku), BQ__FNV_SEED) % (size_t)(2 * seen_cap);
          while (slot[h] >= 0 && strcmp(seen[slot[h]], k.sku)) h = (h + 1) % (size_t)(2 * seen_cap);
          if (slot[h] >= 0) continue; /* seen */
          slot[h] = nseen;
          memcpy(seen[nseen++], k.sku, sizeof k.sku);
          if (n < cap) out[n] = d[j];
          n++;
        }
      }
    }
  }
  BQ_FREE(seen);
  BQ_FREE(slot);
  return n;
}
#endif /* BARACUDA_QUANT_TOOLS */

/* ==== src/impl_memory.h =================================================================== */
/* ---- device memory helpers ----------------------------------------------------------- */
/* They work in the current context, else device 0's primary context (made current), as
   the CUDA runtime does. */
BQ__DEF bq_status bq_malloc(void **ptr, size_t bytes) {
  if (!ptr) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_malloc: ptr is NULL");
  *ptr = NULL;
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUdeviceptr p = 0;
  bq__CUresult r = bq__drv.cuMemAlloc(&p, bytes ? bytes : 1);
  if (r) return bq__cu_fail(r, "cuMemAlloc");
  *ptr = (void *)(uintptr_t)p;
  return BQ_SUCCESS;
}
BQ__DEF bq_status bq_free(void *ptr) {
  if (!ptr) return BQ_SUCCESS;
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUresult r = bq__drv.cuMemFree((bq__CUdeviceptr)(uintptr_t)ptr);
  return r ? bq__cu_fail(r, "cuMemFree") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memcpy_to_device(void *dst, const void *src, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemcpyHtoD((bq__CUdeviceptr)(uintptr_t)dst, src, bytes);
  return r ? bq__cu_fail(r, "cuMemcpyHtoD") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memcpy_to_host(void *dst, const void *src, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemcpyDtoH(dst, (bq__CUdeviceptr)(uintptr_t)src, bytes);
  return r ? bq__cu_fail(r, "cuMemcpyDtoH") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memset(void *dst, unsigned char value, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemsetD8((bq__CUdeviceptr)(uintptr_t)dst, value, bytes);
  return r ? bq__cu_fail(r, "cuMemsetD8") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_synchronize(void *stream) {
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUresult r = bq__drv.cuStreamSynchronize((bq__CUstream)stream);
  return r ? bq__cu_fail(r, "cuStreamSynchronize") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_device_name(char *buf, size_t n) {
  bq__CUcontext c;
  bq_status st = bq__context(0, &c);
  if (st) return st;
  bq__CUdevice dev;
  bq__CUresult r = bq__drv.cuCtxGetDevice(&dev);
  if (!r) r = bq__drv.cuDeviceGetName(buf, (int)n, dev);
  return r ? bq__cu_fail(r, "cuDeviceGetName") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_set_device(int ordinal) {
  if (ordinal < 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_set_device: ordinal (%d) is negative", ordinal);
  bq__CUcontext c;
  bq_status st = bq__primary(ordinal, &c);
  if (st) return st;
  bq__CUresult r = bq__drv.cuCtxSetCurrent(c);
  return r ? bq__cu_fail(r, "cuCtxSetCurrent") : BQ_SUCCESS;
}

/* ==== kernels_src/: the kernel text ======================================================= */
/* BEGIN EMBEDDED KERNELS: generated by tools/amalgamate.py from kernels_src/, do not edit */
static const char bq__src_affine_cu[] =
  "// affine.cu - quantize / dequantize / fake quantize, forward and backward (STE), for\n"
  "// every granularity: per tensor, per channel, per token, per group and per block.\n"
  "// Prelude defines (besides common.cuh's), in the names of the public enums: BQ_OP\n"
  "// (BQ_OP_QUANTIZE, BQ_OP_DEQUANTIZE, BQ_OP_FAKE_QUANTIZE), BQ_DIR (BQ_DIR_FORWARD,\n"
  "// BQ_DIR_BACKWARD), BQ_GRAN (BQ_GRAN_TENSOR, _CHANNEL, _TOKEN, _GROUP, _BLOCK); BQ_U, BQ_GA, BQ_FR\n"
  "// and BQ_NA, the row kernels', bq_affine_blocks', bq_affine_flat's and bq_affine_narrow's\n"
  "// accesses per lane.\n"
  "//\n"
  "// The data is [rows, cols] with a row stride per stream (per tensor and per channel are\n"
  "// one dense row; per channel with the channel axis innermost has its own kernel, at the\n"
  "// end). The stream with the widest element (the lead) is read or written in 16-byte\n"
  "// accesses of BQ_P elements after a scalar prologue that aligns it; the other\n"
  "// streams move the same BQ_P elements with the widest access their alignment allows.\n"
  "// Consecutive lanes take consecutive accesses, so every warp instruction touches one\n"
  "// contiguous span of every stream. A warp takes a tile of 32 * BQ_U accesses of one row\n"
  "// at a time and issues all its loads before it computes; a warp's item is p.tpw consecutive\n"
  "// tiles of one row, whose per-row set-up (pointers, prologue, per-token scale) it pays once.\n"
  "// Per channel and per group, the scale and zero point change along the row. Where no access\n"
  "// straddles two parameter blocks, quantize and fake quantize forward (and f64 fake quantize\n"
  "// backward; per token, f64 quantize and fake quantize backward) take bq_affine_blocks: a\n"
  "// lane prepares its block's parameters once for several accesses of it (see there).\n"
  "// Otherwise the slot kernels (BQ_SLOTS) prepare each parameter block a tile touches once, in\n"
  "// shared memory (f64 quantize: each block of an item once, BQ_ITEM_SLOTS); the other ops\n"
  "// look each access's parameters up. Where accesses can straddle two blocks, bq_affine_odd\n"
  "// computes those in registers with both blocks' parameters; bq_affine redoes them element by\n"
  "// element. Per group (and per token, a group a row) over contiguous data with straddling\n"
  "// accesses, bq_affine_flat treats the tensor as one flat array and gives each element its\n"
  "// group's parameters by a select. f64 quantize takes bq_affine_narrow, bq_affine_blocks'\n"
  "// layout over accesses of one element, where the host says so.\n"
  "\n"
  "#define BQ_BWD (BQ_DIR == BQ_DIR_BACKWARD) // the straight-through gradient\n"
  "\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "typedef bq_t bq_in0;\n"
  "typedef bq_i bq_out;\n"
  "#define BQ_HAS_IN1 0\n"
  "#elif BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD\n"
  "typedef bq_i bq_in0;\n"
  "typedef bq_t bq_out;\n"
  "#define BQ_HAS_IN1 0\n"
  "#elif !BQ_BWD\n"
  "typedef bq_t bq_in0;\n"
  "typedef bq_t bq_out;\n"
  "#define BQ_HAS_IN1 0\n"
  "#else\n"
  "typedef bq_t bq_in0; // dy\n"
  "typedef bq_t bq_out; // dx\n"
  "#define BQ_HAS_IN1 (BQ_OP != BQ_OP_DEQUANTIZE) // x, for the mask\n"
  "#endif\n"
  "typedef bq_t bq_in1;\n"
  "\n"
  "#define BQ_MAX2(a, b) ((a) > (b) ? (a) : (b))\n"
  "#define BQ_LEAD_SIZE BQ_MAX2(sizeof(bq_in0), sizeof(bq_out))\n"
  "#define BQ_P ((int)(16 / BQ_LEAD_SIZE)) // elements per access\n"
  "// BQ_U, accesses per lane per tile, comes from the host's prelude (it sizes the grid)\n"
  "#define BQ_TILE (32 * BQ_U)             // accesses per warp tile\n"
  "#define BQ_OUT_LEADS (BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD) // dequantize forward writes the wide stream\n"
  "// From the host's dispatch table (bq__affine_table, whose columns say where and why): BQ_SLOTS,\n"
  "// per channel and per group the row kernels prepare each parameter block's scale once, in\n"
  "// shared memory, rather than look it up for each access; BQ_ITEM_SLOTS, once an item rather\n"
  "// than once a tile; BQ_ITEMS, a row kernel's item is several tiles (else one); BQ_LB_ROW,\n"
  "// _ODD, _BLOCKS, _FLAT, _NARROW, _COLS, each entry point's launch bounds.\n"
  "#define BQ_RL (BQ_SLOTS ? BQ_P : 1) // elements the redo loop loads together\n"
  "\n"
  "/* kernels_src/affine_abi.h - the affine family's host/kernel interface (quantize, dequantize,\n"
  "   fake quantize), valid as C and as CUDA C++: its entry points and its parameter blocks.\n"
  "   affine.cu and the host (src/family_affine.h) both include it. */\n"
  "#ifndef BQ_AFFINE_ABI_H\n"
  "#define BQ_AFFINE_ABI_H\n"
  "\n"
  "/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,\n"
  "   the kernel's extern \"C\" function (each compiled where the prelude defines BQ_E_<NAME>) */\n"
  "enum {\n"
  "  BQ__AFFINE_ROW,    /* the row kernel, every granularity */\n"
  "  BQ__AFFINE_COLS,   /* per channel, the channel axis innermost */\n"
  "  BQ__AFFINE_ODD,    /* per channel and per group, straddling accesses in registers */\n"
  "  BQ__AFFINE_BLOCKS, /* whole parameter blocks a lane */\n"
  "  BQ__AFFINE_FLAT,   /* per group and per token over one flat array */\n"
  "  BQ__AFFINE_NARROW, /* f64 quantize, blocks' layout over one-element accesses */\n"
  "  BQ__AFFINE_MASK,   /* fake quantize per tensor and per channel with args.mask */\n"
  "  BQ__AFFINE_LEAN,   /* forward quantize and dequantize over small dense tensors */\n"
  "  BQ__AFFINE_PAIR,   /* bq_affine_lean's two accesses a thread (16-bit quantize) */\n"
  "  BQ__AFFINE_SR,     /* stochastic rounding (quantize and fake quantize forward), alone in its SKUs */\n"
  "  BQ__AFFINE_ENTRIES\n"
  "};\n"
  "#define BQ_FN_AFFINE bq_affine\n"
  "#define BQ_FN_AFFINE_COLS bq_affine_cols\n"
  "#define BQ_FN_AFFINE_ODD bq_affine_odd\n"
  "#define BQ_FN_AFFINE_BLOCKS bq_affine_blocks\n"
  "#define BQ_FN_AFFINE_FLAT bq_affine_flat\n"
  "#define BQ_FN_AFFINE_NARROW bq_affine_narrow\n"
  "#define BQ_FN_AFFINE_MASK bq_affine_mask\n"
  "#define BQ_FN_AFFINE_LEAN bq_affine_lean\n"
  "#define BQ_FN_AFFINE_PAIR bq_affine_pair\n"
  "#define BQ_FN_AFFINE_SR bq_affine_sr\n"
  "\n"
  "/* Every entry point but bq_affine_lean's and bq_affine_pair's */\n"
  "typedef struct bq_affine_params {\n"
  "  bq_u64 in0, in1, out;                    /* device pointers */\n"
  "  bq_i64 rows, cols;                       /* [rows, cols] */\n"
  "  bq_i64 in0_stride, in1_stride, out_stride;\n"
  "  bq_i64 tiles, tpw, chunks;               /* warp tiles per row; per item; items per row */\n"
  "  bq_i64 group;                            /* channel: inner size; group: G */\n"
  "  bq_i64 gmod;                             /* channel: number of channels */\n"
  "  bq_i64 grs;                              /* group, block: the scales' leading dimension (bq_pbase) */\n"
  "  bq_u64 scales, zps;                      /* device arrays (zps may be 0: all zero) */\n"
  "  double scale;                            /* per tensor: the scale, already a C value */\n"
  "  bq_fastdiv fd_group, fd_gmod, fd_chunks; /* 32-bit dividers, valid when fast32 != 0 */\n"
  "  int zp;                                  /* per tensor */\n"
  "  int fast32;                              /* indices fit in 32 bits */\n"
  "  /* bq_affine_blocks only: blocks a row, lanes a block (a power of two), parts a block */\n"
  "  bq_i64 nblk;\n"
  "  bq_fastdiv fd_parts;\n"
  "  int gl, parts;\n"
  "  bq_u64 mask; /* bq_affine_mask: the mask's 32-bit words */\n"
  "} bq_affine_params;\n"
  "/* bq_affine_sr's: the problem, the draws' key and first index (args.seed, args.offset), and\n"
  "   the fused rotation's block log2 (args.rotation_block) and whether its signs are random\n"
  "   (desc.random_signs, keyed by the seed too) */\n"
  "typedef struct bq_affine_sr_params {\n"
  "  bq_affine_params a;\n"
  "  bq_u64 offset;\n"
  "  bq_u32 seed_lo, seed_hi;\n"
  "  int rlog2, rsigns;\n"
  "} bq_affine_sr_params;\n"
  "/* bq_affine_lean's and bq_affine_pair's own parameter blocks: only what each reads (a launch\n"
  "   carries its kernel's parameters, and the pair kernel ran slower taking all of\n"
  "   bq_affine_params) */\n"
  "typedef struct bq_lean_params {\n"
  "  bq_u64 in0, out, scales, zps; /* device pointers (zps may be 0: all zero) */\n"
  "  double scale;                 /* per tensor: the scale, already a C value */\n"
  "  bq_u32 accesses, n;           /* whole accesses; elements (fewer than 2^31) */\n"
  "  bq_fastdiv fd_group;          /* per token the row length, per group G, per block B */\n"
  "  int zp;                       /* per tensor */\n"
  "} bq_lean_params;\n"
  "typedef struct bq_pair_params {\n"
  "  bq_u64 in0, out, scales; /* device pointers: the 16-bit input, its codes, the scales */\n"
  "  bq_u32 pairs;            /* the threads with work: elements / (2 * BQ_P) */\n"
  "  bq_fastdiv fd_group;     /* per token the row length, per group G, per block B */\n"
  "} bq_pair_params;\n"
  "/* Per block, the two kernels' blocks with the row's geometry after them: an element's block\n"
  "   is (r / B) * grs + c / B for its row r and column c */\n"
  "typedef struct bq_lean_block_params {\n"
  "  bq_lean_params l;\n"
  "  bq_fastdiv fd_cols; /* the row length */\n"
  "  bq_u32 grs;         /* the scales' leading dimension, in scales */\n"
  "} bq_lean_block_params;\n"
  "typedef struct bq_pair_block_params {\n"
  "  bq_pair_params l;\n"
  "  bq_fastdiv fd_cols;\n"
  "  bq_u32 grs;\n"
  "} bq_pair_block_params;\n"
  "#endif\n"
  "\n"
  "// One element. `fix` is non-null in the vector loops: there an op may take a fast form and\n"
  "// raise *fix where that form does not apply (f64 quantize backward divides through the\n"
  "// prepared reciprocal, bq_div_by; per channel and per group, quantize takes the integer\n"
  "// form, the tile having checked z.iok). The caller then redoes the access element by\n"
  "// element with fix == nullptr: the general formulas.\n"
  "\n"
  "static __device__ __forceinline__ bq_out bq_apply(bq_in0 a, bq_in1 b, const bq_scale &s, const bq_zp &z,\n"
  "                                                  bool *fix) {\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "  if (fix) return (bq_out)bq_quantize_int(bq_to_c(a), s, z); // the tile checked z.iok\n"
  "#endif\n"
  "  return (bq_out)bq_quantize(bq_to_c(a), s, z);\n"
  "#elif BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD\n"
  "  return bq_from_c(bq_dequantize((int)a, s.s, z));\n"
  "#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD\n"
  "  return bq_from_c(bq_fake_quantize(bq_to_c(a), s, z));\n"
  "#elif BQ_OP == BQ_OP_QUANTIZE\n"
  "  if (!bq_in_range(bq_to_c(b), s, z)) return (bq_out)0;\n"
  "  if (fix) {\n"
  "    bool ok;\n"
  "    const bq_c v = bq_div_by(bq_to_c(a), s, ok);\n"
  "    *fix |= !ok;\n"
  "    return bq_from_c(v);\n"
  "  }\n"
  "  return bq_from_c(bq_div(bq_to_c(a), s.s));\n"
  "#elif BQ_OP == BQ_OP_DEQUANTIZE\n"
  "  return bq_from_c(bq_mul(bq_to_c(a), s.s));\n"
  "#else\n"
  "  return bq_in_range(bq_to_c(b), s, z) ? a : (bq_out)0;\n"
  "#endif\n"
  "}\n"
  "\n"
  "// The parameter row of data row r: r itself, per block r / B (B = p.group)\n"
  "static __device__ __forceinline__ bq_i64 bq_prow(const bq_affine_params &p, bq_i64 r) {\n"
  "#if BQ_GRAN == BQ_GRAN_BLOCK\n"
  "  return p.fast32 ? (bq_i64)bq_div_u32((bq_u32)r, p.fd_group) : bq_div64(r, p.group);\n"
  "#else\n"
  "  (void)p;\n"
  "  return r;\n"
  "#endif\n"
  "}\n"
  "\n"
  "// Where an element's scale and zero point come from: per tensor, the parameters; per\n"
  "// token, the row; per channel and per group, an index that walks along the row. `at`\n"
  "// positions the walker on element k of row r (one division per access, none per\n"
  "// element), `next` steps it by one element.\n"
  "struct bq_qparams {\n"
  "  bq_i64 base, g, rem;\n"
  "  bq_scale s;\n"
  "  int zp;\n"
  "  bq_zp z;\n"
  "  bq_mask_iv m; // BQ_MASK_IV: the STE mask as an interval\n"
  "};\n"
  "// Quantize backward from 16-bit data, per tensor and per token, where a scale serves many\n"
  "// accesses: the STE mask prepared as an interval (bq_mask_iv_of). (Fake quantize backward,\n"
  "// whose elements cost less, is no faster with it, and its small tensors are slower.)\n"
  "#define BQ_MASK_IV (BQ_BWD && BQ_OP == BQ_OP_QUANTIZE && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16) && \\\n"
  "                    (BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_TOKEN))\n"
  "static __device__ __forceinline__ void bq_qp_load(bq_qparams &q, const bq_affine_params &p) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "  bq_i64 i = bq_pat(q.base, q.g, p.grs);\n"
  "  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + i)));\n"
  "  q.zp = p.zps ? __ldg((const int *)p.zps + i) : 0;\n"
  "  q.z = bq_zp_of(q.zp);\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ void bq_qp_at(bq_qparams &q, const bq_affine_params &p, bq_i64 r,\n"
  "                                                bq_i64 k) {\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  q.s = bq_scale_of((bq_c)p.scale);\n"
  "  q.zp = p.zp;\n"
  "  q.z = bq_zp_of(q.zp);\n"
  "#elif BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + r)));\n"
  "  q.zp = p.zps ? __ldg((const int *)p.zps + r) : 0;\n"
  "  q.z = bq_zp_of(q.zp);\n"
  "#endif\n"
  "  q.m = bq_mask_none();\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR && BQ_GRAN != BQ_GRAN_TOKEN\n"
  "  bq_i64 g = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)k, p.fd_group) : bq_div64(k, p.group);\n"
  "  q.rem = k - g * p.group;\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "  const bq_i64 m = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)g, p.fd_gmod) : bq_div64(g, p.gmod);\n"
  "  g -= m * p.gmod;\n"
  "  q.base = 0;\n"
  "#else\n"
  "  q.base = bq_pbase(bq_prow(p, r), p.grs);\n"
  "#endif\n"
  "  q.g = g;\n"
  "  bq_qp_load(q, p);\n"
  "#endif\n"
  "}\n"
  "// The tensor's or a token's parameters for the row kernel's vector loop, with the STE\n"
  "// mask's interval where quantize backward takes it (BQ_MASK_IV)\n"
  "static __device__ __forceinline__ void bq_qp_row(bq_qparams &q, const bq_affine_params &p, bq_i64 r) {\n"
  "  bq_qp_at(q, p, r, 0);\n"
  "#if BQ_MASK_IV\n"
  "  q.m = bq_mask_iv_of(q.s, q.z);\n"
  "#endif\n"
  "}\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "// The next parameter block's scale and zero point (per channel, the channel after the last\n"
  "// is the first)\n"
  "static __device__ __forceinline__ void bq_qp_next_block(bq_qparams &q, const bq_affine_params &p) {\n"
  "  ++q.g;\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "  if (q.g == p.gmod) q.g = 0;\n"
  "#endif\n"
  "  bq_qp_load(q, p);\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_qp_next(bq_qparams &q, const bq_affine_params &p) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "  if (++q.rem == p.group) {\n"
  "    q.rem = 0;\n"
  "    bq_qp_next_block(q, p);\n"
  "  }\n"
  "#endif\n"
  "}\n"
  "\n"
  "// One element, for prologues and tails: out of line, so its code exists once. (Its\n"
  "// arguments are plain values: a reference to the parameter block would copy it to\n"
  "// local memory in every thread.)\n"
  "static __device__ __noinline__ void bq_one(bq_i64 k, bq_c sc, int zp, const bq_in0 *in0,\n"
  "                                           const bq_in1 *in1, bq_out *out) {\n"
  "  const bq_zp z = bq_zp_of(zp);\n"
  "  const bq_scale s = bq_scale_of(sc);\n"
  "#if BQ_HAS_IN1\n"
  "  out[k] = bq_apply(in0[k], in1[k], s, z, nullptr);\n"
  "#else\n"
  "  out[k] = bq_apply(in0[k], (bq_in1)0, s, z, nullptr);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// An access: P elements (BQ_P, 16 bytes of the widest stream; bq_affine_narrow's 1)\n"
  "template <typename E, int P = BQ_P> struct alignas(sizeof(E) * P) bq_piece {\n"
  "  E e[P];\n"
  "};\n"
  "\n"
  "#if BQ_HAS_IN1\n"
  "#define BQ_B(u) b[u]\n"
  "#else\n"
  "#define BQ_B(u) bq_piece<bq_in1, (int)(sizeof(a[u].e) / sizeof(a[u].e[0]))>() // a[u]'s P\n"
  "#endif\n"
  "\n"
  "// P values in C rounded to the output type: two at a time where it has 16 bits (one packed\n"
  "// conversion, the same rounding as two)\n"
  "template <int P> static __device__ __forceinline__ void bq_round_piece(const float (&v)[P], bq_out (&y)[P]) {\n"
  "#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)\n"
  "  if (P % 2 == 0) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j + 1 < P; j += 2) {\n"
  "      bq_u32 w; // the first source goes to the upper half\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "      asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(w) : \"f\"(v[j + 1]), \"f\"(v[j]));\n"
  "#else\n"
  "      asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(w) : \"f\"(v[j + 1]), \"f\"(v[j]));\n"
  "#endif\n"
  "      y[j] = (bq_out)(w & 0xffffu);\n"
  "      y[j + 1] = (bq_out)(w >> 16);\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < P; j++) y[j] = bq_from_c(v[j]);\n"
  "}\n"
  "\n"
  "// One access's BQ_P elements through bq_apply's fast forms; *fix is raised where an element\n"
  "// needs the general formulas. NEAR: quantize forward may take bq_quantize_near where the\n"
  "// scale and zero point allow (the usual case). That form pays per tensor, per token and in\n"
  "// the 16-bit slot kernels; the f32 slot kernels and the odd-shape one keep bq_apply, where\n"
  "// its registers cost more than it saves (the odd-shape kernel would spill). Quantize\n"
  "// backward, NEAR, divides from the prepared scale; IV (BQ_MASK_IV's kernels): its mask is\n"
  "// the interval m, else (a scale that is not plain, m.ok false) the general formulas.\n"
  "template <bool NEAR, int P = BQ_P, bool IV = false>\n"
  "static __device__ __forceinline__ void bq_apply_piece(const bq_piece<bq_in0, P> &a, const bq_piece<bq_in1, P> &b,\n"
  "                                                      const bq_scale &s, const bq_zp &z, bq_piece<bq_out, P> &y,\n"
  "                                                      bool *fix, const bq_mask_iv &m = bq_mask_none()) {\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64\n"
  "  if (NEAR && s.plain && z.near) {\n"
  "    bq_quantize_near<true>(a.e, s, z.zp, y.e);\n"
  "    return;\n"
  "  }\n"
  "#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64\n"
  "  if (NEAR && s.plain && (!IV || m.ok)) { // quantize backward: the mask and the division from the\n"
  "    bool ok = true;                          // prepared scale\n"
  "    if (IV) { // the mask an interval; masked quotients selected, then rounded\n"
  "      float v[P];\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < P; j++) {\n"
  "        const float q = bq_div_near(bq_to_c(a.e[j]), s, ok), x = bq_to_c(b.e[j]);\n"
  "        v[j] = (x >= m.lo) & (x <= m.hi) ? q : 0.0f; // (0 rounds to the +0 of (bq_out)0)\n"
  "      }\n"
  "      bq_round_piece(v, y.e);\n"
  "    } else {\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < P; j++) {\n"
  "        const bq_c v = bq_div_near(bq_to_c(a.e[j]), s, ok);\n"
  "        y.e[j] = bq_in_range_near(bq_to_c(b.e[j]), s, z) ? bq_from_c(v) : (bq_out)0;\n"
  "      }\n"
  "    }\n"
  "    if (ok) return; // else the general formulas below\n"
  "  }\n"
  "#else\n"
  "  (void)m;\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < P; j++) y.e[j] = bq_apply(a.e[j], b.e[j], s, z, fix);\n"
  "}\n"
  "\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "// The parameter block of element k of a row (of the flat tensor, in bq_affine_flat): its\n"
  "// group (per group), its run of p.group elements of one channel (per channel; the\n"
  "// channel is the block modulo p.gmod), or its row (per token in bq_affine_flat, where the\n"
  "// host sets p.group to the row length).\n"
  "static __device__ __forceinline__ bq_i64 bq_blk(const bq_affine_params &p, bq_i64 k) {\n"
  "  return p.fast32 ? (bq_i64)bq_div_u32((bq_u32)k, p.fd_group) : bq_div64(k, p.group);\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "// A block's scale and zero point, prepared: what a warp shares through shared memory. (Per\n"
  "// token, bq_affine_blocks' one block a row.)\n"
  "struct bq_prep {\n"
  "  bq_scale s;\n"
  "  bq_zp z;\n"
  "};\n"
  "static __device__ __forceinline__ bq_prep bq_prep_of(const bq_affine_params &p, bq_i64 r, bq_i64 b) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "  const bq_i64 i = b - (p.fast32 ? (bq_i64)bq_div_u32((bq_u32)b, p.fd_gmod) : bq_div64(b, p.gmod)) * p.gmod;\n"
  "#elif BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  const bq_i64 i = r + b; // b == 0\n"
  "#else\n"
  "  const bq_i64 i = bq_pat(bq_pbase(bq_prow(p, r), p.grs), b, p.grs);\n"
  "#endif\n"
  "  bq_prep q;\n"
  "  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + i)));\n"
  "  q.z = bq_zp_of(p.zps ? __ldg((const int *)p.zps + i) : 0);\n"
  "  return q;\n"
  "}\n"
  "#endif\n"
  "\n"
  "// The lead stream's prologue over n elements (its elements before the 16-byte grid) and\n"
  "// each stream's access width after it. (The row kernels' rows; bq_affine_flat's tensor.)\n"
  "static __device__ __forceinline__ void bq_stream_widths(const bq_in0 *in0, const bq_in1 *in1, bq_out *out,\n"
  "                                                        bq_i64 n, bq_i64 &pro, int &w_in0, int &w_in1,\n"
  "                                                        int &w_out) {\n"
  "#if BQ_OUT_LEADS\n"
  "  pro = bq_prologue(out, n);\n"
  "  w_in0 = bq_width(in0 + pro), w_out = 16;\n"
  "#else\n"
  "  pro = bq_prologue(in0, n);\n"
  "  w_in0 = 16, w_out = bq_width(out + pro);\n"
  "#endif\n"
  "#if BQ_HAS_IN1\n"
  "  w_in1 = bq_width(in1 + pro);\n"
  "#else\n"
  "  (void)in1;\n"
  "  w_in1 = 16;\n"
  "#endif\n"
  "}\n"
  "\n"
  "// ---- the row kernels, bq_affine and bq_affine_odd, piece by piece ---------------------------\n"
  "// A warp takes items (bq_item_of), loads a tile's accesses (bq_tile_load), computes and\n"
  "// stores them with their parameters looked up (bq_lookup_prep, bq_lookup_tile) or prepared in\n"
  "// shared memory (the slot kernels: bq_item_slots, bq_slot_tile), redoes the accesses those\n"
  "// marked (bq_tile_redo) and, once a row, its prologue and tail (bq_row_ends).\n"
  "\n"
  "// The accesses marked in redo, element by element with the general formulas. Rare, and out\n"
  "// of the vector loop so that it costs no registers there: accesses over blocks shorter than\n"
  "// an access (each element takes its own scale), dequantize's accesses that straddle a block\n"
  "// boundary, per-channel or per-group quantize with a zero point that leaves no int32 room,\n"
  "// and, in f64 quantize backward, accesses with a quotient outside the fast division's range.\n"
  "// The slot kernels load an access's elements together (BQ_RL), so that it waits for memory\n"
  "// once; the others one by one, which keeps the registers of their vector loop (and their\n"
  "// occupancy) as they are.\n"
  "static __device__ __forceinline__ void bq_tile_redo(const bq_affine_params &p, bq_i64 r, const bq_in0 *in0,\n"
  "                                                    const bq_in1 *in1, bq_out *out, bq_i64 pro, bq_i64 a0,\n"
  "                                                    unsigned redo) {\n"
  "#pragma unroll 1\n"
  "  for (int u = 0; u < BQ_U; u++) {\n"
  "    if (!(redo >> u & 1)) continue;\n"
  "    const bq_i64 k0 = pro + (a0 + u * 32) * BQ_P;\n"
  "    bq_qparams q;\n"
  "    bq_qp_at(q, p, r, k0);\n"
  "#pragma unroll 1\n"
  "    for (int j0 = 0; j0 < BQ_P; j0 += BQ_RL) {\n"
  "      bq_in0 x0[BQ_RL];\n"
  "      bq_in1 x1[BQ_RL];\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < BQ_RL; j++) {\n"
  "        x0[j] = in0[k0 + j0 + j];\n"
  "        x1[j] = BQ_HAS_IN1 ? in1[k0 + j0 + j] : (bq_in1)0;\n"
  "      }\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < BQ_RL; j++) {\n"
  "        out[k0 + j0 + j] = bq_apply(x0[j], x1[j], q.s, q.z, nullptr);\n"
  "        if (j0 + j + 1 < BQ_P) bq_qp_next(q, p);\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "// A row's prologue and tail: fewer than 16 + BQ_P <= 32 elements, one a lane\n"
  "static __device__ __forceinline__ void bq_row_ends(const bq_affine_params &p, bq_i64 r, const bq_in0 *in0,\n"
  "                                                   const bq_in1 *in1, bq_out *out, bq_i64 cols, bq_i64 pro,\n"
  "                                                   bq_i64 nacc, int lane) {\n"
  "  const bq_i64 tail0 = pro + nacc * BQ_P;\n"
  "  const bq_i64 k = lane < pro ? lane : tail0 + (lane - pro);\n"
  "  if (k < cols) {\n"
  "    bq_qparams q;\n"
  "    bq_qp_at(q, p, r, k);\n"
  "    bq_one(k, q.s.s, q.zp, in0, in1, out);\n"
  "  }\n"
  "}\n"
  "\n"
  "#if !BQ_SLOTS\n"
  "// Per channel and per group, the lookup kernels' parameters of each access of a tile; an\n"
  "// access that straddles a block boundary is marked in redo unless bq_affine_odd (TWO)\n"
  "// computes it with both blocks' parameters (blocks at least an access long).\n"
  "template <bool TWO>\n"
  "static __device__ __forceinline__ void bq_lookup_prep(const bq_affine_params &p, bq_i64 r, bq_i64 pro, bq_i64 nacc,\n"
  "                                                      bq_i64 a0, bq_qparams (&qs)[BQ_U], unsigned &redo) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "#pragma unroll\n"
  "  for (int u = 0; u < BQ_U; u++) {\n"
  "    if (a0 + u * 32 >= nacc) continue;\n"
  "    bq_qp_at(qs[u], p, r, pro + (a0 + u * 32) * BQ_P);\n"
  "    if (qs[u].rem + BQ_P > p.group && (!TWO || p.group < BQ_P)) redo |= 1u << u;\n"
  "  }\n"
  "#endif\n"
  "}\n"
  "\n"
  "// A tile of the row kernels without slots: each access takes its scale and zero point from\n"
  "// qt (per tensor, per token) or looks them up (per channel and per group: dequantize, and\n"
  "// backward but f64). An access that straddles a block boundary is marked in redo, or, in\n"
  "// bq_affine_odd (TWO) where blocks are at least an access long, computed with both blocks'\n"
  "// parameters.\n"
  "template <bool TWO>\n"
  "static __device__ __forceinline__ void bq_lookup_tile(const bq_affine_params &p, bq_i64 r,\n"
  "                                                      const bq_piece<bq_in0> (&a)[BQ_U],\n"
  "                                                      const bq_piece<bq_in1> (&b)[BQ_U], bq_out *out, bq_i64 pro,\n"
  "                                                      bq_i64 nacc, int w_out, bq_i64 a0, const bq_qparams &qt,\n"
  "                                                      const bq_qparams (&qs)[BQ_U], unsigned &redo) {\n"
  "#pragma unroll\n"
  "  for (int u = 0; u < BQ_U; u++) {\n"
  "    const bq_i64 acc = a0 + u * 32;\n"
  "    if (acc < nacc && !(redo >> u & 1)) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "      const bq_qparams &q = qs[u];\n"
  "#else\n"
  "      const bq_qparams &q = qt;\n"
  "#endif\n"
  "      bq_piece<bq_out> y;\n"
  "      bool fix = false;\n"
  "      bq_apply_piece<true, BQ_P, BQ_MASK_IV>(a[u], BQ_B(u), q.s, q.z, y, &fix, q.m);\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "      if (TWO && q.rem + BQ_P > p.group) { // from element cut on, the next block's parameters\n"
  "        bq_qparams q2 = q;\n"
  "        bq_qp_next_block(q2, p);\n"
  "        bq_piece<bq_out> y2;\n"
  "        bq_apply_piece<true>(a[u], BQ_B(u), q2.s, q2.z, y2, &fix);\n"
  "        const int cut = (int)(p.group - q.rem);\n"
  "#pragma unroll\n"
  "        for (int j = 1; j < BQ_P; j++)\n"
  "          if (j >= cut) y.e[j] = y2.e[j];\n"
  "      }\n"
  "#endif\n"
  "      bq_store(out + pro + acc * BQ_P, y, w_out);\n"
  "      if (fix) redo |= 1u << u;\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_SLOTS\n"
  "// Access u (a, b) of a tile of the slot kernels with its block's prepared parameters, q[0]\n"
  "// (and, where it straddles in bq_affine_odd, the next block's, q[1], for its elements from\n"
  "// cut on), stored at yp; an access these forms do not cover is marked in redo instead.\n"
  "template <bool TWO>\n"
  "static __device__ __forceinline__ void bq_slot_access(const bq_piece<bq_in0> &a, const bq_piece<bq_in1> &b,\n"
  "                                                      const bq_prep *q, int cut, bq_out *yp, int w_out, int u,\n"
  "                                                      unsigned &redo) {\n"
  "  const bq_prep &qa = q[0];\n"
  "  const bool two = cut < BQ_P;\n"
  "  if (!TWO && two) {\n"
  "    redo |= 1u << u;\n"
  "    return;\n"
  "  }\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "  if (!qa.z.iok || (two && !q[1].z.iok)) { // a zero point within the q-range's width of an\n"
  "    redo |= 1u << u;                       // int32 limit\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  bq_piece<bq_out> y;\n"
  "  bool fix = false;\n"
  "  bq_apply_piece<!TWO && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)>(a, b, qa.s, qa.z, y, &fix);\n"
  "  if (TWO && two) {\n"
  "    const bq_prep &qb = q[1];\n"
  "    bq_piece<bq_out> y2;\n"
  "    bq_apply_piece<false>(a, b, qb.s, qb.z, y2, &fix);\n"
  "#pragma unroll\n"
  "    for (int j = 1; j < BQ_P; j++)\n"
  "      if (j >= cut) y.e[j] = y2.e[j];\n"
  "  }\n"
  "  bq_store(yp, y, w_out);\n"
  "  if (fix) redo |= 1u << u;\n"
  "}\n"
  "\n"
  "// An item whose tiles touch at most 32 parameter blocks prepares them once, into the warp's\n"
  "// slots, and its tiles skip their rounds: they no longer wait for their scales' loads\n"
  "// (BQ_ITEM_SLOTS). Returns how many (the blocks iblk0 onwards), or 0: each tile prepares\n"
  "// its own.\n"
  "static __device__ __forceinline__ int bq_item_slots(const bq_affine_params &p, bq_i64 r, bq_i64 pro, bq_i64 nacc,\n"
  "                                                    bq_i64 t0, bq_i64 t1, int lane, bq_prep *slots, bq_i64 &iblk0) {\n"
  "  int inblk = 0;\n"
  "#if BQ_ITEM_SLOTS\n"
  "  __syncwarp(); // the previous item is done with the slots\n"
  "  if (p.group >= BQ_P) {\n"
  "    const bq_i64 e0 = pro + t0 * BQ_TILE * BQ_P, ne = (t1 * BQ_TILE < nacc ? t1 * BQ_TILE : nacc) - t0 * BQ_TILE;\n"
  "    if (ne > 0) {\n"
  "      iblk0 = bq_blk(p, e0);\n"
  "      const bq_i64 n = bq_blk(p, e0 + ne * BQ_P - 1) - iblk0 + 1;\n"
  "      if (n <= 32) {\n"
  "        inblk = (int)n;\n"
  "        if (lane < inblk) slots[lane] = bq_prep_of(p, r, iblk0 + lane);\n"
  "        __syncwarp();\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "#endif\n"
  "  return inblk;\n"
  "}\n"
  "\n"
  "// The parameter blocks tile t touches (groups; per channel, runs of p.group elements of one\n"
  "// channel) are consecutive: nblk of them (returned), blk0 onwards. For each access, slot[u]\n"
  "// is its first block (from blk0) and cut[u] its elements before the next block (fewer than\n"
  "// BQ_P: the access straddles). Blocks shorter than an access: every access is marked in redo.\n"
  "static __device__ __forceinline__ bq_i64 bq_slot_span(const bq_affine_params &p, bq_i64 t, bq_i64 a0, bq_i64 iblk0,\n"
  "                                                      int inblk, bq_i64 pro, bq_i64 nacc, bq_i64 &blk0,\n"
  "                                                      int (&slot)[BQ_U], int (&cut)[BQ_U], unsigned &redo) {\n"
  "  bq_i64 nblk = 0;\n"
  "  blk0 = 0;\n"
  "  if (inblk) {\n"
  "    blk0 = iblk0;\n"
  "    nblk = inblk;\n"
  "  } else if (p.group >= BQ_P) {\n"
  "    const bq_i64 e0 = pro + t * BQ_TILE * BQ_P, nt = nacc - t * BQ_TILE;\n"
  "    blk0 = bq_blk(p, e0);\n"
  "    nblk = bq_blk(p, e0 + (nt < BQ_TILE ? nt : BQ_TILE) * BQ_P - 1) - blk0 + 1;\n"
  "#if BQ_GRAN == BQ_GRAN_BLOCK\n"
  "    if (nt <= 0) nblk = 0; // a row shorter than an access from an aligned start (B may exceed the row)\n"
  "#endif\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_U; u++)\n"
  "      if (a0 + u * 32 < nacc) redo |= 1u << u;\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int u = 0; u < BQ_U; u++) {\n"
  "    const bq_i64 k0 = pro + (a0 + u * 32) * BQ_P, b = bq_blk(p, k0);\n"
  "    slot[u] = (int)(b - blk0);\n"
  "    cut[u] = (int)(p.group - (k0 - b * p.group));\n"
  "  }\n"
  "  return nblk;\n"
  "}\n"
  "\n"
  "// A tile of the slot kernels. Its blocks' scales and zero points are prepared once each, a\n"
  "// block a lane, into the warp's 32 slots in shared memory, a round at a time (one round where\n"
  "// the item prepared them); each access then reads its block's slot, and one that straddles\n"
  "// two blocks the next one too. Rounds step by 31 blocks, so that the block after a\n"
  "// straddling access is in the same round.\n"
  "template <bool TWO>\n"
  "static __device__ __forceinline__ void bq_slot_tile(const bq_affine_params &p, bq_i64 r, bq_i64 t, bq_i64 a0,\n"
  "                                                    int lane, const bq_piece<bq_in0> (&a)[BQ_U],\n"
  "                                                    const bq_piece<bq_in1> (&b)[BQ_U], bq_prep *slots,\n"
  "                                                    bq_i64 iblk0, int inblk, bq_out *out, bq_i64 pro, bq_i64 nacc,\n"
  "                                                    int w_out, unsigned &redo) {\n"
  "  int slot[BQ_U], cut[BQ_U];\n"
  "  bq_i64 blk0;\n"
  "  const bq_i64 nblk = bq_slot_span(p, t, a0, iblk0, inblk, pro, nacc, blk0, slot, cut, redo);\n"
  "  for (bq_i64 s0 = 0; s0 < nblk; s0 += inblk ? 32 : 31) { // uniform across the warp\n"
  "    if (!inblk) {\n"
  "      if (s0 + lane < nblk) slots[lane] = bq_prep_of(p, r, blk0 + s0 + lane);\n"
  "      __syncwarp();\n"
  "    }\n"
  "    const int last = s0 + 32 >= nblk; // no access of this round's last block straddles\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_U; u++) {\n"
  "      const bq_i64 acc = a0 + u * 32;\n"
  "      const int d = slot[u] - (int)s0;\n"
  "      if (acc < nacc && !(redo >> u & 1) && d >= 0 && (d < 31 || (d == 31 && last)))\n"
  "        bq_slot_access<TWO>(a[u], BQ_B(u), slots + d, cut[u], out + pro + acc * BQ_P, w_out, u, redo);\n"
  "    }\n"
  "    if (!inblk) __syncwarp(); // every lane has read the slots before the next round writes them\n"
  "  }\n"
  "}\n"
  "\n"
  "#endif\n"
  "\n"
  "// A lane's accesses a0, a0 + 32, ... of a tile of a row, each stream's loaded before any\n"
  "// is computed\n"
  "static __device__ __forceinline__ void bq_tile_load(const bq_in0 *in0, const bq_in1 *in1, bq_i64 pro, bq_i64 nacc,\n"
  "                                                    int w_in0, int w_in1, bq_i64 a0, bq_piece<bq_in0> (&a)[BQ_U],\n"
  "                                                    bq_piece<bq_in1> (&b)[BQ_U]) {\n"
  "#pragma unroll\n"
  "  for (int u = 0; u < BQ_U; u++) {\n"
  "    const bq_i64 acc = a0 + u * 32;\n"
  "    if (acc < nacc) {\n"
  "      bq_load(a[u], in0 + pro + acc * BQ_P, w_in0);\n"
  "#if BQ_HAS_IN1\n"
  "      bq_load(b[u], in1 + pro + acc * BQ_P, w_in1);\n"
  "#else\n"
  "      (void)in1, (void)w_in1, (void)b;\n"
  "#endif\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "// A warp's item w: tiles [t0, t1) of row r, p.chunks items a row (per tensor and per\n"
  "// channel, one dense row), of p.tpw tiles each (BQ_ITEMS) or of one.\n"
  "static __device__ __forceinline__ void bq_item_of(const bq_affine_params &p, bq_i64 w, bq_i64 &r, bq_i64 &t0,\n"
  "                                                  bq_i64 &t1) {\n"
  "  bq_i64 c; // the item's place in its row\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "  r = 0, c = w; // one dense row\n"
  "#else\n"
  "  if (p.chunks == 1) {\n"
  "    r = w;\n"
  "    c = 0;\n"
  "  } else {\n"
  "    r = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)w, p.fd_chunks) : bq_div64(w, p.chunks);\n"
  "    c = w - r * p.chunks;\n"
  "  }\n"
  "#endif\n"
  "#if BQ_ITEMS\n"
  "  t0 = c * p.tpw, t1 = t0 + p.tpw < p.tiles ? t0 + p.tpw : p.tiles;\n"
  "#else\n"
  "  t0 = c, t1 = c + 1; // (p.tpw == 1)\n"
  "#endif\n"
  "}\n"
  "\n"
  "// The row kernel's body. TWO: accesses that straddle two parameter blocks are computed in\n"
  "// registers with both blocks' parameters; otherwise they are redone element by element.\n"
  "// The host takes the TWO form (bq_affine_odd) where accesses can straddle (a block length\n"
  "// that is not a multiple of BQ_P, or rows that start unaligned), since its extra registers\n"
  "// cost the aligned shapes a quarter of their warps.\n"
  "template <bool TWO> static __device__ __forceinline__ void bq_affine_body(const bq_affine_params &p) {\n"
  "  const int lane = threadIdx.x & 31;\n"
  "#if BQ_SLOTS\n"
  "  __shared__ bq_prep bq_slots[8][32]; // a warp's prepared parameter blocks\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  bq_qparams qt; // per tensor: prepared once per thread, not per tile\n"
  "  bq_qp_row(qt, p, 0);\n"
  "#endif\n"
  "  const bq_i64 work = p.rows * p.chunks;\n"
  "  for (bq_i64 w = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < work;\n"
  "       w += ((bq_i64)gridDim.x * blockDim.x) >> 5) {\n"
  "    bq_i64 r, t0, t1;\n"
  "    bq_item_of(p, w, r, t0, t1);\n"
  "    const bq_in0 *in0 = (const bq_in0 *)p.in0 + r * p.in0_stride;\n"
  "    const bq_in1 *in1 = (const bq_in1 *)p.in1 + r * p.in1_stride;\n"
  "    bq_out *out = (bq_out *)p.out + r * p.out_stride;\n"
  "    const bq_i64 cols = p.cols;\n"
  "    bq_i64 pro;\n"
  "    int w_in0, w_in1, w_out;\n"
  "    bq_stream_widths(in0, in1, out, cols, pro, w_in0, w_in1, w_out);\n"
  "    const bq_i64 nacc = (cols - pro) / BQ_P;\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "    bq_qparams qt; // per token: once per item, loaded after its first tile's data\n"
  "#endif\n"
  "#if BQ_SLOTS\n"
  "    bq_prep *slots = bq_slots[threadIdx.x >> 5];\n"
  "    bq_i64 iblk0 = 0;\n"
  "    const int inblk = bq_item_slots(p, r, pro, nacc, t0, t1, lane, slots, iblk0);\n"
  "#endif\n"
  "#pragma unroll 1\n"
  "    for (bq_i64 t = t0; t < t1; t++) {\n"
  "      const bq_i64 a0 = t * BQ_TILE + lane;\n"
  "      bq_piece<bq_in0> a[BQ_U];\n"
  "      bq_piece<bq_in1> b[BQ_U]; // (unused where BQ_HAS_IN1 is 0)\n"
  "      bq_tile_load(in0, in1, pro, nacc, w_in0, w_in1, a0, a, b);\n"
  "      unsigned redo = 0; // bit u: access u is redone element by element below\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "      if (t == t0) bq_qp_row(qt, p, r);\n"
  "#endif\n"
  "#if BQ_SLOTS\n"
  "      bq_slot_tile<TWO>(p, r, t, a0, lane, a, b, slots, iblk0, inblk, out, pro, nacc, w_out, redo);\n"
  "#else\n"
  "      bq_qparams qs[BQ_U]; // per channel and per group: each access's parameters\n"
  "      bq_lookup_prep<TWO>(p, r, pro, nacc, a0, qs, redo);\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "      const bq_qparams &qt = qs[0]; // (unread: each access has its own)\n"
  "#endif\n"
  "      bq_lookup_tile<TWO>(p, r, a, b, out, pro, nacc, w_out, a0, qt, qs, redo);\n"
  "#endif\n"
  "      if (redo) bq_tile_redo(p, r, in0, in1, out, pro, a0, redo);\n"
  "    }\n"
  "    if (t0 == 0) bq_row_ends(p, r, in0, in1, out, cols, pro, nacc, lane);\n"
  "  }\n"
  "}\n"
  "\n"
  "#if BQ_E_AFFINE\n"
  "extern \"C\" __global__ void BQ_LB_ROW BQ_FN_AFFINE(const bq_affine_params p) { bq_affine_body<false>(p); }\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED\n"
  "#if BQ_E_AFFINE_ODD\n"
  "extern \"C\" __global__ void BQ_LB_ODD BQ_FN_AFFINE_ODD(const bq_affine_params p) { bq_affine_body<true>(p); }\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "// Per channel and per group (and per token, a block a row) where no access straddles two\n"
  "// parameter blocks: blocks of p.group elements (a group; per channel, a run of one channel)\n"
  "// that are a whole number of accesses, with in0 (which leads: x, or dy) 16-byte aligned at\n"
  "// every row's start (the host checks; p.fast32 holds). A warp's item is 32 / p.gl\n"
  "// whole blocks of one row, p.gl consecutive lanes a block (p.parts == 1), or, for blocks\n"
  "// longer than 32 BQ_GA accesses, one of the p.parts parts of one block (p.gl == 32). Lane\n"
  "// `sub` of a block takes its accesses sub, sub + gl, ... (up to BQ_GA of them), so a warp's\n"
  "// load instruction reads gl contiguous accesses of each of its blocks, and the lane prepares\n"
  "// the block's scale and zero point once, in registers, for all of them: no shared memory, no\n"
  "// barrier, no index arithmetic per access. (The layout of dynamic.cu's bq_groups_fast.)\n"
  "// BQ_GA comes from the host's prelude: 0 for the ops the host runs on bq_affine instead\n"
  "// (bq__affine_table's ga says which, and why), where this kernel is empty and never launched.\n"
  "// Per group, f64 quantize forward is held to 4 blocks an SM: its registers, a few over the\n"
  "// bound, would otherwise allow one block fewer.\n"
  "// The body, for accesses of P elements (BQ_P here; bq_affine_narrow's 1), GA a lane.\n"
  "template <int P, int GA> static __device__ __forceinline__ void bq_blocks_body(const bq_affine_params &p) {\n"
  "  const int lane = threadIdx.x & 31, gl = p.gl, sub = lane & (gl - 1);\n"
  "  const bq_u32 bpi = (bq_u32)(32 / gl), lb = (bq_u32)(lane / gl); // blocks an item, the lane's among them\n"
  "  const bq_u32 gc = (bq_u32)(p.group / P), chunks = (bq_u32)p.chunks; // accesses a block; items a row\n"
  "  const bq_u32 work = (bq_u32)(p.rows * p.chunks), nw = (gridDim.x * blockDim.x) >> 5;\n"
  "  for (bq_u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < work; w += nw) {\n"
  "    const bq_u32 r = chunks == 1 ? w : bq_div_u32(w, p.fd_chunks), j = w - r * chunks;\n"
  "    bq_u32 blk, a0; // the lane's block in the row, and its first access there\n"
  "    if (p.parts == 1) {\n"
  "      blk = j * bpi + lb;\n"
  "      a0 = (bq_u32)sub;\n"
  "    } else {\n"
  "      blk = bq_div_u32(j, p.fd_parts);\n"
  "      a0 = (j - blk * (bq_u32)p.parts) * (32 * GA) + (bq_u32)lane;\n"
  "    }\n"
  "    if (blk >= p.nblk) continue; // the row's last item may hold fewer blocks\n"
  "    const bq_i64 e0 = (bq_i64)blk * p.group;\n"
  "    const bq_in0 *in0 = (const bq_in0 *)p.in0 + r * p.in0_stride + e0;\n"
  "    const bq_in1 *in1 = (const bq_in1 *)p.in1 + r * p.in1_stride + e0;\n"
  "    bq_out *out = (bq_out *)p.out + r * p.out_stride + e0;\n"
  "    const int w_in0 = 16, w_out = bq_width(out); // in0 leads (x, or dy)\n"
  "    bq_piece<bq_in0, P> a[GA];\n"
  "#if BQ_HAS_IN1\n"
  "    const int w_in1 = bq_width(in1);\n"
  "    bq_piece<bq_in1, P> b[GA];\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < GA; u++) {\n"
  "      const bq_u32 acc = a0 + (bq_u32)(u * gl);\n"
  "      if (acc < gc) {\n"
  "        bq_load(a[u], in0 + acc * P, w_in0);\n"
  "#if BQ_HAS_IN1\n"
  "        bq_load(b[u], in1 + acc * P, w_in1);\n"
  "#endif\n"
  "      }\n"
  "    }\n"
  "    const bq_prep q = bq_prep_of(p, r, blk);\n"
  "    unsigned redo = 0; // bit u: access u takes the general formulas, element by element\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < GA; u++) {\n"
  "      const bq_u32 acc = a0 + (bq_u32)(u * gl);\n"
  "      if (acc >= gc) continue;\n"
  "      bool fix = false;\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "      fix = !q.z.iok; // a zero point within the q-range's width of an int32 limit\n"
  "#endif\n"
  "      bq_piece<bq_out, P> y;\n"
  "      if (!fix) bq_apply_piece<true, P>(a[u], BQ_B(u), q.s, q.z, y, &fix);\n"
  "      if (fix) redo |= 1u << u;\n"
  "      else bq_store(out + acc * P, y, w_out);\n"
  "    }\n"
  "    if (redo) { // rare, and out of the vector loop\n"
  "#pragma unroll 1\n"
  "      for (int u = 0; u < GA; u++)\n"
  "        if (redo >> u & 1)\n"
  "#pragma unroll 1\n"
  "          for (int e = 0; e < P; e++)\n"
  "            bq_one((bq_i64)(a0 + (bq_u32)(u * gl)) * P + e, q.s.s, q.z.zp, in0, in1, out);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#if BQ_E_AFFINE_BLOCKS\n"
  "extern \"C\" __global__ void BQ_LB_BLOCKS BQ_FN_AFFINE_BLOCKS(const bq_affine_params p) {\n"
  "#if BQ_GA\n"
  "  bq_blocks_body<BQ_P, BQ_GA>(p);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "// f64 quantize, per channel, per group and per token (a block a row): bq_affine_blocks'\n"
  "// layout with accesses of one element (8 bytes), BQ_NA a lane (the host's prelude: 0 in\n"
  "// the specializations where the host never launches it, and the kernel is empty). An\n"
  "// access never straddles two blocks, whatever G or the row length, and a warp's load\n"
  "// instruction still reads gl contiguous elements of each of its blocks (a whole 32-byte\n"
  "// sector for every 4 lanes); each lane prepares its block's reciprocal once for all of its\n"
  "// elements. The host (bq__affine_narrow) says where it replaced which kernel, and why.\n"
  "#if BQ_E_AFFINE_NARROW\n"
  "extern \"C\" __global__ void BQ_LB_NARROW BQ_FN_AFFINE_NARROW(const bq_affine_params p) {\n"
  "#if BQ_NA\n"
  "  bq_blocks_body<1, BQ_NA>(p);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN || BQ_GRAN == BQ_GRAN_GROUP\n"
  "// Per group over contiguous data: every row stride the row length and the parameter rows\n"
  "// dense, so the tensor is one flat array whose element e belongs to group e / G and the row\n"
  "// boundaries (and their prologues) disappear. Per token the same with G the row length, on\n"
  "// contiguous rows off the 16-byte grid (rows of 4095). The host takes it where accesses straddle\n"
  "// groups (G not a whole number of accesses, or rows off the 16-byte grid: G = 105 on rows\n"
  "// of 4095), and for dequantize and fake quantize backward also where none does. A warp's\n"
  "// tile is 32 x BQ_FR accesses, coalesced as in the row kernels (lane + 32 u); the host\n"
  "// bounds G from below so that a tile touches at most 32 groups. Each lane prepares one of\n"
  "// them into the warp's shared-memory slots, and every element takes its access's first\n"
  "// group's parameters before `cut` and the next group's from there, by a select: no access\n"
  "// is computed twice (bq_affine_odd computes a straddling access with both groups), and a\n"
  "// group's reciprocal is prepared once a tile. Where a group of the tile rules out the fast\n"
  "// forms, the tile takes bq_apply's (bq_flat_near), and where it rules out those too, its\n"
  "// elements are redone one by one (bq_flat_ok). BQ_FR comes from the\n"
  "// host's prelude: 0 for the ops it never launches this kernel for (bq__affine_table's fr says which,\n"
  "// and why).\n"
  "\n"
  "// A prepared scale and zero point taken from a or b, field by field, so that both stay in\n"
  "// registers (the compiler keeps only the fields the element's formula reads).\n"
  "static __device__ __forceinline__ bq_scale bq_scale_sel(bool first, const bq_scale &a, const bq_scale &b) {\n"
  "  bq_scale q;\n"
  "  q.s = first ? a.s : b.s;\n"
  "  q.ss = first ? a.ss : b.ss;\n"
  "  q.rcp = first ? a.rcp : b.rcp;\n"
  "  q.m = first ? a.m : b.m;\n"
  "  q.corr = first ? a.corr : b.corr;\n"
  "  q.plain = first ? a.plain : b.plain;\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "  q.dlo = first ? a.dlo : b.dlo;\n"
  "  q.dhi = first ? a.dhi : b.dhi;\n"
  "#endif\n"
  "  return q;\n"
  "}\n"
  "static __device__ __forceinline__ bq_zp bq_zp_sel(bool first, const bq_zp &a, const bq_zp &b) {\n"
  "  bq_zp z;\n"
  "  z.lo = first ? a.lo : b.lo;\n"
  "  z.hi = first ? a.hi : b.hi;\n"
  "  z.a = first ? a.a : b.a;\n"
  "  z.b = first ? a.b : b.b;\n"
  "  z.zp_hi = first ? a.zp_hi : b.zp_hi;\n"
  "  z.base = first ? a.base : b.base;\n"
  "  z.zp_lo = first ? a.zp_lo : b.zp_lo;\n"
  "  z.ia = first ? a.ia : b.ia;\n"
  "  z.ib = first ? a.ib : b.ib;\n"
  "  z.zp = first ? a.zp : b.zp;\n"
  "  z.iok = first ? a.iok : b.iok;\n"
  "  z.near = first ? a.near : b.near;\n"
  "  return z;\n"
  "}\n"
  "\n"
  "// The same for the fast forms, whose scales are plain (m == 1): there ss == s, so one select\n"
  "// serves both\n"
  "static __device__ __forceinline__ bq_scale bq_scale_sel_plain(bool first, const bq_scale &a, const bq_scale &b) {\n"
  "  bq_scale q = bq_scale_sel(first, a, b);\n"
  "  q.ss = q.s;\n"
  "  return q;\n"
  "}\n"
  "\n"
  "// One access: its elements before `cut` take A's parameters, the others B's. NEAR: the fast\n"
  "// forms (quantize with f32 compute, as bq_apply_piece's; fake quantize forward), which the\n"
  "// caller has checked apply to both groups; *fix rises where an element needs the general\n"
  "// formulas.\n"
  "template <bool NEAR>\n"
  "static __device__ __forceinline__ void bq_flat_piece(const bq_piece<bq_in0> &a, const bq_piece<bq_in1> &b,\n"
  "                                                     const bq_prep &A, const bq_prep &B, int cut,\n"
  "                                                     bq_piece<bq_out> &y, bool *fix) {\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64\n"
  "  if constexpr (NEAR) {\n"
  "    int t[BQ_P];\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_P; j++) {\n"
  "      const bool f = j < cut;\n"
  "      t[j] = bq_near_elem<true>(bq_to_c(a.e[j]), bq_scale_sel_plain(f, A.s, B.s), f ? A.z.zp : B.z.zp);\n"
  "    }\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_P; j += 4) *(bq_u32 *)&y.e[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);\n"
  "  } else\n"
  "#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64\n"
  "  if constexpr (NEAR) {\n"
  "    // bq_div_near's window for both groups: their intersection (an element outside it takes\n"
  "    // the general formulas, exact either way; only |dy| beyond |s| 2^+-96 leaves it)\n"
  "    const float dlo = fmaxf(A.s.dlo, B.s.dlo), dhi = fminf(A.s.dhi, B.s.dhi);\n"
  "    bool ok = true;\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_P; j++) {\n"
  "      const bool f = j < cut;\n"
  "      bq_scale s = bq_scale_sel_plain(f, A.s, B.s);\n"
  "      s.dlo = dlo;\n"
  "      s.dhi = dhi;\n"
  "      const bq_c v = bq_div_near(bq_to_c(a.e[j]), s, ok);\n"
  "      y.e[j] = bq_in_range_near(bq_to_c(b.e[j]), s, bq_zp_sel(f, A.z, B.z)) ? bq_from_c(v) : (bq_out)0;\n"
  "    }\n"
  "    *fix |= !ok;\n"
  "  } else\n"
  "#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD\n"
  "  if constexpr (NEAR) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_P; j++) {\n"
  "      const bool f = j < cut;\n"
  "      y.e[j] = bq_from_c(bq_fake_quantize_near(bq_to_c(a.e[j]), bq_scale_sel_plain(f, A.s, B.s), bq_zp_sel(f, A.z, B.z)));\n"
  "    }\n"
  "  } else\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_P; j++) {\n"
  "      const bool f = j < cut;\n"
  "      y.e[j] = bq_apply(a.e[j], b.e[j], bq_scale_sel(f, A.s, B.s), bq_zp_sel(f, A.z, B.z), fix);\n"
  "    }\n"
  "}\n"
  "\n"
  "// Whether a group's parameters allow bq_flat_piece's fast forms (NEAR): bq_quantize_near's\n"
  "// condition for quantize forward, a plain scale for quantize backward (both f32 compute),\n"
  "// bq_fake_quantize_near's for fake quantize forward (f64 quantize backward is slower with a\n"
  "// fast form, so it has none);\n"
  "static __device__ __forceinline__ bool bq_flat_near(const bq_prep &q) {\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64\n"
  "  return q.s.plain && q.z.near;\n"
  "#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64\n"
  "  return q.s.plain;\n"
  "#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD\n"
  "  return q.s.plain && q.z.lo == q.z.a && q.z.hi == q.z.b;\n"
  "#else\n"
  "  return false;\n"
  "#endif\n"
  "}\n"
  "// and whether they allow bq_apply's forms at all (quantize's integer form needs z.iok).\n"
  "static __device__ __forceinline__ bool bq_flat_ok(const bq_prep &q) {\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "  return q.z.iok;\n"
  "#else\n"
  "  return true;\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_FR\n"
  "// bq_affine_flat's accesses marked in redo (rare), with the general formulas, element by\n"
  "// element; the tile's groups are in the slots, g0 onwards\n"
  "static __device__ __forceinline__ void bq_flat_redo(const bq_affine_params &p, const bq_prep *slots, bq_i64 g0,\n"
  "                                                    const bq_in0 *in0, const bq_in1 *in1, bq_out *out, bq_i64 pro,\n"
  "                                                    bq_i64 nacc, bq_i64 a0, unsigned redo) {\n"
  "#pragma unroll 1\n"
  "  for (int u = 0; u < BQ_FR; u++)\n"
  "    if ((redo >> u & 1) && a0 + u * 32 < nacc)\n"
  "#pragma unroll 1\n"
  "      for (int j = 0; j < BQ_P; j++) {\n"
  "        const bq_i64 k = pro + (a0 + u * 32) * BQ_P + j;\n"
  "        const bq_prep q = slots[bq_blk(p, k) - g0];\n"
  "        bq_one(k, q.s.s, q.z.zp, in0, in1, out);\n"
  "      }\n"
  "}\n"
  "\n"
  "// bq_affine_flat's prologue and tail: fewer than 2 BQ_P elements, one a thread\n"
  "static __device__ __forceinline__ void bq_flat_ends(const bq_affine_params &p, const bq_in0 *in0, const bq_in1 *in1,\n"
  "                                                    bq_out *out, bq_i64 n, bq_i64 pro, bq_i64 nacc) {\n"
  "  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, tail0 = pro + nacc * BQ_P;\n"
  "  if (tid < pro + (n - tail0)) {\n"
  "    const bq_i64 k = tid < pro ? tid : tail0 + (tid - pro);\n"
  "    const bq_prep q = bq_prep_of(p, 0, bq_blk(p, k));\n"
  "    bq_one(k, q.s.s, q.z.zp, in0, in1, out);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#define BQ_FL (BQ_FR ? BQ_FR : 1) // (an array length where the kernel is empty)\n"
  "#if BQ_E_AFFINE_FLAT\n"
  "extern \"C\" __global__ void BQ_LB_FLAT BQ_FN_AFFINE_FLAT(const bq_affine_params p) {\n"
  "#if BQ_FR\n"
  "  __shared__ bq_prep bq_fslots[8][32]; // a warp's prepared groups\n"
  "  bq_prep *slots = bq_fslots[threadIdx.x >> 5];\n"
  "  const int lane = threadIdx.x & 31;\n"
  "  const bq_i64 n = p.rows * p.cols, G = p.group;\n"
  "  const bq_in0 *in0 = (const bq_in0 *)p.in0;\n"
  "  const bq_in1 *in1 = (const bq_in1 *)p.in1;\n"
  "  bq_out *out = (bq_out *)p.out;\n"
  "  bq_i64 pro;\n"
  "  int w_in0, w_in1, w_out;\n"
  "  bq_stream_widths(in0, in1, out, n, pro, w_in0, w_in1, w_out);\n"
  "  const bq_i64 nacc = (n - pro) / BQ_P, tiles = (nacc + 32 * BQ_FR - 1) / (32 * BQ_FR);\n"
  "  for (bq_i64 t = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < tiles;\n"
  "       t += ((bq_i64)gridDim.x * blockDim.x) >> 5) {\n"
  "    const bq_i64 a0 = t * 32 * BQ_FR + lane;\n"
  "    bq_piece<bq_in0> a[BQ_FL];\n"
  "#if BQ_HAS_IN1\n"
  "    bq_piece<bq_in1> b[BQ_FL];\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_FR; u++) {\n"
  "      if (a0 + u * 32 < nacc) {\n"
  "        bq_load(a[u], in0 + pro + (a0 + u * 32) * BQ_P, w_in0);\n"
  "#if BQ_HAS_IN1\n"
  "        bq_load(b[u], in1 + pro + (a0 + u * 32) * BQ_P, w_in1);\n"
  "#endif\n"
  "      }\n"
  "    }\n"
  "    // The tile's groups g0 .. g1 (at most 32: the host bounds G from below), a lane each\n"
  "    const bq_i64 e0 = pro + t * 32 * BQ_FR * BQ_P, na = nacc - t * 32 * BQ_FR;\n"
  "    const bq_i64 g0 = bq_blk(p, e0), g1 = bq_blk(p, e0 + (na < 32 * BQ_FR ? na : 32 * BQ_FR) * BQ_P - 1);\n"
  "    const bq_prep mine = bq_prep_of(p, 0, g0 + lane <= g1 ? g0 + lane : g1);\n"
  "    __syncwarp(); // the previous tile is done with the slots\n"
  "    slots[lane] = mine;\n"
  "    const bool near = __all_sync(0xffffffffu, bq_flat_near(mine)), ok = __all_sync(0xffffffffu, bq_flat_ok(mine));\n"
  "    __syncwarp();\n"
  "    unsigned redo = ok ? 0u : ~0u; // bit u: access u again, element by element\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_FR; u++) {\n"
  "      const bq_i64 acc = a0 + u * 32;\n"
  "      if (acc >= nacc || (redo >> u & 1)) continue;\n"
  "      const bq_i64 e = pro + acc * BQ_P, g = bq_blk(p, e);\n"
  "      const int d = (int)(g - g0), cut = (int)((g + 1) * G - e);\n"
  "      const bq_prep A = slots[d], B = slots[d < 31 ? d + 1 : 31];\n"
  "      bq_piece<bq_out> y;\n"
  "      bool fix = false;\n"
  "      if (near) bq_flat_piece<true>(a[u], BQ_B(u), A, B, cut, y, &fix);\n"
  "      else bq_flat_piece<false>(a[u], BQ_B(u), A, B, cut, y, &fix);\n"
  "      bq_store(out + e, y, w_out);\n"
  "      if (fix) redo |= 1u << u;\n"
  "    }\n"
  "    if (redo) bq_flat_redo(p, slots, g0, in0, in1, out, pro, nacc, a0, redo);\n"
  "  }\n"
  "  bq_flat_ends(p, in0, in1, out, n, pro, nacc);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "// Per channel with the channel axis innermost: the data is [rows, C] (p.rows, p.cols, dense)\n"
  "// with a scale and zero point per column. The host takes this kernel when C % BQ_CP == 0 and\n"
  "// every stream is aligned to its chunk. Each lane owns BQ_CP columns, prepares their scales\n"
  "// and zero points once, and walks down the rows with BQ_R rows in flight, so no element pays\n"
  "// for a parameter. Grid: x, strips of blockDim.x chunks (a warp's lanes take consecutive\n"
  "// chunks, the block's warps consecutive strips of 32; the host launches up to 8 warps, no\n"
  "// more than C needs); y, rows.\n"
  "#define BQ_CP (BQ_P < 4 ? BQ_P : 4) // columns per lane: 16-byte f32/f64, 8-byte f16/bf16 accesses\n"
  "// Rows in flight per lane: 64 bytes of the lead stream (32 for fake quantize, whose columns\n"
  "// keep more parameters in registers). (Dequantize forward, whose lead is the output, is no\n"
  "// faster with more rows of its int8 input in flight.)\n"
  "#define BQ_R ((int)((BQ_OP == BQ_OP_FAKE_QUANTIZE ? 32 : 64) / (BQ_CP * BQ_LEAD_SIZE)))\n"
  "// A block's rows in flight: consecutive rows (f64, dequantize forward), or rows gridDim.y\n"
  "// apart (the others), whichever reads faster for that kernel.\n"
  "#define BQ_CONSEC (BQ_FT == BQ_TYPE_F64 || (BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD))\n"
  "\n"
  "// The column kernel's rows, for the lane's columns c0 .. c0 + BQ_CP - 1 with their prepared\n"
  "// scales and zero points. NEAR (quantize backward, every column's scale plain): the fast\n"
  "// forms only, so that the general formulas' values need no registers in the loop.\n"
  "template <bool NEAR, int R>\n"
  "static __device__ __forceinline__ void bq_cols_rows(const bq_affine_params &p, const bq_scale (&s)[BQ_CP],\n"
  "                                                    const bq_zp (&z)[BQ_CP], bool slow, bq_i64 c0) {\n"
  "  const bq_i64 C = p.cols;\n"
  "  const bq_in0 *in0 = (const bq_in0 *)p.in0;\n"
  "  const bq_in1 *in1 = (const bq_in1 *)p.in1;\n"
  "  bq_out *out = (bq_out *)p.out;\n"
  "  const bq_i64 step = BQ_CONSEC ? 1 : (bq_i64)gridDim.y; // between a lane's rows in flight\n"
  "  for (bq_i64 r = (bq_i64)blockIdx.y * (BQ_CONSEC ? R : 1); r < p.rows; r += (bq_i64)gridDim.y * R) {\n"
  "    bq_chunk<bq_in0, BQ_CP> a[R];\n"
  "#if BQ_HAS_IN1\n"
  "    bq_chunk<bq_in1, BQ_CP> b[R];\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < R; i++) {\n"
  "      const bq_i64 k = (r + i * step) * C + c0;\n"
  "      if (r + i * step < p.rows) {\n"
  "        bq_load(a[i], in0 + k, 16);\n"
  "#if BQ_HAS_IN1\n"
  "        bq_load(b[i], in1 + k, 16);\n"
  "#endif\n"
  "      }\n"
  "    }\n"
  "    bool fix = slow;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < R; i++) {\n"
  "      if (r + i * step < p.rows) {\n"
  "        bq_chunk<bq_out, BQ_CP> y;\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && BQ_BWD && BQ_FT != BQ_TYPE_F64\n"
  "        if (NEAR) { // quantize backward as bq_apply_piece's fast form: no division in the loop\n"
  "          bool ok = true;\n"
  "#pragma unroll\n"
  "          for (int j = 0; j < BQ_CP; j++) {\n"
  "            const bq_c v = bq_div_near(bq_to_c(a[i].e[j]), s[j], ok);\n"
  "            y.e[j] = bq_in_range_near(bq_to_c(b[i].e[j]), s[j], z[j]) ? bq_from_c(v) : (bq_out)0;\n"
  "          }\n"
  "          fix |= !ok;\n"
  "        } else\n"
  "#endif\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < BQ_CP; j++)\n"
  "#if BQ_HAS_IN1\n"
  "          y.e[j] = bq_apply(a[i].e[j], b[i].e[j], s[j], z[j], &fix);\n"
  "#else\n"
  "          y.e[j] = bq_apply(a[i].e[j], (bq_in1)0, s[j], z[j], &fix);\n"
  "#endif\n"
  "        bq_store(out + (r + i * step) * C + c0, y, 16);\n"
  "      }\n"
  "    }\n"
  "    if (fix) { // rare: these rows again, element by element with the general formulas\n"
  "#pragma unroll 1\n"
  "      for (int i = 0; i < R; i++)\n"
  "#pragma unroll // (s[j] and z[j] must stay registers: no dynamic index)\n"
  "        for (int j = 0; j < BQ_CP; j++)\n"
  "          if (r + i * step < p.rows) bq_one((r + i * step) * C + c0 + j, s[j].s, z[j].zp, in0, in1, out);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "// (the host gives the ops the table's cwave names one wave of blocks, the others a block for\n"
  "// every BQ_R rows)\n"
  "#if BQ_E_AFFINE_COLS\n"
  "extern \"C\" __global__ void BQ_LB_COLS BQ_FN_AFFINE_COLS(const bq_affine_params p) {\n"
  "  const bq_i64 C = p.cols, c0 = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) * BQ_CP;\n"
  "  if (c0 >= C) return;\n"
  "  bq_scale s[BQ_CP];\n"
  "  bq_zp z[BQ_CP];\n"
  "  bool slow = false; // a column whose zero point leaves no int32 room (quantize)\n"
  "  bool plain = true;  // every column's scale needs no power-of-two bracket (bq_div_near)\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_CP; j++) {\n"
  "    s[j] = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + c0 + j)));\n"
  "    z[j] = bq_zp_of(p.zps ? __ldg((const int *)p.zps + c0 + j) : 0);\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD\n"
  "    slow |= !z[j].iok;\n"
  "#endif\n"
  "    plain &= s[j].plain;\n"
  "  }\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && BQ_BWD && BQ_FT != BQ_TYPE_F64\n"
  "  if (plain) bq_cols_rows<true, BQ_R / 2>(p, s, z, slow, c0);\n"
  "  else\n"
  "#endif\n"
  "    bq_cols_rows<false, BQ_R>(p, s, z, slow, c0);\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "\n"
  "// ---- dense data: one flat array of p.cols elements ----------------------------------------\n"
  "// The scale and zero point of element e of dense data (p.group: per channel the inner size,\n"
  "// per token the row length, per group G), prepared\n"
  "static __device__ __forceinline__ void bq_dense_params(const bq_affine_params &p, bq_i64 e, bq_scale &s, bq_zp &z) {\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  (void)e;\n"
  "  s = bq_scale_of((bq_c)p.scale);\n"
  "  z = bq_zp_of(p.zp);\n"
  "#elif BQ_GRAN == BQ_GRAN_BLOCK\n"
  "  (void)p, (void)e, (void)s, (void)z; // (no dense kernel)\n"
  "#else\n"
  "  const bq_i64 b = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)e, p.fd_group) : bq_div64(e, p.group);\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  const bq_prep q = bq_prep_of(p, b, 0); // b: the row\n"
  "#else\n"
  "  const bq_prep q = bq_prep_of(p, 0, b); // the channel's run (bq_prep_of takes it modulo p.gmod) or the group\n"
  "#endif\n"
  "  s = q.s;\n"
  "  z = q.z;\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if !BQ_BWD && BQ_OP != BQ_OP_FAKE_QUANTIZE && BQ_GRAN != BQ_GRAN_CHANNEL\n"
  "// ---- bq_affine_lean ---------------------------------------------------------------------------\n"
  "// Quantize and dequantize forward, per tensor, per token, per group and per block, over dense\n"
  "// data whose streams start on their accesses' grid (the lead stream on the 16-byte one), rows,\n"
  "// groups and blocks a whole number of accesses (the host checks; per group, row-major scales\n"
  "// with a row of groups a row; per block, row-major scales): each access's parameters looked\n"
  "// up and prepared in registers after its load, nothing else. The kernel holds few registers,\n"
  "// so an SM holds many warps, which tensors of a few waves need (the row kernels pay a row's\n"
  "// set-up per warp). A thread takes BQ_LEAN_U accesses a block's width apart, all loaded\n"
  "// before any is converted, which keeps more bytes in flight per register where the device\n"
  "// needs it (the host's table column lu). The thread whose access would be the one past the\n"
  "// last whole access takes the elements after it. Dequantize stores its output with the\n"
  "// default cache policy, as its consumer reads it next: streaming the output measured slower\n"
  "// on the H100.\n"
  "// Without zero points (per tensor: a zero point of 0) the body runs in a form with the zero\n"
  "// point folded away, chosen once for the launch; there quantize takes a scale that needs no\n"
  "// power-of-two bracket straight to bq_quantize_near. Its indices are 32-bit: the host gives\n"
  "// it tensors of fewer than 2^31 elements. Quantize from 16-bit data without zero points\n"
  "// takes bq_affine_pair instead where the host allows.\n"
  "// A vector access of the input (narrower than 8 bytes: bq_load), at the default cache\n"
  "// policy: on the H100 as fast as or faster than an L2 evict-last policy (which needs each\n"
  "// line handed back to normal priority after its accesses), than streaming it (ld.cs) or\n"
  "// than the non-coherent path (ld.nc). Volatile, so that a thread's loads stay ahead of its\n"
  "// arithmetic.\n"
  "template <typename C> static __device__ __forceinline__ void bq_lean_load(C &x, const void *src) {\n"
  "#if !defined(BQ_EMULATED)\n"
  "  if (sizeof(C) == 16 || sizeof(C) == 8) {\n"
  "    bq_u32 *v = (bq_u32 *)&x;\n"
  "    if (sizeof(C) == 16)\n"
  "      asm volatile(\"ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\"\n"
  "                   : \"=r\"(v[0]), \"=r\"(v[1]), \"=r\"(v[2]), \"=r\"(v[3]) : \"l\"(src));\n"
  "    else\n"
  "      asm volatile(\"ld.global.v2.u32 {%0, %1}, [%2];\" : \"=r\"(v[0]), \"=r\"(v[1]) : \"l\"(src));\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  bq_load<true>(x, src, 16);\n"
  "}\n"
  "// The kernels' parameter blocks: per block with the row's geometry after them\n"
  "#if BQ_GRAN == BQ_GRAN_BLOCK\n"
  "typedef bq_lean_block_params bq_lean_kp;\n"
  "typedef bq_pair_block_params bq_pair_kp;\n"
  "#define BQ_LEAN_P(p) (p).l\n"
  "#else\n"
  "typedef bq_lean_params bq_lean_kp;\n"
  "typedef bq_pair_params bq_pair_kp;\n"
  "#define BQ_LEAN_P(p) (p)\n"
  "#endif\n"
  "// Element e's parameter block: per token its row, per group its group, per block the block of\n"
  "// its row and column\n"
  "template <typename P> static __device__ __forceinline__ bq_u32 bq_lean_block(const P &p, bq_u32 e) {\n"
  "#if BQ_GRAN == BQ_GRAN_BLOCK\n"
  "  const bq_u32 r = bq_div_u31(e, p.fd_cols), c = e - r * p.fd_cols.d;\n"
  "  return bq_div_u31(r, p.l.fd_group) * p.grs + bq_div_u31(c, p.l.fd_group);\n"
  "#else\n"
  "  return bq_div_u31(e, p.fd_group);\n"
  "#endif\n"
  "}\n"
  "// Element e's scale, as a C value, and its zero point (Z0: none)\n"
  "template <bool Z0> static __device__ __forceinline__ bq_c bq_lean_param(const bq_lean_kp &kp, bq_u32 e, bq_zp &z) {\n"
  "  const bq_lean_params &p = BQ_LEAN_P(kp);\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  (void)e;\n"
  "  z = bq_zp_of(Z0 ? 0 : p.zp);\n"
  "  return (bq_c)p.scale;\n"
  "#else\n"
  "  const bq_u32 b = bq_lean_block(kp, e);\n"
  "  const bq_c sv = bq_scale_to_c(__ldg((const bq_s *)p.scales + b));\n"
  "  z = bq_zp_of(!Z0 && p.zps ? __ldg((const int *)p.zps + b) : 0);\n"
  "  return sv;\n"
  "#endif\n"
  "}\n"
  "// Access a, loaded into x: its scale and zero point, its conversion and its store\n"
  "template <bool Z0> static __device__ __forceinline__ void bq_lean_one(const bq_lean_kp &kp, bq_u32 a,\n"
  "                                                                   const bq_piece<bq_in0> &x) {\n"
  "  const bq_lean_params &p = BQ_LEAN_P(kp);\n"
  "  const bq_in0 *in0 = (const bq_in0 *)p.in0;\n"
  "  bq_out *out = (bq_out *)p.out;\n"
  "  const bq_u32 e = a * BQ_P;\n"
  "  bq_zp z;\n"
  "  const bq_c sv = bq_lean_param<Z0>(kp, e, z);\n"
  "  bq_piece<bq_out> y;\n"
  "#if BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64\n"
  "  if (Z0 && bq_scale_is_plain(sv)) {\n"
  "    bq_quantize_near<true, true>(x.e, bq_scale_plain_of(sv), 0, y.e);\n"
  "    bq_store<true>(out + e, y, 16);\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  const bq_scale s = bq_scale_of(sv);\n"
  "  bool fix = false;\n"
  "#if BQ_OP == BQ_OP_QUANTIZE\n"
  "  fix = !z.iok; // a zero point within the q-range's width of an int32 limit\n"
  "#endif\n"
  "  if (!fix) bq_apply_piece<true>(x, bq_piece<bq_in1>(), s, z, y, &fix);\n"
  "  if (!fix) {\n"
  "    bq_store<true>(out + e, y, 16);\n"
  "    return;\n"
  "  }\n"
  "#pragma unroll 1\n"
  "  for (int j = 0; j < BQ_P; j++) bq_one(e + j, s.s, z.zp, in0, (const bq_in1 *)nullptr, out);\n"
  "}\n"
  "template <bool Z0> static __device__ __forceinline__ void bq_lean(const bq_lean_kp &kp) {\n"
  "  const bq_lean_params &p = BQ_LEAN_P(kp);\n"
  "  const bq_u32 a0 = blockIdx.x * (blockDim.x * BQ_LEAN_U) + threadIdx.x, na = p.accesses;\n"
  "  const bq_in0 *in0 = (const bq_in0 *)p.in0;\n"
  "  bq_piece<bq_in0> x[BQ_LEAN_U];\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_LEAN_U; j++)\n"
  "    if (a0 + j * blockDim.x < na) bq_lean_load(x[j], in0 + (a0 + j * blockDim.x) * BQ_P);\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_LEAN_U; j++) {\n"
  "    const bq_u32 a = a0 + j * blockDim.x;\n"
  "    if (a < na) {\n"
  "      bq_lean_one<Z0>(kp, a, x[j]);\n"
  "    } else if (a == na) {\n"
  "      bq_out *out = (bq_out *)p.out;\n"
  "      bq_zp z;\n"
  "#pragma unroll 1\n"
  "      for (bq_u32 e = na * BQ_P; e < p.n; e++) {\n"
  "        const bq_scale s = bq_scale_of(bq_lean_param<false>(kp, e, z));\n"
  "        bq_one(e, s.s, z.zp, in0, (const bq_in1 *)nullptr, out);\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#if BQ_E_AFFINE_LEAN\n"
  "extern \"C\" __global__ void BQ_LB_LEAN BQ_FN_AFFINE_LEAN(const bq_lean_kp p) {\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  if (p.zp == 0) bq_lean<true>(p);\n"
  "#else\n"
  "  if (!BQ_LEAN_P(p).zps) bq_lean<true>(p);\n"
  "#endif\n"
  "  else bq_lean<false>(p);\n"
  "}\n"
  "#endif\n"
  "#elif BQ_GRAN != BQ_GRAN_CHANNEL\n"
  "#if BQ_E_AFFINE_LEAN\n"
  "extern \"C\" __global__ void BQ_LB_LEAN BQ_FN_AFFINE_LEAN(const bq_lean_params p) { (void)p; } // never launched\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN || BQ_GRAN == BQ_GRAN_GROUP || BQ_GRAN == BQ_GRAN_BLOCK\n"
  "#if !BQ_BWD && BQ_OP == BQ_OP_QUANTIZE && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)\n"
  "// ---- bq_affine_pair --------------------------------------------------------------------------\n"
  "// bq_affine_lean's path for quantize from 16-bit data without zero points, per token, per\n"
  "// group and per block, where rows, groups and blocks are whole pairs of accesses and the\n"
  "// output is 16-byte aligned (the host checks, bq__affine_lean): thread a takes accesses 2a\n"
  "// and 2a + 1, which share one scale, and stores their 16 codes at once. An entry point of\n"
  "// its own, so that nothing is tested before the loads: a thread past the last pair loads\n"
  "// the last pair again and returns before it stores. The loads are used on both sides of the\n"
  "// plain-scale test, which keeps them issued ahead of it. There are p.pairs pairs and no\n"
  "// elements past them.\n"
  "#if BQ_E_AFFINE_PAIR\n"
  "extern \"C\" __global__ void BQ_LB_PAIR BQ_FN_AFFINE_PAIR(const bq_pair_kp kp) {\n"
  "  const bq_pair_params &p = BQ_LEAN_P(kp);\n"
  "  const bq_u32 t = blockIdx.x * blockDim.x + threadIdx.x, np = p.pairs;\n"
  "  const bq_u32 a = min(t, np - 1);\n"
  "  const bq_in0 *in0 = (const bq_in0 *)p.in0;\n"
  "  bq_out *out = (bq_out *)p.out;\n"
  "  const bq_u32 e = a * (2 * BQ_P);\n"
  "  bq_piece<bq_in0> x0, x1;\n"
  "  bq_lean_load(x0, in0 + e);\n"
  "  bq_lean_load(x1, in0 + e + BQ_P);\n"
  "  const bq_c sv = bq_scale_to_c(__ldg((const bq_s *)p.scales + bq_lean_block(kp, e)));\n"
  "  bq_piece<bq_out, 2 * BQ_P> y;\n"
  "  bq_piece<bq_out> &y0 = *reinterpret_cast<bq_piece<bq_out> *>(&y.e[0]);\n"
  "  bq_piece<bq_out> &y1 = *reinterpret_cast<bq_piece<bq_out> *>(&y.e[BQ_P]);\n"
  "  bool fix = false;\n"
  "  bq_scale s;\n"
  "  if (bq_scale_is_plain(sv)) {\n"
  "    s = bq_scale_plain_of(sv);\n"
  "    bq_quantize_near<true, true>(x0.e, s, 0, y0.e);\n"
  "    bq_quantize_near<true, true>(x1.e, s, 0, y1.e);\n"
  "  } else {\n"
  "    s = bq_scale_of(sv);\n"
  "    const bq_zp z = bq_zp_of(0); // (z.iok: a zero point of 0 leaves int32 room)\n"
  "    bq_apply_piece<true>(x0, bq_piece<bq_in1>(), s, z, y0, &fix);\n"
  "    bq_apply_piece<true>(x1, bq_piece<bq_in1>(), s, z, y1, &fix);\n"
  "  }\n"
  "  if (t >= np) return;\n"
  "  if (!fix) bq_store<true>(out + e, y, 16);\n"
  "  if (fix) {\n"
  "#pragma unroll 1\n"
  "    for (int j = 0; j < 2 * BQ_P; j++) bq_one(e + j, s.s, 0, in0, (const bq_in1 *)nullptr, out);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "#else\n"
  "#if BQ_E_AFFINE_PAIR\n"
  "extern \"C\" __global__ void BQ_LB_PAIR BQ_FN_AFFINE_PAIR(const bq_pair_params p) { (void)p; } // never launched\n"
  "#endif\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "// ---- fake quantize with a saved mask: bq_affine_mask ----------------------------------------\n"
  "// Per tensor and per channel, over one dense array of n = p.cols elements. The forward pass\n"
  "// writes y and the straight-through mask, a bit an element: bit e % 32 of word e / 32 is 1\n"
  "// where element e is in range (bq_in_range), and the last word's bits past n are 0. The\n"
  "// backward pass reads dy and that mask instead of x: dx = dy where the bit is 1, else 0,\n"
  "// an eighth of a byte an element where x cost its whole width. A warp takes BQ_MU chunks a\n"
  "// step, each 32 accesses of BQ_P elements (BQ_P words of the mask), and loads them all\n"
  "// before it computes. A lane's BQ_P bits are shifted into place and OR-ed over the\n"
  "// 32 / BQ_P lanes that share a word (shuffles), and the first of them stores it. A partial\n"
  "// chunk, or streams off the 16-byte grid, go element by element: lane l takes elements\n"
  "// l, l + 32, ... of the chunk, and a ballot gives each word. The other ops' modules get an\n"
  "// empty kernel of the name, never launched.\n"
  "#if BQ_OP == BQ_OP_FAKE_QUANTIZE\n"
  "#define BQ_MU 2            // chunks a warp loads before it computes\n"
  "#define BQ_LPW (32 / BQ_P) // lanes whose elements share a mask word\n"
  "\n"
  "// Chunk c of the forward pass (x -> y and the mask) or of the backward pass (dy and the mask\n"
  "// -> dx), element by element\n"
  "static __device__ __forceinline__ void bq_mask_chunk_scalar(const bq_affine_params &p, bq_i64 c, int lane) {\n"
  "  const bq_t *in = (const bq_t *)p.in0;\n"
  "  bq_t *out = (bq_t *)p.out;\n"
  "  bq_u32 *mask = (bq_u32 *)p.mask;\n"
  "#pragma unroll 1\n"
  "  for (int j = 0; j < BQ_P; j++) {\n"
  "    const bq_i64 w = c * BQ_P + j, e = w * 32 + lane; // the word, and this lane's element\n"
  "    const bool ok = e < p.cols;\n"
  "#if !BQ_BWD\n"
  "    bool in_range = false;\n"
  "    if (ok) {\n"
  "      bq_scale s;\n"
  "      bq_zp z;\n"
  "      bq_dense_params(p, e, s, z);\n"
  "      const bq_c v = bq_to_c(in[e]);\n"
  "      out[e] = bq_from_c(bq_fake_quantize(v, s, z));\n"
  "      in_range = bq_in_range(v, s, z);\n"
  "    }\n"
  "    const bq_u32 word = __ballot_sync(0xffffffffu, in_range);\n"
  "    if (lane == 0 && w * 32 < p.cols) mask[w] = word;\n"
  "#else\n"
  "    if (ok) out[e] = (__ldg(mask + w) >> lane & 1) ? in[e] : (bq_t)0;\n"
  "#endif\n"
  "  }\n"
  "}\n"
  "\n"
  "static __device__ __forceinline__ void bq_mask_body(const bq_affine_params &p) {\n"
  "  const int lane = threadIdx.x & 31;\n"
  "  const bq_i64 chunk = 32 * BQ_P, chunks = (p.cols + chunk - 1) / chunk;\n"
  "  const bool vec = ((p.in0 | p.out) & 15) == 0; // both streams on the 16-byte grid\n"
  "  const bq_t *in = (const bq_t *)p.in0;\n"
  "  bq_t *out = (bq_t *)p.out;\n"
  "  bq_u32 *mask = (bq_u32 *)p.mask;\n"
  "  const int sub = lane % BQ_LPW; // this lane's place among those sharing its word\n"
  "#if !BQ_BWD && BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  bq_scale st;\n"
  "  bq_zp zt;\n"
  "  bq_dense_params(p, 0, st, zt);\n"
  "#elif !BQ_BWD\n"
  "  const bool one = (p.group & (BQ_P - 1)) == 0; // an access never straddles two channels\n"
  "  bq_scale sc;                                   // the parameters of run rc, kept for the next\n"
  "  bq_zp zc;                                      // access of the same run\n"
  "  bq_i64 rc = -1;\n"
  "#endif\n"
  "  const bq_i64 step = ((bq_i64)gridDim.x * blockDim.x >> 5) * BQ_MU;\n"
  "  for (bq_i64 c0 = (((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * BQ_MU; c0 < chunks; c0 += step) {\n"
  "    if (!vec || (c0 + BQ_MU) * chunk > p.cols) {\n"
  "#pragma unroll 1\n"
  "      for (int u = 0; u < BQ_MU && c0 + u < chunks; u++) bq_mask_chunk_scalar(p, c0 + u, lane);\n"
  "      continue;\n"
  "    }\n"
  "    bq_piece<bq_t> a[BQ_MU];\n"
  "#if BQ_BWD\n"
  "    bq_u32 m[BQ_MU];\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_MU; u++) {\n"
  "      const bq_i64 e = (c0 + u) * chunk + lane * BQ_P;\n"
  "      bq_load(a[u], in + e, 16);\n"
  "#if BQ_BWD\n"
  "      m[u] = __ldg(mask + e / 32) >> (sub * BQ_P);\n"
  "#endif\n"
  "    }\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_MU; u++) {\n"
  "      const bq_i64 e = (c0 + u) * chunk + lane * BQ_P;\n"
  "      bq_piece<bq_t> y;\n"
  "#if BQ_BWD\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < BQ_P; j++) y.e[j] = (m[u] >> j & 1) ? a[u].e[j] : (bq_t)0;\n"
  "#else\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "      const bq_scale &s = st;\n"
  "      const bq_zp &z = zt;\n"
  "#else\n"
  "      bq_scale &s = sc;\n"
  "      bq_zp &z = zc;\n"
  "      if (one) { // a run's parameters prepared once for all of this lane's accesses of it\n"
  "        const bq_i64 r = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)e, p.fd_group) : bq_div64(e, p.group);\n"
  "        if (r != rc) bq_dense_params(p, e, s, z), rc = r;\n"
  "      }\n"
  "#endif\n"
  "      bq_u32 bits = 0;\n"
  "      // bq_fake_quantize_near's and bq_in_range_near's condition, for the access's one run\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "      const bool near = one && s.plain && z.lo == z.a && z.hi == z.b;\n"
  "#else\n"
  "      const bool near = s.plain && z.lo == z.a && z.hi == z.b;\n"
  "#endif\n"
  "      if (near) {\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < BQ_P; j++) {\n"
  "          const bq_c v = bq_to_c(a[u].e[j]);\n"
  "          y.e[j] = bq_from_c(bq_fake_quantize_near(v, s, z));\n"
  "          bits |= (bq_u32)bq_in_range_near(v, s, z) << j;\n"
  "        }\n"
  "      } else {\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < BQ_P; j++) {\n"
  "#if BQ_GRAN == BQ_GRAN_CHANNEL\n"
  "          if (!one) bq_dense_params(p, e + j, s, z);\n"
  "#endif\n"
  "          const bq_c v = bq_to_c(a[u].e[j]);\n"
  "          y.e[j] = bq_from_c(bq_fake_quantize(v, s, z));\n"
  "          bits |= (bq_u32)bq_in_range(v, s, z) << j;\n"
  "        }\n"
  "      }\n"
  "      bits <<= sub * BQ_P;\n"
  "#pragma unroll\n"
  "      for (int o = 1; o < BQ_LPW; o <<= 1) bits |= (bq_u32)__shfl_xor_sync(0xffffffffu, (int)bits, o);\n"
  "      if (sub == 0) mask[e / 32] = bits;\n"
  "#endif\n"
  "      bq_store(out + e, y, 16);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_E_AFFINE_MASK\n"
  "extern \"C\" __global__ void BQ_LB_MASK BQ_FN_AFFINE_MASK(const bq_affine_params p) {\n"
  "#if BQ_OP == BQ_OP_FAKE_QUANTIZE\n"
  "  bq_mask_body(p);\n"
  "#else\n"
  "  (void)p;\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#ifndef BQ_AFF_ROT\n"
  "#define BQ_AFF_ROT 0\n"
  "#endif\n"
  "#if BQ_SR || BQ_AFF_ROT\n"
  "// ---- bq_affine_sr: quantize and fake quantize forward with stochastic rounding, and the ------\n"
  "// fused rotation (BQ_AFF_ROT: quantize forward rotates x first, dequantize rotates its output\n"
  "// back, fake quantize does both; its backward pass rotates dy and x, masks, rotates back)\n"
  "// A thread takes BQ_SR_N consecutive elements of a row (16 of 16-bit data, two generator\n"
  "// calls' draws whose chains interleave; else 8, one call's): element (r, c) draws at index\n"
  "// offset + r * cols + c (bq_sr_draws), so the bits depend on neither the grid nor the kernel.\n"
  "// It moves them with the widest accesses their alignment allows. Each element's parameters\n"
  "// come from bq_qparams' walker, positioned once for the chunk (per tensor: once a thread).\n"
  "// The rotation's blocks of n (a power of two dividing the row, at most 32 threads' elements)\n"
  "// are a thread's own (n <= BQ_SR_N) or n / BQ_SR_N consecutive lanes' (common.cuh's\n"
  "// bq_rot_apply): the rows hold whole blocks and a warp's threads start at a multiple of 32,\n"
  "// so those lanes take one row's consecutive chunks, and the place of a lane's chunk in its\n"
  "// block is the same at every step (its signs drawn once).\n"
  "#define BQ_SR_N (sizeof(bq_in0) <= 2 ? 16 : 8)\n"
  "#if BQ_AFF_ROT\n"
  "// a chunk's N values of T rotated (forward, or backward) by common.cuh's steps, each rounded to T\n"
  "template <int N, class CH>\n"
  "static __device__ __forceinline__ void bq_rot_chunk(CH &v, int lane, int log2n, bq_u32 neg, bq_c cn, bool backward,\n"
  "                                                    bq_u32 mask) {\n"
  "  bq_c c[N];\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < N; k++) c[k] = bq_to_c(v.e[k]);\n"
  "  bq_rot_apply<N>(c, lane, log2n, neg, cn, backward, mask);\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < N; k++) v.e[k] = bq_from_c(c[k]);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_AFFINE_SR\n"
  "extern \"C\" __global__ void BQ_LB_SR BQ_FN_AFFINE_SR(const bq_affine_sr_params sp) {\n"
  "#if (!BQ_BWD && (BQ_OP == BQ_OP_QUANTIZE || BQ_OP == BQ_OP_FAKE_QUANTIZE || (BQ_AFF_ROT && BQ_OP == BQ_OP_DEQUANTIZE))) || \\\n"
  "    (BQ_AFF_ROT && BQ_BWD && BQ_OP == BQ_OP_FAKE_QUANTIZE)\n"
  "  constexpr int N = BQ_SR_N;\n"
  "  const bq_affine_params &p = sp.a;\n"
  "  const bq_i64 per = (p.cols + N - 1) / N, n = p.rows * per;\n"
  "  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  bq_qparams q;\n"
  "  bq_qp_at(q, p, 0, 0);\n"
  "#endif\n"
  "#if BQ_AFF_ROT\n"
  "  const int rn = 1 << sp.rlog2, L = rn > N ? rn / N : 1, lane = (int)(threadIdx.x & 31);\n"
  "  const bq_u32 rmask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (lane & -L);\n"
  "  const bq_c rc = bq_rot_c(sp.rlog2);\n"
  "  const bq_u32 rneg = sp.rsigns ? bq_rot_signs<N>((lane * N) & (rn - 1), rn, sp.seed_lo, sp.seed_hi) : 0u;\n"
  "#endif\n"
  "  for (bq_i64 t = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) {\n"
  "    const bq_i64 r = p.rows == 1 ? 0 : t / per, c0 = (t - r * per) * N;\n"
  "#if BQ_SR && !BQ_BWD\n"
  "    bq_u32 u[N];\n"
  "    bq_sr_draws<N>(sp.offset + (bq_u64)(r * p.cols + c0), sp.seed_lo, sp.seed_hi, u);\n"
  "#endif\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "    bq_qparams q;\n"
  "    bq_qp_at(q, p, r, c0);\n"
  "#endif\n"
  "    const bq_in0 *x = (const bq_in0 *)p.in0 + r * p.in0_stride + c0;\n"
  "    bq_out *y = (bq_out *)p.out + r * p.out_stride + c0;\n"
  "    bq_chunk<bq_in0, N> a;\n"
  "    bq_chunk<bq_out, N> b;\n"
  "    const bool whole = c0 + N <= p.cols;\n"
  "    if (whole) {\n"
  "      bq_load(a, x, bq_width(x));\n"
  "    } else {\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < N; k++) a.e[k] = c0 + k < p.cols ? x[k] : (bq_in0)0;\n"
  "    }\n"
  "#if BQ_AFF_ROT && BQ_OP != BQ_OP_DEQUANTIZE\n"
  "    bq_rot_chunk<N>(a, lane, sp.rlog2, rneg, rc, false, rmask); // (past a row's end: whole blocks of zeros)\n"
  "#endif\n"
  "#if BQ_BWD // fake quantize backward, rotating: the mask of the rotated x on the rotated dy\n"
  "    const bq_in1 *xi = (const bq_in1 *)p.in1 + r * p.in1_stride + c0;\n"
  "    bq_chunk<bq_in1, N> xr;\n"
  "    if (whole) {\n"
  "      bq_load(xr, xi, bq_width(xi));\n"
  "    } else {\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < N; k++) xr.e[k] = c0 + k < p.cols ? xi[k] : (bq_in1)0;\n"
  "    }\n"
  "    bq_rot_chunk<N>(xr, lane, sp.rlog2, rneg, rc, false, rmask);\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < N; k++) {\n"
  "#if BQ_BWD\n"
  "      b.e[k] = bq_apply(a.e[k], xr.e[k], q.s, q.z, nullptr);\n"
  "#elif BQ_SR && BQ_OP == BQ_OP_QUANTIZE\n"
  "      b.e[k] = (bq_out)bq_quantize_sr(bq_to_c(a.e[k]), q.s, q.z, u[k]);\n"
  "#elif BQ_SR\n"
  "      b.e[k] = bq_from_c(bq_fake_quantize_sr(bq_to_c(a.e[k]), q.s, q.z, u[k]));\n"
  "#else\n"
  "      b.e[k] = bq_apply(a.e[k], (bq_in1)0, q.s, q.z, nullptr);\n"
  "#endif\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "      if (k < N - 1 && c0 + k + 1 < p.cols) bq_qp_next(q, p); // (never a block past the row's last)\n"
  "#endif\n"
  "    }\n"
  "#if BQ_AFF_ROT && BQ_OP != BQ_OP_QUANTIZE\n"
  "    bq_rot_chunk<N>(b, lane, sp.rlog2, rneg, rc, true, rmask); // the values of T (or dx) rotated back\n"
  "#endif\n"
  "    if (whole) {\n"
  "      bq_store(y, b, bq_width(y));\n"
  "    } else {\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < N; k++)\n"
  "        if (c0 + k < p.cols) y[k] = b.e[k];\n"
  "    }\n"
  "  }\n"
  "#else\n"
  "  (void)sp;\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#endif\n"
;
static const char bq__src_common_cuh[] =
  "// common.cuh - types, conversions and the affine rounding rules shared by every kernel.\n"
  "// Self-contained on purpose: NVRTC sees no CUDA headers on a user's machine. The host\n"
  "// prepends a prelude of #defines that specializes this file (see baracuda_quant.h,\n"
  "// \"kernel specialization\"). Its values are the names of the public enums' values, which it\n"
  "// defines first (BQ_TYPE_F32, BQ_GRAN_TOKEN, BQ_OP_QUANTIZE, ...):\n"
  "//   BQ_FT   float type T: BQ_TYPE_F32, BQ_TYPE_F64, BQ_TYPE_F16 or BQ_TYPE_BF16\n"
  "//   BQ_IT   storage type I: BQ_TYPE_S8, BQ_TYPE_U8, or FP8: BQ_TYPE_E4M3, BQ_TYPE_E5M2\n"
  "//   BQ_QMIN, BQ_QMAX   the q-range (integer types; 0 and 0 for FP8)\n"
  "//   BQ_ST   scale array element type: BQ_TYPE_F32, T or BQ_TYPE_UE8M0\n"
  "//   BQ_SL   the per-group scales' layout: BQ_SL_ROWS, BQ_SL_MN or BQ_SL_MN_X4 (bq_pbase)\n"
  "//   BQ_E_<NAME>  the entry points this source compiles (bq_affine_lean: BQ_E_AFFINE_LEAN): the\n"
  "//           host compiles a module for each entry point alone, so every kernel file\n"
  "//           wraps each of its entry points in #if BQ_E_<NAME>\n"
  "// Numerics: docs/numerics.md in the repository. Every rounding is explicit\n"
  "// (__fdiv_rn, __fmul_rn, ...), so no compiler option can change a result.\n"
  "\n"
  "/* kernels_src/abi.h - what the host and every kernel file share, valid as C and as CUDA C++:\n"
  "   the integer types both sides write the parameter blocks in, and the divider the host\n"
  "   prepares for the kernels. Each family's <family>_abi.h builds on it. The kernel files\n"
  "   include it; tools/amalgamate.py inlines it into the header's host code and into the\n"
  "   embedded kernel text, so both sides compile the one definition. */\n"
  "#ifndef BQ_ABI_H\n"
  "#define BQ_ABI_H\n"
  "typedef unsigned char bq_u8;\n"
  "typedef unsigned short bq_u16;\n"
  "typedef unsigned int bq_u32;\n"
  "typedef long long bq_i64;\n"
  "typedef unsigned long long bq_u64;\n"
  "\n"
  "/* n / d == (umulhi(n, magic) + n) >> shift for every n < 2^32 (the host's bq__make_fastdiv,\n"
  "   the kernels' bq_div_u32) */\n"
  "typedef struct bq_fastdiv {\n"
  "  bq_u32 d, magic, shift;\n"
  "} bq_fastdiv;\n"
  "\n"
  "/* An entry point's name as the host looks it up: BQ_ENTRY_NAME(BQ_FN_AFFINE_COLS) is\n"
  "   \"bq_affine_cols\" */\n"
  "#define BQ_ENTRY_NAME_(fn) #fn\n"
  "#define BQ_ENTRY_NAME(fn) BQ_ENTRY_NAME_(fn)\n"
  "#endif\n"
  "\n"
  "// Per group and per block, scales (and zero points) form a matrix of parameter rows (a row\n"
  "// of data per group; per block, B rows) by blocks along the row. Its layout, BQ_SL:\n"
  "//   BQ_SL_ROWS   [prow][b] at prow ld + b (packed UE8M0 rows too: the host gives ld in bytes)\n"
  "//   BQ_SL_MN     [b][prow] at b ld + prow\n"
  "//   BQ_SL_MN_X4  UE8M0 bytes packed four to a word along b, words MN-major: byte\n"
  "//                (b / 4) ld + 4 prow + b % 4, ld in bytes\n"
  "//   BQ_SL_ROWS_X4  packed, row-major: BQ_SL_ROWS's bytes (dynamic quantize zeroes a row's\n"
  "//                bytes past its last group)\n"
  "// bq_pbase gives a parameter row's part of the index, bq_pat adds block b's.\n"
  "#define BQ_SL_ROWS 0\n"
  "#define BQ_SL_MN 1\n"
  "#define BQ_SL_MN_X4 2\n"
  "#define BQ_SL_ROWS_X4 3\n"
  "#define BQ_GROUPED (BQ_GRAN == BQ_GRAN_GROUP || BQ_GRAN == BQ_GRAN_BLOCK)\n"
  "static __device__ __forceinline__ bq_i64 bq_pbase(bq_i64 prow, bq_i64 ld) {\n"
  "#if BQ_SL == BQ_SL_ROWS || BQ_SL == BQ_SL_ROWS_X4\n"
  "  return prow * ld;\n"
  "#elif BQ_SL == BQ_SL_MN\n"
  "  (void)ld;\n"
  "  return prow;\n"
  "#else\n"
  "  (void)ld;\n"
  "  return 4 * prow;\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_i64 bq_pat(bq_i64 base, bq_i64 b, bq_i64 ld) {\n"
  "#if BQ_SL == BQ_SL_ROWS || BQ_SL == BQ_SL_ROWS_X4\n"
  "  (void)ld;\n"
  "  return base + b;\n"
  "#elif BQ_SL == BQ_SL_MN\n"
  "  return b * ld + base;\n"
  "#else\n"
  "  return (b >> 2) * ld + base + (b & 3);\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "typedef double bq_c; // compute type C\n"
  "#else\n"
  "typedef float bq_c;\n"
  "#endif\n"
  "\n"
  "#if BQ_FT == BQ_TYPE_F32\n"
  "typedef float bq_t;\n"
  "#elif BQ_FT == BQ_TYPE_F64\n"
  "typedef double bq_t;\n"
  "#else\n"
  "typedef bq_u16 bq_t; // f16 / bf16 bits\n"
  "#endif\n"
  "\n"
  "#if BQ_IT == BQ_TYPE_E4M3 || BQ_IT == BQ_TYPE_E5M2\n"
  "// FP8 storage: bq_i holds the code. The ints the element functions pass around are codes\n"
  "// (0..255), so the int type's packing and saturation never change one.\n"
  "#define BQ_FP8 1\n"
  "typedef unsigned char bq_i;\n"
  "#define BQ_I_MIN 0\n"
  "#define BQ_I_MAX 255\n"
  "#elif BQ_IT == BQ_TYPE_S8\n"
  "#define BQ_FP8 0\n"
  "typedef signed char bq_i;\n"
  "#define BQ_I_MIN (-128)\n"
  "#define BQ_I_MAX 127\n"
  "#else\n"
  "#define BQ_FP8 0\n"
  "typedef unsigned char bq_i;\n"
  "#define BQ_I_MIN 0\n"
  "#define BQ_I_MAX 255\n"
  "#endif\n"
  "\n"
  "#if BQ_ST == BQ_TYPE_F32\n"
  "typedef float bq_s; // scale array element\n"
  "#elif BQ_ST == BQ_TYPE_UE8M0\n"
  "typedef bq_u8 bq_s; // a power of two 2^(e - 127) as its biased exponent e; 255 is NaN\n"
  "#else\n"
  "typedef bq_t bq_s;\n"
  "#endif\n"
  "\n"
  "// The PTX conversions. (A host emulator that runs these sources on the CPU for tests\n"
  "// defines BQ_EMULATED and supplies its own; NVRTC never sees it.)\n"
  "#ifndef BQ_EMULATED\n"
  "static __device__ __forceinline__ float bq_f16_to_f32(bq_u16 h) {\n"
  "  float f;\n"
  "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
  "  return f;\n"
  "}\n"
  "static __device__ __forceinline__ bq_u16 bq_f32_to_f16(float f) {\n"
  "  bq_u16 h;\n"
  "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
  "  return h;\n"
  "}\n"
  "static __device__ __forceinline__ bq_u16 bq_f32_to_bf16(float f) {\n"
  "  bq_u16 h;\n"
  "  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
  "  return h;\n"
  "}\n"
  "// rne(v) saturated to the int type's range [BQ_I_MIN, BQ_I_MAX], NaN -> 0: one conversion\n"
  "// (a float to integer cvt clamps to its destination type; the narrow result is extended\n"
  "// to 32 bits)\n"
  "static __device__ __forceinline__ int bq_cvt_sat(float v) {\n"
  "  int r;\n"
  "#if BQ_IT == BQ_TYPE_S8\n"
  "  asm(\"cvt.rni.s8.f32 %0, %1;\" : \"=r\"(r) : \"f\"(v));\n"
  "#else\n"
  "  asm(\"cvt.rni.u8.f32 %0, %1;\" : \"=r\"(r) : \"f\"(v));\n"
  "#endif\n"
  "  return r;\n"
  "}\n"
  "// rne(v) saturated to [-32768, 32767], NaN -> 0\n"
  "static __device__ __forceinline__ int bq_cvt_s16(float v) {\n"
  "  int r;\n"
  "  asm(\"cvt.rni.s16.f32 %0, %1;\" : \"=r\"(r) : \"f\"(v));\n"
  "  return r;\n"
  "}\n"
  "// Four ints, each saturated to the int type's range, packed into a word (e0 in the low\n"
  "// byte): two instructions. (cvt.pack.sat puts its two values in the low half-word, b\n"
  "// first, and the third operand's low half above them.)\n"
  "static __device__ __forceinline__ bq_u32 bq_pack4(int e0, int e1, int e2, int e3) {\n"
  "  bq_u32 hi, w;\n"
  "#if BQ_FP8 // codes: no saturation\n"
  "  w = (bq_u32)e0 | ((bq_u32)e1 << 8) | ((bq_u32)e2 << 16) | ((bq_u32)e3 << 24);\n"
  "  (void)hi;\n"
  "#elif BQ_IT == BQ_TYPE_S8\n"
  "  asm(\"cvt.pack.sat.s8.s32.b32 %0, %1, %2, 0;\" : \"=r\"(hi) : \"r\"(e3), \"r\"(e2));\n"
  "  asm(\"cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;\" : \"=r\"(w) : \"r\"(e1), \"r\"(e0), \"r\"(hi));\n"
  "#else\n"
  "  asm(\"cvt.pack.sat.u8.s32.b32 %0, %1, %2, 0;\" : \"=r\"(hi) : \"r\"(e3), \"r\"(e2));\n"
  "  asm(\"cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;\" : \"=r\"(w) : \"r\"(e1), \"r\"(e0), \"r\"(hi));\n"
  "#endif\n"
  "  return w;\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ float bq_bf16_to_f32(bq_u16 h) {\n"
  "  return __uint_as_float(((bq_u32)h) << 16);\n"
  "}\n"
  "\n"
  "// T <-> C. T -> C is exact; C -> T rounds to nearest even.\n"
  "static __device__ __forceinline__ bq_c bq_to_c(bq_t v) {\n"
  "#if BQ_FT == BQ_TYPE_F16\n"
  "  return bq_f16_to_f32(v);\n"
  "#elif BQ_FT == BQ_TYPE_BF16\n"
  "  return bq_bf16_to_f32(v);\n"
  "#else\n"
  "  return v;\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_t bq_from_c(bq_c v) {\n"
  "#if BQ_FT == BQ_TYPE_F16\n"
  "  return bq_f32_to_f16(v);\n"
  "#elif BQ_FT == BQ_TYPE_BF16\n"
  "  return bq_f32_to_bf16(v);\n"
  "#else\n"
  "  return v;\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_c bq_scale_to_c(bq_s v) {\n"
  "#if BQ_ST == BQ_TYPE_F32\n"
  "  return v;\n"
  "#elif BQ_ST == BQ_TYPE_UE8M0\n"
  "  // exact: e in [1, 254] is a normal f32's exponent field, e = 0 the subnormal 2^-127\n"
  "  const float f = v == 0 ? 0x1p-127f : __uint_as_float((bq_u32)v << 23);\n"
  "  return (bq_c)(v == 255 ? __uint_as_float(0x7fffffffu) : f);\n"
  "#else\n"
  "  return bq_to_c(v);\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __ddiv_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __dmul_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __dadd_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_sub(bq_c a, bq_c b) { return __dsub_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_fma(bq_c a, bq_c b, bq_c c) { return __fma_rn(a, b, c); }\n"
  "static __device__ __forceinline__ bq_c bq_rcp(bq_c a) { return __drcp_rn(a); }\n"
  "// scales outside [BQ_RCP_LO, BQ_RCP_HI] are brought inside by BQ_RCP_UP or BQ_RCP_DOWN\n"
  "#define BQ_RCP_LO 0x1p-500\n"
  "#define BQ_RCP_HI 0x1p500\n"
  "#define BQ_RCP_UP 0x1p600\n"
  "#define BQ_RCP_DOWN 0x1p-600\n"
  "#define BQ_C_MAX 0x1.fffffffffffffp1023\n"
  "static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __double2ll_rn(v); }\n"
  "// saturating; NaN -> 0 (the conversion itself gives INT_MIN for a NaN double on sm_90)\n"
  "static __device__ __forceinline__ int bq_rne_int(bq_c v) { return v == v ? __double2int_rn(v) : 0; }\n"
  "static __device__ __forceinline__ int bq_to_int_rz(bq_c v) { return __double2int_rz(v); }\n"
  "static __device__ __forceinline__ bq_c bq_rint(bq_c v) { return rint(v); }\n"
  "static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2double_rn(v); }\n"
  "static __device__ __forceinline__ bq_c bq_min(bq_c a, bq_c b) { return fmin(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_max(bq_c a, bq_c b) { return fmax(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_abs(bq_c a) { return fabs(a); }\n"
  "#define BQ_CLAMP_BIG 0x1p40\n"
  "#else\n"
  "static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __fdiv_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __fmul_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __fadd_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_sub(bq_c a, bq_c b) { return __fsub_rn(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_fma(bq_c a, bq_c b, bq_c c) { return __fmaf_rn(a, b, c); }\n"
  "static __device__ __forceinline__ bq_c bq_rcp(bq_c a) { return __frcp_rn(a); }\n"
  "#define BQ_RCP_LO 0x1p-90f\n"
  "#define BQ_RCP_HI 0x1p90f\n"
  "#define BQ_RCP_UP 0x1p64f\n"
  "#define BQ_RCP_DOWN 0x1p-64f\n"
  "#define BQ_C_MAX 0x1.fffffep127f\n"
  "static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __float2ll_rn(v); }\n"
  "static __device__ __forceinline__ int bq_rne_int(bq_c v) { return __float2int_rn(v); } // saturating, NaN -> 0\n"
  "static __device__ __forceinline__ int bq_to_int_rz(bq_c v) { return __float2int_rz(v); }\n"
  "static __device__ __forceinline__ bq_c bq_rint(bq_c v) { return rintf(v); }\n"
  "static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2float_rn(v); }\n"
  "static __device__ __forceinline__ bq_c bq_min(bq_c a, bq_c b) { return fminf(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_max(bq_c a, bq_c b) { return fmaxf(a, b); }\n"
  "static __device__ __forceinline__ bq_c bq_abs(bq_c a) { return fabsf(a); }\n"
  "#define BQ_CLAMP_BIG 0x1p40f\n"
  "#endif\n"
  "\n"
  "// rne(v) as an integer with NaN -> 0, clamped to +-2^40 so that adding any int32 zero\n"
  "// point can neither wrap nor change which side of the q-range the result falls on.\n"
  "static __device__ __forceinline__ bq_i64 bq_round(bq_c v) {\n"
  "  v = (v == v) ? v : (bq_c)0;\n"
  "  v = v < -BQ_CLAMP_BIG ? -BQ_CLAMP_BIG : (v > BQ_CLAMP_BIG ? BQ_CLAMP_BIG : v);\n"
  "  return bq_rne_ll(v);\n"
  "}\n"
  "\n"
  "// One zero point, prepared once per tensor, row or group so that no element needs 64-bit\n"
  "// arithmetic whatever the int32 zero point:\n"
  "// - quantize: q = sat(R + zp, qmin, qmax) with R = rne(x / s) is qmin for R < a = qmin - zp,\n"
  "//   qmax for R > b = qmax - zp, else R + zp. With lo = a rounded up to C and hi = b rounded\n"
  "//   down (exact for f64 and for |zp| < 2^24) the comparisons on the integer-valued R give\n"
  "//   the same answers, and inside [lo, hi] R + zp = base + (R - lo), R - lo exact (Sterbenz),\n"
  "//   base = qmin + (lo - a).\n"
  "// - dequantize: q - zp = (q - zp_lo) - zp_hi with zp_hi = C(zp) and zp_lo = zp - zp_hi, a\n"
  "//   small integer: one exact conversion, then a single rounding in C.\n"
  "// - fake quantize: q - zp is R itself inside the range, else a or b rounded once to C.\n"
  "// - quantize, the usual case (ia = a and ib = b both fit in int32, i.e. zp is not within\n"
  "//   the q-range's width of an int32 limit): q = min(max(R, ia), ib) + zp in int32, with R\n"
  "//   from the saturating conversion (NaN -> 0), which cannot move R across ia or ib.\n"
  "#define BQ_NEAR_ZP 32000 // zero points bq_quantize_near takes\n"
  "struct bq_zp {\n"
  "  bq_c lo, hi, a, b, zp_hi;\n"
  "  int base, zp_lo;\n"
  "  int ia, ib, zp;\n"
  "  bool iok, near; // near: |zp| <= BQ_NEAR_ZP\n"
  "};\n"
  "static __device__ __forceinline__ bq_zp bq_zp_of(int zp) {\n"
  "  bq_zp z;\n"
  "  const bq_i64 a = (bq_i64)BQ_QMIN - zp, b = (bq_i64)BQ_QMAX - zp;\n"
  "  z.iok = a >= -(bq_i64)0x80000000LL && b <= (bq_i64)0x7fffffffLL;\n"
  "  z.ia = (int)a;\n"
  "  z.ib = (int)b;\n"
  "  z.zp = zp;\n"
  "  z.near = zp >= -BQ_NEAR_ZP && zp <= BQ_NEAR_ZP;\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  z.lo = z.a = (double)a;\n"
  "  z.hi = z.b = (double)b;\n"
  "  z.base = BQ_QMIN;\n"
  "  z.zp_hi = (double)zp;\n"
  "  z.zp_lo = 0;\n"
  "#else\n"
  "  if (zp > -(1 << 24) && zp < (1 << 24)) { // everything exact in 32 bits: the usual case\n"
  "    z.lo = z.a = (float)(BQ_QMIN - zp);\n"
  "    z.hi = z.b = (float)(BQ_QMAX - zp);\n"
  "    z.base = BQ_QMIN;\n"
  "    z.zp_hi = (float)zp;\n"
  "    z.zp_lo = 0;\n"
  "  } else {\n"
  "    z.lo = __ll2float_ru(a);\n"
  "    z.hi = __ll2float_rd(b);\n"
  "    z.a = __ll2float_rn(a);\n"
  "    z.b = __ll2float_rn(b);\n"
  "    z.base = BQ_QMIN + (int)((bq_i64)z.lo - a);\n"
  "    z.zp_hi = __int2float_rn(zp);\n"
  "    z.zp_lo = (int)((bq_i64)zp - (bq_i64)z.zp_hi);\n"
  "  }\n"
  "#endif\n"
  "  return z;\n"
  "}\n"
  "\n"
  "// A scale, prepared once per tensor, row or group. Quantizing needs rne(x / s), not x / s\n"
  "// itself, so the division becomes two products and two FMAs: with s' = s m and x' = x m\n"
  "// (m a power of two that brings |s'| into [BQ_RCP_LO, BQ_RCP_HI], exact) and\n"
  "// rcp = RN(1 / s'), Markstein's correction q1 = q0 + (x' - q0 s') rcp, q0 = x' rcp, is\n"
  "// RN(x / s) whenever it can round to a nonzero integer; smaller quotients round to 0\n"
  "// either way, and past 2^100 (or for s = 0, inf, NaN) q0 itself is used, which only has to\n"
  "// saturate or be NaN like x / s. Checked against IEEE division on 2.5e9 quotients: random\n"
  "// bit patterns, special scales, and values within a few ulps of half-integers.\n"
  "struct bq_scale {\n"
  "  bq_c s;          // the scale\n"
  "  bq_c ss, rcp, m; // the scaled scale, its reciprocal, the power of two\n"
  "  bool corr;       // apply the correction (s finite and nonzero)\n"
  "  bool plain;      // m == 1 and corr: bq_quantize_near applies\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "  float dlo, dhi; // bq_div_near's window for |dy|\n"
  "#endif\n"
  "};\n"
  "// bq_div_near's window for |dy|, from a = |s|\n"
  "static __device__ __forceinline__ void bq_scale_window(bq_scale &q, bq_c a) {\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "  q.dlo = fmaxf(0x1p-96f, __fmul_rn(a, 0x1p-96f));\n"
  "  q.dhi = fminf(__fmul_rn(a, 0x1p96f), 0x1.fffffep127f); // finite: an infinite dy divides outright\n"
  "#else\n"
  "  (void)q, (void)a;\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_scale bq_scale_of(bq_c s) {\n"
  "  bq_scale q;\n"
  "  const bq_c a = bq_abs(s);\n"
  "  q.s = s;\n"
  "  q.m = a < BQ_RCP_LO ? BQ_RCP_UP : (a > BQ_RCP_HI && a <= BQ_C_MAX ? BQ_RCP_DOWN : (bq_c)1);\n"
  "  q.ss = bq_mul(s, q.m);\n"
  "  q.rcp = bq_rcp(q.ss);\n"
  "  q.corr = a > (bq_c)0 && a <= BQ_C_MAX;\n"
  "  q.plain = q.m == (bq_c)1 && q.corr;\n"
  "  bq_scale_window(q, a);\n"
  "  return q;\n"
  "}\n"
  "// Whether s needs no bracket (m == 1) and its reciprocal corrects (bq_scale_of's plain)\n"
  "static __device__ __forceinline__ bool bq_scale_is_plain(bq_c s) {\n"
  "  const bq_c a = bq_abs(s);\n"
  "  return a >= BQ_RCP_LO && a <= BQ_RCP_HI;\n"
  "}\n"
  "// bq_scale_of(s) where bq_scale_is_plain(s), without the bracket's selects and product\n"
  "static __device__ __forceinline__ bq_scale bq_scale_plain_of(bq_c s) {\n"
  "  bq_scale q;\n"
  "  q.s = q.ss = s;\n"
  "  q.m = (bq_c)1;\n"
  "  q.rcp = bq_rcp(s);\n"
  "  q.corr = q.plain = true;\n"
  "  bq_scale_window(q, bq_abs(s));\n"
  "  return q;\n"
  "}\n"
  "// x / s as far as rne needs it: exact where it matters, NaN where x / s is NaN\n"
  "static __device__ __forceinline__ bq_c bq_quotient(bq_c x, const bq_scale &q) {\n"
  "  const bq_c xs = bq_mul(x, q.m);\n"
  "  const bq_c q0 = bq_mul(xs, q.rcp);\n"
  "  const bq_c q1 = bq_fma(bq_fma(-q0, q.ss, xs), q.rcp, q0);\n"
  "  return (q.corr & (bq_abs(q0) < (bq_c)0x1p100f)) ? q1 : q0; // & not &&: no branch\n"
  "}\n"
  "// x / s itself, correctly rounded (the quantize backward pass), where `ok` comes back true;\n"
  "// the caller divides the other elements with bq_div. f32 divides outright. f64 uses the\n"
  "// prepared reciprocal: with rcp = RN(1 / s) (m == 1: |s| in [2^-500, 2^500]), q0 = RN(x rcp)\n"
  "// and the exact residual x - q0 s, q0 + (x - q0 s) rcp rounded once is RN(x / s)\n"
  "// (Markstein) wherever nothing can underflow or overflow, which |x| in [2^-400, 2^401)\n"
  "// ensures (checked against IEEE division on 2.7e8 such quotients, hard cases included). The\n"
  "// test reads x's exponent with integer operations; x = +-0 gives q0, exact with its sign.\n"
  "static __device__ __forceinline__ bq_c bq_div_by(bq_c x, const bq_scale &q, bool &ok) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const double q0 = __dmul_rn(x, q.rcp);\n"
  "  const int hi = __double2hiint(x);\n"
  "  const bool zero = ((hi & 0x7fffffff) | __double2loint(x)) == 0;\n"
  "  const bool mid = (unsigned)(((hi >> 20) & 0x7ff) - (1023 - 400)) < 801u;\n"
  "  ok = q.m == 1.0 && q.corr && (zero || mid);\n"
  "  return zero ? q0 : __fma_rn(__fma_rn(-q0, q.s, x), q.rcp, q0);\n"
  "#else\n"
  "  ok = true;\n"
  "  return bq_div(x, q.s);\n"
  "#endif\n"
  "}\n"
  "// rne(x / s) with NaN -> 0\n"
  "static __device__ __forceinline__ bq_c bq_rounded_quotient(bq_c x, const bq_scale &q) {\n"
  "  const bq_c v = bq_quotient(x, q);\n"
  "  return bq_rint(v == v ? v : (bq_c)0);\n"
  "}\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// Quantize backward where s.plain, in f32: the STE mask (bq_in_range_near) and\n"
  "// dy / s, correctly rounded, from the prepared reciprocal (Markstein's correction, as\n"
  "// bq_div_by does in f64) where |dy| is 0 or in [max(2^-96, |s| 2^-96), min(|s| 2^96, the\n"
  "// largest finite)] (an infinite dy, whose residual is NaN, is never in it): there the\n"
  "// residual is exact and nothing underflows or overflows. Outside that window `ok` falls and\n"
  "// the caller divides. A zero residual keeps q0 (an exact quotient; for dy = -0 the\n"
  "// correction would give +0). Checked against IEEE division on the host (tests/test_division.c):\n"
  "// every bf16 and f16 value against random scales, and random f32 quotients, hard cases near\n"
  "// the window's ends and near multiples of s included.\n"
  "static __device__ __forceinline__ float bq_div_near(float a, const bq_scale &s, bool &ok) {\n"
  "  const float q0 = __fmul_rn(a, s.rcp);\n"
  "  const float r = __fmaf_rn(-q0, s.s, a);\n"
  "  const float aa = fabsf(a);\n"
  "  ok &= (aa <= s.dhi) & ((aa >= s.dlo) | (aa == 0.0f)); // & and |: no branch an element\n"
  "  return r == 0.0f ? q0 : __fmaf_rn(r, s.rcp, q0);\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// C(x) / C(s) in f32, exact wherever the FP8 (or E2M1) rounding or the mask can tell, with\n"
  "// no division, for any scale. With bq_scale's power of two m (|s m| in [2^-90, 2^90]), the\n"
  "// quotient is (x m) / (s m), and Markstein's correction of (x m) * RN(1 / (s m)) is that\n"
  "// quotient correctly rounded while |x m| is in bq_div_near's window. Below 2^-96, x m is\n"
  "// taken up by 2^64 first (exact) and the quotient down again after, which can only round\n"
  "// results below 2^-126, far under half FP8's smallest subnormal. Where |q0| >= 2^90 the\n"
  "// quotient saturates whatever its last bits, so q0 (possibly inf) is kept, as it is for a\n"
  "// zero, infinite or NaN scale (corr false: q0 is then x / s's inf, zero or NaN). What is\n"
  "// left outside the window are quotients under 2^-96 (a small x m against a large s m, or\n"
  "// an x m that underflowed): they keep their sign and round to +-0 either way.\n"
  "// PLAIN: the caller knows s.plain (m == 1, corr), which saves the product by m.\n"
  "template <bool PLAIN> static __device__ __forceinline__ float bq_f8_quotient_f32(float x, const bq_scale &s) {\n"
  "  const float xm = PLAIN ? x : __fmul_rn(x, s.m);\n"
  "  const bool tiny = fabsf(xm) < 0x1p-96f;\n"
  "  const float xs = tiny ? __fmul_rn(xm, 0x1p64f) : xm;\n"
  "  const float q0 = __fmul_rn(xs, s.rcp);\n"
  "  const float r = __fmaf_rn(-q0, s.ss, xs);\n"
  "  float q1 = r == 0.0f ? q0 : __fmaf_rn(r, s.rcp, q0); // r == 0: q0 is exact (and -0 stays -0)\n"
  "  q1 = (PLAIN || s.corr) && fabsf(q0) < 0x1p90f ? q1 : q0; // (a NaN q0 makes q1 NaN too)\n"
  "  return tiny ? __fmul_rn(q1, 0x1p-64f) : q1;\n"
  "}\n"
  "#endif\n"
  "// C(x) / C(s), correctly rounded where the FP8 rounding or the mask can tell: as above in\n"
  "// f32; in f64 from the reciprocal where bq_div_by's window allows, else by division\n"
  "static __device__ __forceinline__ bq_c bq_f8_quotient(bq_c x, const bq_scale &s) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  bool ok;\n"
  "  const bq_c v = bq_div_by(x, s, ok);\n"
  "  return ok ? v : bq_div(x, s.s);\n"
  "#else\n"
  "  return bq_f8_quotient_f32<false>(x, s);\n"
  "#endif\n"
  "}\n"
  "#if BQ_FP8\n"
  "// ---- FP8 storage: docs/numerics.md, \"FP8 storage\" --------------------------------------\n"
  "// q = fp8(C(x) / C(s)): the IEEE quotient in C, then one round to nearest even into the\n"
  "// type, saturating to its largest finite value (NaN gives the code 0x7F). Zero points are\n"
  "// 0 (the host rejects others), so bq_zp only carries them through.\n"
  "#if BQ_IT == BQ_TYPE_E4M3\n"
  "#define BQ_F8_M 3          // mantissa bits\n"
  "#define BQ_F8_BIAS 7\n"
  "#define BQ_F8_MAX 448.0f\n"
  "#define BQ_F8_MAX_CODE 0x7E\n"
  "#else\n"
  "#define BQ_F8_M 2\n"
  "#define BQ_F8_BIAS 15\n"
  "#define BQ_F8_MAX 57344.0f\n"
  "#define BQ_F8_MAX_CODE 0x7B\n"
  "#endif\n"
  "// BQ_F8_HW: the FP8 conversion instructions are there (sm_89 and later, on the GPU, without\n"
  "// BQ_FP8_SOFT); the forms below without them are the bit-exact software ones.\n"
  "#if !defined(BQ_EMULATED) && !defined(BQ_FP8_SOFT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
  "#define BQ_F8_HW 1\n"
  "#else\n"
  "#define BQ_F8_HW 0\n"
  "#endif\n"
  "// f32 -> FP8 code, round to nearest even, satfinite. sm_89 and later have the instruction;\n"
  "// elsewhere (and in the CPU emulator, or with BQ_FP8_SOFT, which the tests use to check this\n"
  "// form on an H100) the same rounding from the bits: the significand keeps BQ_F8_M bits\n"
  "// above the type's quantum at x's exponent (its smallest normal exponent below that).\n"
  "// Not inlined: one call per element, where a copy in every element of every unrolled\n"
  "// access made these kernels the slowest to compile (up to a few times slower).\n"
  "static __device__ __noinline__ int bq_f8_soft(float v) {\n"
  "  const bq_u32 b = __float_as_uint(v);\n"
  "  const int sign = (int)((b >> 24) & 0x80u);\n"
  "  const bq_u32 a = b & 0x7fffffffu;\n"
  "  if (a > 0x7f800000u) return 0x7F;                              // NaN\n"
  "  if (__uint_as_float(a) >= BQ_F8_MAX) return sign | BQ_F8_MAX_CODE; // saturate (and +-inf)\n"
  "  const int e = (int)(a >> 23) - 127, emin = 1 - BQ_F8_BIAS;\n"
  "  if (e < emin - BQ_F8_M - 1) return sign; // below half the smallest subnormal: +-0\n"
  "  const bq_u32 m = (a & 0x7fffffu) | 0x800000u;\n"
  "  const int shift = 23 - BQ_F8_M + (e < emin ? emin - e : 0); // at most 24\n"
  "  const bq_u32 keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);\n"
  "  const bq_u32 up = (rem > half) | ((rem == half) & keep);\n"
  "  // keep counts quanta 2^(max(e, emin) - M); a carry into the next binade lands right\n"
  "  return sign | (int)(((bq_u32)((e < emin ? emin : e) + BQ_F8_BIAS - 1) << BQ_F8_M) + keep + up);\n"
  "}\n"
  "static __device__ __forceinline__ int bq_f8_of_f32(float v) {\n"
  "#if BQ_F8_HW\n"
  "  bq_u16 h;\n"
  "#if BQ_IT == BQ_TYPE_E4M3\n"
  "  asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(0.0f), \"f\"(v));\n"
  "#else\n"
  "  asm(\"cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(0.0f), \"f\"(v));\n"
  "#endif\n"
  "  return h & 0xFF; // the second operand lands in the low byte\n"
  "#else\n"
  "  return bq_f8_soft(v);\n"
  "#endif\n"
  "}\n"
  "// Two codes at once, lo's in the low byte (one instruction in hardware)\n"
  "static __device__ __forceinline__ bq_u32 bq_f8x2_of_f32(float lo, float hi) {\n"
  "#if BQ_F8_HW\n"
  "  bq_u16 h;\n"
  "#if BQ_IT == BQ_TYPE_E4M3\n"
  "  asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(hi), \"f\"(lo));\n"
  "#else\n"
  "  asm(\"cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(hi), \"f\"(lo));\n"
  "#endif\n"
  "  return h;\n"
  "#else\n"
  "  return (bq_u32)bq_f8_soft(lo) | (bq_u32)bq_f8_soft(hi) << 8;\n"
  "#endif\n"
  "}\n"
  "// C -> FP8 code, one rounding. An f64 value is first rounded to f32 by round to odd\n"
  "// (truncate, then set the last bit if anything was dropped), which keeps the FP8 rounding\n"
  "// single: f32 carries far more than the two extra bits that needs.\n"
  "static __device__ __forceinline__ int bq_f8_of_c(bq_c v) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  float f = __double2float_rn(v);\n"
  "  if ((double)f != v && v == v) {\n"
  "    bq_u32 u = __float_as_uint(f);\n"
  "    if (fabs((double)f) > fabs(v)) u -= 1; // rounded away from zero: step back (inf -> max)\n"
  "    f = __uint_as_float(u | 1u);\n"
  "  }\n"
  "  return bq_f8_of_f32(f);\n"
  "#else\n"
  "  return bq_f8_of_f32(v);\n"
  "#endif\n"
  "}\n"
  "// FP8 code -> C, exact. sm_89 and later convert in hardware (through f16, which holds every\n"
  "// FP8 value); elsewhere the magnitude's bits are placed in an f32 and scaled by a power of\n"
  "// two (subnormal codes become f32 subnormals first, which the product makes normal exactly).\n"
  "// The two forms differ only in a NaN's sign and payload, which the one caller's product\n"
  "// with the scale replaces by the canonical NaN.\n"
  "static __device__ __forceinline__ bq_c bq_f8_to_c(int c) {\n"
  "#if BQ_F8_HW\n"
  "  bq_u32 h2;\n"
  "  float f;\n"
  "#if BQ_IT == BQ_TYPE_E4M3\n"
  "  asm(\"cvt.rn.f16x2.e4m3x2 %0, %1;\" : \"=r\"(h2) : \"h\"((bq_u16)(c & 0xff)));\n"
  "#else\n"
  "  asm(\"cvt.rn.f16x2.e5m2x2 %0, %1;\" : \"=r\"(h2) : \"h\"((bq_u16)(c & 0xff)));\n"
  "#endif\n"
  "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((bq_u16)h2)); // the low byte's value is the low half\n"
  "  return (bq_c)f;\n"
  "#else\n"
  "  const bq_u32 mag = (bq_u32)c & 0x7fu;\n"
  "#if BQ_IT == BQ_TYPE_E4M3\n"
  "  float v = __fmul_rn(__uint_as_float(mag << 20), 0x1p120f);\n"
  "  v = mag == 0x7fu ? __uint_as_float(0x7fffffffu) : v;\n"
  "#else\n"
  "  float v = __fmul_rn(__uint_as_float(mag << 21), 0x1p112f);\n"
  "  v = mag >= 0x7cu ? (mag == 0x7cu ? __uint_as_float(0x7f800000u) : __uint_as_float(0x7fffffffu)) : v;\n"
  "#endif\n"
  "  return (bq_c)__uint_as_float(__float_as_uint(v) | (((bq_u32)c & 0x80u) << 24));\n"
  "#endif\n"
  "}\n"
  "// the quantize forms the affine and dynamic kernels call\n"
  "static __device__ __forceinline__ int bq_quantize_f8(bq_c x, const bq_scale &s) {\n"
  "  return bq_f8_of_c(bq_f8_quotient(x, s));\n"
  "}\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// the same where the caller knows s.plain\n"
  "static __device__ __forceinline__ int bq_quantize_f8_plain(float x, const bq_scale &s) {\n"
  "  return bq_f8_of_f32(bq_f8_quotient_f32<true>(x, s));\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ int bq_quantize_int(bq_c x, const bq_scale &s, const bq_zp &) {\n"
  "  return bq_quantize_f8(x, s);\n"
  "}\n"
  "static __device__ __forceinline__ int bq_quantize_bounded(bq_c x, const bq_scale &s, const bq_zp &) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  return bq_quantize_f8(x, s);\n"
  "#else\n"
  "  return bq_quantize_f8_plain(x, s); // the caller knows s.plain\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ int bq_quantize(bq_c x, const bq_scale &s, const bq_zp &) {\n"
  "  return bq_quantize_f8(x, s);\n"
  "}\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// the forms whose callers know s.plain\n"
  "static __device__ __forceinline__ int bq_quantize_sym(float x, const bq_scale &s) {\n"
  "  return bq_quantize_f8_plain(x, s);\n"
  "}\n"
  "template <bool GUARD> static __device__ __forceinline__ int bq_near_elem(float v, const bq_scale &s, int) {\n"
  "  return bq_quantize_f8_plain(v, s);\n"
  "}\n"
  "// PAIRS: two codes a conversion, already in their bytes' order (bq_affine_lean and\n"
  "// bq_affine_pair, where it ran faster; it slowed the kernels that take MN-major scales)\n"
  "template <bool GUARD, bool PAIRS = false, int N, typename E>\n"
  "static __device__ __forceinline__ void bq_quantize_near(const E (&x)[N], const bq_scale &s, int, bq_i (&y)[N]) {\n"
  "#if BQ_F8_HW\n"
  "  if (PAIRS && N % 2 == 0) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < N; j += 2) {\n"
  "      const bq_u32 h = bq_f8x2_of_f32(bq_f8_quotient_f32<true>(bq_to_c(x[j]), s),\n"
  "                                      bq_f8_quotient_f32<true>(bq_to_c(x[j + 1]), s));\n"
  "      y[j] = (bq_i)(h & 0xffu);\n"
  "      y[j + 1] = (bq_i)(h >> 8);\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < N; j++) y[j] = (bq_i)bq_quantize_f8_plain(bq_to_c(x[j]), s);\n"
  "}\n"
  "#endif\n"
  "// dequantize: C(q) * C(s), one rounding\n"
  "static __device__ __forceinline__ bq_c bq_dequantize(int q, bq_c s, const bq_zp &) {\n"
  "  return bq_mul(bq_f8_to_c(q), s);\n"
  "}\n"
  "// fake quantize: dequantize(quantize(x)), bit for bit\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  return bq_dequantize(bq_quantize_f8(x, s), s.s, z);\n"
  "}\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize_near(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  return bq_fake_quantize(x, s, z);\n"
  "#else\n"
  "  return bq_dequantize(bq_quantize_f8_plain(x, s), s.s, z); // s.plain\n"
  "#endif\n"
  "}\n"
  "// STE mask: |C(x) / C(s)| <= max, 0 for NaN\n"
  "static __device__ __forceinline__ bool bq_in_range(bq_c x, const bq_scale &s, const bq_zp &) {\n"
  "  return bq_abs(bq_f8_quotient(x, s)) <= (bq_c)BQ_F8_MAX;\n"
  "}\n"
  "static __device__ __forceinline__ bool bq_in_range_near(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  return bq_in_range(x, s, z);\n"
  "#else\n"
  "  return fabsf(bq_f8_quotient_f32<true>(x, s)) <= BQ_F8_MAX; // s.plain\n"
  "#endif\n"
  "}\n"
  "#else\n"
  "// quantize: q = sat(rne(x / s) + zp, qmin, qmax)\n"
  "// (The in-range value is computed for every element and then selected: the conversion\n"
  "// is the saturating intrinsic, defined for any input, so no branch is needed.)\n"
  "// The integer form, exact when z.iok: always so for a zero point inside the q-range, like\n"
  "// every zero point dynamic quantization computes.\n"
  "static __device__ __forceinline__ int bq_quantize_int(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const int r = bq_rne_int(bq_quotient(x, s)); // saturating, NaN -> 0\n"
  "  return min(max(r, z.ia), z.ib) + z.zp;\n"
  "}\n"
  "// bq_quotient for a plain scale (s.m == 1 and s.corr; then ss == s): q0 = x rcp with\n"
  "// Markstein's correction, without the bracket's products. GUARD keeps q0 where it is past\n"
  "// 2^100 (an overflowing product, an infinite x), where it only has to saturate or be NaN;\n"
  "// without it the caller knows |x / s| < 2^100 or x NaN.\n"
  "template <bool GUARD> static __device__ __forceinline__ bq_c bq_quotient_plain(bq_c x, const bq_scale &s) {\n"
  "  const bq_c q0 = bq_mul(x, s.rcp);\n"
  "  const bq_c q1 = bq_fma(bq_fma(-q0, s.ss, x), s.rcp, q0);\n"
  "  return !GUARD || bq_abs(q0) < (bq_c)0x1p100f ? q1 : q0;\n"
  "}\n"
  "// The same where the caller knows more: s.m == 1, s.corr, and |x / s| < 2^100 or x NaN\n"
  "// (dynamic quantization, whose scale bounds every finite element of its segment). Then\n"
  "// q0 needs neither the bracket's product nor the guard's compare and select: bit for bit\n"
  "// bq_quantize_int's result with three operations fewer per element.\n"
  "static __device__ __forceinline__ int bq_quantize_bounded(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const int r = bq_rne_int(bq_quotient_plain<false>(x, s)); // NaN -> 0\n"
  "  return min(max(r, z.ia), z.ib) + z.zp;\n"
  "}\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// And with zero point 0 (symmetric dynamic quantization) in f32: the conversion to the int\n"
  "// type rounds half to even, saturates to the type's range and maps NaN to 0 by itself, so\n"
  "// only q-range bounds inside that range need a clamp: four operations an element.\n"
  "static __device__ __forceinline__ int bq_quantize_sym(float x, const bq_scale &s) {\n"
  "  int r = bq_cvt_sat(bq_quotient_plain<false>(x, s));\n"
  "#if BQ_QMIN > BQ_I_MIN\n"
  "  r = max(r, BQ_QMIN);\n"
  "#endif\n"
  "#if BQ_QMAX < BQ_I_MAX\n"
  "  r = min(r, BQ_QMAX);\n"
  "#endif\n"
  "  return r;\n"
  "}\n"
  "// Quantize, the usual case in f32: a scale that needs no power-of-two bracket (bq_scale.plain)\n"
  "// and a zero point of magnitude up to BQ_NEAR_ZP (bq_zp.near); N elements (a multiple of\n"
  "// 4) into N / 4 packed words, bit for bit bq_quantize_int's results. rne(x / s) is\n"
  "// saturated to 16 bits, which cannot change a result for such a zero point: past 2^15 the\n"
  "// sum stays beyond the q-range on the same side. The guard keeps an overflowing product\n"
  "// (x / s past 2^100, an infinite x) from turning the correction into NaN; that q0 only\n"
  "// has to saturate. (GUARD false: the caller knows |x / s| < 2^100 or x NaN, as for\n"
  "// bq_quantize_bounded.) Per element: a product, two FMAs (the second predicated), a\n"
  "// compare, the 16-bit conversion, the zero point's add and half of a saturating pack;\n"
  "// bq_quantize_int takes 11 operations and the compiler's byte packing.\n"
  "// One element, before the pack's saturation to the int type:\n"
  "template <bool GUARD> static __device__ __forceinline__ int bq_near_elem(float v, const bq_scale &s, int zp) {\n"
  "  int t = bq_cvt_s16(bq_quotient_plain<GUARD>(v, s)) + zp;\n"
  "#if BQ_QMIN > BQ_I_MIN\n"
  "  t = max(t, BQ_QMIN);\n"
  "#endif\n"
  "#if BQ_QMAX < BQ_I_MAX\n"
  "  t = min(t, BQ_QMAX);\n"
  "#endif\n"
  "  return t;\n"
  "}\n"
  "// (x: T values, or values already in C)\n"
  "static __device__ __forceinline__ float bq_widen(float v) { return v; }\n"
  "#if BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16\n"
  "static __device__ __forceinline__ float bq_widen(bq_u16 v) { return bq_to_c(v); }\n"
  "#endif\n"
  "template <bool GUARD, bool PAIRS = false, int N, typename E>\n"
  "static __device__ __forceinline__ void bq_quantize_near(const E (&x)[N], const bq_scale &s, int zp, bq_i (&y)[N]) {\n"
  "  int t[N];\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < N; j++) t[j] = bq_near_elem<GUARD>(bq_widen(x[j]), s, zp);\n"
  "#pragma unroll // (y is a chunk's elements: whole aligned words)\n"
  "  for (int j = 0; j < N; j += 4) *(bq_u32 *)&y[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);\n"
  "}\n"
  "#endif\n"
  "// Quantize backward where s.plain: the STE mask, bit for bit bq_in_range's without the\n"
  "// power-of-two products\n"
  "static __device__ __forceinline__ bool bq_in_range_near(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const bq_c r = bq_rint(bq_quotient_plain<true>(x, s)); // NaN compares false\n"
  "  return r >= z.lo && r <= z.hi;\n"
  "}\n"
  "static __device__ __forceinline__ int bq_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  if (z.iok) return bq_quantize_int(x, s, z); // uniform across a tensor, row or group\n"
  "  const bq_c r = bq_rounded_quotient(x, s);\n"
  "  const int inside = z.base + bq_to_int_rz(bq_sub(r, z.lo));\n"
  "  const int below = r < z.lo ? BQ_QMIN : inside;\n"
  "  return r > z.hi ? BQ_QMAX : below;\n"
  "}\n"
  "// dequantize: (q - zp) exact in integer, one rounding to C, one product in C.\n"
  "static __device__ __forceinline__ bq_c bq_dequantize(int q, bq_c s, const bq_zp &z) {\n"
  "  return bq_mul(bq_sub((bq_c)(q - z.zp_lo), z.zp_hi), s);\n"
  "}\n"
  "// fake quantize: dequantize(quantize(x)), bit for bit\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const bq_c r = bq_add(bq_rounded_quotient(x, s), (bq_c)0); // + 0 turns -0 into the integer 0\n"
  "  const bq_c below = r < z.lo ? z.a : r;\n"
  "  return bq_mul(r > z.hi ? z.b : below, s.s);\n"
  "}\n"
  "// The same where s.plain (no power-of-two bracket) and the q-range's ends are exact in C\n"
  "// (z.lo == z.a, z.hi == z.b: every f64 zero point, |zp| < 2^24 in f32): bit for bit, without\n"
  "// the bracket's product and the checks it needs\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize_near(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const bq_c v = bq_quotient_plain<true>(x, s);\n"
  "  const bq_c r = bq_add(bq_rint(v == v ? v : (bq_c)0), (bq_c)0);\n"
  "  const bq_c below = r < z.lo ? z.lo : r;\n"
  "  return bq_mul(r > z.hi ? z.hi : below, s.s);\n"
  "}\n"
  "// STE mask: qmin <= rne(x / s) + zp <= qmax, before saturation; 0 for NaN.\n"
  "static __device__ __forceinline__ bool bq_in_range(bq_c x, const bq_scale &s, const bq_zp &z) {\n"
  "  const bq_c r = bq_rint(bq_quotient(x, s)); // NaN compares false\n"
  "  return r >= z.lo && r <= z.hi;\n"
  "}\n"
  "\n"
  "#endif // BQ_FP8\n"
  "\n"
  "// ---- the STE mask as an interval ----------------------------------------------------------\n"
  "// Where s.plain, bq_in_range_near(x) holds exactly on one interval [lo, hi] of x: it asks the\n"
  "// quotient RN(x / s), monotone in x, to round into a range. Its ends are found once per\n"
  "// scale, from the range's ends times s, by asking the mask itself an ulp at a time either\n"
  "// way; an element then takes two comparisons (NaN fails both). ok is false where s is not\n"
  "// plain or a search does not settle in its steps: there the caller keeps the mask itself.\n"
  "struct bq_mask_iv {\n"
  "  float lo, hi;\n"
  "  bool ok;\n"
  "};\n"
  "static __device__ __forceinline__ bq_mask_iv bq_mask_none() { return bq_mask_iv{0.0f, 0.0f, false}; }\n"
  "#if BQ_FT != BQ_TYPE_F64\n"
  "// the float next to x (finite) up (D = 1) or down (D = -1); past the largest finite, infinity\n"
  "template <int D> static __device__ __forceinline__ float bq_float_step(float x) {\n"
  "  const int i = __float_as_int(x);\n"
  "  return x == 0.0f ? (D > 0 ? 0x1p-149f : -0x1p-149f) : __int_as_float(i + (i < 0 ? -D : D));\n"
  "}\n"
  "// The interval's end toward D (1: its largest x, -1: its smallest) from a guess g near it\n"
  "template <int D>\n"
  "static __device__ __forceinline__ float bq_mask_end(float g, const bq_scale &s, const bq_zp &z, bool &ok) {\n"
  "  float x = fminf(fmaxf(g, -0x1.fffffep127f), 0x1.fffffep127f);\n"
  "  bool in = bq_in_range_near(x, s, z), done = in;\n"
  "#pragma unroll 1\n"
  "  for (int k = 0; k < 8 && !in; k++) { // outside: back into the interval, whose end it then is\n"
  "    x = bq_float_step<-D>(x);\n"
  "    in = bq_in_range_near(x, s, z);\n"
  "  }\n"
  "  if (done) { // inside: out to the end\n"
  "    done = false;\n"
  "#pragma unroll 1\n"
  "    for (int k = 0; k < 8 && !done; k++) {\n"
  "      const float n = bq_float_step<D>(x);\n"
  "      done = !bq_in_range_near(n, s, z);\n"
  "      if (!done) x = n;\n"
  "    }\n"
  "  } else {\n"
  "    done = in;\n"
  "  }\n"
  "  ok &= done;\n"
  "  return x;\n"
  "}\n"
  "static __device__ __forceinline__ bq_mask_iv bq_mask_iv_of(const bq_scale &s, const bq_zp &z) {\n"
  "  bq_mask_iv m = bq_mask_none();\n"
  "  if (s.plain) {\n"
  "    m.ok = true;\n"
  "#if BQ_FP8\n"
  "    m.hi = bq_mask_end<1>(__fmul_rn(BQ_F8_MAX, fabsf(s.s)), s, z, m.ok);\n"
  "    m.lo = -m.hi; // the mask is even in x\n"
  "#else\n"
  "    const float a = __fmul_rn(z.hi + 0.5f, s.s), b = __fmul_rn(z.lo - 0.5f, s.s);\n"
  "    m.hi = bq_mask_end<1>(s.s > 0.0f ? a : b, s, z, m.ok);\n"
  "    m.lo = bq_mask_end<-1>(s.s > 0.0f ? b : a, s, z, m.ok);\n"
  "#endif\n"
  "  }\n"
  "  return m;\n"
  "}\n"
  "#endif\n"
  "\n"
  "// 64-bit division, out of line: it is the rare path (indices past 2^31), and one copy of\n"
  "// its code keeps the compile fast.\n"
  "static __device__ __noinline__ bq_i64 bq_div64(bq_i64 a, bq_i64 b) { return a / b; }\n"
  "\n"
  "static __device__ __forceinline__ bq_u32 bq_div_u32(bq_u32 n, bq_fastdiv f) {\n"
  "  bq_u32 t = __umulhi(n, f.magic);\n"
  "  return (bq_u32)(((bq_u64)t + n) >> f.shift);\n"
  "}\n"
  "// The same for n < 2^31, where t + n stays below 2^32\n"
  "static __device__ __forceinline__ bq_u32 bq_div_u31(bq_u32 n, bq_fastdiv f) {\n"
  "  return (__umulhi(n, f.magic) + n) >> f.shift;\n"
  "}\n"
  "\n"
  "// ---- vector access -------------------------------------------------------------------\n"
  "// A chunk is a few elements of one stream held in registers (a power of two bytes). It\n"
  "// moves with the widest access (16, 8, 4, 2 or 1 bytes) that both its size and the\n"
  "// stream's alignment allow, so any pointer, stride and length stays on the vector path.\n"
  "template <typename E, int N> struct alignas(sizeof(E) * N) bq_chunk {\n"
  "  E e[N];\n"
  "};\n"
  "\n"
  "static __device__ __forceinline__ int bq_width(const void *p) {\n"
  "  bq_u32 a = (bq_u32)(bq_u64)p & 15u;\n"
  "  return a == 0 ? 16 : (int)(a & (0u - a));\n"
  "}\n"
  "\n"
  "// Cache policy: 16-byte accesses stream (ld.cs / st.cs: evict first), narrower ones take the\n"
  "// default. STREAM8 streams 8-byte loads too; KEEP16 stores 16-byte accesses with the default\n"
  "// policy, for an output its consumer reads next (bq_affine_lean's dequantize, where the\n"
  "// wide stream is the output).\n"
  "// (The CPU emulator checks each access's alignment, which a GPU faults on: BQ_EMU_ALIGNED.)\n"
  "#ifdef BQ_EMULATED\n"
  "#define BQ_EMU_ALIGNED(p, n) emu_check_aligned(p, n, \"vector access\")\n"
  "#else\n"
  "#define BQ_EMU_ALIGNED(p, n)\n"
  "#endif\n"
  "template <bool STREAM8 = false, typename C>\n"
  "static __device__ __forceinline__ void bq_load(C &dst, const void *src, int w) {\n"
  "  w = w < (int)sizeof(C) ? w : (int)sizeof(C);\n"
  "#define BQ_LOAD_AS(W)                                                                      \\\n"
  "  {                                                                                        \\\n"
  "    const W *s = (const W *)src;                                                           \\\n"
  "    W *d = (W *)&dst;                                                                      \\\n"
  "    BQ_EMU_ALIGNED(s, sizeof(W));                                                          \\\n"
  "    _Pragma(\"unroll\") for (int i = 0; i < (int)(sizeof(C) / sizeof(W)); i++) d[i] = s[i];  \\\n"
  "  }\n"
  "  if (w == 16) {\n"
  "    const uint4 *s = (const uint4 *)src;\n"
  "    uint4 *d = (uint4 *)&dst;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < (int)(sizeof(C) / 16); i++) d[i] = __ldcs(s + i);\n"
  "  } else if (w == 8 && STREAM8) {\n"
  "    const uint2 *s = (const uint2 *)src;\n"
  "    uint2 *d = (uint2 *)&dst;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < (int)(sizeof(C) / 8); i++) d[i] = __ldcs(s + i);\n"
  "  } else if (w == 8) BQ_LOAD_AS(uint2)\n"
  "  else if (w == 4) BQ_LOAD_AS(bq_u32)\n"
  "  else if (w == 2) BQ_LOAD_AS(bq_u16)\n"
  "  else BQ_LOAD_AS(bq_u8)\n"
  "#undef BQ_LOAD_AS\n"
  "}\n"
  "\n"
  "template <bool KEEP16 = false, typename C>\n"
  "static __device__ __forceinline__ void bq_store(void *dst, const C &src, int w) {\n"
  "  w = w < (int)sizeof(C) ? w : (int)sizeof(C);\n"
  "#define BQ_STORE_AS(W)                                                                     \\\n"
  "  {                                                                                        \\\n"
  "    W *d = (W *)dst;                                                                       \\\n"
  "    const W *s = (const W *)&src;                                                          \\\n"
  "    BQ_EMU_ALIGNED(d, sizeof(W));                                                          \\\n"
  "    _Pragma(\"unroll\") for (int i = 0; i < (int)(sizeof(C) / sizeof(W)); i++) d[i] = s[i];  \\\n"
  "  }\n"
  "  if (w == 16 && KEEP16) BQ_STORE_AS(uint4)\n"
  "  else if (w == 16) {\n"
  "    uint4 *d = (uint4 *)dst;\n"
  "    const uint4 *s = (const uint4 *)&src;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < (int)(sizeof(C) / 16); i++) __stcs(d + i, s[i]);\n"
  "  } else if (w == 8) BQ_STORE_AS(uint2)\n"
  "  else if (w == 4) BQ_STORE_AS(bq_u32)\n"
  "  else if (w == 2) BQ_STORE_AS(bq_u16)\n"
  "  else BQ_STORE_AS(bq_u8)\n"
  "#undef BQ_STORE_AS\n"
  "}\n"
  "\n"
  "// Elements before the first 16-byte boundary of p (at most n).\n"
  "template <typename E> static __device__ __forceinline__ bq_i64 bq_prologue(const E *p, bq_i64 n) {\n"
  "  bq_i64 k = (bq_i64)(((16u - ((bq_u32)(bq_u64)p & 15u)) & 15u) / sizeof(E));\n"
  "  return k < n ? k : n;\n"
  "}\n"
  "\n"
  "// C -> scale element type, rounding to nearest even. UE8M0 takes a power of two (dynamic\n"
  "// quantization's with pow2_scales) and stores its exponent, clamped to [2^-127, 2^127];\n"
  "// inf and NaN store 255 (NaN).\n"
  "static __device__ __forceinline__ bq_s bq_scale_from_c(bq_c v) {\n"
  "#if BQ_ST == BQ_TYPE_UE8M0\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const int k = (int)((__double_as_longlong(v) >> 52) & 0x7ff) - 1023; // v > 0: its exponent (subnormal: -1023)\n"
  "  const bool special = !(v <= 0x1.fffffffffffffp1023);\n"
  "#else\n"
  "  const int k = (int)((__float_as_uint(v) >> 23) & 0xff) - 127;\n"
  "  const bool special = !(v <= 0x1.fffffep127f);\n"
  "#endif\n"
  "  const int e = k + 127 < 0 ? 0 : (k + 127 > 254 ? 254 : k + 127);\n"
  "  return (bq_s)(special ? 255 : e);\n"
  "#elif BQ_ST == BQ_TYPE_F32 && BQ_FT == BQ_TYPE_F64\n"
  "  return __double2float_rn(v);\n"
  "#elif BQ_ST == BQ_TYPE_F32\n"
  "  return v;\n"
  "#else\n"
  "  return bq_from_c(v);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// ---- teams ----------------------------------------------------------------------------\n"
  "// A team is tpr threads working on one row: a warp (tpr == 32; a block holds several,\n"
  "// independent of each other) or a whole block (tpr >= 64). So a team synchronizes with\n"
  "// __syncwarp or __syncthreads, and blocks of different rows never wait for each other.\n"
  "static __device__ __forceinline__ void bq_team_sync(int tpr) {\n"
  "  if (tpr > 32) __syncthreads();\n"
  "  else __syncwarp();\n"
  "}\n"
  "\n"
  "// ---- dynamic shared memory and cp.async ------------------------------------------------\n"
  "// 16-byte copies from global to shared memory through L2 (cp.async.cg, sm_80 and up),\n"
  "// committed and waited on by group: the linear layers' pipelines and the fused family's\n"
  "// activation table and staged rows. (The CPU emulator supplies host versions.)\n"
  "#ifndef BQ_EMULATED\n"
  "#define BQ_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]\n"
  "static __device__ __forceinline__ void bq_cp_async16(bq_u32 dst, const void *src, int bytes) {\n"
  "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(bytes) : \"memory\");\n"
  "}\n"
  "// ... and 4-byte ones through L1 (cp.async.ca: the sizes below 16), a scale each\n"
  "static __device__ __forceinline__ void bq_cp_async4(bq_u32 dst, const void *src, int bytes) {\n"
  "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(bytes) : \"memory\");\n"
  "}\n"
  "static __device__ __forceinline__ void bq_cp_commit() { asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\"); }\n"
  "template <int N> static __device__ __forceinline__ void bq_cp_wait() {\n"
  "  asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(N) : \"memory\");\n"
  "}\n"
  "static __device__ __forceinline__ bq_u32 bq_smem_addr(const void *p) { return (bq_u32)__cvta_generic_to_shared(p); }\n"
  "#endif\n"
  "\n"
  "// ---- programmatic dependent launch (sm_90 and up) ------------------------------------\n"
  "// QuantizedLinear's weight streaming is launched with programmatic stream serialization\n"
  "// right after its activations' quantization: bq_launch_dependents (in that kernel) lets it\n"
  "// start at once and stream weights, and bq_wait_prior_grid (in the GEMV, before its first\n"
  "// read of anything the quantization writes) waits until that grid has finished and its\n"
  "// writes are visible. Both are no-ops in a grid launched the ordinary way, below sm_90,\n"
  "// and in the CPU emulator.\n"
  "static __device__ __forceinline__ void bq_launch_dependents() {\n"
  "#if !defined(BQ_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
  "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ void bq_wait_prior_grid() {\n"
  "#if !defined(BQ_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
  "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
  "#endif\n"
  "}\n"
  "\n"
  "// ---- dynamic scales: the dynamic and fused families (their preludes define BQ_ASYM) ----\n"
  "#ifdef BQ_ASYM\n"
  "#define BQ_VEC ((int)(16 / sizeof(bq_t))) // elements per access\n"
  "typedef bq_chunk<bq_t, BQ_VEC> bq_xchunk;\n"
  "typedef bq_chunk<bq_i, BQ_VEC> bq_qchunk;\n"
  "\n"
  "// The reduction: symmetric keeps a = max |x|; asymmetric keeps a = min(0, min x) and\n"
  "// b = max(0, max x). fmin/fmax drop NaN operands, so NaN elements are ignored.\n"
  "struct bq_red {\n"
  "  bq_c a, b;\n"
  "};\n"
  "static __device__ __forceinline__ bq_red bq_red_init() {\n"
  "  bq_red r;\n"
  "  r.a = 0;\n"
  "  r.b = 0;\n"
  "  return r;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_red_add(bq_red &r, bq_c x) {\n"
  "#if BQ_ASYM\n"
  "  r.a = bq_min(r.a, x);\n"
  "  r.b = bq_max(r.b, x);\n"
  "#else\n"
  "  r.a = bq_max(r.a, bq_abs(x));\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_red bq_red_merge(bq_red u, bq_red v) {\n"
  "#if BQ_ASYM\n"
  "  u.a = bq_min(u.a, v.a);\n"
  "  u.b = bq_max(u.b, v.b);\n"
  "#else\n"
  "  u.a = bq_max(u.a, v.a);\n"
  "#endif\n"
  "  return u;\n"
  "}\n"
  "// lane l's reduction (XOR: lane ^ l's); every lane of the warp takes part\n"
  "template <bool XOR = true>\n"
  "static __device__ __forceinline__ bq_red bq_red_shfl(bq_red r, int l) {\n"
  "  bq_red o;\n"
  "  o.a = XOR ? __shfl_xor_sync(0xffffffffu, r.a, l) : __shfl_sync(0xffffffffu, r.a, l);\n"
  "#if BQ_ASYM\n"
  "  o.b = XOR ? __shfl_xor_sync(0xffffffffu, r.b, l) : __shfl_sync(0xffffffffu, r.b, l);\n"
  "#else\n"
  "  o.b = 0; // unused\n"
  "#endif\n"
  "  return o;\n"
  "}\n"
  "// reduce over aligned groups of `width` lanes (a power of two <= 32, uniform across the\n"
  "// warp): the butterfly's merges at offsets width / 2, ..., 1, in that order, unrolled under\n"
  "// uniform guards rather than looped; N reductions at once, each offset's shuffles in flight\n"
  "// together\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_red_lanes_n(bq_red (&r)[N], int width) {\n"
  "#pragma unroll\n"
  "  for (int off = 16; off > 0; off >>= 1)\n"
  "    if (off < width) {\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < N; i++) r[i] = bq_red_merge(r[i], bq_red_shfl(r[i], off));\n"
  "    }\n"
  "}\n"
  "static __device__ __forceinline__ bq_red bq_red_lanes(bq_red r, int width) {\n"
  "  bq_red a[1] = {r};\n"
  "  bq_red_lanes_n<1>(a, width);\n"
  "  return a[0];\n"
  "}\n"
  "\n"
  "// The scale (as stored) and zero point from a reduction: docs/numerics.md, \"Dynamic quantization\".\n"
  "struct bq_qp {\n"
  "  bq_s stored;\n"
  "  bq_scale s;\n"
  "  int zp;\n"
  "  bq_zp z;\n"
  "  bool bounded; // the scale is normal (m == 1, finite, nonzero): bq_quantize_bounded applies\n"
  "#if BQ_FP8\n"
  "  bool lean; // bounded and the scale at least 2^-80: bq_f8_lean_quotient applies\n"
  "#endif\n"
  "};\n"
  "#ifndef BQ_POW2\n"
  "#define BQ_POW2 0\n"
  "#endif\n"
  "#if BQ_FP8\n"
  "#define BQ_SYM_MAX BQ_F8_MAX\n"
  "#else\n"
  "#define BQ_SYM_MAX BQ_QMAX\n"
  "#endif\n"
  "// The smallest power of two >= s (s >= 0, or inf, which stays): s itself, or s with its\n"
  "// mantissa cleared and its exponent raised (past the largest finite: inf). Subnormals are\n"
  "// taken up into the normal range first and down after, both exact; 0 gives the smallest\n"
  "// positive power of two.\n"
  "static __device__ __forceinline__ bq_c bq_pow2_up(bq_c s) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const bool sub = s < 0x1p-1022;\n"
  "  const double t = sub ? __dmul_rn(s, 0x1p200) : s;\n"
  "  long long u = __double_as_longlong(t);\n"
  "  if ((u & 0xfffffffffffffLL) && t <= 0x1.fffffffffffffp1023) u = (u & ~0xfffffffffffffLL) + (1LL << 52);\n"
  "  const double p = __longlong_as_double(u);\n"
  "  return s == 0.0 ? 0x1p-1074 : (sub ? __dmul_rn(p, 0x1p-200) : p);\n"
  "#else\n"
  "  const bool sub = s < 0x1p-126f;\n"
  "  const float t = sub ? __fmul_rn(s, 0x1p64f) : s;\n"
  "  bq_u32 u = __float_as_uint(t);\n"
  "  if ((u & 0x7fffffu) && t <= 0x1.fffffep127f) u = (u & ~0x7fffffu) + (1u << 23);\n"
  "  const float p = __uint_as_float(u);\n"
  "  return s == 0.0f ? 0x1p-149f : (sub ? __fmul_rn(p, 0x1p-64f) : p);\n"
  "#endif\n"
  "}\n"
  "// bound: args.amax_bound in C (0: none), symmetric plans only\n"
  "static __device__ __forceinline__ bq_qp bq_params_of(bq_red r, bq_c bound = 0) {\n"
  "  bq_qp q;\n"
  "#if !BQ_ASYM\n"
  "  const bool capped = bound > (bq_c)0 && !(r.a <= bound); // (an inf amax is capped too)\n"
  "  if (capped) r.a = bound;\n"
  "#else\n"
  "  const bool capped = false;\n"
  "#endif\n"
  "#if BQ_ASYM\n"
  "  bq_c s = r.a == r.b ? (bq_c)1 : bq_div(bq_sub(r.b, r.a), (bq_c)(BQ_QMAX - BQ_QMIN));\n"
  "  if (BQ_POW2) s = bq_pow2_up(s);\n"
  "  q.stored = bq_scale_from_c(s);\n"
  "  const bq_c sc = bq_scale_to_c(q.stored);\n"
  "  bq_i64 z = (bq_i64)BQ_QMIN - bq_round(bq_div(r.a, sc));\n"
  "  q.zp = (int)(z < BQ_QMIN ? BQ_QMIN : (z > BQ_QMAX ? BQ_QMAX : z));\n"
  "#else // symmetric: amax over the type's largest value (FP8's largest finite, or qmax)\n"
  "  bq_c s = r.a == (bq_c)0 ? (bq_c)1 : bq_div(r.a, (bq_c)BQ_SYM_MAX);\n"
  "  if (BQ_POW2) s = bq_pow2_up(s);\n"
  "  q.stored = bq_scale_from_c(s);\n"
  "  const bq_c sc = bq_scale_to_c(q.stored);\n"
  "  q.zp = 0;\n"
  "#endif\n"
  "  q.s = bq_scale_of(sc);\n"
  "  q.z = bq_zp_of(q.zp);\n"
  "  // Every finite element x of the segment has |x| <= max(|a|, |b|), so |x / s| stays within\n"
  "  // a few units of the q-range's width (the stored scale is s rounded once, or up to a power\n"
  "  // of two); an infinite element makes the scale infinite or NaN, which fails corr. A\n"
  "  // segment whose amax the bound cut has elements beyond it: the general forms.\n"
  "  q.bounded = q.s.m == (bq_c)1 && q.s.corr && !capped;\n"
  "#if BQ_ST == BQ_TYPE_UE8M0\n"
  "  q.bounded = q.bounded && !(q.s.s < s); // a power of two past 2^127, stored as 2^127\n"
  "#endif\n"
  "#if BQ_FP8\n"
  "  q.lean = q.bounded && BQ_FT != BQ_TYPE_F64 && sc >= (bq_c)0x1p-80;\n"
  "#endif\n"
  "  return q;\n"
  "}\n"
  "\n"
  "#if BQ_FP8 && BQ_FT != BQ_TYPE_F64\n"
  "// x / s for the FP8 rounding, in a segment whose scale is lean: normal, at least 2^-80, and\n"
  "// over elements |x| <= amax (not capped). Every quotient then stays near the FP8 range, so\n"
  "// Markstein's correction needs neither bq_f8_quotient_f32's guard nor its rescaling of\n"
  "// tiny x: |x| < 2^-96 gives |x / s| < 2^-16, below E4M3's codes and at most E5M2's\n"
  "// smallest subnormal, where the residual (no bit of it below 2^-149) and so the correction\n"
  "// stay exact. The residual is taken negated, t = q0 s - x, and subtracted: for s > 0 the\n"
  "// result is the quotient of |x| with x's sign, -0 included (q0 + (x - q0 s) would turn -0\n"
  "// into +0; an exactly zero t is absorbed by q0), with no instruction to put the sign back.\n"
  "// A power-of-two scale divides exactly: x times its reciprocal.\n"
  "static __device__ __forceinline__ float bq_f8_lean_quotient(float x, const bq_scale &s) {\n"
  "#if BQ_POW2\n"
  "  return __fmul_rn(x, s.rcp);\n"
  "#else\n"
  "  const float q0 = __fmul_rn(x, s.rcp);\n"
  "  return __fmaf_rn(-__fmaf_rn(q0, s.ss, -x), s.rcp, q0);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "// (bq_params_of clamps the zero point into the q-range, so bq_quantize_int is exact here)\n"
  "// A chunk's values, already in C (c: T values widened)\n"
  "static __device__ __forceinline__ void bq_quantize_vals(const bq_c (&c)[BQ_VEC], bq_qchunk &o, const bq_qp &q) {\n"
  "  if (q.bounded) { // uniform across the segment\n"
  "#if BQ_FP8 || BQ_FT == BQ_TYPE_F64\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_bounded(c[j], q.s, q.z);\n"
  "#elif !BQ_ASYM && !defined(BQ_EMULATED) && BQ_IT == BQ_TYPE_S8 && BQ_QMIN == BQ_I_MIN && BQ_QMAX == BQ_I_MAX\n"
  "    // s8's whole range: rne to int32 (saturating, NaN -> 0), then four a word saturated to\n"
  "    // s8 by bq_pack4, bq_quantize_sym's codes with a byte permute fewer per four elements\n"
  "    int t[BQ_VEC];\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) t[j] = __float2int_rn(bq_quotient_plain<false>(c[j], q.s));\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j += 4) *(bq_u32 *)&o.e[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);\n"
  "#elif !BQ_ASYM\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_sym(c[j], q.s);\n"
  "#else\n"
  "    bq_quantize_near<false>(c, q.s, q.zp, o.e); // the zero point lies in the q-range\n"
  "#endif\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_int(c[j], q.s, q.z);\n"
  "  }\n"
  "}\n"
  "// The same from the chunk's T values (the dynamic kernels' form: its machine code differs\n"
  "// from widening first and calling bq_quantize_vals)\n"
  "static __device__ __forceinline__ void bq_quantize_chunk(const bq_xchunk &a, bq_qchunk &o, bq_qp q) {\n"
  "  if (q.bounded) {\n"
  "#if BQ_FP8 || BQ_FT == BQ_TYPE_F64\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_bounded(bq_to_c(a.e[j]), q.s, q.z);\n"
  "#elif !BQ_ASYM\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_sym(bq_to_c(a.e[j]), q.s);\n"
  "#else\n"
  "    bq_quantize_near<false>(a.e, q.s, q.zp, o.e);\n"
  "#endif\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_int(bq_to_c(a.e[j]), q.s, q.z);\n"
  "  }\n"
  "}\n"
  "// FP8 segments with a lean scale (bq_is_lean, uniform across a segment) take\n"
  "// bq_quantize_chunk_as<true>: the lean quotient, two codes a conversion. Callers pick the\n"
  "// form once for a whole batch of chunks, so that the chunks' arithmetic interleaves.\n"
  "#define BQ_LEAN (BQ_FP8 && BQ_FT != BQ_TYPE_F64)\n"
  "static __device__ __forceinline__ bool bq_is_lean(const bq_qp &q) {\n"
  "#if BQ_LEAN\n"
  "  return q.lean;\n"
  "#else\n"
  "  (void)q;\n"
  "  return false;\n"
  "#endif\n"
  "}\n"
  "template <bool LEAN>\n"
  "static __device__ __forceinline__ void bq_quantize_chunk_as(const bq_xchunk &a, bq_qchunk &o, const bq_qp &q) {\n"
  "#if BQ_LEAN\n"
  "  if (LEAN) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j += 4) { // four codes a word (BQ_VEC: 4 or 8)\n"
  "      const bq_u32 lo = bq_f8x2_of_f32(bq_f8_lean_quotient(bq_to_c(a.e[j]), q.s),\n"
  "                                       bq_f8_lean_quotient(bq_to_c(a.e[j + 1]), q.s));\n"
  "      const bq_u32 hi = bq_f8x2_of_f32(bq_f8_lean_quotient(bq_to_c(a.e[j + 2]), q.s),\n"
  "                                       bq_f8_lean_quotient(bq_to_c(a.e[j + 3]), q.s));\n"
  "      *(bq_u32 *)&o.e[j] = (lo & 0xFFFFu) | hi << 16;\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  bq_quantize_chunk(a, o, q);\n"
  "}\n"
  "// the form picked for this chunk alone (uniform across the segment all the same)\n"
  "static __device__ __forceinline__ void bq_quantize_chunk_any(const bq_xchunk &a, bq_qchunk &o, const bq_qp &q) {\n"
  "  if (bq_is_lean(q)) bq_quantize_chunk_as<true>(a, o, q);\n"
  "  else bq_quantize_chunk_as<false>(a, o, q);\n"
  "}\n"
  "static __device__ __forceinline__ void bq_reduce_chunk(const bq_xchunk &a, bq_red &r) {\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) bq_red_add(r, bq_to_c(a.e[j]));\n"
  "}\n"
  "// Symmetric 16-bit data may keep max |x| on the packed pairs of their words (BQ_HMAX2:\n"
  "// bq_hmax2_chunk, then bq_hmax2_fold), one max.xorsign.abs a pair (max(|u|, |v|),\n"
  "// its sign the operands' XOR, cleared once at the end; NaN operands dropped, as bq_max\n"
  "// drops them), and widen only the two halves of the result: exact, as the halves' maximum\n"
  "// is one of the elements. (Row-major UE8M0 scales keep the element form, which ran faster\n"
  "// there on the H200.)\n"
  "#define BQ_HMAX2 (!BQ_ASYM && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16) && \\\n"
  "                  !(BQ_ST == BQ_TYPE_UE8M0 && BQ_SL == BQ_SL_ROWS))\n"
  "#if BQ_HMAX2 && !defined(BQ_EMULATED)\n"
  "static __device__ __forceinline__ bq_u32 bq_hmax2_xabs(bq_u32 u, bq_u32 v) {\n"
  "  bq_u32 d;\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 860\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "  asm(\"max.xorsign.abs.bf16x2 %0, %1, %2;\" : \"=r\"(d) : \"r\"(u), \"r\"(v));\n"
  "#else\n"
  "  asm(\"max.xorsign.abs.f16x2 %0, %1, %2;\" : \"=r\"(d) : \"r\"(u), \"r\"(v));\n"
  "#endif\n"
  "#else // sm_80: the magnitudes' maximum (its sign clear: the XOR's is cleared anyway)\n"
  "  u &= 0x7FFF7FFFu;\n"
  "  v &= 0x7FFF7FFFu;\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "  asm(\"max.bf16x2 %0, %1, %2;\" : \"=r\"(d) : \"r\"(u), \"r\"(v));\n"
  "#else\n"
  "  asm(\"max.f16x2 %0, %1, %2;\" : \"=r\"(d) : \"r\"(u), \"r\"(v));\n"
  "#endif\n"
  "#endif\n"
  "  return d;\n"
  "}\n"
  "#endif\n"
  "#if BQ_HMAX2\n"
  "// the pairs' accumulator m (from 0: +0 pairs are never NaN, so every NaN operand meets a\n"
  "// number) after chunk a; then folded into r\n"
  "static __device__ __forceinline__ bq_u32 bq_hmax2_chunk(bq_u32 m, const bq_xchunk &a) {\n"
  "  const bq_u32 *w = (const bq_u32 *)a.e;\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC / 2; j++) m = bq_hmax2_xabs(m, w[j]);\n"
  "  return m;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_hmax2_fold(bq_red &r, bq_u32 m) {\n"
  "  m &= 0x7FFF7FFFu;\n"
  "  r.a = bq_max(r.a, bq_max(bq_to_c((bq_t)(m & 0xFFFFu)), bq_to_c((bq_t)(m >> 16))));\n"
  "}\n"
  "#endif\n"
  "// Reduces the chunks a[i], i < n, into r where ok: on packed pairs where BQ_HMAX2 allows.\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_reduce_chunks(const bq_xchunk (&a)[N], bool ok, int n, bq_red &r) {\n"
  "#if BQ_HMAX2\n"
  "  bq_u32 m = 0;\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < N; i++)\n"
  "    if (ok && i < n) m = bq_hmax2_chunk(m, a[i]);\n"
  "  bq_hmax2_fold(r, m);\n"
  "#else\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < N; i++)\n"
  "    if (ok && i < n) bq_reduce_chunk(a[i], r);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// Team-wide reduction; every lane gets the result. red_smem holds one slot per warp of\n"
  "// a block-wide team. REDUX (symmetric, f32 compute): the warp's step is one redux.sync on\n"
  "// the bits of max |x|, which are >= +0 and never NaN and so order as the values do.\n"
  "template <bool REDUX = false>\n"
  "static __device__ __forceinline__ bq_red bq_red_team(bq_red r, int tpr, bq_red *red_smem) {\n"
  "#if !defined(BQ_EMULATED) && !BQ_ASYM && BQ_FT != BQ_TYPE_F64\n"
  "  if (REDUX) {\n"
  "    bq_u32 m;\n"
  "    asm(\"redux.sync.max.u32 %0, %1, 0xffffffff;\" : \"=r\"(m) : \"r\"(__float_as_uint(r.a)));\n"
  "    r.a = __uint_as_float(m);\n"
  "  } else\n"
  "#endif\n"
  "    r = bq_red_lanes(r, 32);\n"
  "  if (tpr > 32) {\n"
  "    const int warp = threadIdx.x >> 5, nw = tpr >> 5;\n"
  "    if ((threadIdx.x & 31) == 0) red_smem[warp] = r;\n"
  "    bq_team_sync(tpr);\n"
  "    r = red_smem[0];\n"
  "    for (int i = 1; i < nw; i++) r = bq_red_merge(r, red_smem[i]);\n"
  "    bq_team_sync(tpr); // the slots are reused by the team's next row\n"
  "  }\n"
  "  return r;\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- Philox4x32-10: the counter-based generator of the rotation's random signs and of -------\n"
  "// stochastic rounding's draws (Random123's; tests/reference_rotate.h checks its known answers)\n"
  "static __device__ __forceinline__ void bq_philox4x32_10(bq_u32 (&c)[4], bq_u32 k0, bq_u32 k1) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < 10; i++) {\n"
  "    if (i) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;\n"
  "    const bq_u64 p0 = (bq_u64)0xD2511F53u * c[0], p1 = (bq_u64)0xCD9E8D57u * c[2];\n"
  "    const bq_u32 lo0 = (bq_u32)p0, hi0 = (bq_u32)(p0 >> 32), lo1 = (bq_u32)p1, hi1 = (bq_u32)(p1 >> 32);\n"
  "    const bq_u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;\n"
  "    c[0] = n0, c[1] = lo1, c[2] = n2, c[3] = lo0;\n"
  "  }\n"
  "}\n"
  "\n"
  "// ---- the Walsh-Hadamard rotation's steps (docs/numerics.md, \"Rotation\"): rotate.cu's kernels,\n"
  "// and the microscaling kernels' fused rotation ----------------------------------------------\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "#define BQ_RSQRT2 0x1.6a09e667f3bcdp-1\n"
  "#else\n"
  "#define BQ_RSQRT2 0x1.6a09e6p-1f\n"
  "#endif\n"
  "// C(1 / sqrt(2^k)): a power of two, times C(1 / sqrt(2)) for odd k (exact either way)\n"
  "static __device__ __forceinline__ bq_c bq_rot_c(int k) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const bq_c p = __longlong_as_double((bq_i64)(1023 - (k >> 1)) << 52);\n"
  "#else\n"
  "  const bq_c p = __uint_as_float((bq_u32)(127 - (k >> 1)) << 23);\n"
  "#endif\n"
  "  return k & 1 ? bq_mul(p, (bq_c)BQ_RSQRT2) : p;\n"
  "}\n"
  "// The signs of elements a .. a + E - 1 of a row (E divides a and 128), at j = (a + k) % n in\n"
  "// their block: bit k set where element a + k is negated, bit j % 32 of word (j / 32) % 4 of\n"
  "// Philox4x32-10 at (j / 128, 0, 0, 0)\n"
  "template <int E> static __device__ __forceinline__ bq_u32 bq_rot_signs(int a, int n, bq_u32 k0, bq_u32 k1) {\n"
  "  const int j0 = a % n;\n"
  "  bq_u32 w[4] = {(bq_u32)(j0 >> 7), 0u, 0u, 0u}, neg = 0;\n"
  "  bq_philox4x32_10(w, k0, k1);\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < E; k++) {\n"
  "    const int j = (a + k) % n, i = (j >> 5) & 3; // (selects, not w[i]: a local-memory array)\n"
  "    const bq_u32 wi = i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];\n"
  "    neg |= ((wi >> (j & 31)) & 1u) << k;\n"
  "  }\n"
  "  return neg;\n"
  "}\n"
  "// A lane's E consecutive elements c of blocks of n = 2^log2n that n / E consecutive lanes hold\n"
  "// (or one lane, n <= E): forward c = H (s c) cn, backward c = s ((H c) cn), neg the lane's\n"
  "// signs, cn = bq_rot_c(log2n). The butterfly's stages with h < E run in the lane's registers,\n"
  "// the others between lanes lane ^ h / E (mask: the lanes taking part); each stage computes\n"
  "// every pair of the contract's stage, so the bits do not depend on E or on which lane holds what.\n"
  "template <int E>\n"
  "static __device__ __forceinline__ void bq_rot_apply(bq_c (&c)[E], int lane, int log2n, bq_u32 neg, bq_c cn,\n"
  "                                                    bool backward, bq_u32 mask) {\n"
  "  const int n = 1 << log2n;\n"
  "  if (!backward) {\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++) c[k] = (neg >> k) & 1u ? -c[k] : c[k];\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int h = 1; h < E; h <<= 1) {\n"
  "    if (h >= n) break;\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++)\n"
  "      if (!(k & h)) {\n"
  "        const bq_c a = c[k], b = c[k + h];\n"
  "        c[k] = bq_add(a, b);\n"
  "        c[k + h] = bq_sub(a, b);\n"
  "      }\n"
  "  }\n"
  "  for (int lh = 1; lh * E < n; lh <<= 1) {\n"
  "    // this lane holds the pairs' second elements where up: o - c there, c + o elsewhere, each\n"
  "    // one fma by +-1 (exact product, one rounding: the same bits, zeros' signs included)\n"
  "    const bq_c sg = lane & lh ? (bq_c)-1 : (bq_c)1;\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++) {\n"
  "      const bq_c o = __shfl_xor_sync(mask, c[k], lh);\n"
  "      c[k] = bq_fma(c[k], sg, o);\n"
  "    }\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < E; k++) {\n"
  "    c[k] = bq_mul(c[k], cn);\n"
  "    if (backward) c[k] = (neg >> k) & 1u ? -c[k] : c[k];\n"
  "  }\n"
  "}\n"
  "\n"
  "// Stochastic rounding's draws (BQ_SR 1; docs/numerics.md, \"Stochastic rounding\"): element i\n"
  "// (its row-major index plus args.offset) takes 16 bits, bits 16 (i % 2) of word (i / 2) % 4\n"
  "// of Philox4x32-10 at counter (i / 8, 1) (i / 8's low and high words, 1, 0), keyed by the\n"
  "// seed. bq_sr_draws fills u with those of N consecutive elements from i0: one generator call\n"
  "// per 8 of them where i0 starts a set of 8 (the usual case), else a call per set touched.\n"
  "#ifndef BQ_SR\n"
  "#define BQ_SR 0\n"
  "#endif\n"
  "#ifndef BQ_MX_ROT\n"
  "#define BQ_MX_ROT 0 // microscaling: the fused rotation (bq_mx_lanes)\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_sr_block(bq_u64 b, bq_u32 k0, bq_u32 k1, bq_u32 (&c)[4]) {\n"
  "  c[0] = (bq_u32)b, c[1] = (bq_u32)(b >> 32), c[2] = 1u, c[3] = 0u;\n"
  "  bq_philox4x32_10(c, k0, k1);\n"
  "}\n"
  "// element i's 16 bits from its set's words (i % 8 any)\n"
  "static __device__ __forceinline__ bq_u32 bq_sr_pick(const bq_u32 (&c)[4], bq_u64 i) {\n"
  "  const int w = (int)(i >> 1) & 3;\n"
  "  const bq_u32 v = w == 0 ? c[0] : w == 1 ? c[1] : w == 2 ? c[2] : c[3];\n"
  "  return (v >> ((int)(i & 1) * 16)) & 0xffffu;\n"
  "}\n"
  "template <int N> static __device__ __forceinline__ void bq_sr_draws(bq_u64 i0, bq_u32 k0, bq_u32 k1, bq_u32 (&u)[N]) {\n"
  "  bq_u32 c[4];\n"
  "  if (N % 8 == 0 && (i0 & 7) == 0) {\n"
  "#pragma unroll\n"
  "    for (int b = 0; b < N / 8; b++) {\n"
  "      bq_sr_block((i0 + 8ull * (bq_u64)b) >> 3, k0, k1, c);\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < 8; k++) u[8 * b + k < N ? 8 * b + k : 0] = (c[k >> 1] >> ((k & 1) * 16)) & 0xffffu;\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "  // the j-th set touched, which element k is in (indices wrap modulo 2^64, as the host's do)\n"
  "  const int s = (int)(i0 & 7);\n"
  "#pragma unroll 1\n"
  "  for (int j = 0; j <= (s + N - 1) >> 3; j++) {\n"
  "    bq_sr_block(((i0 & ~7ull) + 8ull * (bq_u64)j) >> 3, k0, k1, c);\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < N; k++)\n"
  "      if ((s + k) >> 3 == j) u[k] = bq_sr_pick(c, i0 + k);\n"
  "  }\n"
  "}\n"
  "\n"
  "#if BQ_SR\n"
  "// A draw's threshold (u + 1/2) 2^-16 = (2u + 1) 2^-17, exact: 1 + it from the bits (2u + 1 has\n"
  "// 17 bits, placed below 1's exponent), less 1 (Sterbenz: exact). No integer-to-float\n"
  "// conversion, which issues at a quarter of the FP32 rate.\n"
  "static __device__ __forceinline__ float bq_sr_threshold_f32(bq_u32 u) {\n"
  "  return __fsub_rn(__uint_as_float(0x3f800000u | ((2u * u + 1u) << 6)), 1.0f);\n"
  "}\n"
  "static __device__ __forceinline__ double bq_sr_threshold_f64(bq_u32 u) {\n"
  "  return __dsub_rn(__longlong_as_double(0x3ff0000000000000ll | ((bq_i64)(2u * u + 1u) << 35)), 1.0);\n"
  "}\n"
  "// The stochastic rounding of v (|v| < top, finite) onto a float grid of MBITS mantissa bits and\n"
  "// smallest normal exponent EMIN (docs/numerics.md, \"Stochastic rounding\"): |v| = (n + f) q, q\n"
  "// the grid's step at |v|, n an integer, 0 <= f < 1; (n + 1) q (at most top) when\n"
  "// (u + 1/2) 2^-16 < f, else n q, v's sign kept. Each step is exact, so C = f32 and f64 give\n"
  "// the reference's doubles' result; the value is on the grid, so rounding it to nearest into\n"
  "// the type is exact.\n"
  "template <int EMIN, int MBITS> static __device__ __forceinline__ bq_c bq_sr_grid(bq_c v, bq_u32 u, bq_c top) {\n"
  "  const bq_c a = bq_abs(v);\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const bq_i64 e = max((int)(__double_as_longlong(a) >> 52) - 1023, EMIN) - MBITS;\n"
  "  const double q = __longlong_as_double((1023 + e) << 52), qi = __longlong_as_double((1023 - e) << 52);\n"
  "  const double t = __dmul_rn(a, qi), n = floor(t), f = __dsub_rn(t, n);\n"
  "  const double r = bq_sr_threshold_f64(u);\n"
  "  const double m = fmin(__dmul_rn(__dadd_rn(n, r < f ? 1.0 : 0.0), q), top);\n"
  "  return __longlong_as_double(__double_as_longlong(m) | (__double_as_longlong(v) & (1ll << 63)));\n"
  "#else\n"
  "  const int e = max((int)(__float_as_uint(a) >> 23) - 127, EMIN) - MBITS;\n"
  "  const float q = __uint_as_float((bq_u32)(127 + e) << 23), qi = __uint_as_float((bq_u32)(127 - e) << 23);\n"
  "  const float t = __fmul_rn(a, qi), n = floorf(t), f = __fsub_rn(t, n);\n"
  "  const float r = bq_sr_threshold_f32(u);\n"
  "  const float m = fminf(__fmul_rn(__fadd_rn(n, r < f ? 1.0f : 0.0f), q), top);\n"
  "  return __uint_as_float(__float_as_uint(m) | (__float_as_uint(v) & 0x80000000u));\n"
  "#endif\n"
  "}\n"
  "// The same onto the integers (step 1): n + 1 when (u + 1/2) 2^-16 < f, v's sign kept (-0\n"
  "// stays -0); infinities stay, NaN gives 0 (as rne's does)\n"
  "static __device__ __forceinline__ bq_c bq_sr_rint(bq_c v, bq_u32 u) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const double a = fabs(v), n = floor(a), f = __dsub_rn(a, n), r = bq_sr_threshold_f64(u);\n"
  "  const double m = __dadd_rn(n, r < f ? 1.0 : 0.0);\n"
  "  return v == v ? copysign(m, v) : 0.0;\n"
  "#else\n"
  "  const float a = fabsf(v), n = floorf(a), f = __fsub_rn(a, n), r = bq_sr_threshold_f32(u);\n"
  "  const float m = __fadd_rn(n, r < f ? 1.0f : 0.0f);\n"
  "  return v == v ? copysignf(m, v) : 0.0f;\n"
  "#endif\n"
  "}\n"
  "#ifndef BQ_MX_RULE\n"
  "// Quantize and fake quantize with stochastic rounding in place of rne (the affine family):\n"
  "// the quotient is C(x) / C(s) correctly rounded (bq_f8_quotient; below 2^-17 it cannot go up,\n"
  "// so its last bits there do not matter), then the zero point and the saturation as\n"
  "// bq_quantize's and bq_fake_quantize's, or FP8's grid and saturation\n"
  "#if BQ_FP8\n"
  "static __device__ __forceinline__ int bq_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &, bq_u32 u) {\n"
  "  const bq_c v = bq_f8_quotient(x, s);\n"
  "  if (!(bq_abs(v) < (bq_c)BQ_F8_MAX)) return bq_f8_of_c(v); // saturates; NaN's code\n"
  "  return bq_f8_of_c(bq_sr_grid<1 - BQ_F8_BIAS, BQ_F8_M>(v, u, (bq_c)BQ_F8_MAX));\n"
  "}\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {\n"
  "  return bq_dequantize(bq_quantize_sr(x, s, z, u), s.s, z);\n"
  "}\n"
  "#else\n"
  "static __device__ __forceinline__ int bq_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {\n"
  "  const bq_c r = bq_sr_rint(bq_f8_quotient(x, s), u);\n"
  "  const int inside = z.base + bq_to_int_rz(bq_sub(r, z.lo));\n"
  "  const int below = r < z.lo ? BQ_QMIN : inside;\n"
  "  return r > z.hi ? BQ_QMAX : below;\n"
  "}\n"
  "static __device__ __forceinline__ bq_c bq_fake_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {\n"
  "  const bq_c r = bq_add(bq_sr_rint(bq_f8_quotient(x, s), u), (bq_c)0); // + 0 turns -0 into the integer 0\n"
  "  const bq_c below = r < z.lo ? z.a : r;\n"
  "  return bq_mul(r > z.hi ? z.b : below, s.s);\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "// ---- the microscaling formats (BQ_MX_RULE defined: mx.cu, and fused.cu producing them) ----------\n"
  "// Prelude defines: BQ_IT BQ_TYPE_E2M1, _E4M3 or _E5M2; BQ_ST BQ_TYPE_UE8M0, or BQ_TYPE_E4M3 (NVFP4);\n"
  "// BQ_MX_LAYOUT (0 row-major, 1 MN-major, 2 blocked); BQ_MX_RULE (bq_scale_rule's values).\n"
  "#ifdef BQ_MX_RULE\n"
  "#define BQ_MX_NV (BQ_ST == BQ_TYPE_E4M3) // NVFP4: E4M3 group scales times the tensor scale\n"
  "#ifndef BQ_EMULATED\n"
  "// byte j of the result: byte (sel >> 4j) & 7 of b:a (bit 3 of the nibble 0)\n"
  "static __device__ __forceinline__ bq_u32 bq_prmt(bq_u32 a, bq_u32 b, bq_u32 sel) {\n"
  "  bq_u32 d;\n"
  "  asm(\"prmt.b32 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(sel));\n"
  "  return d;\n"
  "}\n"
  "#endif\n"
  "// NVFP4 under the library's rule from f32 arithmetic: bq_mx_nv_fast where a group's scale allows\n"
  "#define BQ_MX_NV_FAST (BQ_MX_NV && BQ_MX_RULE == 0 && BQ_FT != BQ_TYPE_F64)\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "#define BQ_MX_MAX 6.0f\n"
  "#define BQ_MX_EMAX 2\n"
  "#define BQ_MX_MBITS 1\n"
  "#elif BQ_IT == BQ_TYPE_E4M3\n"
  "#define BQ_MX_MAX 448.0f\n"
  "#define BQ_MX_EMAX 8\n"
  "#define BQ_MX_MBITS 3\n"
  "#else\n"
  "#define BQ_MX_MAX 57344.0f\n"
  "#define BQ_MX_EMAX 15\n"
  "#define BQ_MX_MBITS 2\n"
  "#endif\n"
  "\n"
  "// ---- elements --------------------------------------------------------------------------------\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "// C -> E2M1 code: one round to nearest even onto +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating\n"
  "// (6 and past it, inf), NaN -> 0x7, -0 -> 0x8. f64: each comparison is a midpoint between\n"
  "// two magnitudes, strict where the tie goes to the lower (even) code and not where it goes\n"
  "// up. f32, from the bits (the same code for every f32 pattern): below 1, rint(2|v|) in the\n"
  "// low bits of 2|v| + 2^23; from 1 on, the mantissa rounded to one bit (RNE: add just under\n"
  "// half its last place plus the kept bit), read with the exponent from 1.0's code, 2.\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) {\n"
  "  const bq_c a = bq_abs(v);\n"
  "  if (!(a == a)) return 7;\n"
  "  const int c = (a > (bq_c)0.25) + (a >= (bq_c)0.75) + (a > (bq_c)1.25) + (a >= (bq_c)1.75) + (a > (bq_c)2.5) +\n"
  "                (a >= (bq_c)3.5) + (a > (bq_c)5.0);\n"
  "  return c | (__double_as_longlong(v) < 0 ? 8 : 0);\n"
  "}\n"
  "#else\n"
  "static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) {\n"
  "  const bq_u32 u = __float_as_uint(v), a = u & 0x7fffffffu;\n"
  "  const bq_u32 lo = __float_as_uint(__fmaf_rn(__uint_as_float(a), 2.0f, 0x1p23f)) & 3u;\n"
  "  const bq_u32 hi = min((a + 0x1fffffu + ((a >> 22) & 1u)) >> 22, 259u) - 252u; // (inf, NaN: 7)\n"
  "  const bq_u32 c = a < 0x3f800000u ? lo : hi;\n"
  "  return (int)(c | (a <= 0x7f800000u ? (u >> 28) & 8u : 0u));\n"
  "}\n"
  "// |v|'s magnitude code alone, 0 to 7, as bq_mx_elem_of takes it (NVFP4's fast quotient):\n"
  "// the clamp at 6's bits first, which also saturates inf and NaN\n"
  "static __device__ __forceinline__ bq_u32 bq_e2m1_mag(float v) {\n"
  "  const bq_u32 u = min(__float_as_uint(v) & 0x7fffffffu, 0x40c00000u);\n"
  "  const bq_u32 lo = __float_as_uint(__fmaf_rn(__uint_as_float(u), 2.0f, 0x1p23f)) & 3u;\n"
  "  const bq_u32 hi = (u - 0x3f000000u + 0x1fffffu + ((u >> 22) & 1u)) >> 22; // (252 taken off before the shift)\n"
  "  return u < 0x3f800000u ? lo : hi;\n"
  "}\n"
  "#endif\n"
  "// E2M1 code -> C, exact, from the f32's bits: magnitude m from 2 on is (2 + m % 2) 2^(m / 2 - 2),\n"
  "// whose exponent and mantissa bit read (m + 252) << 22; 1 is 0.5, 0 is 0; then the sign bit\n"
  "static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) {\n"
  "  const bq_u32 m = (bq_u32)c & 7u;\n"
  "  return (bq_c)__uint_as_float((m < 2u ? m * 0x3f000000u : (m + 252u) << 22) | (((bq_u32)c & 8u) << 28));\n"
  "}\n"
  "#else\n"
  "static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) { return bq_f8_of_c(v); }\n"
  "static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) { return bq_f8_to_c(c); }\n"
  "#endif\n"
  "\n"
  "#if BQ_SR\n"
  "// Stochastic rounding (docs/numerics.md, \"Stochastic rounding\"): |v| = (n + f) q, q the\n"
  "// element grid's step at |v| (2^(max(e, emin) - mantissa bits), e |v|'s exponent, emin the\n"
  "// smallest normal's), n an integer, 0 <= f < 1; the code of (n + 1) q (at most max) when\n"
  "// (u + 1/2) 2^-16 < f, else of n q, v's sign kept. Each step is exact, so C = f32 and f64\n"
  "// give the reference's doubles' result. |v| at or past max, inf and NaN: as round to nearest.\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "#define BQ_MX_EMIN 0\n"
  "#elif BQ_IT == BQ_TYPE_E4M3\n"
  "#define BQ_MX_EMIN (-6)\n"
  "#else\n"
  "#define BQ_MX_EMIN (-14)\n"
  "#endif\n"
  "static __device__ __forceinline__ int bq_mx_elem_sr(bq_c v, bq_u32 u) {\n"
  "  if (!(bq_abs(v) < (bq_c)BQ_MX_MAX)) return bq_mx_elem_of(v);\n"
  "  return bq_mx_elem_of(bq_sr_grid<BQ_MX_EMIN, BQ_MX_MBITS>(v, u, (bq_c)BQ_MX_MAX));\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- scales ----------------------------------------------------------------------------------\n"
  "// UE8M0 byte e -> 2^(e - 127) in f32 (e = 0 is the subnormal 2^-127), 255: NaN\n"
  "static __device__ __forceinline__ float bq_ue8m0_f32(int e) {\n"
  "  return __uint_as_float(e == 255 ? 0x7fc00000u : e == 0 ? 0x00400000u : (bq_u32)e << 23);\n"
  "}\n"
  "// E4M3 code -> f32, exact (0x7F and 0xFF: NaN)\n"
  "static __device__ __forceinline__ float bq_e4m3_f32(int c) {\n"
  "  const bq_u32 mag = (bq_u32)c & 0x7fu;\n"
  "  float v = __fmul_rn(__uint_as_float(mag << 20), 0x1p120f);\n"
  "  v = mag == 0x7fu ? __uint_as_float(0x7fffffffu) : v;\n"
  "  return __uint_as_float(__float_as_uint(v) | (((bq_u32)c & 0x80u) << 24));\n"
  "}\n"
  "// f32 -> E4M3 code, round to nearest even, saturating to 448 (NaN: 0x7F): the instruction\n"
  "// where BQ_F8_HW's conditions hold (an NVFP4 group's scale costs one), else from the bits\n"
  "static __device__ __forceinline__ int bq_e4m3_of(float v) {\n"
  "#if !defined(BQ_EMULATED) && !defined(BQ_FP8_SOFT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
  "  bq_u16 h;\n"
  "  asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(0.0f), \"f\"(v));\n"
  "  return h & 0xFF; // (the second operand lands in the low byte)\n"
  "#else\n"
  "  const bq_u32 b = __float_as_uint(v);\n"
  "  const int sign = (int)((b >> 24) & 0x80u);\n"
  "  const bq_u32 a = b & 0x7fffffffu;\n"
  "  if (a > 0x7f800000u) return 0x7F;\n"
  "  if (__uint_as_float(a) >= 448.0f) return sign | 0x7E;\n"
  "  const int e = (int)(a >> 23) - 127, emin = -6;\n"
  "  if (e < emin - 4) return sign;\n"
  "  const bq_u32 m = (a & 0x7fffffu) | 0x800000u;\n"
  "  const int shift = 20 + (e < emin ? emin - e : 0);\n"
  "  const bq_u32 keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);\n"
  "  const bq_u32 up = (rem > half) | ((rem == half) & keep);\n"
  "  return sign | (int)(((bq_u32)((e < emin ? emin : e) + 6) << 3) + keep + up);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// A group's scale as the elements use it: sc = C(scale) (UE8M0's power of two, or NVFP4's\n"
  "// g times the E4M3 scale, one f32 product), and for UE8M0 its reciprocal, exact (the\n"
  "// reciprocal of 2^k for k in [-127, 127] is a power of two of f32 too): x * rcp is then\n"
  "// x / sc rounded once, the same bits as the division.\n"
  "// NVFP4 under a peer's rule quantizes by the peer's multiplier instead (rcp): torchao's\n"
  "// (1 / g) / s8, Transformer Engine's min(1 / (s8 g), FLT_MAX), f32 steps as they take them.\n"
  "struct bq_mx_scale {\n"
  "  bq_c sc, rcp;\n"
  "#if BQ_MX_NV && BQ_MX_RULE == 0\n"
  "  bq_scale q; // sc as bq_f8_quotient takes it: the library's rule divides, by reciprocal and correction\n"
  "  bool fast;  // sc positive and q.plain: bq_mx_nv_fast applies (f32 arithmetic)\n"
  "#endif\n"
  "};\n"
  "static __device__ __forceinline__ bq_mx_scale bq_mx_scale_of(int code, float g) {\n"
  "  bq_mx_scale s;\n"
  "#if BQ_MX_NV\n"
  "  const float s8 = bq_e4m3_f32(code);\n"
  "  s.sc = (bq_c)__fmul_rn(g, s8);\n"
  "#if BQ_MX_RULE == 6\n"
  "  s.rcp = (bq_c)__fdiv_rn(__fdiv_rn(1.0f, g), s8);\n"
  "#elif BQ_MX_RULE == 7\n"
  "  s.rcp = (bq_c)fminf(__fdiv_rn(1.0f, __fmul_rn(s8, g)), 0x1.fffffep127f);\n"
  "#else\n"
  "  s.rcp = 0;\n"
  "  s.q = bq_scale_of(s.sc);\n"
  "  s.fast = BQ_MX_NV_FAST && s.q.plain && s.sc > (bq_c)0;\n"
  "#endif\n"
  "#else\n"
  "  (void)g;\n"
  "  s.sc = (bq_c)bq_ue8m0_f32(code);\n"
  "  s.rcp = (bq_c)bq_ue8m0_f32(code == 255 ? 255 : 254 - code);\n"
  "#endif\n"
  "  return s;\n"
  "}\n"
  "#if BQ_MX_NV_FAST\n"
  "// NVFP4's quotient where s.fast: Markstein's correction of |x| rcp with no rescaling and no\n"
  "// guard, then x's sign. |x| under 2^-96 gives a quotient under 2^-6 however it rounds (code\n"
  "// 0); past 2^90 (or an infinite |x|) q0 saturates and the correction's NaN too, through\n"
  "// bq_e2m1_mag; in between this is bq_f8_quotient's RN(|x| / s) (its zero residual keeps\n"
  "// q0: the same with |x|). The sign is x's unless the quotient is NaN (x NaN: q0 NaN).\n"
  "static __device__ __forceinline__ int bq_mx_nv_fast(float x, const bq_mx_scale &s) {\n"
  "  const float a = fabsf(x), q0 = __fmul_rn(a, s.q.rcp);\n"
  "  const float q1 = __fmaf_rn(__fmaf_rn(-q0, s.q.s, a), s.q.rcp, q0);\n"
  "  return (int)(bq_e2m1_mag(q1) | (q0 == q0 ? (__float_as_uint(x) >> 28) & 8u : 0u));\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ int bq_mx_quantize(bq_c x, const bq_mx_scale &s) {\n"
  "#if BQ_MX_NV && BQ_MX_RULE == 0\n"
  "#if BQ_MX_NV_FAST\n"
  "  if (s.fast) return bq_mx_nv_fast(x, s);\n"
  "#endif\n"
  "  return bq_mx_elem_of(bq_f8_quotient(x, s.q)); // (the IEEE quotient wherever E2M1 can tell)\n"
  "#else\n"
  "  return bq_mx_elem_of(bq_mul(x, s.rcp));\n"
  "#endif\n"
  "}\n"
  "#if BQ_MX_NV_FAST\n"
  "// N elements' codes, the quotient's form chosen once for them (a branch an element would\n"
  "// cost as much as the arithmetic it saves)\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_mx_quantize_n(const bq_c (&c)[N], const bq_mx_scale &s, int (&q)[N]) {\n"
  "  if (s.fast) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < N; j++) q[j] = bq_mx_nv_fast(c[j], s);\n"
  "    return;\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < N; j++) q[j] = bq_mx_elem_of(bq_f8_quotient(c[j], s.q));\n"
  "}\n"
  "#endif\n"
  "#if BQ_SR\n"
  "// the same quotient, rounded stochastically by the draw u (the IEEE quotient throughout: the\n"
  "// draw can tell any two quotients apart)\n"
  "static __device__ __forceinline__ int bq_mx_quantize_sr(bq_c x, const bq_mx_scale &s, bq_u32 u) {\n"
  "#if BQ_MX_NV && BQ_MX_RULE == 0\n"
  "  return bq_mx_elem_sr(bq_div(x, s.sc), u);\n"
  "#else\n"
  "  return bq_mx_elem_sr(bq_mul(x, s.rcp), u);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "// Dynamic quantize: a group's scale code from its amax (C, >= 0 or inf; NaN elements were\n"
  "// skipped), by the plan's rule. UE8M0 rules other than the library's are the peers' f32\n"
  "// rules: amax is taken to f32 first (f64 data, one RNE conversion).\n"
  "static __device__ __forceinline__ int bq_mx_rule(bq_c amax, float g, float enc) {\n"
  "#if BQ_MX_NV && BQ_MX_RULE == 6\n"
  "  // torchao: (amax * f32(1 / 6)) / g, clamped to [2^-6, 448] (NaN kept), to E4M3\n"
  "  (void)enc;\n"
  "  const float b = __fdiv_rn(__fmul_rn((float)amax, 0x1.555556p-3f), g);\n"
  "  return bq_e4m3_of(b < 0x1p-6f ? 0x1p-6f : (b > 448.0f ? 448.0f : b));\n"
  "#elif BQ_MX_NV && BQ_MX_RULE == 7\n"
  "  // Transformer Engine: min(amax * (enc * f32(1 / 6)), FLT_MAX), to E4M3 (saturating)\n"
  "  (void)g;\n"
  "  return bq_e4m3_of(fminf(__fmul_rn((float)amax, __fmul_rn(enc, 0x1.555556p-3f)), 0x1.fffffep127f));\n"
  "#elif BQ_MX_NV\n"
  "  // NVFP4: the group's scale (amax / 6) / g, to E4M3 (RNE, saturating), kept at least\n"
  "  // E4M3's smallest subnormal so that a group of zeros divides by a nonzero scale\n"
  "  (void)enc;\n"
  "  const float a = (float)amax;\n"
  "  const float b = __fdiv_rn(__fdiv_rn(a, 6.0f), g);\n"
  "  return bq_e4m3_of(b < 0x1p-9f ? 0x1p-9f : b);\n"
  "#elif BQ_MX_RULE == 0\n"
  "  (void)g, (void)enc;\n"
  "  bq_c s = amax == (bq_c)0 ? (bq_c)1 : bq_div(amax, (bq_c)BQ_MX_MAX);\n"
  "  return (int)bq_scale_from_c(bq_pow2_up(s));\n"
  "#else\n"
  "  (void)g, (void)enc;\n"
  "  const float a = (float)amax;\n"
  "#if BQ_MX_RULE == 4 || BQ_MX_RULE == 5 // RCEIL (cuBLAS), RCEIL_SAT (Transformer Engine)\n"
  "  const float d = __fmul_rn(a, 1.0f / BQ_MX_MAX);\n"
  "  const bq_u32 u = __float_as_uint(d), e = (u >> 23) & 0xffu, m = u & 0x7fffffu;\n"
  "  if (e == 0xffu) return BQ_MX_RULE == 5 ? 254 : 255; // (inf: amax is never NaN here)\n"
  "  const bq_u32 s = e + (e == 0 ? (m > 0x400000u) : (m != 0));\n"
  "  return (int)(s > 254 ? (BQ_MX_RULE == 5 ? 254u : 255u) : s);\n"
  "#else // FLOOR (OCP, torchao), CEIL, EVEN\n"
  "  bq_u32 u = __float_as_uint(a);\n"
  "  if ((u & 0x7f800000u) == 0x7f800000u) return 255;\n"
  "#if BQ_MX_RULE == 3\n"
  "  u = (u + (1u << (22 - BQ_MX_MBITS))) & 0xff800000u;\n"
  "#endif\n"
  "  int p = (int)((u >> 23) & 0xffu) - 127;\n"
  "#if BQ_MX_RULE == 2\n"
  "  p += (u & 0x7fffffu) != 0;\n"
  "#endif\n"
  "  int e = p - BQ_MX_EMAX;\n"
  "  e = e < -127 ? -127 : (e > 128 ? 128 : e);\n"
  "  return e + 127;\n"
  "#endif\n"
  "#endif\n"
  "}\n"
  "\n"
  "\n"
  "// MXFP4 from bf16 or f16 (rounding to nearest): two elements a 32-bit step, in the packed\n"
  "// half-precision arithmetic and integer steps on the halves, the same codes as\n"
  "// bq_mx_elem_of(x * rcp) in f32. rcp is a power of two, so x rcp is exact in the half type\n"
  "// wherever it is at least the type's smallest normal (below, code 0 with x's sign either way)\n"
  "// and is inf where it overflows the type (at least 6 in f32: code 7 either way); rcp must be\n"
  "// a normal of the type, or NaN (the caller keeps the f32 form otherwise). Then per half, as\n"
  "// bq_e2m1_mag and bq_mx_elem_of do in f32: the magnitude clamped at 6 (inf and NaN too); from\n"
  "// 1 on, the mantissa rounded to one bit (RNE) with the exponent read from its bits, the\n"
  "// code's 3 bits from (c + BQ_H2_HI + lsb) >> BQ_H2_SH (4 << BQ_H2_SH of it is the code's\n"
  "// offset from 1.0's bits, mod 8); below 1, rint(2c) as the low bits of 2c + BQ_H2_LOW (a\n"
  "// power of two whose step is 1) rounded to the type; the sign unless NaN. No carry crosses\n"
  "// the halves: every sum stays under 2^16.\n"
  "#define BQ_MX_HALF_PAIRS ((BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16) && BQ_IT == BQ_TYPE_E2M1 && !BQ_MX_NV && !BQ_SR)\n"
  "// NVFP4 under the library's rule from f16, or from bf16 where the packed bf16 comparison\n"
  "// exists (sm_90 on): bq_nv_pairs, below\n"
  "#if BQ_MX_NV_FAST && !BQ_SR && \\\n"
  "    (BQ_FT == BQ_TYPE_F16 || (BQ_FT == BQ_TYPE_BF16 && (defined(BQ_EMULATED) || __CUDA_ARCH__ >= 900)))\n"
  "#define BQ_MX_NV_PAIRS 1\n"
  "#else\n"
  "#define BQ_MX_NV_PAIRS 0\n"
  "#endif\n"
  "#if BQ_MX_HALF_PAIRS || BQ_MX_NV_PAIRS\n"
  "#if BQ_FT == BQ_TYPE_BF16 // 7 mantissa bits: 6.0, 1.0 + 0x4080 = 2^15, the largest finite + 0x7f = 0x7fff\n"
  "#define BQ_H2_SIX 0x40c040c0u\n"
  "#define BQ_H2_SH 6\n"
  "#define BQ_H2_HI 0x011f011fu\n"
  "#define BQ_H2_LOW 0x43004300u\n"
  "#define BQ_H2_GE1 0x40804080u\n"
  "#define BQ_H2_NAN 0x007f007fu\n"
  "#define BQ_H2_MIN 0x1p-126f\n"
  "#define BQ_H2_MAX 0x1p127f\n"
  "#else // f16, 10 mantissa bits\n"
  "#define BQ_H2_SIX 0x46004600u\n"
  "#define BQ_H2_SH 9\n"
  "#define BQ_H2_HI 0x08ff08ffu\n"
  "#define BQ_H2_LOW 0x64006400u\n"
  "#define BQ_H2_GE1 0x44004400u\n"
  "#define BQ_H2_NAN 0x03ff03ffu\n"
  "#define BQ_H2_MIN 0x1p-14f\n"
  "#define BQ_H2_MAX 0x1p15f\n"
  "#endif\n"
  "#define BQ_H2_ONE (BQ_FT == BQ_TYPE_BF16 ? 0x3f803f80u : 0x3c003c00u)\n"
  "#ifndef BQ_EMULATED\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "#define BQ_H2_TYPE \".bf16x2\"\n"
  "#else\n"
  "#define BQ_H2_TYPE \".f16x2\"\n"
  "#endif\n"
  "#define BQ_H2_ASM(op) op BQ_H2_TYPE \" %0, %1, %2\"\n"
  "static __device__ __forceinline__ bq_u32 bq_h2_fma(bq_u32 a, bq_u32 b, bq_u32 c) {\n"
  "  bq_u32 d;\n"
  "  asm(BQ_H2_ASM(\"fma.rn\") \", %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c));\n"
  "  return d;\n"
  "}\n"
  "static __device__ __forceinline__ bq_u32 bq_h2_min(bq_u32 a, bq_u32 b) {\n"
  "  bq_u32 d;\n"
  "  asm(BQ_H2_ASM(\"min\") \";\" : \"=r\"(d) : \"r\"(a), \"r\"(b));\n"
  "  return d;\n"
  "}\n"
  "// 1.0 in the halves where a >= b or either is NaN, else 0\n"
  "static __device__ __forceinline__ bq_u32 bq_h2_geu(bq_u32 a, bq_u32 b) {\n"
  "  bq_u32 d;\n"
  "  asm(\"set.geu\" BQ_H2_TYPE BQ_H2_ASM(\"\") \";\" : \"=r\"(d) : \"r\"(a), \"r\"(b));\n"
  "  return d;\n"
  "}\n"
  "// f32 to f16 rounded up\n"
  "static __device__ __forceinline__ bq_u32 bq_f32_to_f16_ru(float f) {\n"
  "  bq_u16 h;\n"
  "  asm(\"cvt.rp.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
  "  return h;\n"
  "}\n"
  "#endif\n"
  "// N elements (N a multiple of 8) into N / 2 bytes of codes, f taking a pair of them to its\n"
  "// codes (element 0's in bits 0-3, 1's in 16-19)\n"
  "template <int N, class V, class C, class F>\n"
  "static __device__ __forceinline__ void bq_e2m1_pack(const V &v, C &c, F f) {\n"
  "  const bq_u32 *w = (const bq_u32 *)v.e;\n"
  "  bq_u32 *o = (bq_u32 *)c.e;\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < N / 8; k++) {\n"
  "    const bq_u32 t0 = f(w[4 * k]) | f(w[4 * k + 1]) << 8;\n"
  "    const bq_u32 t1 = f(w[4 * k + 2]) | f(w[4 * k + 3]) << 8;\n"
  "    o[k] = ((t0 | t0 >> 12) & 0xffffu) | (t1 | t1 >> 12) << 16;\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "#if BQ_MX_HALF_PAIRS\n"
  "// the codes of the pair w times r2 (rcp in both halves): element 0's in bits 0-3, 1's in 16-19\n"
  "static __device__ __forceinline__ bq_u32 bq_e2m1_pair(bq_u32 w, bq_u32 r2) {\n"
  "  const bq_u32 p = bq_h2_fma(w, r2, 0x80008000u); // x rcp (+ -0: a zero keeps its sign)\n"
  "  const bq_u32 a = p & 0x7fff7fffu, c = bq_h2_min(a, BQ_H2_SIX);\n"
  "  const bq_u32 hi = (c + BQ_H2_HI + ((c >> BQ_H2_SH) & 0x00010001u)) >> BQ_H2_SH;\n"
  "  const bq_u32 lo = bq_h2_fma(c, 0x40004000u, BQ_H2_LOW); // (2.0: 0x4000 in both types)\n"
  "  const bq_u32 m = bq_prmt(c + BQ_H2_GE1, 0u, 0xbb99u); // 0xffff in the halves where c >= 1\n"
  "  const bq_u32 sign = (p & ~(a + BQ_H2_NAN) & 0x80008000u) >> 12; // (a NaN's sum sets bit 15)\n"
  "  return (((hi & m) | (lo & ~m)) & 0x00070007u) | sign;\n"
  "}\n"
  "// N elements (N a multiple of 8) into N / 2 bytes of codes; rcp in [BQ_H2_MIN, BQ_H2_MAX] or NaN\n"
  "template <int N, class V, class C>\n"
  "static __device__ __forceinline__ void bq_e2m1_pairs(const V &v, float rcp, C &c) {\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "  const bq_u32 r2 = (__float_as_uint(rcp) >> 16) * 0x10001u;\n"
  "#else\n"
  "  const bq_u32 r2 = (bq_u32)bq_f32_to_f16(rcp) * 0x10001u;\n"
  "#endif\n"
  "  bq_e2m1_pack<N>(v, c, [&](bq_u32 w) { return bq_e2m1_pair(w, r2); });\n"
  "}\n"
  "#endif\n"
  "#if BQ_MX_NV_PAIRS\n"
  "// NVFP4 from bf16 or f16 under the library's rule where s.fast, two elements a step: the code\n"
  "// of RN(|x| / s) in f32 counts the E2M1 midpoints m it reaches (a tie goes to the even code:\n"
  "// past m for 0.25, 1.25, 2.5 and 5, at m for 0.75, 1.75 and 3.5). The f32 quotient reaches m\n"
  "// where the exact one reaches mu, the midpoint between m and its f32 neighbour on that side,\n"
  "// that is where |x| >= mu s; no f32 equals mu s (mu's odd part alone has 25 bits), so that is\n"
  "// |x| >= RU(mu s), and for x of a half type, |x| >= RU(mu s) rounded up to the type. Seven\n"
  "// such thresholds a group; each is one packed comparison for two elements (unordered: NaN\n"
  "// passes all of them, code 7), counted in the low bits of BQ_H2_LOW (whose step is 1).\n"
  "// s in [BQ_RCP_LO, BQ_RCP_HI]: each d s below is exact and each mu s a normal f32.\n"
  "static __device__ __forceinline__ bq_u32 bq_h2_up(float t) { // t > 0, rounded up to T, in both halves\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "  return bq_prmt(__float_as_uint(t) + 0xffffu, 0u, 0x3232u);\n"
  "#else\n"
  "  return bq_f32_to_f16_ru(t) * 0x10001u;\n"
  "#endif\n"
  "}\n"
  "template <int N, class V, class C>\n"
  "static __device__ __forceinline__ void bq_nv_pairs(const V &v, float s, C &c) {\n"
  "  const float m[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};\n"
  "  const float d[7] = {0x1p-26f, -0x1p-25f, 0x1p-24f, -0x1p-24f, 0x1p-23f, -0x1p-23f, 0x1p-22f}; // mu - m\n"
  "  bq_u32 t[7];\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < 7; k++) t[k] = bq_h2_up(__fmaf_ru(m[k], s, __fmul_rn(d[k], s)));\n"
  "  bq_e2m1_pack<N>(v, c, [&](bq_u32 w) {\n"
  "    const bq_u32 a = w & 0x7fff7fffu;\n"
  "    bq_u32 n = BQ_H2_LOW;\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < 7; k++) n = bq_h2_fma(bq_h2_geu(a, t[k]), BQ_H2_ONE, n);\n"
  "    return (n & 0x00070007u) | (w & ~(a + BQ_H2_NAN) & 0x80008000u) >> 12; // (the sign unless NaN)\n"
  "  });\n"
  "}\n"
  "#endif\n"
  "\n"
  "// Bytes of y before element e of a row (E2M1: two codes a byte; the host keeps row strides\n"
  "// and groups even)\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "#define BQ_MX_YB(e) ((e) >> 1)\n"
  "#else\n"
  "#define BQ_MX_YB(e) (e)\n"
  "#endif\n"
  "\n"
  "// ---- where a group's scale goes -----------------------------------------------------------------\n"
  "// Group g of row r's scale byte in the layout (BQ_MX_LAYOUT 0 row-major, 1 MN-major, 2 the\n"
  "// blocked 128 x 4 tiles, ngroups groups a row)\n"
  "static __device__ __forceinline__ bq_i64 bq_mx_sidx(bq_i64 r, bq_i64 g, bq_i64 ngroups, bq_i64 grs) {\n"
  "#if BQ_MX_LAYOUT == 2\n"
  "  (void)grs;\n"
  "  return ((r >> 7) * ((ngroups + 3) >> 2) + (g >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (g & 3);\n"
  "#elif BQ_MX_LAYOUT == 1\n"
  "  (void)ngroups;\n"
  "  return g * grs + r;\n"
  "#else\n"
  "  (void)ngroups;\n"
  "  return r * grs + g;\n"
  "#endif\n"
  "}\n"
  "\n"
  "// NVFP4's tensor scale g from the tensor's amax a (f32, >= 0 or inf), by the plan's rule;\n"
  "// enc, Transformer Engine's encode factor (1 / g as its rule computes it; 1 elsewhere)\n"
  "static __device__ __forceinline__ float bq_mx_tensor_scale(float a, float &enc) {\n"
  "#if BQ_MX_RULE == 6 // torchao: amax * f32(1 / 2688), no guard\n"
  "  enc = 1.0f;\n"
  "  return __fmul_rn(a, 0x1.861862p-12f);\n"
  "#elif BQ_MX_RULE == 7 // Transformer Engine: the encode factor, 1 where amax is 0 or infinite\n"
  "  enc = fminf(__fdiv_rn(2688.0f, a), 0x1.fffffep127f);\n"
  "  enc = a == 0.0f || enc == 0.0f ? 1.0f : enc;\n"
  "  return __fdiv_rn(1.0f, enc);\n"
  "#else\n"
  "  enc = 1.0f;\n"
  "  return a == 0.0f || !(a <= 0x1.fffffep127f) ? 1.0f : __fdiv_rn(a, 2688.0f);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
;
static const char bq__src_dynamic_cu[] =
  "// dynamic.cu - dynamic quantization: scales (and zero points) computed on the device\n"
  "// from the data, then the data quantized with exactly the stored scale.\n"
  "// Prelude defines (besides common.cuh's): BQ_ASYM 0 symmetric (max |x|), 1 asymmetric\n"
  "// (min/max with a zero point); BQ_GRAN BQ_GRAN_TENSOR, BQ_GRAN_TOKEN, BQ_GRAN_GROUP or\n"
  "// BQ_GRAN_BLOCK;\n"
  "// BQ_CPT, BQ_BLOCK, BQ_LONG_CPT and BQ_LONG_TEAM, the teams' sizes (below).\n"
  "//\n"
  "// Input moves in 16-byte accesses of BQ_P elements (after a scalar prologue that aligns\n"
  "// it, and in bq_dynamic the output's lines too where it can: bq_segment_prologue),\n"
  "// consecutive lanes taking consecutive accesses; the int8 output moves the same BQ_P\n"
  "// elements with the widest access its alignment allows.\n"
  "// Per token: a team per row. When the row fits (up to BQ_CPT accesses per thread, or\n"
  "// BQ_LONG_CPT in bq_dynamic_long) it is read once into registers, reduced, then quantized\n"
  "// from registers: one read of DRAM. Longer rows are read twice. Per group: when a group\n"
  "// is a power-of-two number of accesses (up to 128) and rows start 16-byte aligned, the\n"
  "// lanes holding a group reduce it with shuffles: one read. Other group shapes run each\n"
  "// group as a row of its own. Per block: a thread block a B x B tile (bq_dynamic_tiles).\n"
  "// Per tensor: bq_dynamic_reduce writes one partial per block to the workspace;\n"
  "// bq_dynamic_apply reduces the partials in a fixed order (deterministic) and quantizes.\n"
  "// The reduction, the scale it gives and the quantize of a chunk are common.cuh's (\"dynamic\n"
  "// scales\"), shared with fused.cu.\n"
  "\n"
  "// Accesses per thread kept on chip, BQ_CPT in bq_dynamic, whose teams have up to BQ_BLOCK\n"
  "// threads (also the per-tensor kernels' block), and BQ_LONG_CPT in bq_dynamic_long (per\n"
  "// token), whose teams have up to BQ_LONG_TEAM: the prelude's, from the host's dispatch table\n"
  "// (bq__dynamic_table), which says why.\n"
  "#define BQ_DU 4 // accesses in flight per thread in the streaming loops\n"
  "// BQ_WRITE_Y 0 (stochastic rounding's plans): the kernels write the scales (and zero points)\n"
  "// alone; the affine family's bq_affine_sr quantizes with them after (family_dynamic.h)\n"
  "#ifndef BQ_WRITE_Y\n"
  "#define BQ_WRITE_Y 1\n"
  "#endif\n"
  "// BQ_DYN_ROT 1 (per token, desc.rotation): each row rotated first (bq_dyn_rot below)\n"
  "#ifndef BQ_DYN_ROT\n"
  "#define BQ_DYN_ROT 0\n"
  "#endif\n"
  "\n"
  "/* kernels_src/dynamic_abi.h - dynamic quantization's host/kernel interface, valid as C and\n"
  "   as CUDA C++: its entry points and its parameter block. dynamic.cu and the host\n"
  "   (src/family_dynamic.h) both include it. */\n"
  "#ifndef BQ_DYNAMIC_ABI_H\n"
  "#define BQ_DYNAMIC_ABI_H\n"
  "\n"
  "/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,\n"
  "   the kernel's extern \"C\" function. Per block's tiles take the first two indices. */\n"
  "enum {\n"
  "  BQ__DYN_ROW,    /* bq_dynamic: a team a segment (a row, or a group); per block bq_dynamic_tiles */\n"
  "  BQ__DYN_LONG,   /* bq_dynamic_long: per token, long rows; per block bq_dynamic_tiles_rows; per\n"
  "                     group bq_dynamic_groups (integer codes' fast groups) */\n"
  "  BQ__DYN_REDUCE, /* bq_dynamic_reduce, then bq_dynamic_apply: per tensor */\n"
  "  BQ__DYN_APPLY,\n"
  "  BQ__DYN_STAGED  /* bq_dynamic_staged: per token, 16-bit rows staged in shared memory; per\n"
  "                     group bq_dynamic_sets (fast groups of 2 or 4 accesses, two a lane) */\n"
  "};\n"
  "#define BQ__DYN_SETS BQ__DYN_STAGED\n"
  "#define BQ_FN_DYNAMIC bq_dynamic\n"
  "#define BQ_FN_DYNAMIC_LONG bq_dynamic_long\n"
  "#define BQ_FN_DYNAMIC_STAGED bq_dynamic_staged\n"
  "#define BQ_FN_DYNAMIC_GROUPS bq_dynamic_groups           /* per group, groups reduced across lanes */\n"
  "#define BQ_FN_DYNAMIC_SETS bq_dynamic_sets               /* per group, the same, two groups a lane */\n"
  "#define BQ_FN_DYNAMIC_REDUCE bq_dynamic_reduce\n"
  "#define BQ_FN_DYNAMIC_APPLY bq_dynamic_apply\n"
  "#define BQ_FN_DYNAMIC_TILES bq_dynamic_tiles           /* per block, rows 16-byte aligned, whole accesses */\n"
  "#define BQ_FN_DYNAMIC_TILES_ROWS bq_dynamic_tiles_rows /* per block, any rows */\n"
  "\n"
  "typedef struct bq_dynamic_params {\n"
  "  bq_u64 x, y, scales, zps, partial;\n"
  "  bq_i64 rows, cols, xs, ys;\n"
  "  bq_i64 group, ngroups, grs;             /* per group (per block: B, blocks a row); grs as bq_pbase's ld */\n"
  "  int tpr, fast_groups, nblocks, align_y; /* align_y: some segment's y starts off a 32-byte sector */\n"
  "  int staged, pad;                        /* per block: tiles staged in shared memory (bq_tiles_staged);\n"
  "                                             per token: bq_dynamic_staged's launch */\n"
  "  double bound;                           /* args.amax_bound (0: none) */\n"
  "  /* per block, the tiles' walk (bq_twalk): trows rows of tiles, tcols columns walked (the\n"
  "     staged kernel's last column apart where it is not whole accesses), the grid's\n"
  "     gridDim.x = tdq tcols + tdr */\n"
  "  bq_i64 trows, tcols, tdq, tdr;\n"
  "  /* per token, the fused rotation (BQ_DYN_ROT): blocks of 2^rlog2, rsigns the random signs\n"
  "     keyed by the seed's words */\n"
  "  int rlog2, rsigns;\n"
  "  bq_u32 seed_lo, seed_hi;\n"
  "} bq_dynamic_params;\n"
  "#endif\n"
  "\n"
  "static __device__ __forceinline__ void bq_write_params(const bq_dynamic_params &p, bq_i64 i, bq_qp q) {\n"
  "  ((bq_s *)p.scales)[i] = q.stored;\n"
  "#if BQ_ASYM\n"
  "  ((int *)p.zps)[i] = q.zp;\n"
  "#endif\n"
  "}\n"
  "// Group g's parameters at index i (bq_pat's, in the scales' layout); packed scales also get\n"
  "// the bytes after a row's last group, to its word's end (the bytes after i), written 0.\n"
  "static __device__ __forceinline__ void bq_write_group(const bq_dynamic_params &p, bq_i64 i, bq_i64 g, bq_qp q) {\n"
  "  bq_write_params(p, i, q);\n"
  "#if BQ_SL == BQ_SL_MN_X4 || BQ_SL == BQ_SL_ROWS_X4\n"
  "  if (g == p.ngroups - 1)\n"
  "    for (bq_i64 j = 1; j <= 3 - (g & 3); j++) ((bq_u8 *)p.scales)[i + j] = 0;\n"
  "#else\n"
  "  (void)g;\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_LEAN\n"
  "// FP8: quantizes and stores the chunks a[i] at accesses c0 + i step of y (those below nch),\n"
  "// in the form LEAN (bq_quantize_chunk_as), with w the output's access width. (The integer\n"
  "// types keep their own loops, whose machine code this form would change.)\n"
  "template <bool LEAN, int N>\n"
  "static __device__ __forceinline__ void bq_quantize_batch_as(const bq_xchunk (&a)[N], bq_i *y, bq_i64 c0, bq_i64 step,\n"
  "                                                            bq_i64 nch, const bq_qp &q, int w) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < N; i++) {\n"
  "    const bq_i64 c = c0 + (bq_i64)i * step;\n"
  "    if (c < nch) {\n"
  "      bq_qchunk o;\n"
  "      bq_quantize_chunk_as<LEAN>(a[i], o, q);\n"
  "      bq_store(y + c * BQ_VEC, o, w);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// The form picked once for the batch (HOIST), or chunk by chunk: once is faster where the\n"
  "// registers allow it (f32 per token: 62 against 81 us on [8192, 4096]); bq_dynamic_long,\n"
  "// held to 64 registers, spills so and stays chunk by chunk.\n"
  "template <bool HOIST, int N>\n"
  "static __device__ __forceinline__ void bq_quantize_batch(const bq_xchunk (&a)[N], bq_i *y, bq_i64 c0, bq_i64 step,\n"
  "                                                         bq_i64 nch, const bq_qp &q, int w) {\n"
  "  if (!HOIST) {\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < N; i++) {\n"
  "      const bq_i64 c = c0 + (bq_i64)i * step;\n"
  "      if (c < nch) {\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk_any(a[i], o, q);\n"
  "        bq_store(y + c * BQ_VEC, o, w);\n"
  "      }\n"
  "    }\n"
  "  } else if (bq_is_lean(q)) {\n"
  "    bq_quantize_batch_as<true>(a, y, c0, step, nch, q, w);\n"
  "  } else {\n"
  "    bq_quantize_batch_as<false>(a, y, c0, step, nch, q, w);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_DYN_ROT\n"
  "// The fused rotation (docs/numerics.md, \"Rotation\"), per token: rows 16-byte aligned and whole\n"
  "// accesses (the host's check), blocks of n = 2^p.rlog2 elements, at most a warp's accesses.\n"
  "// Access c of a row is held by the lane c % tpr of its team (tpr a multiple of 32), so a\n"
  "// block's n / BQ_VEC accesses sit in consecutive lanes of one warp (bq_rot_apply's shuffles\n"
  "// among them), and a lane's place in its blocks, hence its signs, is the same for every access\n"
  "// it holds: computed once a thread.\n"
  "struct bq_dyn_rot {\n"
  "  int lane, log2n;\n"
  "  bq_u32 neg, mask;\n"
  "  bq_c cn;\n"
  "};\n"
  "static __device__ __forceinline__ bq_dyn_rot bq_dyn_rot_of(const bq_dynamic_params &p, int lane) {\n"
  "  bq_dyn_rot r;\n"
  "  const int n = 1 << p.rlog2, L = n > BQ_VEC ? n / BQ_VEC : 1;\n"
  "  r.lane = (int)(threadIdx.x & 31);\n"
  "  r.log2n = p.rlog2;\n"
  "  r.mask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (r.lane & -L);\n"
  "  r.cn = bq_rot_c(p.rlog2);\n"
  "  r.neg = p.rsigns ? bq_rot_signs<BQ_VEC>((lane * BQ_VEC) & (n - 1), n, p.seed_lo, p.seed_hi) : 0u;\n"
  "  return r;\n"
  "}\n"
  "// a batch's accesses c0 + i tpr below nch rotated and rounded to T (a block's lanes are all\n"
  "// below nch or all past it: n divides the row)\n"
  "template <int CPT>\n"
  "static __device__ __forceinline__ void bq_rotate_batch(bq_xchunk (&a)[CPT], bq_i64 c0, bq_i64 nch, int tpr,\n"
  "                                                       const bq_dyn_rot &r) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < CPT; i++)\n"
  "    if (c0 + (bq_i64)i * tpr < nch) {\n"
  "      bq_c c[BQ_VEC];\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_VEC; k++) c[k] = bq_to_c(a[i].e[k]);\n"
  "      bq_rot_apply<BQ_VEC>(c, r.lane, r.log2n, r.neg, r.cn, false, r.mask);\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_VEC; k++) a[i].e[k] = bq_from_c(c[k]);\n"
  "    }\n"
  "}\n"
  "#define BQ_ROTATE_BATCH(CPT, a, c0, nch, tpr, rot) bq_rotate_batch<CPT>(a, c0, nch, tpr, *(rot))\n"
  "#else\n"
  "struct bq_dyn_rot;\n"
  "#define BQ_ROTATE_BATCH(CPT, a, c0, nch, tpr, rot) (void)0\n"
  "#endif\n"
  "\n"
  "// One segment (a row, or a group run as a row) of n elements: reduce, store the scale,\n"
  "// quantize. The team holds batches of up to BQ_CPT accesses per lane in registers; a\n"
  "// segment of one batch is read once, a longer one is read again for the quantize pass.\n"
  "template <int CPT>\n"
  "static __device__ __forceinline__ void bq_load_batch(bq_xchunk (&a)[CPT], const bq_t *x, bq_i64 c0, bq_i64 nch,\n"
  "                                                     int tpr) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < CPT; i++) {\n"
  "    const bq_i64 c = c0 + (bq_i64)i * tpr;\n"
  "    if (c < nch) bq_load(a[i], x + c * BQ_VEC, 16);\n"
  "  }\n"
  "}\n"
  "\n"
  "// Elements before a segment's vector loop, one a lane at most: x must reach a 16-byte\n"
  "// boundary. Where y starts off a sector and the count that brings y to a line (or to the\n"
  "// team's width if smaller) keeps x 16-byte aligned, take that count instead (odd-length\n"
  "// rows from aligned bases, say), so that the warps' stores write whole lines rather than\n"
  "// partial ones. Sector-aligned rows keep x's count (strided rows would otherwise take a\n"
  "// line's worth of elements one by one), and where the host sees that every segment's y is\n"
  "// sector-aligned (p.align_y == 0) the test is skipped, which saves its cost. bq_dynamic\n"
  "// only: in bq_dynamic_long the test costs registers that its large teams cannot spare.\n"
  "static __device__ __forceinline__ int bq_segment_prologue(const bq_t *x, const bq_i *y, bq_i64 n, int tpr) {\n"
  "  const bq_u32 ya = (bq_u32)(bq_u64)y, xa = (bq_u32)(bq_u64)x, a = tpr < 128 ? (bq_u32)tpr : 128u;\n"
  "  const bq_u32 py = (0u - ya) & (a - 1); // y has one byte an element\n"
  "  const bq_u32 px = ((0u - xa) & 15u) / (bq_u32)sizeof(bq_t); // bq_prologue's count, in 32 bits (its\n"
  "                                                               // 64-bit form changed the whole kernel's code)\n"
  "  const int k = (int)((ya & 31u) != 0 && ((xa + py * (bq_u32)sizeof(bq_t)) & 15u) == 0 ? py : px);\n"
  "  return (bq_i64)k < n ? k : (int)n;\n"
  "}\n"
  "\n"
  "template <int CPT>\n"
  "static __device__ __forceinline__ void bq_segment(const bq_dynamic_params &p, const bq_t *x, bq_i *y,\n"
  "                                                  bq_i64 n, bq_i64 pidx, bq_i64 g, int lane, int tpr, bq_red *red_smem,\n"
  "                                                  const bq_dyn_rot *rot = 0) {\n"
  "  (void)rot;\n"
  "  // (the rotation's rows start on the 16-byte grid: no prologue, whatever y's alignment)\n"
  "  const int pro = BQ_DYN_ROT ? 0 : CPT == BQ_CPT && p.align_y ? bq_segment_prologue(x, y, n, tpr) : (int)bq_prologue(x, n);\n"
  "  const int w_out = bq_width(y + pro);\n"
  "  const bq_i64 nch = (n - pro) / BQ_VEC, tail0 = pro + nch * BQ_VEC;\n"
  "  const bq_i64 batch = (bq_i64)tpr * CPT;\n"
  "  const bq_t *xb = x + pro;\n"
  "  bq_i *yb = y + pro;\n"
  "  bq_red r = bq_red_init();\n"
  "  // prologue and tail elements, at most one of each a lane, loaded with the first batch\n"
  "  // (not after the reduction: that would cost the row a second round trip to memory)\n"
  "  const bq_i64 kp = lane, kt = tail0 + lane;\n"
  "  const bool has_p = kp < pro, has_t = kt < n;\n"
  "  const bq_t xp = has_p ? x[kp] : (bq_t)0, xt = has_t ? x[kt] : (bq_t)0;\n"
  "  bq_xchunk a[CPT];\n"
  "  // integer codes in bq_dynamic reduce on packed pairs (bq_reduce_chunks): up to 10% faster\n"
  "  // there; FP8 codes and bq_dynamic_long's long rows ran slower so and keep the element form\n"
  "  const bool pairs = BQ_HMAX2 && !BQ_FP8 && CPT == BQ_CPT;\n"
  "#if BQ_HMAX2\n"
  "  bq_u32 m2 = 0;\n"
  "#endif\n"
  "  for (bq_i64 b = 0; b < nch; b += batch) {\n"
  "    bq_load_batch<CPT>(a, xb, b + lane, nch, tpr);\n"
  "    BQ_ROTATE_BATCH(CPT, a, b + lane, nch, tpr, rot);\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++)\n"
  "      if (b + lane + (bq_i64)i * tpr < nch) {\n"
  "#if BQ_HMAX2\n"
  "        if (pairs) m2 = bq_hmax2_chunk(m2, a[i]);\n"
  "        else\n"
  "#endif\n"
  "          bq_reduce_chunk(a[i], r);\n"
  "      }\n"
  "  }\n"
  "#if BQ_HMAX2\n"
  "  if (pairs) bq_hmax2_fold(r, m2);\n"
  "#endif\n"
  "  const bq_c ep = bq_to_c(xp), et = bq_to_c(xt);\n"
  "  if (has_p) bq_red_add(r, ep);\n"
  "  if (has_t) bq_red_add(r, et);\n"
  "  r = bq_red_team(r, tpr, red_smem);\n"
  "  const bq_qp q = bq_params_of(r, (bq_c)p.bound);\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "  if (lane == 0) bq_write_group(p, pidx, g, q);\n"
  "#else\n"
  "  if (lane == 0) bq_write_params(p, pidx, q);\n"
  "#endif\n"
  "  if (!BQ_WRITE_Y) return;\n"
  "  if (has_p) y[kp] = (bq_i)bq_quantize_int(ep, q.s, q.z);\n"
  "  if (has_t) y[kt] = (bq_i)bq_quantize_int(et, q.s, q.z);\n"
  "  for (bq_i64 b = 0; b < nch; b += batch) {\n"
  "    if (nch > batch) { // the one-batch segment is still in a\n"
  "      bq_load_batch<CPT>(a, xb, b + lane, nch, tpr);\n"
  "      BQ_ROTATE_BATCH(CPT, a, b + lane, nch, tpr, rot);\n"
  "    }\n"
  "#if BQ_LEAN\n"
  "    bq_quantize_batch<CPT == BQ_CPT>(a, yb, b + lane, tpr, nch, q, w_out);\n"
  "#else\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++) {\n"
  "      const bq_i64 c = b + lane + (bq_i64)i * tpr;\n"
  "      if (c < nch) {\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk(a[i], o, q);\n"
  "        bq_store(yb + c * BQ_VEC, o, w_out);\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "}\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "// Per group, fast shape: the group is gc = G / BQ_VEC accesses (a power of two up to\n"
  "// 32 BQ_DU) and the row starts 16-byte aligned, so accesses never straddle groups. A\n"
  "// group is held by gl = gc / ga consecutive lanes, ga = min(gc, BQ_DU) accesses each, but\n"
  "// 2 where gc is BQ_DU (access u of lane j is the group's u gl + j: a load instruction reads\n"
  "// gl contiguous accesses of each group; a lane alone with four accesses 64 bytes apart made\n"
  "// every load instruction half-sectors, 26% slower on bf16 groups of 32). The lanes reduce\n"
  "// with log2(gl) shuffles, and one set of scale instructions serves 32 / gl groups a warp.\n"
  "// Where ga is BQ_DU / 2 (gc of BQ_DU or BQ_DU / 2), bq_dynamic_sets takes two groups a lane.\n"
  "static __device__ __forceinline__ void bq_groups_fast(const bq_dynamic_params &p, const bq_t *x, bq_i *y,\n"
  "                                                      bq_i64 r, int lane, int tpr) {\n"
  "  // gc, ga and gl are powers of two: integer codes (bq_dynamic_groups) index by shifts,\n"
  "  // which ran up to 4% faster there; FP8 codes (in bq_dynamic) divide, as the shifts ran\n"
  "  // slower there\n"
  "  const bool sh = !BQ_FP8;\n"
  "  const int gc = (int)(p.group / BQ_VEC), ga = gc < BQ_DU ? gc : gc == BQ_DU ? BQ_DU / 2 : BQ_DU;\n"
  "  const int lgc = __ffs(gc) - 1, lgl = lgc - (__ffs(ga) - 1), gl = sh ? 1 << lgl : gc / ga;\n"
  "  const int w_out = bq_width(y);\n"
  "  const int sub = lane & (gl - 1);\n"
  "  const bq_i64 per = sh ? tpr >> lgl : tpr / gl; // groups a team takes at once\n"
  "  for (bq_i64 g0 = 0; g0 < p.ngroups; g0 += per) { // uniform trip count: shuffles need all lanes\n"
  "    const bq_i64 g = g0 + (sh ? lane >> lgl : lane / gl);\n"
  "    const bool ok = g < p.ngroups;\n"
  "    const bq_i64 c0 = (sh ? g << lgc : g * gc) + sub;\n"
  "    bq_xchunk a[BQ_DU];\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_DU; u++)\n"
  "      if (ok && u < ga) bq_load(a[u], x + (c0 + (bq_i64)u * gl) * BQ_VEC, 16);\n"
  "    bq_red red = bq_red_init();\n"
  "    bq_reduce_chunks(a, ok, ga, red);\n"
  "    red = bq_red_lanes(red, gl);\n"
  "    if (ok) {\n"
  "      const bq_qp q = bq_params_of(red, (bq_c)p.bound);\n"
  "      if (sub == 0) bq_write_group(p, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, q);\n"
  "      if (!BQ_WRITE_Y) continue;\n"
  "#if BQ_LEAN\n"
  "      bq_quantize_batch<true>(a, y, c0, gl, c0 + (bq_i64)ga * gl, q, w_out); // access u < ga: u gl + sub < gc\n"
  "#else\n"
  "#pragma unroll\n"
  "      for (int u = 0; u < BQ_DU; u++) {\n"
  "        if (u < ga) {\n"
  "          bq_qchunk o;\n"
  "          bq_quantize_chunk(a[u], o, q);\n"
  "          bq_store(y + (c0 + (bq_i64)u * gl) * BQ_VEC, o, w_out);\n"
  "        }\n"
  "      }\n"
  "#endif\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// Per group, fast shape, ga = BQ_DU / NS accesses a lane: a lane holds NS groups at once,\n"
  "// `per` groups apart (a team's groups at a time, as in bq_groups_fast), so that it keeps\n"
  "// BQ_DU accesses in flight, as the larger groups do. (With one group of two accesses a lane,\n"
  "// bf16 groups of 32 ran a quarter slower than groups of 128.) The groups' reductions are\n"
  "// the same maxima in another order: the same bits.\n"
  "template <int NS> static __device__ __forceinline__ void bq_groups_sets(const bq_dynamic_params &p, const bq_t *x,\n"
  "                                                                       bq_i *y, int lane, int tpr, bq_i64 r) {\n"
  "  constexpr int GA = BQ_DU / NS;\n"
  "  const bool sh = !BQ_FP8;\n"
  "  const int gc = (int)(p.group / BQ_VEC), lgc = __ffs(gc) - 1, lgl = lgc - (__ffs(GA) - 1);\n"
  "  const int gl = sh ? 1 << lgl : gc / GA, sub = lane & (gl - 1), w_out = bq_width(y);\n"
  "  const bq_i64 per = sh ? tpr >> lgl : tpr / gl;\n"
  "  for (bq_i64 g0 = 0; g0 < p.ngroups; g0 += NS * per) { // uniform trip count: shuffles need all lanes\n"
  "    const bq_i64 gb = g0 + (sh ? lane >> lgl : lane / gl);\n"
  "    bq_xchunk a[NS][GA];\n"
  "#pragma unroll\n"
  "    for (int s = 0; s < NS; s++) {\n"
  "      const bq_i64 g = gb + s * per, c0 = (sh ? g << lgc : g * gc) + sub;\n"
  "#pragma unroll\n"
  "      for (int u = 0; u < GA; u++)\n"
  "        if (g < p.ngroups) bq_load(a[s][u], x + (c0 + (bq_i64)u * gl) * BQ_VEC, 16);\n"
  "    }\n"
  "    bq_red red[NS];\n"
  "#pragma unroll\n"
  "    for (int s = 0; s < NS; s++) {\n"
  "      red[s] = bq_red_init();\n"
  "      bq_reduce_chunks(a[s], gb + s * per < p.ngroups, GA, red[s]);\n"
  "    }\n"
  "    bq_red_lanes_n<NS>(red, gl);\n"
  "#pragma unroll\n"
  "    for (int s = 0; s < NS; s++) {\n"
  "      const bq_i64 g = gb + s * per, c0 = (sh ? g << lgc : g * gc) + sub;\n"
  "      if (g >= p.ngroups) continue;\n"
  "      const bq_qp q = bq_params_of(red[s], (bq_c)p.bound);\n"
  "      if (sub == 0) bq_write_group(p, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, q);\n"
  "      if (!BQ_WRITE_Y) continue;\n"
  "#if BQ_LEAN\n"
  "      bq_quantize_batch<true>(a[s], y, c0, gl, c0 + (bq_i64)GA * gl, q, w_out);\n"
  "#else\n"
  "#pragma unroll\n"
  "      for (int u = 0; u < GA; u++) {\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk(a[s][u], o, q);\n"
  "        bq_store(y + (c0 + (bq_i64)u * gl) * BQ_VEC, o, w_out);\n"
  "      }\n"
  "#endif\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// every fast-groups row of a team's share of the grid (bq_dynamic for FP8 codes,\n"
  "// bq_dynamic_groups for integer codes)\n"
  "static __device__ __forceinline__ void bq_groups_rows(const bq_dynamic_params &p, int lane, int tpr, int teams,\n"
  "                                                      int team) {\n"
  "  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)\n"
  "    bq_groups_fast(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, r, lane, tpr);\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_BLOCK\n"
  "// Per block: a thread block of BQ_TILE_THREADS a B x B tile (p.group; fewer rows or columns\n"
  "// at the matrix's edges; the host bounds B so that a tile's indices fit 32 bits), striding\n"
  "// over the tiles. Where every row starts 16-byte aligned and B is a whole number of accesses\n"
  "// (p.fast_groups), a tile of whole accesses is spread over the threads on a grid\n"
  "// (bq_tgrid), BQ_TILE_CPT accesses at a time each in registers: a tile that fits is read\n"
  "// from DRAM once, a larger one again (from L2) for the quantize pass. Tiles whose rows are\n"
  "// off the grid, and right edge tiles that are not whole accesses, are spread as the 16-byte\n"
  "// lines that hold their rows (bq_tile_window).\n"
  "#define BQ_TILE_THREADS (2048 / BQ_VEC) // 256 threads for 16-bit types: a 128 x 128 tile in one batch\n"
  "#define BQ_TILE_CPT 8\n"
  "#define BQ_TILE_EDGE_CPT 2 // the aligned kernels' right edge tiles that are not whole accesses (bq_tile_window)\n"
  "// Division by a tile's row length w (accesses or slots, uniform across the block) for\n"
  "// indices below n: a multiply by ceil(2^32 / w), exact while n w < 2^32, else a division.\n"
  "// (A division an access was a tenth of the tile kernels' instructions.)\n"
  "struct bq_tdiv {\n"
  "  bq_u32 w, m; // m = 0: divide\n"
  "};\n"
  "static __device__ __forceinline__ bq_tdiv bq_tdiv_of(bq_u32 w, bq_u32 n) {\n"
  "  bq_tdiv d;\n"
  "  d.w = w > 0 ? w : 1;\n"
  "  d.m = d.w > 1 && (bq_u64)n * d.w < ((bq_u64)1 << 32) ? 0xFFFFFFFFu / d.w + 1 : 0;\n"
  "  return d;\n"
  "}\n"
  "static __device__ __forceinline__ bq_u32 bq_tdiv_q(bq_u32 i, const bq_tdiv &d) { return d.m ? __umulhi(i, d.m) : i / d.w; }\n"
  "// The grid of an aligned tile whose rows are apr whole accesses (apr <= BQ_TILE_THREADS):\n"
  "// thread t takes access t % apr of rows t / apr + k R, R = BQ_TILE_THREADS / apr rows a\n"
  "// step (threads from R apr on take none), so that a thread divides once a tile shape and\n"
  "// steps a pointer an access. (Dividing each access's index cost a fifth of the instructions.)\n"
  "struct bq_tgrid {\n"
  "  bq_u32 apr, R, row, col; // apr 0: not yet set\n"
  "};\n"
  "static __device__ __forceinline__ void bq_tgrid_at(bq_tgrid &g, bq_u32 apr) {\n"
  "  if (apr != g.apr) { // uniform; a run of tiles of one shape keeps the grid\n"
  "    g.apr = apr;\n"
  "    g.R = BQ_TILE_THREADS / apr;\n"
  "    g.row = threadIdx.x / apr;\n"
  "    g.col = threadIdx.x - g.row * apr;\n"
  "  }\n"
  "}\n"
  "// the rows below which this thread holds accesses of a tile of nr rows\n"
  "static __device__ __forceinline__ bq_u32 bq_tgrid_lim(const bq_tgrid &g, bq_u32 nr) { return g.row < g.R ? nr : 0; }\n"
  "// how many of the CPT steps from row b (a multiple of R) this thread holds: steps k < the\n"
  "// count, one register where the rows' bounds would take three\n"
  "template <int CPT> static __device__ __forceinline__ int bq_tgrid_steps(const bq_tgrid &g, bq_u32 b, bq_u32 lim) {\n"
  "  int n = 0;\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < CPT; k++) n += g.row + b + k * g.R < lim;\n"
  "  return n;\n"
  "}\n"
  "// Quantizes and stores the chunks a[k], k < nk, y the access of k = 0 and ystep elements\n"
  "// between k and k + 1. The form is picked chunk by chunk (once for the batch it was slower,\n"
  "// 85.6 against 79.1 us on bf16 [8192, 8192]).\n"
  "template <int CPT>\n"
  "static __device__ __forceinline__ void bq_tile_put(const bq_xchunk (&a)[CPT], bq_i *y, bq_i64 ystep, int nk,\n"
  "                                                   const bq_qp &q) {\n"
  "  if (!BQ_WRITE_Y) return;\n"
  "  const int w0 = bq_width(y);\n"
  "  const bool same = (((bq_u32)ystep * (bq_u32)sizeof(bq_i)) & 15u) == 0; // every access aligned as the first\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < CPT; k++) {\n"
  "    if (k < nk) {\n"
  "      bq_qchunk o;\n"
  "      bq_quantize_chunk_any(a[k], o, q);\n"
  "      bq_i *yp = y + k * ystep;\n"
  "      bq_store(yp, o, same ? w0 : bq_width(yp));\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// A tile read as windows (bq_dynamic_tiles_rows, and the right edge tiles of the others\n"
  "// that are not whole accesses): row rr's nc elements lie in the 16-byte lines from the one\n"
  "// holding its first element, w lines a row at most (every row gets w slots; slots past its\n"
  "// row's end hold nothing). The tile's slots are spread over the threads as bq_dynamic_tiles\n"
  "// spreads accesses, CPT at a time each: a tile that fits is read from DRAM once, with one\n"
  "// 16-byte load a line. A line's elements outside the row are read as 0, which moves no\n"
  "// reduction (both forms include 0), and are not stored. A line that reaches outside x's\n"
  "// span (before its first element or past its last) is read element by element.\n"
  "// The threads take every row's inner slots first (lines 1 to w - 2, whole but for the last\n"
  "// of a row that ends short of it) and the two edge lines of each row after them, so that a\n"
  "// warp meets the masked forms in one or two batches of its CPT, not in all of them.\n"
  "struct bq_wgeo {\n"
  "  bq_u32 w, ni, nin, n; // slots a row, inner slots a row, inner slots, all slots\n"
  "  bq_tdiv d;            // division by ni\n"
  "};\n"
  "static __device__ __forceinline__ bq_wgeo bq_wgeo_of(bq_u32 nr, bq_u32 nc, bool aligned) {\n"
  "  bq_wgeo g;\n"
  "  g.w = (nc + (aligned ? BQ_VEC - 1 : 2 * BQ_VEC - 2)) / BQ_VEC;\n"
  "  g.ni = g.w > 2 ? g.w - 2 : 0;\n"
  "  g.nin = nr * g.ni;\n"
  "  g.n = nr * g.w;\n"
  "  g.d = bq_tdiv_of(g.ni, g.nin); // (ni 0: no slot below nin)\n"
  "  return g;\n"
  "}\n"
  "struct bq_win {\n"
  "  bq_u32 rr;       // the row\n"
  "  int s;           // the slot's first element, from the row's first (negative: the line starts before the row)\n"
  "  bool any, whole; // the slot holds an element of the row; it holds elements of the row only\n"
  "};\n"
  "static __device__ __forceinline__ bq_win bq_win_of(const bq_t *x, bq_i64 xs, bq_u32 i, const bq_wgeo &g, bq_u32 nc) {\n"
  "  bq_win v;\n"
  "  bq_u32 k;\n"
  "  if (i < g.nin) {\n"
  "    v.rr = bq_tdiv_q(i, g.d);\n"
  "    k = 1 + (i - v.rr * g.ni);\n"
  "  } else { // edge slots: (line 0, line w - 1) of each row, or line 0 alone where w is 1\n"
  "    const bq_u32 j = i - g.nin;\n"
  "    v.rr = g.w > 1 ? j >> 1 : j;\n"
  "    k = g.w > 1 && (j & 1) ? g.w - 1 : 0;\n"
  "  }\n"
  "  v.s = (int)(k * BQ_VEC) - (int)(((bq_u32)(bq_u64)(x + v.rr * xs) & 15u) / sizeof(bq_t));\n"
  "  v.any = v.s < (int)nc;\n"
  "  v.whole = v.s >= 0 && v.s + BQ_VEC <= (int)nc;\n"
  "  return v;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_win_load(bq_xchunk &a, const bq_win &v, const bq_t *xr, bq_u32 nc,\n"
  "                                                   const bq_t *lo, const bq_t *hi) {\n"
  "  const bq_t *l = xr + v.s;\n"
  "  if (v.whole) {\n"
  "    bq_load(a, l, 16);\n"
  "  } else if (l >= lo && l + BQ_VEC <= hi) {\n"
  "    bq_load(a, l, 16);\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++)\n"
  "      if ((bq_u32)(v.s + j) >= nc) a.e[j] = bq_t(0);\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) a.e[j] = (bq_u32)(v.s + j) < nc ? xr[v.s + j] : bq_t(0);\n"
  "  }\n"
  "}\n"
  "static __device__ __forceinline__ void bq_win_store(const bq_qchunk &o, const bq_win &v, bq_i *yr, bq_u32 nc) {\n"
  "  if (v.whole) {\n"
  "    bq_i *yp = yr + v.s;\n"
  "    bq_store(yp, o, bq_width(yp));\n"
  "  } else if (BQ_VEC == 8) { // the row's run of the line, [j, e), in the widest pieces its\n"
  "    // alignment allows: lanes here hold different rows, so each store is a memory request\n"
  "    // of its own (narrower lines keep the byte stores, which ran faster for them)\n"
  "    bq_u64 bits = 0;\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) bits |= (bq_u64)(bq_u8)o.e[j] << (8 * j);\n"
  "    bq_u8 *d = (bq_u8 *)(yr + v.s);\n"
  "    const int e = (int)nc - v.s < BQ_VEC ? (int)nc - v.s : BQ_VEC;\n"
  "    for (int j = v.s < 0 ? -v.s : 0; j < e;) {\n"
  "      const bq_u32 a = (bq_u32)(bq_u64)(d + j);\n"
  "      const int n = e - j;\n"
  "      const bq_u64 b = bits >> (8 * j);\n"
  "      if ((a & 7u) == 0 && n >= 8) {\n"
  "        BQ_EMU_ALIGNED(d + j, 8);\n"
  "        *(bq_u64 *)(d + j) = b;\n"
  "        j += 8;\n"
  "      } else if ((a & 3u) == 0 && n >= 4) {\n"
  "        BQ_EMU_ALIGNED(d + j, 4);\n"
  "        *(bq_u32 *)(d + j) = (bq_u32)b;\n"
  "        j += 4;\n"
  "      } else if ((a & 1u) == 0 && n >= 2) {\n"
  "        BQ_EMU_ALIGNED(d + j, 2);\n"
  "        *(bq_u16 *)(d + j) = (bq_u16)b;\n"
  "        j += 2;\n"
  "      } else {\n"
  "        d[j] = (bq_u8)b;\n"
  "        j += 1;\n"
  "      }\n"
  "    }\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++)\n"
  "      if ((bq_u32)(v.s + j) < nc) yr[v.s + j] = o.e[j];\n"
  "  }\n"
  "}\n"
  "// One tile (its first element x, y; nr x nc; aligned: its rows start on a line): reduce,\n"
  "// store its scale at pidx, quantize.\n"
  "template <int CPT>\n"
  "static __device__ __forceinline__ void bq_tile_window(const bq_dynamic_params &p, bq_i64 pidx, const bq_t *x, bq_i *y,\n"
  "                                                      bq_u32 nr, bq_u32 nc, bool aligned, bq_red *red_smem) {\n"
  "  const bq_u32 tid = threadIdx.x, batch = BQ_TILE_THREADS * CPT;\n"
  "  const bq_wgeo g = bq_wgeo_of(nr, nc, aligned);\n"
  "  const bq_t *lo = (const bq_t *)p.x, *hi = lo + (p.rows - 1) * p.xs + p.cols;\n"
  "  bq_xchunk a[CPT];\n"
  "  bq_red red = bq_red_init();\n"
  "  for (bq_u32 b0 = 0; b0 < g.n; b0 += batch) {\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < CPT; k++) {\n"
  "      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;\n"
  "      const bq_win v = bq_win_of(x, p.xs, i, g, nc);\n"
  "      if (i < g.n && v.any) bq_win_load(a[k], v, x + v.rr * p.xs, nc, lo, hi);\n"
  "    }\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < CPT; k++) {\n"
  "      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;\n"
  "      if (i < g.n && bq_win_of(x, p.xs, i, g, nc).any) bq_reduce_chunk(a[k], red);\n"
  "    }\n"
  "  }\n"
  "  red = bq_red_team(red, BQ_TILE_THREADS, red_smem);\n"
  "  const bq_qp q = bq_params_of(red, (bq_c)p.bound);\n"
  "  if (tid == 0) bq_write_params(p, pidx, q);\n"
  "  if (!BQ_WRITE_Y) return;\n"
  "  for (bq_u32 b0 = 0; b0 < g.n; b0 += batch) {\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < CPT; k++) {\n"
  "      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;\n"
  "      const bq_win v = bq_win_of(x, p.xs, i, g, nc);\n"
  "      if (i < g.n && v.any) {\n"
  "        if (g.n > batch) bq_win_load(a[k], v, x + v.rr * p.xs, nc, lo, hi); // else still in a\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk_any(a[k], o, q);\n"
  "        bq_win_store(o, v, y + v.rr * p.ys, nc);\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// A block's tiles: blockIdx.x, + gridDim.x, ... of the host's walk (p.trows x p.tcols\n"
  "// tiles), as (row, column) stepped without a division a tile, the walk's constants in the\n"
  "// parameter block rather than registers. (Dividing each tile's 64-bit index cost as much as\n"
  "// staging its accesses.)\n"
  "struct bq_twalk {\n"
  "  bq_i64 tr, tc;\n"
  "};\n"
  "static __device__ __forceinline__ bq_twalk bq_twalk_of(const bq_dynamic_params &p) {\n"
  "  bq_twalk w;\n"
  "  w.tr = p.tcols > 0 ? (bq_i64)blockIdx.x / p.tcols : p.trows; // (no columns: no tiles)\n"
  "  w.tc = (bq_i64)blockIdx.x - w.tr * p.tcols;\n"
  "  return w;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_twalk_step(const bq_dynamic_params &p, bq_twalk &w) {\n"
  "  w.tr += p.tdq;\n"
  "  w.tc += p.tdr;\n"
  "  if (w.tc >= p.tcols) {\n"
  "    w.tc -= p.tcols;\n"
  "    w.tr++;\n"
  "  }\n"
  "}\n"
  "// tile (tr, tc)'s rows and columns (fewer at the matrix's edges)\n"
  "static __device__ __forceinline__ bq_u32 bq_tile_len(bq_i64 n, bq_i64 t, bq_i64 B) {\n"
  "  const bq_i64 r = n - t * B;\n"
  "  return (bq_u32)(r < B ? r : B);\n"
  "}\n"
  "#define BQ_TILE_STAGED (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)\n"
  "#if BQ_E_DYNAMIC_TILES && BQ_TILE_STAGED\n"
  "// Staged tiles (p.staged: 16-bit data, rows 16-byte aligned, B whole accesses and a tile\n"
  "// of at most BQ_TILE_CPT accesses a thread, which bounds B to 128: apr <= 16 accesses a row,\n"
  "// so a tile's nr <= B = 8 apr rows take at most BQ_TILE_CPT steps of its grid). A\n"
  "// persistent block takes the tiles of whole accesses blockIdx.x, + gridDim.x, ..., and while\n"
  "// it reduces and quantizes one from registers, cp.async brings its next into shared memory\n"
  "// (one slot, BQ_TILE_THREADS * BQ_TILE_CPT accesses), so that loads stay in flight through\n"
  "// the arithmetic. Thread t copies exactly the accesses it later reads (its grid's, to slot\n"
  "// positions t + k BQ_TILE_THREADS), so its own cp.async.wait_group is all the\n"
  "// synchronization the slot needs, and it copies the next tile only after its reduction has\n"
  "// consumed this one's. A right edge column of tiles that are not whole accesses runs after\n"
  "// them (the round robin going on), as windows, a few slots a thread at a time\n"
  "// (BQ_TILE_EDGE_CPT): inside the loop its registers would spill the loop's.\n"
  "static __device__ __forceinline__ void bq_tile_stage(const bq_dynamic_params &p, bq_i64 tr, bq_i64 tc, bq_u32 nr,\n"
  "                                                     const bq_tgrid &g, bq_u32 slot) {\n"
  "  const bq_u32 lim = bq_tgrid_lim(g, nr), r0 = lim ? g.row : 0;\n"
  "  const bq_t *x = (const bq_t *)p.x + (tr * p.group + r0) * p.xs + tc * p.group + g.col * BQ_VEC;\n"
  "  const bq_i64 step = (bq_i64)g.R * p.xs;\n"
  "  const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, 0, lim);\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < BQ_TILE_CPT; k++)\n"
  "    if (k < nk) bq_cp_async16(slot + (threadIdx.x + k * BQ_TILE_THREADS) * 16u, x + k * step, 16);\n"
  "}\n"
  "static __device__ __forceinline__ void bq_tiles_staged(const bq_dynamic_params &p, bq_red *red_smem) {\n"
  "  BQ_DYNAMIC_SMEM(bq_tile_slot);\n"
  "  const bq_u32 slot = bq_smem_addr(bq_tile_slot), tid = threadIdx.x;\n"
  "  const bq_xchunk *S = (const bq_xchunk *)bq_tile_slot;\n"
  "  const bq_i64 B = p.group;\n"
  "  bq_tgrid g; // the current tile's grid\n"
  "  g.apr = 0;\n"
  "  bq_twalk w = bq_twalk_of(p);\n"
  "  if (w.tr < p.trows) {\n"
  "    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B);\n"
  "    bq_tgrid_at(g, bq_tile_len(p.cols, w.tc, B) / BQ_VEC);\n"
  "    bq_tile_stage(p, w.tr, w.tc, nr, g, slot);\n"
  "  }\n"
  "  bq_cp_commit();\n"
  "  for (; w.tr < p.trows; bq_twalk_step(p, w)) {\n"
  "    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B);\n"
  "    const bq_u32 lim = bq_tgrid_lim(g, nr);\n"
  "    const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, 0, lim);\n"
  "    bq_cp_wait<0>();\n"
  "    bq_xchunk a[BQ_TILE_CPT];\n"
  "    bq_red red = bq_red_init();\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < BQ_TILE_CPT; k++)\n"
  "      if (k < nk) {\n"
  "        a[k] = S[tid + k * BQ_TILE_THREADS];\n"
  "        bq_reduce_chunk(a[k], red);\n"
  "      }\n"
  "    bq_twalk n = w; // the next tile: staged now (this thread's accesses of the slot are in a, and reduced)\n"
  "    bq_twalk_step(p, n);\n"
  "    bq_u32 napr = 0;\n"
  "    if (n.tr < p.trows) {\n"
  "      bq_tgrid gn = g;\n"
  "      napr = bq_tile_len(p.cols, n.tc, B) / BQ_VEC;\n"
  "      bq_tgrid_at(gn, napr);\n"
  "      bq_tile_stage(p, n.tr, n.tc, bq_tile_len(p.rows, n.tr, B), gn, slot);\n"
  "    }\n"
  "    bq_cp_commit();\n"
  "    red = bq_red_team(red, BQ_TILE_THREADS, red_smem);\n"
  "    const bq_qp q = bq_params_of(red, (bq_c)p.bound);\n"
  "    if (tid == 0) bq_write_params(p, w.tr * p.grs + w.tc, q);\n"
  "    bq_i *y = (bq_i *)p.y + (w.tr * B + (lim ? g.row : 0)) * p.ys + w.tc * B + g.col * BQ_VEC;\n"
  "    bq_tile_put<BQ_TILE_CPT>(a, y, (bq_i64)g.R * p.ys, nk, q);\n"
  "    if (napr) bq_tgrid_at(g, napr); // (the same as gn)\n"
  "  }\n"
  "  bq_cp_wait<0>();\n"
  "  if (p.tcols < p.ngroups) { // the last column's tiles, the round robin going on from where the staged tiles left it\n"
  "    const bq_i64 G = gridDim.x, tc = p.ngroups - 1;\n"
  "    for (bq_i64 tr = ((bq_i64)blockIdx.x - p.trows * p.tcols % G + G) % G; tr < p.trows; tr += G)\n"
  "      bq_tile_window<BQ_TILE_EDGE_CPT>(p, tr * p.grs + tc, (const bq_t *)p.x + tr * B * p.xs + tc * B,\n"
  "                                       (bq_i *)p.y + tr * B * p.ys + tc * B, bq_tile_len(p.rows, tr, B),\n"
  "                                       bq_tile_len(p.cols, tc, B), true, red_smem);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "// (64 registers: four 256-thread blocks an SM, whose tiles' loads in flight keep it busy)\n"
  "#if BQ_E_DYNAMIC_TILES\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_TILE_THREADS, 1024 / BQ_TILE_THREADS) BQ_FN_DYNAMIC_TILES(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_TILE_THREADS / 32];\n"
  "#if BQ_TILE_STAGED\n"
  "  if (p.staged) {\n"
  "    bq_tiles_staged(p, red_smem);\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  const bq_i64 B = p.group;\n"
  "  bq_tgrid g;\n"
  "  g.apr = 0;\n"
  "  for (bq_twalk w = bq_twalk_of(p); w.tr < p.trows; bq_twalk_step(p, w)) {\n"
  "    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B), nc = bq_tile_len(p.cols, w.tc, B);\n"
  "    const bq_t *x = (const bq_t *)p.x + w.tr * B * p.xs + w.tc * B;\n"
  "    bq_i *y = (bq_i *)p.y + w.tr * B * p.ys + w.tc * B;\n"
  "    if (p.fast_groups && nc % BQ_VEC == 0 && nc / BQ_VEC <= BQ_TILE_THREADS) {\n"
  "      bq_tgrid_at(g, nc / BQ_VEC);\n"
  "      const bq_u32 lim = bq_tgrid_lim(g, nr), rt = lim ? g.row : 0, span = BQ_TILE_CPT * g.R; // rows a batch\n"
  "      const bq_i64 xstep = (bq_i64)g.R * p.xs, ystep = (bq_i64)g.R * p.ys;\n"
  "      const bq_t *xt = x + rt * p.xs + g.col * BQ_VEC;\n"
  "      bq_i *yt = y + rt * p.ys + g.col * BQ_VEC;\n"
  "      bq_xchunk a[BQ_TILE_CPT];\n"
  "      bq_red red = bq_red_init();\n"
  "      for (bq_u32 b = 0, kb = 0; b < nr; b += span, kb += BQ_TILE_CPT) {\n"
  "        const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, b, lim);\n"
  "#pragma unroll\n"
  "        for (int k = 0; k < BQ_TILE_CPT; k++)\n"
  "          if (k < nk) bq_load(a[k], xt + (kb + k) * xstep, 16);\n"
  "#pragma unroll\n"
  "        for (int k = 0; k < BQ_TILE_CPT; k++)\n"
  "          if (k < nk) bq_reduce_chunk(a[k], red);\n"
  "      }\n"
  "      red = bq_red_team(red, BQ_TILE_THREADS, red_smem);\n"
  "      const bq_qp q = bq_params_of(red, (bq_c)p.bound);\n"
  "      if (threadIdx.x == 0) bq_write_params(p, w.tr * p.grs + w.tc, q);\n"
  "      for (bq_u32 b = 0, kb = 0; b < nr; b += span, kb += BQ_TILE_CPT) {\n"
  "        const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, b, lim);\n"
  "        if (BQ_WRITE_Y && nr > span) { // else still in a\n"
  "#pragma unroll\n"
  "          for (int k = 0; k < BQ_TILE_CPT; k++)\n"
  "            if (k < nk) bq_load(a[k], xt + (kb + k) * xstep, 16);\n"
  "        }\n"
  "        bq_tile_put<BQ_TILE_CPT>(a, yt + kb * ystep, ystep, nk, q);\n"
  "      }\n"
  "    } else { // a right edge tile that is not whole accesses (or rows longer than the block's accesses)\n"
  "      bq_tile_window<BQ_TILE_EDGE_CPT>(p, w.tr * p.grs + w.tc, x, y, nr, nc, true, red_smem);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "// Every tile off the 16-byte grid (rows whose stride is not a multiple of 16 bytes, or x\n"
  "// itself off it: the host's choice) as windows, at bq_dynamic_tiles' bound: a row of B\n"
  "// elements takes one line more than its accesses, so a thread holds one slot more.\n"
  "#if BQ_E_DYNAMIC_TILES_ROWS\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_TILE_THREADS, 1024 / BQ_TILE_THREADS) BQ_FN_DYNAMIC_TILES_ROWS(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_TILE_THREADS / 32];\n"
  "  const bq_i64 B = p.group;\n"
  "  for (bq_twalk w = bq_twalk_of(p); w.tr < p.trows; bq_twalk_step(p, w))\n"
  "    bq_tile_window<BQ_TILE_CPT + 1>(p, w.tr * p.grs + w.tc, (const bq_t *)p.x + w.tr * B * p.xs + w.tc * B,\n"
  "                                    (bq_i *)p.y + w.tr * B * p.ys + w.tc * B, bq_tile_len(p.rows, w.tr, B),\n"
  "                                    bq_tile_len(p.cols, w.tc, B), false, red_smem);\n"
  "}\n"
  "#endif\n"
  "#elif BQ_GRAN != BQ_GRAN_TENSOR\n"
  "// Teams of tpr threads (p.tpr), a row or group each; a block holds one team or, for warp\n"
  "// teams, eight.\n"
  "template <int CPT> static __device__ __forceinline__ void bq_dynamic_body(const bq_dynamic_params &p, bq_red *red_smem) {\n"
  "  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr;\n"
  "  const int lane = threadIdx.x & (tpr - 1);\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "#if BQ_DYN_ROT\n"
  "  const bq_dyn_rot rot = bq_dyn_rot_of(p, lane);\n"
  "  const bq_dyn_rot *rp = &rot;\n"
  "#else\n"
  "  const bq_dyn_rot *rp = 0;\n"
  "#endif\n"
  "  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)\n"
  "    bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, p.cols, r, 0, lane, tpr, red_smem, rp);\n"
  "#else\n"
  "#if BQ_FP8 // FP8 codes run their fast groups here too (integer codes take bq_dynamic_groups)\n"
  "  if (p.fast_groups) {\n"
  "    bq_groups_rows(p, lane, tpr, teams, team);\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  const bq_i64 segs = p.rows * p.ngroups; // every group a segment of its own\n"
  "  for (bq_i64 w = (bq_i64)blockIdx.x * teams + team; w < segs; w += (bq_i64)gridDim.x * teams) {\n"
  "    const bq_i64 r = bq_div64(w, p.ngroups), g = w - r * p.ngroups;\n"
  "    bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs + g * p.group, (bq_i *)p.y + r * p.ys + g * p.group,\n"
  "                    p.group, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, lane, tpr, red_smem);\n"
  "  }\n"
  "#endif\n"
  "}\n"
  "// Per token, QuantizedLinear's weight streaming may start as soon as every block of this\n"
  "// grid is running (bq_launch_dependents): it streams weights until this grid is done.\n"
  "#define BQ_ROWS_STAGED (BQ_GRAN == BQ_GRAN_TOKEN && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16))\n"
  "#if BQ_E_DYNAMIC_STAGED && BQ_ROWS_STAGED\n"
  "// Staged rows (bq_dynamic_staged: per token, 16-bit data, rows 16-byte aligned and whole\n"
  "// accesses, a row of at most p.tpr BQ_CPT accesses and the team a block, more rows than\n"
  "// the grid's blocks): persistent blocks take rows\n"
  "// blockIdx.x, + gridDim.x, ..., and while a block reduces and quantizes one row from\n"
  "// registers, cp.async brings its next into shared memory (one slot of a row), each thread\n"
  "// copying exactly the accesses it reads later, so that its own wait is all the\n"
  "// synchronization the slot needs, and copying only after its reduction has consumed them.\n"
  "// A team's loads so stay in flight through its reduction and stores. (With the rotation,\n"
  "// two slots: below.)\n"
  "#if BQ_DYN_ROT\n"
  "// With the rotation the row's accesses are dealt otherwise: access i of a lane holds chunk\n"
  "// (access) 8 (lane / 2) + 2 (i % 4) + lane % 2 of the span of 4 tpr chunks that i / 4 picks.\n"
  "// A lane pair so holds 8 consecutive chunks, and a block of nb chunks (n / BQ_VEC, at most a\n"
  "// warp's 32) is nb / 8 lane pairs: the butterfly's stages between a block's chunks take one\n"
  "// shuffle (lane ^ 1), two register stages (accesses m ^ 1, m ^ 2), then log2(nb / 8) shuffles:\n"
  "// one fewer than bq_dyn_rot's map where nb is 4, two fewer from 8 up. A load or store moves\n"
  "// whole 32-byte sectors (a lane pair's). The slot keeps a chunk at its place in the row but\n"
  "// for 16-byte units 1-2 of each 128-byte line, xored with the chunk's bits 3-4, so that a\n"
  "// quarter warp's reads fall in distinct banks; the slot is so a whole number of lines\n"
  "// (bq_staged_slot).\n"
  "static __device__ __forceinline__ bq_i64 bq_staged_chunk(int lane, int i, int tpr) {\n"
  "  return (bq_i64)(i >> 2) * 4 * tpr + 8 * (lane >> 1) + 2 * (i & 3) + (lane & 1);\n"
  "}\n"
  "static __device__ __forceinline__ bq_u32 bq_staged_pos(bq_i64 c) { return (bq_u32)c ^ (((bq_u32)c >> 2) & 6u); }\n"
  "static __device__ __forceinline__ bq_u32 bq_staged_slot(bq_i64 nch) { return (bq_u32)((nch + 7) & ~7ll) * 16u; }\n"
  "#else\n"
  "static __device__ __forceinline__ bq_i64 bq_staged_chunk(int lane, int i, int tpr) { return lane + (bq_i64)i * tpr; }\n"
  "static __device__ __forceinline__ bq_u32 bq_staged_pos(bq_i64 c) { return (bq_u32)c; }\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_row_stage(const bq_dynamic_params &p, bq_i64 r, int lane, int tpr,\n"
  "                                                    bq_i64 nch, bq_u32 slot) {\n"
  "  const bq_t *x = (const bq_t *)p.x + r * p.xs;\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < BQ_CPT; i++) {\n"
  "    const bq_i64 c = bq_staged_chunk(lane, i, tpr);\n"
  "    if (c < nch) bq_cp_async16(slot + bq_staged_pos(c) * 16u, x + c * BQ_VEC, 16);\n"
  "  }\n"
  "}\n"
  "#if BQ_DYN_ROT\n"
  "// The rotation in the staged map: the lane's signs for each of its accesses m of a span\n"
  "// (the same in every span: a span is whole blocks), computed once a thread, BQ_VEC bits an\n"
  "// access in one word (four words spilled at 64 registers)\n"
  "struct bq_staged_rot {\n"
  "  int log2n;\n"
  "  bq_u32 neg;\n"
  "  bq_c cn;\n"
  "};\n"
  "static __device__ __forceinline__ bq_staged_rot bq_staged_rot_of(const bq_dynamic_params &p, int lane) {\n"
  "  bq_staged_rot r;\n"
  "  const int n = 1 << p.rlog2;\n"
  "  r.log2n = p.rlog2;\n"
  "  r.cn = bq_rot_c(p.rlog2);\n"
  "  r.neg = 0;\n"
  "  static_assert(4 * BQ_VEC <= 32, \"a lane's signs in one word\");\n"
  "  if (p.rsigns)\n"
  "#pragma unroll\n"
  "    for (int m = 0; m < 4; m++)\n"
  "      r.neg |= bq_rot_signs<BQ_VEC>((int)(bq_staged_chunk(lane, m, 0) * BQ_VEC) & (n - 1), n, p.seed_lo, p.seed_hi)\n"
  "               << (BQ_VEC * m);\n"
  "  return r;\n"
  "}\n"
  "// one butterfly stage between lanes lane and lane ^ lh, for every element of the four accesses\n"
  "static __device__ __forceinline__ void bq_rc_stage(bq_c (&c)[4][BQ_VEC], int lane, int lh) {\n"
  "  const bq_c sg = lane & lh ? (bq_c)-1 : (bq_c)1; // (as bq_rot_apply's: one fma by +-1)\n"
  "#pragma unroll\n"
  "  for (int m = 0; m < 4; m++)\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < BQ_VEC; k++) c[m][k] = bq_fma(c[m][k], sg, __shfl_xor_sync(0xffffffffu, c[m][k], lh));\n"
  "}\n"
  "// one between the lane's accesses m and m ^ hm\n"
  "static __device__ __forceinline__ void bq_rc_regs(bq_c (&c)[4][BQ_VEC], int hm) {\n"
  "#pragma unroll\n"
  "  for (int m = 0; m < 4; m++)\n"
  "    if (!(m & hm))\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_VEC; k++) {\n"
  "        const bq_c u = c[m][k], v = c[m + hm][k];\n"
  "        c[m][k] = bq_add(u, v);\n"
  "        c[m + hm][k] = bq_sub(u, v);\n"
  "      }\n"
  "}\n"
  "// Rotates a row's accesses in place (rounded to T), the contract's stages in their order:\n"
  "// within an access, lane ^ 1, accesses m ^ 1 and m ^ 2, lanes ^ 2, ^ 4. A warp whose chunks\n"
  "// all lie past the row skips (warp-uniform: it holds 128 consecutive chunks of each span);\n"
  "// the rest run every stage on all 32 lanes, on zeros past the row.\n"
  "static __device__ __forceinline__ void bq_rotate_staged(bq_xchunk (&a)[BQ_CPT], bq_i64 nch, int lane, int tpr,\n"
  "                                                        const bq_staged_rot &r) {\n"
  "  static_assert(BQ_CPT % 4 == 0, \"the staged map deals accesses in fours\");\n"
  "  const int n = 1 << r.log2n;\n"
  "#pragma unroll\n"
  "  for (int s = 0; s < BQ_CPT / 4; s++) {\n"
  "    if ((bq_i64)s * 4 * tpr + 128 * (lane >> 5) >= nch) continue;\n"
  "    bq_c c[4][BQ_VEC];\n"
  "#pragma unroll\n"
  "    for (int m = 0; m < 4; m++)\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_VEC; k++) {\n"
  "        const bq_c v = bq_to_c(a[4 * s + m].e[k]);\n"
  "        c[m][k] = (r.neg >> (BQ_VEC * m + k)) & 1u ? -v : v;\n"
  "      }\n"
  "#pragma unroll\n"
  "    for (int h = 1; h < BQ_VEC; h <<= 1) {\n"
  "      if (h >= n) break;\n"
  "#pragma unroll\n"
  "      for (int m = 0; m < 4; m++)\n"
  "#pragma unroll\n"
  "        for (int k = 0; k < BQ_VEC; k++)\n"
  "          if (!(k & h)) {\n"
  "            const bq_c u = c[m][k], v = c[m][k + h];\n"
  "            c[m][k] = bq_add(u, v);\n"
  "            c[m][k + h] = bq_sub(u, v);\n"
  "          }\n"
  "    }\n"
  "    if (n > BQ_VEC) bq_rc_stage(c, lane, 1);\n"
  "    if (n > 2 * BQ_VEC) bq_rc_regs(c, 1);\n"
  "    if (n > 4 * BQ_VEC) bq_rc_regs(c, 2);\n"
  "    for (int lh = 2; 4 * lh * BQ_VEC < n; lh <<= 1) bq_rc_stage(c, lane, lh);\n"
  "#pragma unroll\n"
  "    for (int m = 0; m < 4; m++)\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_VEC; k++) a[4 * s + m].e[k] = bq_from_c(bq_mul(c[m][k], r.cn));\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_rows_staged(const bq_dynamic_params &p, bq_red *red_smem) {\n"
  "  BQ_DYNAMIC_SMEM(bq_row_slot);\n"
  "  const bq_u32 slot = bq_smem_addr(bq_row_slot);\n"
  "  const bq_xchunk *S = (const bq_xchunk *)bq_row_slot;\n"
  "  (void)S;\n"
  "  const int tpr = p.tpr, lane = threadIdx.x;\n"
  "  const bq_i64 nch = p.cols / BQ_VEC;\n"
  "  bq_i64 r = blockIdx.x;\n"
  "  if (r < p.rows) bq_row_stage(p, r, lane, tpr, nch, slot);\n"
  "  bq_cp_commit();\n"
  "  const bool pairs = BQ_HMAX2 && !BQ_FP8; // as bq_segment's\n"
  "#if BQ_DYN_ROT\n"
  "  // With the rotation, two slots: the next row is requested into the other one before this\n"
  "  // one is read, so its loads stay in flight through the rotation's shuffles too (which\n"
  "  // would otherwise stand between a row's arrival and its successor's request). A thread\n"
  "  // again copies only what it reads, and the other slot's accesses were consumed by the\n"
  "  // previous row's quantize.\n"
  "  const bq_staged_rot rot = bq_staged_rot_of(p, lane);\n"
  "  const bq_u32 bytes = bq_staged_slot(nch);\n"
  "  int k = 0;\n"
  "#endif\n"
  "  for (; r < p.rows; r += gridDim.x) {\n"
  "    bq_xchunk a[BQ_CPT];\n"
  "    bq_red red = bq_red_init();\n"
  "#if BQ_HMAX2\n"
  "    bq_u32 m2 = 0;\n"
  "#endif\n"
  "#if BQ_DYN_ROT\n"
  "    if (r + gridDim.x < p.rows) bq_row_stage(p, r + gridDim.x, lane, tpr, nch, slot + (bq_u32)(k ^ 1) * bytes);\n"
  "    bq_cp_commit();\n"
  "    bq_cp_wait<1>();\n"
  "    const bq_xchunk *Sk = (const bq_xchunk *)(bq_row_slot + (bq_u32)k * bytes);\n"
  "    k ^= 1;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BQ_CPT; i++) {\n"
  "      const bq_i64 c = bq_staged_chunk(lane, i, tpr);\n"
  "      if (c < nch) a[i] = Sk[bq_staged_pos(c)];\n"
  "      else a[i] = bq_xchunk{};\n"
  "    }\n"
  "    bq_rotate_staged(a, nch, lane, tpr, rot);\n"
  "#else\n"
  "    bq_cp_wait<0>();\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BQ_CPT; i++) {\n"
  "      const bq_i64 c = bq_staged_chunk(lane, i, tpr);\n"
  "      if (c < nch) {\n"
  "#if !BQ_DYN_ROT\n"
  "        a[i] = S[c];\n"
  "#endif\n"
  "#if BQ_HMAX2\n"
  "        if (pairs) m2 = bq_hmax2_chunk(m2, a[i]);\n"
  "        else\n"
  "#endif\n"
  "          bq_reduce_chunk(a[i], red);\n"
  "      }\n"
  "    }\n"
  "#if BQ_HMAX2\n"
  "    if (pairs) bq_hmax2_fold(red, m2);\n"
  "#endif\n"
  "#if !BQ_DYN_ROT\n"
  "    if (r + gridDim.x < p.rows) bq_row_stage(p, r + gridDim.x, lane, tpr, nch, slot); // its accesses are in a[] now\n"
  "    bq_cp_commit();\n"
  "#endif\n"
  "    red = bq_red_team(red, tpr, red_smem);\n"
  "    const bq_qp q = bq_params_of(red, (bq_c)p.bound);\n"
  "    if (lane == 0) bq_write_params(p, r, q);\n"
  "    if (!BQ_WRITE_Y) continue;\n"
  "    bq_i *y = (bq_i *)p.y + r * p.ys;\n"
  "    const int w_out = bq_width(y);\n"
  "#if BQ_DYN_ROT\n"
  "#if BQ_LEAN\n"
  "    const bool lean = bq_is_lean(q);\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BQ_CPT; i++) {\n"
  "      const bq_i64 c = bq_staged_chunk(lane, i, tpr);\n"
  "      if (c < nch) {\n"
  "        bq_qchunk o;\n"
  "#if BQ_LEAN\n"
  "        if (lean) bq_quantize_chunk_as<true>(a[i], o, q);\n"
  "        else bq_quantize_chunk_as<false>(a[i], o, q);\n"
  "#else\n"
  "        bq_quantize_chunk(a[i], o, q);\n"
  "#endif\n"
  "        bq_store(y + c * BQ_VEC, o, w_out);\n"
  "      }\n"
  "    }\n"
  "#elif BQ_LEAN\n"
  "    bq_quantize_batch<true>(a, y, lane, tpr, nch, q, w_out);\n"
  "#else\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BQ_CPT; i++) {\n"
  "      const bq_i64 c = lane + (bq_i64)i * tpr;\n"
  "      if (c < nch) {\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk(a[i], o, q);\n"
  "        bq_store(y + c * BQ_VEC, o, w_out);\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "  bq_cp_wait<0>();\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_DYNAMIC\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_BLOCK / 32];\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  bq_launch_dependents();\n"
  "#endif\n"
  "  bq_dynamic_body<BQ_CPT>(p, red_smem);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_DYNAMIC_STAGED\n"
  "// (empty but for 16-bit rows: the host launches it for no other)\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_STAGED(const bq_dynamic_params p) {\n"
  "#if BQ_ROWS_STAGED\n"
  "  __shared__ bq_red red_smem[BQ_BLOCK / 32];\n"
  "  bq_launch_dependents();\n"
  "  bq_rows_staged(p, red_smem);\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP && BQ_E_DYNAMIC_GROUPS\n"
  "// Per group into integer codes, the fast groups alone (p.fast_groups; teams of at most 64\n"
  "// threads, 8 rows of warp teams a block where a team is a warp): a module of their own,\n"
  "// which compiles in half the time of one with bq_segment's batches beside them. From f32\n"
  "// and 16-bit data they fit 48 registers, from f64 64. (FP8 codes keep theirs in\n"
  "// bq_dynamic, where they ran faster; the host never launches this entry for them.)\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "#define BQ_GROUPS_MIN_BLOCKS 4\n"
  "#else\n"
  "#define BQ_GROUPS_MIN_BLOCKS 5\n"
  "#endif\n"
  "extern \"C\" __global__ void __launch_bounds__(256, BQ_GROUPS_MIN_BLOCKS) BQ_FN_DYNAMIC_GROUPS(const bq_dynamic_params p) {\n"
  "  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr;\n"
  "  bq_groups_rows(p, threadIdx.x & (tpr - 1), tpr, teams, team);\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP && BQ_E_DYNAMIC_SETS\n"
  "// Per group, the fast groups of BQ_DU or BQ_DU / 2 accesses, two a lane (bq_groups_sets), for\n"
  "// every code type: an entry of its own, as the other kernels' registers and code stay as they\n"
  "// were (inside them this path cost the groups of 128 up to 4%).\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_DYNAMIC_SETS(const bq_dynamic_params p) {\n"
  "  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr, lane = threadIdx.x & (tpr - 1);\n"
  "  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)\n"
  "    bq_groups_sets<2>(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, lane, tpr, r);\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "// Symmetric: at most 64 registers, two 512-thread blocks an SM, as the code without a bound\n"
  "// (args.amax_bound) fits; the bound's branch would otherwise cost one block an SM.\n"
  "#if BQ_ASYM || BQ_DYN_ROT // (the rotation's registers: spills at 64)\n"
  "#define BQ_LONG_MIN_BLOCKS 1\n"
  "#else\n"
  "#define BQ_LONG_MIN_BLOCKS (65536 / (64 * BQ_LONG_TEAM))\n"
  "#endif\n"
  "#if BQ_E_DYNAMIC_LONG\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_LONG_TEAM, BQ_LONG_MIN_BLOCKS) BQ_FN_DYNAMIC_LONG(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_LONG_TEAM / 32];\n"
  "  bq_launch_dependents();\n"
  "  bq_dynamic_body<BQ_LONG_CPT>(p, red_smem);\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "#else\n"
  "// Per tensor, pass 1: one partial reduction per block into the workspace. Its loads take\n"
  "// L2's default policy, not the streaming one, so that the tail it reads last is still in L2\n"
  "// when pass 2, walking the tensor from its end, reads it again.\n"
  "#if BQ_E_DYNAMIC_REDUCE\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_REDUCE(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_BLOCK / 32];\n"
  "  const bq_t *x = (const bq_t *)p.x;\n"
  "  const bq_i64 n = p.cols, pro = bq_prologue(x, n), nch = (n - pro) / BQ_VEC;\n"
  "  bq_red r = bq_red_init();\n"
  "  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, nth = (bq_i64)gridDim.x * blockDim.x;\n"
  "  for (bq_i64 c0 = tid; c0 < nch; c0 += nth * BQ_DU) {\n"
  "    bq_xchunk a[BQ_DU];\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_DU; u++)\n"
  "      if (c0 + u * nth < nch) {\n"
  "        const bq_xchunk *s = (const bq_xchunk *)(x + pro + (c0 + u * nth) * BQ_VEC);\n"
  "        BQ_EMU_ALIGNED(s, sizeof(bq_xchunk)); // (the emulator's check; nothing on a GPU)\n"
  "        a[u] = *s;\n"
  "      }\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_DU; u++)\n"
  "      if (c0 + u * nth < nch) bq_reduce_chunk(a[u], r);\n"
  "  }\n"
  "  if (tid < pro) bq_red_add(r, bq_to_c(x[tid]));\n"
  "  if (pro + nch * BQ_VEC + tid < n) bq_red_add(r, bq_to_c(x[pro + nch * BQ_VEC + tid]));\n"
  "  r = bq_red_team(r, blockDim.x, red_smem);\n"
  "  if (threadIdx.x == 0) ((bq_red *)p.partial)[blockIdx.x] = r;\n"
  "}\n"
  "#endif\n"
  "\n"
  "// Per tensor, pass 2: every block reduces the partials in the same order, block 0 stores\n"
  "// the scale, and all quantize. Pass 1's strides (nth BQ_DU accesses each) are taken last\n"
  "// first: the tail pass 1 left in L2 is read again from there.\n"
  "#if BQ_E_DYNAMIC_APPLY\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_APPLY(const bq_dynamic_params p) {\n"
  "  __shared__ bq_red red_smem[BQ_BLOCK / 32];\n"
  "  bq_red r = bq_red_init();\n"
  "  for (int i = threadIdx.x; i < p.nblocks; i += blockDim.x) r = bq_red_merge(r, ((const bq_red *)p.partial)[i]);\n"
  "  r = bq_red_team(r, blockDim.x, red_smem);\n"
  "  const bq_qp q = bq_params_of(r, (bq_c)p.bound);\n"
  "  if (blockIdx.x == 0 && threadIdx.x == 0) bq_write_params(p, 0, q);\n"
  "  if (!BQ_WRITE_Y) return;\n"
  "  const bq_t *x = (const bq_t *)p.x;\n"
  "  bq_i *y = (bq_i *)p.y;\n"
  "  const bq_i64 n = p.cols, pro = bq_prologue(x, n), nch = (n - pro) / BQ_VEC;\n"
  "  const int w_out = bq_width(y + pro);\n"
  "  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, nth = (bq_i64)gridDim.x * blockDim.x;\n"
  "  const bq_i64 stride = nth * BQ_DU;\n"
  "  for (bq_i64 c0 = tid + (nch > 0 ? (nch - 1) / stride : -1) * stride; c0 >= 0; c0 -= stride) {\n"
  "    bq_xchunk a[BQ_DU];\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_DU; u++)\n"
  "      if (c0 + u * nth < nch) bq_load(a[u], x + pro + (c0 + u * nth) * BQ_VEC, 16);\n"
  "#if BQ_LEAN\n"
  "    bq_quantize_batch<true>(a, y + pro, c0, nth, nch, q, w_out);\n"
  "#else\n"
  "#pragma unroll\n"
  "    for (int u = 0; u < BQ_DU; u++) {\n"
  "      if (c0 + u * nth < nch) {\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_chunk(a[u], o, q);\n"
  "        bq_store(y + pro + (c0 + u * nth) * BQ_VEC, o, w_out);\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "  if (tid < pro) y[tid] = (bq_i)bq_quantize_int(bq_to_c(x[tid]), q.s, q.z);\n"
  "  const bq_i64 kt = pro + nch * BQ_VEC + tid;\n"
  "  if (kt < n) y[kt] = (bq_i)bq_quantize_int(bq_to_c(x[kt]), q.s, q.z);\n"
  "}\n"
  "#endif\n"
  "#endif\n"
;
static const char bq__src_fused_cu[] =
  "// fused.cu - a producer fused with its quantize: (residual add +) RMSNorm, or act(gate) *\n"
  "// up, whose T values are then quantized as the existing ops would: static per tensor, or\n"
  "// dynamic per token or per group (docs/numerics.md, \"Fused producers\").\n"
  "// Prelude defines (besides common.cuh's): BQ_OP (BQ_OP_RMSNORM_QUANTIZE or\n"
  "// BQ_OP_GATED_QUANTIZE), BQ_ACT (BQ_ACT_SILU or BQ_ACT_GELU_TANH; gated only), BQ_GRAN\n"
  "// (BQ_GRAN_TENSOR, BQ_GRAN_TOKEN or BQ_GRAN_GROUP), BQ_ASYM (dynamic: 1 asymmetric).\n"
  "//\n"
  "// A block of TPR threads takes a row. Access a of a row holds its elements [a V, a V + V)\n"
  "// (V = BQ_VEC, 16 bytes of T). The contract fixes RMSNorm's sum of squares over 256 lanes\n"
  "// (BQ_THREADS): lane l adds the accesses l, l + 256, l + 512, ... in order. Thread t of a\n"
  "// block of TPR threads takes the accesses t, t + TPR, t + 2 TPR, ... and keeps a partial\n"
  "// sum for each of its 256 / TPR lanes (t, t + TPR, ...), so the sum is the same whatever\n"
  "// the number of rows, the grid, the block or the entry point.\n"
  "// bq_fused_c1 .. bq_fused_c8 (256 threads) and bq_fused_m4 .. bq_fused_m16 (128 threads: fewer\n"
  "// warps a row, so that a row's fixed work, its reductions, is shared by more elements) keep\n"
  "// a row of up to TPR CPT accesses in registers from its load to its quantize: one read of\n"
  "// DRAM. The 128-thread entries take dense rows only (DENSE: every stream 16-byte aligned,\n"
  "// whole accesses; a residual only in bq_fused_m4 and bq_fused_m4f), so they carry no\n"
  "// element path, nor does bq_fused_c2d or bq_fused_c8d (dense rows, a residual allowed);\n"
  "// bq_fused_m4f and bq_fused_m8f take rows of exactly TPR CPT accesses (FULL: no access is\n"
  "// checked against the row's end). In 256-thread blocks a row's rstd and scale are computed\n"
  "// once, by thread 0, and read by the block. bq_fused_long takes any row in batches of 256 BQ_LONG_CPT\n"
  "// accesses and reads the row again for each pass it needs (from L2); bq_fused_staged copies\n"
  "// long rows into shared memory ahead of their use (cp.async, two slots).\n"
  "// Rows whose streams all start 16 bytes aligned (p.aligned) move in 16-byte accesses;\n"
  "// others element by element, with the same results.\n"
  "// Per group, groups of gc accesses (gc a power of two up to 32) lie in gc consecutive lanes\n"
  "// of a warp, which reduce them with shuffles; any other group size takes a generic pass in\n"
  "// which a thread takes a group and recomputes its values from memory.\n"
  "// BQ_ACT_TAB (gated, T = bf16): act(g) is read from a table of the contract's values in\n"
  "// shared memory rather than computed (see \"the activation's table\" below).\n"
  "// Microscaling output (BQ_MX_RULE defined, with BQ_MX_LAYOUT; common.cuh's conversions and\n"
  "// rules): per group, each group's scale a byte (UE8M0, or NVFP4's E4M3 times the tensor scale\n"
  "// g) written in the layout, E2M1 codes two a byte; the blocked layout's padding written 0 by\n"
  "// the blocks of the rows (see \"microscaling\" below). NVFP4 with g computed takes two launches\n"
  "// of bq_fused_amax first, for the tensor's amax.\n"
  "\n"
  "#define BQ_THREADS 256\n"
  "#define BQ_LONG_CPT 4\n"
  "#define BQ_RMS (BQ_OP == BQ_OP_RMSNORM_QUANTIZE)\n"
  "#ifdef BQ_MX_RULE\n"
  "#define BQ_FMX 1 // microscaling output\n"
  "#define BQ_FYB(e) BQ_MX_YB(e) // bytes of y before element e of a row\n"
  "#ifndef BQ_FMX_PAIRS\n"
  "#define BQ_FMX_PAIRS 1 // E2M1 from 16-bit data: common.cuh's pairs where the scale allows\n"
  "#endif\n"
  "#else\n"
  "#define BQ_FMX 0\n"
  "#define BQ_FYB(e) (e)\n"
  "#endif\n"
  "\n"
  "/* kernels_src/fused_abi.h - the fused producers' host/kernel interface (RMSNorm, gated\n"
  "   activation, then quantize), valid as C and as CUDA C++: their entry points and their\n"
  "   parameter block. fused.cu and the host (src/family_fused.h) both include it. */\n"
  "#ifndef BQ_FUSED_ABI_H\n"
  "#define BQ_FUSED_ABI_H\n"
  "\n"
  "/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,\n"
  "   the kernel's extern \"C\" function. bq_fused_c1 .. bq_fused_c8 hold a row of up to 256 * k\n"
  "   accesses in registers (k = 1, 2, 4, 8), bq_fused_long takes any row in batches, and\n"
  "   bq_fused_staged stages 16-byte aligned rows in shared memory, the next row's copy in\n"
  "   flight while a row is worked on. bq_fused_m4, bq_fused_m8 and bq_fused_m16 hold a row of\n"
  "   up to 512, 1024 or 2048 accesses in registers with 128 threads (4, 8 or 16 accesses each):\n"
  "   a row's fixed work (its reductions, rstd and scale) is done by half as many warps.\n"
  "   bq_fused_m4f and bq_fused_m8f are the same for rows of exactly 512 or 1024 accesses, whose\n"
  "   accesses need no check against the row's end. bq_fused_c2d and bq_fused_c8d are\n"
  "   bq_fused_c2 and bq_fused_c8 for dense rows (every stream 16-byte aligned, D whole\n"
  "   accesses), a residual allowed: no element path. bq_fused_amax is NVFP4's first launch\n"
  "   where the tensor scale is computed: the producer's amax over the tensor, nothing written. */\n"
  "enum {\n"
  "  BQ__FUSED_C1, BQ__FUSED_C2, BQ__FUSED_C4, BQ__FUSED_C8, BQ__FUSED_LONG, BQ__FUSED_STAGED,\n"
  "  BQ__FUSED_M4, BQ__FUSED_M8, BQ__FUSED_M4F, BQ__FUSED_M8F, BQ__FUSED_M16, BQ__FUSED_C2D, BQ__FUSED_C8D,\n"
  "  BQ__FUSED_AMAX, BQ__FUSED_ENTRIES\n"
  "};\n"
  "#define BQ_FN_FUSED_C1 bq_fused_c1\n"
  "#define BQ_FN_FUSED_C2 bq_fused_c2\n"
  "#define BQ_FN_FUSED_C4 bq_fused_c4\n"
  "#define BQ_FN_FUSED_C8 bq_fused_c8\n"
  "#define BQ_FN_FUSED_LONG bq_fused_long\n"
  "#define BQ_FN_FUSED_STAGED bq_fused_staged\n"
  "#define BQ_FN_FUSED_M4 bq_fused_m4\n"
  "#define BQ_FN_FUSED_M8 bq_fused_m8\n"
  "#define BQ_FN_FUSED_M4F bq_fused_m4f\n"
  "#define BQ_FN_FUSED_M8F bq_fused_m8f\n"
  "#define BQ_FN_FUSED_M16 bq_fused_m16\n"
  "#define BQ_FN_FUSED_C2D bq_fused_c2d\n"
  "#define BQ_FN_FUSED_C8D bq_fused_c8d\n"
  "#define BQ_FN_FUSED_AMAX bq_fused_amax\n"
  "\n"
  "typedef struct bq_fused_params {\n"
  "  bq_u64 x, res, w, out, y, scales, zps;\n"
  "  bq_i64 rows, cols, xs, rs, os, ys, group, grs; /* strides in elements; grs: per group */\n"
  "  double scale, eps;                             /* per tensor's static scale; RMSNorm's eps */\n"
  "  int zp, aligned, fast_groups;\n"
  "  int slot, wstage; /* bq_fused_staged: a slot's bytes; the weight staged */\n"
  "  /* microscaling output, NVFP4: the f32 tensor scale g read (0: computed), where a computed\n"
  "     one is written, and the workspace's amax (f32): bq_fused_amax writes a partial a block,\n"
  "     then (nparts > 0) one block reduces nparts partials into amax[nparts], which the\n"
  "     producer's launch reads */\n"
  "  bq_u64 tensor_scale, out_tensor_scale, amax;\n"
  "  int nparts;\n"
  "} bq_fused_params;\n"
  "#endif\n"
  "\n"
  "// ---- the math of the contract: every operation one rounding in C ---------------------\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "#define BQ_LOG2E 0x1.71547652b82fep+0\n"
  "#define BQ_SHIFTER 0x1.8p+52\n"
  "#define BQ_LN2_HI 0x1.62e42feep-1\n"
  "#define BQ_LN2_LO 0x1.a39ef35793c76p-33\n"
  "#define BQ_EXP_XMAX 710.0\n"
  "#define BQ_EXP_XMIN (-746.0)\n"
  "#define BQ_TANH_A0 0.5625\n"
  "#define BQ_TANH_SAT 20.0\n"
  "#define BQ_GELU_K0 0x1.9884533d43651p-1\n"
  "#define BQ_GELU_K1 0x1.6e4e26d4801f7p-5\n"
  "#define BQ_EXP_N 12\n"
  "#define BQ_TANH_N 11\n"
  "static __device__ __forceinline__ bq_c bq_pow2(int j) { return __longlong_as_double((bq_i64)(j + 1023) << 52); }\n"
  "static __device__ __forceinline__ bq_c bq_sqrt(bq_c a) { return __dsqrt_rn(a); }\n"
  "#define BQ_INF __longlong_as_double(0x7ff0000000000000LL)\n"
  "#else\n"
  "#define BQ_LOG2E 0x1.715476p+0f\n"
  "#define BQ_SHIFTER 0x1.8p+23f\n"
  "#define BQ_LN2_HI 0x1.62e4p-1f\n"
  "#define BQ_LN2_LO 0x1.7f7d1cp-20f\n"
  "#define BQ_EXP_XMAX 89.0f\n"
  "#define BQ_EXP_XMIN (-104.0f)\n"
  "#define BQ_TANH_A0 0.5625f\n"
  "#define BQ_TANH_SAT 10.0f\n"
  "#define BQ_GELU_K0 0x1.988454p-1f\n"
  "#define BQ_GELU_K1 0x1.6e4e26p-5f\n"
  "#define BQ_EXP_N 6\n"
  "#define BQ_TANH_N 6\n"
  "static __device__ __forceinline__ bq_c bq_pow2(int j) { return __uint_as_float((bq_u32)(j + 127) << 23); }\n"
  "static __device__ __forceinline__ bq_c bq_sqrt(bq_c a) { return __fsqrt_rn(a); }\n"
  "#define BQ_INF __uint_as_float(0x7f800000u)\n"
  "#endif\n"
  "\n"
  "#if !BQ_RMS\n"
  "// exp_c's reduction and polynomial for x in [XMIN, XMAX]: exp(x) = 2^k (1 + m). k is read\n"
  "// from the bits of t + SHIFTER (an integer in its last place), the very value the\n"
  "// contract's kf = (t + SHIFTER) - SHIFTER names, without a conversion.\n"
  "static __device__ __forceinline__ bq_c bq_exp_core(bq_c x, int &k) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const bq_c c[BQ_EXP_N] = {0x1.0p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,\n"
  "                            0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16,\n"
  "                            0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,\n"
  "                            0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};\n"
  "#else\n"
  "  const bq_c c[BQ_EXP_N] = {0x1.0p-1f, 0x1.555556p-3f, 0x1.555556p-5f, 0x1.111112p-7f, 0x1.6c16c2p-10f,\n"
  "                            0x1.a01a02p-13f};\n"
  "#endif\n"
  "  const bq_c u = bq_add(bq_mul(x, BQ_LOG2E), BQ_SHIFTER);\n"
  "  const bq_c kf = bq_sub(u, BQ_SHIFTER);\n"
  "  const bq_c r = bq_sub(bq_sub(x, bq_mul(kf, BQ_LN2_HI)), bq_mul(kf, BQ_LN2_LO));\n"
  "  bq_c q = c[BQ_EXP_N - 1];\n"
  "#pragma unroll\n"
  "  for (int n = BQ_EXP_N - 2; n >= 0; n--) q = bq_add(bq_mul(q, r), c[n]);\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  k = (int)(__double_as_longlong(u) - __double_as_longlong(BQ_SHIFTER));\n"
  "#else\n"
  "  k = (int)(__float_as_uint(u) - __float_as_uint(BQ_SHIFTER));\n"
  "#endif\n"
  "  return bq_add(r, bq_mul(bq_mul(r, r), q));\n"
  "}\n"
  "// exp_c without branches: the formula on x clamped into [XMIN, XMAX], then the special\n"
  "// values selected (NaN, and past either clamp, where the contract answers directly).\n"
  "static __device__ __forceinline__ bq_c bq_exp_c(bq_c x) {\n"
  "  const bq_c xc = bq_min(bq_max(x, BQ_EXP_XMIN), BQ_EXP_XMAX);\n"
  "  int k;\n"
  "  const bq_c e = bq_add((bq_c)1, bq_exp_core(xc, k));\n"
  "  const int k1 = (k - (k >> 31)) >> 1; // k / 2, rounded toward zero\n"
  "  bq_c y = bq_mul(bq_mul(e, bq_pow2(k1)), bq_pow2(k - k1));\n"
  "  y = x > BQ_EXP_XMAX ? BQ_INF : y;\n"
  "  y = x < BQ_EXP_XMIN ? (bq_c)0 : y;\n"
  "  return x != x ? bq_add(x, x) : y;\n"
  "}\n"
  "// tanh_c without branches: both of the contract's formulas (the second on a clamped to SAT),\n"
  "// then the one for a selected.\n"
  "static __device__ __forceinline__ bq_c bq_tanh_c(bq_c y) {\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "  const bq_c P[BQ_TANH_N] = {-0x1.5555555555555p-2, 0x1.1111111110fbep-3, -0x1.ba1ba1b9f19ap-5,\n"
  "                             0x1.664f48727bbfdp-6, -0x1.226e32212f8e9p-7, 0x1.d6d30f918e945p-9,\n"
  "                             -0x1.7d9545835e3e5p-10, 0x1.34ad2f7abd75ap-11, -0x1.eaf47874aab53p-13,\n"
  "                             0x1.616f17dcc6fd8p-14, -0x1.4ffe31971aeb8p-16};\n"
  "#else\n"
  "  const bq_c P[BQ_TANH_N] = {-0x1.555556p-2f, 0x1.111102p-3f, -0x1.ba12d8p-5f, 0x1.655dcp-6f, -0x1.1680dcp-7f,\n"
  "                             0x1.460e8p-9f};\n"
  "#endif\n"
  "  const bq_c a = bq_abs(y);\n"
  "  // a < A0: a + a (s P(s)), s = a^2\n"
  "  const bq_c s = bq_mul(a, a);\n"
  "  bq_c q = P[BQ_TANH_N - 1];\n"
  "#pragma unroll\n"
  "  for (int n = BQ_TANH_N - 2; n >= 0; n--) q = bq_add(bq_mul(q, s), P[n]);\n"
  "  const bq_c t0 = bq_add(a, bq_mul(a, bq_mul(s, q)));\n"
  "  // A0 <= a <= SAT: 1 - 2 / (expm1(2a) + 2)\n"
  "  const bq_c ac = bq_min(bq_max(a, BQ_TANH_A0), BQ_TANH_SAT);\n"
  "  int k;\n"
  "  const bq_c m = bq_exp_core(bq_add(ac, ac), k), p2 = bq_pow2(k);\n"
  "  const bq_c e = bq_add(bq_sub(p2, (bq_c)1), bq_mul(p2, m));\n"
  "  const bq_c t1 = bq_sub((bq_c)1, bq_div((bq_c)2, bq_add(e, (bq_c)2)));\n"
  "  bq_c t = a < BQ_TANH_A0 ? t0 : (a <= BQ_TANH_SAT ? t1 : (bq_c)1);\n"
  "  t = y < (bq_c)0 ? -t : t;\n"
  "  t = y == (bq_c)0 ? y : t;\n"
  "  return y != y ? bq_add(y, y) : t;\n"
  "}\n"
  "static __device__ __forceinline__ bq_c bq_act(bq_c g) {\n"
  "#if BQ_ACT == BQ_ACT_SILU\n"
  "  return bq_div(g, bq_add((bq_c)1, bq_exp_c(-g)));\n"
  "#else\n"
  "  const bq_c inner = bq_add(g, bq_mul(bq_mul((bq_c)BQ_GELU_K1, g), bq_mul(g, g)));\n"
  "  const bq_c t = bq_tanh_c(bq_mul((bq_c)BQ_GELU_K0, inner));\n"
  "  return bq_mul(bq_mul((bq_c)0.5, g), bq_add((bq_c)1, t));\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- the activation's table (BQ_ACT_TAB) ------------------------------------------------\n"
  "// A bf16 gate has 2^16 values, so act(C(g)) can be looked up instead of computed: the\n"
  "// contract's formula costs several times the instructions a DRAM pass leaves for it. The\n"
  "// table holds act(g), computed by bq_act itself, for every bf16 g whose exponent field is\n"
  "// in [BQ_ACT_E0, BQ_ACT_E0 + 32), |g| in [2^-25, 2^7): entry (sign, exponent - E0,\n"
  "// mantissa). Any other g (zeros, tiny, huge, inf, NaN) is computed with the formula, an\n"
  "// access at a time where one of its values needs it. The values, and so the results, are\n"
  "// the formula's, bit for bit.\n"
  "// Each block copies the table into the first BQ_ACT_BYTES of its dynamic shared memory\n"
  "// (the host launches as many blocks as fit at once, so this is once a block, not once a\n"
  "// row) with cp.async, every copy in flight at once (a loop of loads, each waited on in\n"
  "// turn, held every block of a launch about 10 us before its first row). The first blocks\n"
  "// of a module's first launch find no table in global memory yet: they compute their copy,\n"
  "// and the first of them to claim bq_act_state publishes it.\n"
  "#if BQ_ACT_TAB\n"
  "#define BQ_ACT_E0 102\n"
  "#define BQ_ACT_N 8192\n"
  "#define BQ_ACT_BYTES (BQ_ACT_N * 4)\n"
  "__device__ __align__(16) float bq_act_global[BQ_ACT_N]; // (16: cp.async's copies)\n"
  "__device__ int bq_act_state; // 0: not published, 1: being published, 2: published\n"
  "#ifdef BQ_EMULATED\n"
  "static inline int bq_act_state_get() { return bq_act_state; }\n"
  "static inline bool bq_act_claim() { return bq_act_state == 0 ? (bq_act_state = 1, true) : false; }\n"
  "static inline void bq_act_publish() { bq_act_state = 2; }\n"
  "static inline void bq_act_copy(float *tab) {\n"
  "  for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) tab[i] = bq_act_global[i];\n"
  "}\n"
  "static inline float *bq_act_smem() { return (float *)emu.smem; }\n"
  "#else\n"
  "static __device__ __forceinline__ int bq_act_state_get() {\n"
  "  int v;\n"
  "  asm volatile(\"ld.acquire.gpu.global.b32 %0, [%1];\" : \"=r\"(v) : \"l\"(&bq_act_state) : \"memory\");\n"
  "  return v;\n"
  "}\n"
  "static __device__ __forceinline__ bool bq_act_claim() {\n"
  "  int old;\n"
  "  asm volatile(\"atom.acq_rel.gpu.global.cas.b32 %0, [%1], 0, 1;\" : \"=r\"(old) : \"l\"(&bq_act_state) : \"memory\");\n"
  "  return old == 0;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_act_publish() {\n"
  "  asm volatile(\"st.release.gpu.global.b32 [%0], 2;\" ::\"l\"(&bq_act_state) : \"memory\");\n"
  "}\n"
  "// the published table into the block's copy: read through L2 (cp.async.cg), as another\n"
  "// block wrote it during this launch, so neither L1 nor the read-only path may hold it\n"
  "static __device__ __forceinline__ void bq_act_copy(float *tab) {\n"
  "  const bq_u32 s0 = bq_smem_addr(tab);\n"
  "  for (int i = threadIdx.x; i < BQ_ACT_N / 4; i += blockDim.x) bq_cp_async16(s0 + (bq_u32)i * 16u, bq_act_global + 4 * i, 16);\n"
  "  bq_cp_commit();\n"
  "  bq_cp_wait<0>();\n"
  "}\n"
  "extern __shared__ __align__(128) unsigned char bq_act_dsmem[];\n"
  "static __device__ __forceinline__ float *bq_act_smem() { return (float *)bq_act_dsmem; }\n"
  "#endif\n"
  "// the gate of entry i\n"
  "static __device__ __forceinline__ bq_c bq_act_arg(int i) {\n"
  "  const bq_u32 b = ((bq_u32)(i >> 12) << 15) | (((bq_u32)BQ_ACT_E0 << 7) + (bq_u32)(i & 4095));\n"
  "  return __uint_as_float(b << 16);\n"
  "}\n"
  "static __device__ void bq_act_fill() {\n"
  "  __shared__ int claimed;\n"
  "  float *tab = bq_act_smem();\n"
  "  const bool published = bq_act_state_get() == 2;\n"
  "  if (published) bq_act_copy(tab);\n"
  "  else\n"
  "    for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) tab[i] = bq_act(bq_act_arg(i));\n"
  "  if (threadIdx.x == 0) claimed = !published && bq_act_claim();\n"
  "  __syncthreads();\n"
  "  if (claimed) {\n"
  "    for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) bq_act_global[i] = tab[i];\n"
  "    __threadfence();\n"
  "    __syncthreads();\n"
  "    if (threadIdx.x == 0) bq_act_publish();\n"
  "  }\n"
  "}\n"
  "// the formula, for the rare access that holds a gate outside the table\n"
  "static __device__ __noinline__ bq_c bq_act_far(bq_c g) { return bq_act(g); }\n"
  "// A gate's f32 bits are its bf16 bits << 16: d, its exponent and mantissa less the table's\n"
  "// first, is below 4096 << 16 in the table, and its entry's byte offset is d >> 14, plus\n"
  "// 16 KiB for a negative gate.\n"
  "static __device__ __forceinline__ bq_u32 bq_act_d(bq_u32 u) { return (u & 0x7fff0000u) - ((bq_u32)BQ_ACT_E0 << 23); }\n"
  "// act of an access's gates (T values in C). An access whose d all lie in the table (their\n"
  "// OR below 2^28) takes no branch.\n"
  "static __device__ __forceinline__ void bq_act_chunk(bq_c (&c)[BQ_VEC]) {\n"
  "  const unsigned char *tab = (const unsigned char *)bq_act_smem();\n"
  "  bq_u32 any = 0;\n"
  "  bq_c a[BQ_VEC];\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) {\n"
  "    const bq_u32 u = __float_as_uint(c[j]), d = bq_act_d(u);\n"
  "    any |= d;\n"
  "    a[j] = *(const float *)(tab + (((d >> 14) & 0x3ffcu) + ((u >> 31) << 14)));\n"
  "  }\n"
  "  if (any >> 28) {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++)\n"
  "      if (bq_act_d(__float_as_uint(c[j])) >= (4096u << 16)) a[j] = bq_act_far(c[j]);\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) c[j] = a[j];\n"
  "}\n"
  "#else\n"
  "#define BQ_ACT_BYTES 0\n"
  "#endif\n"
  "\n"
  "// ---- C values rounded to T: two at a time where T has 16 bits (one packed conversion, the\n"
  "// same rounding as two) ------------------------------------------------------------------\n"
  "static __device__ __forceinline__ void bq_round_chunk(const bq_c (&c)[BQ_VEC], bq_xchunk &o) {\n"
  "#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j += 2) {\n"
  "    bq_u32 w; // cvt.rn.{bf16x2,f16x2}.f32 puts its first source in the upper half\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(w) : \"f\"(c[j + 1]), \"f\"(c[j]));\n"
  "#else\n"
  "    asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(w) : \"f\"(c[j + 1]), \"f\"(c[j]));\n"
  "#endif\n"
  "    ((bq_u32 *)&o)[j / 2] = w; // elements j, j + 1\n"
  "  }\n"
  "#else\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) o.e[j] = bq_from_c(c[j]);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// T values of a chunk in C (exact). A bf16 pair's word widens with two bit operations: the\n"
  "// low half shifted up, the high half masked.\n"
  "static __device__ __forceinline__ void bq_chunk_c(const bq_xchunk &x, bq_c (&c)[BQ_VEC]) {\n"
  "#if !defined(BQ_EMULATED) && BQ_FT == BQ_TYPE_BF16\n"
  "  const bq_u32 *w = (const bq_u32 *)&x;\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC / 2; j++) {\n"
  "    c[2 * j] = __uint_as_float(w[j] << 16);\n"
  "    c[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);\n"
  "  }\n"
  "#else\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_to_c(x.e[j]);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// h = T(C(x) + C(r)), into x's chunk. For a 16-bit T one packed fma (x * 1 + r) a pair gives\n"
  "// the same bits: C = f32 carries at least twice T's precision plus two bits, so rounding\n"
  "// the sum to f32 and then to T equals rounding it to T once (double rounding is innocuous).\n"
  "static __device__ __forceinline__ void bq_add_chunk(bq_xchunk &h, const bq_xchunk &v) {\n"
  "#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)\n"
  "  bq_u32 *hp = (bq_u32 *)&h;\n"
  "  const bq_u32 *vp = (const bq_u32 *)&v;\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC / 2; j++) {\n"
  "#if BQ_FT == BQ_TYPE_BF16\n"
  "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(hp[j]) : \"r\"(hp[j]), \"r\"(0x3f803f80u), \"r\"(vp[j]));\n"
  "#else\n"
  "    asm(\"fma.rn.f16x2 %0, %1, %2, %3;\" : \"=r\"(hp[j]) : \"r\"(hp[j]), \"r\"(0x3c003c00u), \"r\"(vp[j]));\n"
  "#endif\n"
  "  }\n"
  "#else\n"
  "  bq_c c[BQ_VEC];\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_add(bq_to_c(h.e[j]), bq_to_c(v.e[j]));\n"
  "  bq_round_chunk(c, h);\n"
  "#endif\n"
  "}\n"
  "\n"
  "// ---- one access of a row: elements [a V, a V + V) past D read as 0, never written -------\n"
  "// x and the residual are read once, with the default cache policy (streaming them, ld.cs,\n"
  "// measured 2-3% slower on the H100 in every large row); the weight stays cached for every\n"
  "// row. CS streams them all the same (bq_fused_m8f: ptxas schedules the plain loads\n"
  "// differently there, and it spills).\n"
  "// DENSE: the caller knows the stream's rows are 16-byte aligned and D a multiple of V.\n"
  "template <bool KEEP, bool DENSE = false, bool CS = false>\n"
  "static __device__ __forceinline__ void bq_fload(bq_xchunk &c, const bq_t *row, int a, int D, bool aligned) {\n"
  "  const int e0 = a * BQ_VEC;\n"
  "  if (DENSE || (aligned && e0 + BQ_VEC <= D)) {\n"
  "    if (KEEP) *(uint4 *)&c = __ldg((const uint4 *)(row + e0));\n"
  "    else if (CS) bq_load(c, row + e0, 16);\n"
  "    else {\n"
  "      BQ_EMU_ALIGNED(row + e0, 16); // (the emulator's check; nothing on a GPU)\n"
  "      *(uint4 *)&c = *(const uint4 *)(row + e0);\n"
  "    }\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++) c.e[j] = e0 + j < D ? row[e0 + j] : (bq_t)0;\n"
  "  }\n"
  "}\n"
  "template <bool DENSE = false>\n"
  "static __device__ __forceinline__ void bq_fstore(bq_t *row, const bq_xchunk &c, int a, int D, bool aligned) {\n"
  "  const int e0 = a * BQ_VEC;\n"
  "  if (DENSE || (aligned && e0 + BQ_VEC <= D)) {\n"
  "    bq_store(row + e0, c, 16);\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++)\n"
  "      if (e0 + j < D) row[e0 + j] = c.e[j];\n"
  "  }\n"
  "}\n"
  "// w: the widest access y's row allows (its start's alignment; accesses keep it)\n"
  "static __device__ __forceinline__ int bq_qwidth(const bq_i *row) {\n"
  "  const int w = bq_width(row);\n"
  "  return w < (int)sizeof(bq_qchunk) ? w : (int)sizeof(bq_qchunk);\n"
  "}\n"
  "template <bool DENSE = false>\n"
  "static __device__ __forceinline__ void bq_qstore(bq_i *row, const bq_qchunk &o, int a, int D, int w) {\n"
  "  const int e0 = a * BQ_VEC;\n"
  "  if (DENSE || e0 + BQ_VEC <= D) {\n"
  "    bq_store(row + e0, o, w);\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j++)\n"
  "      if (e0 + j < D) row[e0 + j] = o.e[j];\n"
  "  }\n"
  "}\n"
  "\n"
  "// ---- the producers, an access at a time -----------------------------------------------\n"
  "#if BQ_RMS\n"
  "// h = T(C(x) + C(residual)), written back to the residual, an access at a time (x already\n"
  "// in h)\n"
  "template <bool DENSE>\n"
  "static __device__ __forceinline__ void bq_rms_res1(const bq_fused_params &p, bq_i64 r, int a, bq_xchunk &h) {\n"
  "  bq_t *rr = (bq_t *)p.res + r * p.rs;\n"
  "  bq_xchunk v;\n"
  "  bq_fload<false, DENSE>(v, rr, a, p.cols, p.aligned);\n"
  "  bq_add_chunk(h, v);\n"
  "  bq_fstore<DENSE>(rr, h, a, p.cols, p.aligned);\n"
  "}\n"
  "// The same for both accesses b + t + i TPR a thread of bq_fused_c1 or _c2 holds, both\n"
  "// loads before the stores: a store to the residual may alias x (in place) or a later\n"
  "// load, so the access-at-a-time form waits for each access's loads in turn. (Wider\n"
  "// entries keep that form: the loads' registers made them spill.)\n"
  "template <int TPR, int CPT, bool DENSE, bool FULL>\n"
  "static __device__ __forceinline__ void bq_rms_res(const bq_fused_params &p, bq_i64 r, int b, int nacc,\n"
  "                                                  bq_xchunk (&v)[CPT]) {\n"
  "  bq_t *rr = (bq_t *)p.res + r * p.rs;\n"
  "  bq_xchunk u[CPT];\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < CPT; i++) {\n"
  "    const int a = b + (int)threadIdx.x + i * TPR;\n"
  "    if (FULL || a < nacc) bq_fload<false, DENSE>(u[i], rr, a, p.cols, p.aligned);\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < CPT; i++) {\n"
  "    const int a = b + (int)threadIdx.x + i * TPR;\n"
  "    if (FULL || a < nacc) {\n"
  "      bq_add_chunk(v[i], u[i]);\n"
  "      bq_fstore<DENSE>(rr, v[i], a, p.cols, p.aligned);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "// n = T((C(h) * rstd) * C(w)), in place\n"
  "// (red: the values before their rounding to T are reduced; see bq_red_round)\n"
  "static __device__ __forceinline__ void bq_rms_nw(bq_xchunk &h, const bq_xchunk w, bq_c rstd, bq_red &red) {\n"
  "  bq_c c[BQ_VEC], wc[BQ_VEC];\n"
  "  bq_chunk_c(h, c);\n"
  "  bq_chunk_c(w, wc);\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) {\n"
  "    c[j] = bq_mul(bq_mul(c[j], rstd), wc[j]);\n"
  "    bq_red_add(red, c[j]);\n"
  "  }\n"
  "  bq_round_chunk(c, h);\n"
  "}\n"
  "template <bool DENSE>\n"
  "static __device__ __forceinline__ void bq_rms_n(const bq_fused_params &p, int a, bq_xchunk &h, bq_c rstd, bq_red &red) {\n"
  "  bq_xchunk w;\n"
  "  bq_fload<true, DENSE>(w, (const bq_t *)p.w, a, p.cols, p.aligned);\n"
  "  bq_rms_nw(h, w, rstd, red);\n"
  "}\n"
  "// n again, from h in memory (the residual buffer, or x)\n"
  "static __device__ __forceinline__ void bq_value(const bq_fused_params &p, bq_i64 r, int a, bq_c rstd, bq_xchunk &v,\n"
  "                                                bq_red &red) {\n"
  "  if (p.res) bq_fload<false>(v, (const bq_t *)p.res + r * p.rs, a, p.cols, p.aligned);\n"
  "  else bq_fload<false>(v, (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);\n"
  "  bq_rms_n<false>(p, a, v, rstd, red);\n"
  "}\n"
  "static __device__ __forceinline__ bq_t bq_value_at(const bq_fused_params &p, bq_i64 r, int e, bq_c rstd) {\n"
  "  const bq_t h = p.res ? ((const bq_t *)p.res)[r * p.rs + e] : ((const bq_t *)p.x)[r * p.xs + e];\n"
  "  return bq_from_c(bq_mul(bq_mul(bq_to_c(h), rstd), bq_to_c(((const bq_t *)p.w)[e])));\n"
  "}\n"
  "#else\n"
  "// a = T(act(C(gate)) * C(up)), into the gate's chunk\n"
  "static __device__ __forceinline__ void bq_gate(bq_xchunk &g, const bq_xchunk &u, bq_red &red) {\n"
  "  bq_c c[BQ_VEC], uc[BQ_VEC];\n"
  "  bq_chunk_c(g, c);\n"
  "  bq_chunk_c(u, uc);\n"
  "#if BQ_ACT_TAB\n"
  "  bq_act_chunk(c);\n"
  "#else\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_act(c[j]);\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) {\n"
  "    c[j] = bq_mul(c[j], uc[j]);\n"
  "    bq_red_add(red, c[j]);\n"
  "  }\n"
  "  bq_round_chunk(c, g);\n"
  "}\n"
  "template <bool DENSE = false>\n"
  "static __device__ __forceinline__ void bq_value(const bq_fused_params &p, bq_i64 r, int a, bq_c rstd, bq_xchunk &v,\n"
  "                                                bq_red &red) {\n"
  "  (void)rstd;\n"
  "  const bq_t *g = (const bq_t *)p.x + r * p.xs;\n"
  "  bq_xchunk u;\n"
  "  bq_fload<false, DENSE>(v, g, a, p.cols, p.aligned);\n"
  "  bq_fload<false, DENSE>(u, g + p.cols, a, p.cols, p.aligned);\n"
  "  bq_gate(v, u, red);\n"
  "}\n"
  "static __device__ __forceinline__ bq_t bq_value_at(const bq_fused_params &p, bq_i64 r, int e, bq_c rstd) {\n"
  "  (void)rstd;\n"
  "  const bq_t *g = (const bq_t *)p.x + r * p.xs;\n"
  "  return bq_from_c(bq_mul(bq_act(bq_to_c(g[e])), bq_to_c(g[p.cols + e])));\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- the block's reductions -----------------------------------------------------------\n"
  "#if BQ_RMS\n"
  "// rstd from the partial sums of squares of the contract's lanes this thread holds (lane\n"
  "// t + j TPR in v[j]): the contract's xor butterfly in each warp, then the 8 warps' sums\n"
  "// left to right (lane t + j TPR is in the contract's warp t / 32 + j TPR / 32).\n"
  "template <int TPR>\n"
  "static __device__ __forceinline__ bq_c bq_rstd(const bq_fused_params &p, bq_c (&v)[BQ_THREADS / TPR], bq_c *ss_smem) {\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_THREADS / TPR; j++) {\n"
  "#pragma unroll\n"
  "    for (int o = 16; o >= 1; o >>= 1) v[j] = bq_add(v[j], __shfl_xor_sync(0xffffffffu, v[j], o));\n"
  "    if ((threadIdx.x & 31) == 0) ss_smem[(threadIdx.x >> 5) + j * (TPR / 32)] = v[j];\n"
  "  }\n"
  "  __syncthreads();\n"
  "  // 256-thread blocks: thread 0 alone, into the slot after the warps' (ss_smem holds\n"
  "  // BQ_THREADS / 32 + 1), so that 7 warps fewer spend issue slots on it; narrower blocks, with\n"
  "  // fewer warps to hide a lone thread's latency, each thread.\n"
  "  constexpr bool ONE = TPR == BQ_THREADS;\n"
  "  bq_c rs = 0;\n"
  "  if (!ONE || threadIdx.x == 0) {\n"
  "    bq_c ss = ss_smem[0];\n"
  "#pragma unroll\n"
  "    for (int w = 1; w < BQ_THREADS / 32; w++) ss = bq_add(ss, ss_smem[w]);\n"
  "    const bq_c mean = bq_div(ss, (bq_c)p.cols);\n"
  "    rs = bq_div((bq_c)1, bq_sqrt(bq_add(mean, (bq_c)p.eps)));\n"
  "    if (ONE) ss_smem[BQ_THREADS / 32] = rs;\n"
  "  }\n"
  "  __syncthreads(); // (the slots are rewritten after the block's next barrier, once all have read)\n"
  "  return ONE ? ss_smem[BQ_THREADS / 32] : rs;\n"
  "}\n"
  "// adds an access's squares to a lane's partial sum (elements past D are 0 and add nothing).\n"
  "// A bf16 pair widens here by byte permutes: the same values as bq_chunk_c's, in a form the\n"
  "// compiler does not merge with the normalizing pass's, so that the row stays packed in\n"
  "// registers between the two passes.\n"
  "static __device__ __forceinline__ void bq_add_squares(bq_c &ss, const bq_xchunk &h) {\n"
  "  bq_c c[BQ_VEC];\n"
  "#if !defined(BQ_EMULATED) && BQ_FT == BQ_TYPE_BF16\n"
  "  const bq_u32 *w = (const bq_u32 *)&h;\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC / 2; j++) {\n"
  "    c[2 * j] = __uint_as_float(__byte_perm(w[j], 0u, 0x1044u));\n"
  "    c[2 * j + 1] = __uint_as_float(__byte_perm(w[j], 0u, 0x3244u));\n"
  "  }\n"
  "#else\n"
  "  bq_chunk_c(h, c);\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) ss = bq_add(ss, bq_mul(c[j], c[j]));\n"
  "}\n"
  "#endif\n"
  "\n"
  "// The reductions see the producer's values before they are rounded to T. Rounding to\n"
  "// nearest is monotone and keeps 0, so the extremes of the rounded values are the rounded\n"
  "// extremes (NaN ignored either way): one rounding a row or group instead of one an element.\n"
  "static __device__ __forceinline__ bq_red bq_red_round(bq_red r) {\n"
  "  r.a = bq_to_c(bq_from_c(r.a));\n"
  "  r.b = bq_to_c(bq_from_c(r.b));\n"
  "  return r;\n"
  "}\n"
  "\n"
  "// an access's T values quantized with a static scale (per tensor)\n"
  "static __device__ __forceinline__ void bq_quantize_static(const bq_xchunk &v, bq_qchunk &o, const bq_scale &s,\n"
  "                                                          const bq_zp &z) {\n"
  "  bq_c c[BQ_VEC];\n"
  "  bq_chunk_c(v, c);\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize(c[j], s, z);\n"
  "}\n"
  "\n"
  "#if BQ_GRAN != BQ_GRAN_TENSOR\n"
  "static __device__ __forceinline__ void bq_fused_params_out(const bq_fused_params &p, bq_i64 i, const bq_qp &q) {\n"
  "  ((bq_s *)p.scales)[i] = q.stored;\n"
  "#if BQ_ASYM\n"
  "  ((int *)p.zps)[i] = q.zp;\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "// A row's groups on the fast path (p.fast_groups): a group is gc = 2^gsh accesses in gc\n"
  "// consecutive lanes, this thread its sub-th; access a's group is a >> gsh. The row's first\n"
  "// scale (and zero point) is found once a row, not once an access.\n"
  "struct bq_gshape {\n"
  "  int gc, sub, gsh;\n"
  "  bq_s *scales; // the row's\n"
  "#if BQ_ASYM\n"
  "  int *zps;\n"
  "#endif\n"
  "#if BQ_FMX\n"
  "  bq_u8 *sb;          // the scales' bytes (the layout indexes them)\n"
  "  bq_i64 r, ngroups, grs;\n"
  "  float g, enc;       // NVFP4's tensor scale and Transformer Engine's encode factor (else 1)\n"
  "#endif\n"
  "};\n"
  "static __device__ __forceinline__ bq_gshape bq_gshape_of(const bq_fused_params &p, bq_i64 r) {\n"
  "  bq_gshape g;\n"
  "  g.gc = (int)(p.group / BQ_VEC);\n"
  "  g.sub = threadIdx.x & (g.gc - 1);\n"
  "  g.gsh = 31 - __clz(g.gc); // log2 gc wherever fast_groups holds\n"
  "  g.scales = (bq_s *)p.scales + r * p.grs;\n"
  "#if BQ_ASYM\n"
  "  g.zps = (int *)p.zps + r * p.grs;\n"
  "#endif\n"
  "#if BQ_FMX\n"
  "  g.sb = (bq_u8 *)p.scales;\n"
  "  g.r = r;\n"
  "  g.ngroups = p.cols / p.group;\n"
  "  g.grs = p.grs;\n"
  "  g.g = g.enc = 1.0f;\n"
  "#if BQ_MX_NV\n"
  "  if (p.tensor_scale) { // given: Transformer Engine's encode factor is then 1 / g\n"
  "    g.g = *(const float *)p.tensor_scale;\n"
  "    if (BQ_MX_RULE == 7) g.enc = __fdiv_rn(1.0f, g.g);\n"
  "  } else { // computed from bq_fused_amax's amax, and written once\n"
  "    g.g = bq_mx_tensor_scale(*(const float *)p.amax, g.enc);\n"
  "    if (r == 0 && threadIdx.x == 0) *(float *)p.out_tensor_scale = g.g;\n"
  "  }\n"
  "#endif\n"
  "#endif\n"
  "  return g;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_fused_group_out(const bq_gshape &g, int a, const bq_qp &q) {\n"
  "  g.scales[a >> g.gsh] = q.stored;\n"
  "#if BQ_ASYM\n"
  "  g.zps[a >> g.gsh] = q.zp;\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "// Per token: the block's reduction, then the row's scale (written by thread 0). 256-thread\n"
  "// blocks have thread 0 alone compute it and read it from q_smem (as bq_rstd).\n"
  "template <int TPR>\n"
  "static __device__ __forceinline__ bq_qp bq_row_params(const bq_fused_params &p, bq_i64 r, bq_red red, bq_red *red_smem,\n"
  "                                                      bq_qp *q_smem) {\n"
  "  red = bq_red_team<true>(red, TPR, red_smem);\n"
  "  if (TPR < BQ_THREADS) {\n"
  "    const bq_qp q = bq_params_of(bq_red_round(red));\n"
  "    if (threadIdx.x == 0) bq_fused_params_out(p, r, q);\n"
  "    return q;\n"
  "  }\n"
  "  if (threadIdx.x == 0) {\n"
  "    const bq_qp q = bq_params_of(bq_red_round(red));\n"
  "    bq_fused_params_out(p, r, q);\n"
  "    *q_smem = q;\n"
  "  }\n"
  "  __syncthreads(); // (thread 0 rewrites q_smem after the next row's reduction's barriers)\n"
  "  return *q_smem;\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "// Groups of any other size: a thread a group, its values recomputed from memory (h from\n"
  "// the residual buffer or x; the gate and up from x).\n"
  "static __device__ __forceinline__ void bq_groups_generic(const bq_fused_params &p, bq_i64 r, bq_i *y, bq_c rstd) {\n"
  "  __syncthreads(); // the block's residual writes (h) are visible to every thread\n"
  "  const int G = (int)p.group, ng = (int)p.cols / G;\n"
  "  for (int g = threadIdx.x; g < ng; g += blockDim.x) {\n"
  "    bq_red red = bq_red_init();\n"
  "    for (int e = g * G; e < g * G + G; e++) bq_red_add(red, bq_to_c(bq_value_at(p, r, e, rstd)));\n"
  "    const bq_qp q = bq_params_of(red);\n"
  "    bq_fused_params_out(p, r * p.grs + g, q);\n"
  "    for (int e = g * G; e < g * G + G; e++) y[e] = (bq_i)bq_quantize_int(bq_to_c(bq_value_at(p, r, e, rstd)), q.s, q.z);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_FMX\n"
  "// ---- microscaling: a group's scale byte from its amax by the plan's rule, its elements\n"
  "// converted (common.cuh), codes two a byte for E2M1 (the lower index in the low nibble)\n"
  "static __device__ __forceinline__ bq_mx_scale bq_fmx_scale(const bq_gshape &gs, bq_i64 g, bq_c amax, bool store) {\n"
  "  const int code = bq_mx_rule(amax, gs.g, gs.enc);\n"
  "  if (store) gs.sb[bq_mx_sidx(gs.r, g, gs.ngroups, gs.grs)] = (bq_u8)code;\n"
  "  return bq_mx_scale_of(code, gs.g);\n"
  "}\n"
  "// One access on the fast path (whole accesses: G, hence D, a multiple of V): g, its group's\n"
  "// reduction (merged over the group's lanes and rounded); its first lane stores the scale. yw:\n"
  "// the width y's row start allows (an access's codes keep it: BQ_MX_YB(V) bytes, a power of two).\n"
  "static __device__ __forceinline__ void bq_fmx_access(const bq_gshape &gs, bq_red g, const bq_xchunk &v, bq_i *y, int a,\n"
  "                                                     int yw) {\n"
  "  constexpr int NB = BQ_MX_YB(BQ_VEC);\n"
  "  bq_chunk<bq_u8, NB> o;\n"
  "#if (BQ_MX_NV_PAIRS || BQ_MX_HALF_PAIRS) && BQ_FMX_PAIRS\n"
  "  { // E2M1 from bf16 or f16 two elements a step where the group's scale allows (as mx.cu)\n"
  "    const int code = bq_mx_rule(g.a, gs.g, gs.enc);\n"
  "    if (gs.sub == 0) gs.sb[bq_mx_sidx(gs.r, a >> gs.gsh, gs.ngroups, gs.grs)] = (bq_u8)code;\n"
  "#if BQ_MX_NV_PAIRS\n"
  "    const float sc = __fmul_rn(gs.g, bq_e4m3_f32(code));\n"
  "    const bool pairs = BQ_VEC % 8 == 0 && sc > 0.0f && bq_scale_is_plain(sc);\n"
  "    if (pairs) bq_nv_pairs<BQ_VEC>(v, sc, o);\n"
  "#else\n"
  "    const float rcp = bq_ue8m0_f32(code == 255 ? 255 : 254 - code);\n"
  "    const bool pairs = BQ_VEC % 8 == 0 && !(rcp < BQ_H2_MIN) && !(rcp > BQ_H2_MAX); // (a normal half, or NaN)\n"
  "    if (pairs) bq_e2m1_pairs<BQ_VEC>(v, rcp, o);\n"
  "#endif\n"
  "    if (pairs) {\n"
  "      bq_store((bq_u8 *)y + BQ_MX_YB(a * BQ_VEC), o, yw);\n"
  "      return;\n"
  "    }\n"
  "  }\n"
  "  const bq_mx_scale s = bq_fmx_scale(gs, a >> gs.gsh, g.a, false);\n"
  "#else\n"
  "  const bq_mx_scale s = bq_fmx_scale(gs, a >> gs.gsh, g.a, gs.sub == 0);\n"
  "#endif\n"
  "  bq_c c[BQ_VEC];\n"
  "  bq_chunk_c(v, c);\n"
  "#if BQ_MX_NV_FAST\n"
  "  int qv[BQ_VEC];\n"
  "  bq_mx_quantize_n<BQ_VEC>(c, s, qv); // (the quotient's form chosen once for the access)\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BQ_VEC; j++) {\n"
  "#if BQ_MX_NV_FAST\n"
  "    const int q = qv[j];\n"
  "#else\n"
  "    const int q = bq_mx_quantize(c[j], s);\n"
  "#endif\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "    o.e[j >> 1] = (bq_u8)((j & 1) ? (o.e[j >> 1] | (q << 4)) : q);\n"
  "#else\n"
  "    o.e[j] = (bq_u8)q;\n"
  "#endif\n"
  "  }\n"
  "  bq_store((bq_u8 *)y + BQ_MX_YB(a * BQ_VEC), o, yw); // (the fast path's groups are whole accesses)\n"
  "}\n"
  "// Groups of any other size: a thread a group, its values recomputed from memory (as\n"
  "// bq_groups_generic)\n"
  "static __device__ __forceinline__ void bq_fmx_generic(const bq_fused_params &p, const bq_gshape &gs, bq_i64 r, bq_i *y,\n"
  "                                                      bq_c rstd) {\n"
  "  __syncthreads(); // the block's residual writes (h) are visible to every thread\n"
  "  const int G = (int)p.group, ng = (int)gs.ngroups;\n"
  "  for (int g = threadIdx.x; g < ng; g += blockDim.x) {\n"
  "    bq_red red = bq_red_init();\n"
  "    for (int e = g * G; e < g * G + G; e++) bq_red_add(red, bq_to_c(bq_value_at(p, r, e, rstd)));\n"
  "    const bq_mx_scale s = bq_fmx_scale(gs, g, red.a, true);\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "    for (int e = g * G; e < g * G + G; e += 2)\n"
  "      y[e >> 1] = (bq_i)(bq_mx_quantize(bq_to_c(bq_value_at(p, r, e, rstd)), s) |\n"
  "                         (bq_mx_quantize(bq_to_c(bq_value_at(p, r, e + 1, rstd)), s) << 4));\n"
  "#else\n"
  "    for (int e = g * G; e < g * G + G; e++) y[e] = (bq_i)bq_mx_quantize(bq_to_c(bq_value_at(p, r, e, rstd)), s);\n"
  "#endif\n"
  "  }\n"
  "}\n"
  "// The blocked layout's padding, written 0 by the block of row r (tpr threads): the row's\n"
  "// entries past its last group (groups padded to 4), and the padding rows rows + r,\n"
  "// rows + r + rows, ... below rows rounded up to 128\n"
  "static __device__ __forceinline__ void bq_fmx_pad(const bq_fused_params &p, bq_i64 r, int tpr) {\n"
  "#if BQ_MX_LAYOUT == 2\n"
  "  const bq_i64 ng = p.cols / p.group, pg = (ng + 3) & ~(bq_i64)3, prows = (p.rows + 127) & ~(bq_i64)127;\n"
  "  bq_u8 *sb = (bq_u8 *)p.scales;\n"
  "  for (bq_i64 g = ng + threadIdx.x; g < pg; g += tpr) sb[bq_mx_sidx(r, g, ng, 0)] = 0;\n"
  "  for (bq_i64 pr = p.rows + r; pr < prows; pr += p.rows)\n"
  "    for (bq_i64 g = threadIdx.x; g < pg; g += tpr) sb[bq_mx_sidx(pr, g, ng, 0)] = 0;\n"
  "#else\n"
  "  (void)p, (void)r, (void)tpr;\n"
  "#endif\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- a row -------------------------------------------------------------------------------\n"
  "// A block of TPR threads, CPT accesses a thread a batch; HOLD: the row is one batch, kept in\n"
  "// registers throughout.\n"
  "static __device__ __forceinline__ void bq_fquantize(const bq_xchunk &v, bq_qchunk &o, const bq_qp &q) {\n"
  "  bq_c c[BQ_VEC];\n"
  "#if BQ_LEAN\n"
  "  // FP8: a scale from the row's or group's own amax takes the lean quotient, two codes a\n"
  "  // cvt; any other (tiny, capped or not finite) the general form, which is right for all\n"
  "  if (q.lean) {\n"
  "    bq_chunk_c(v, c);\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BQ_VEC; j += 2) {\n"
  "      const bq_u32 w = bq_f8x2_of_f32(bq_f8_lean_quotient(c[j], q.s), bq_f8_lean_quotient(c[j + 1], q.s));\n"
  "      o.e[j] = (bq_i)(w & 0xFF);\n"
  "      o.e[j + 1] = (bq_i)(w >> 8);\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "  bq_qp g = q;\n"
  "  g.bounded = false;\n"
  "  bq_chunk_c(v, c);\n"
  "  bq_quantize_vals(c, o, g);\n"
  "#else\n"
  "  bq_chunk_c(v, c);\n"
  "  bq_quantize_vals(c, o, q);\n"
  "#endif\n"
  "}\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "// The narrow entries' last pass: the row's held values quantized, the scale's form (q.bounded;\n"
  "// FP8: q.lean, else the general form) fixed for the whole row so that the accesses'\n"
  "// arithmetic interleaves without a branch\n"
  "template <int TPR, int CPT, bool FULL, int BOUNDED>\n"
  "static __device__ __forceinline__ void bq_fused_qrow(const bq_xchunk (&v)[CPT], bq_qp q, bq_i *y, int nacc, int D,\n"
  "                                                     int yw) {\n"
  "  q.bounded = BOUNDED != 0;\n"
  "#if BQ_LEAN\n"
  "  q.lean = BOUNDED != 0; // FP8: the caller takes BOUNDED for lean rows only\n"
  "#endif\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < CPT; i++) {\n"
  "    const int a = threadIdx.x + i * TPR;\n"
  "    bq_qchunk o;\n"
  "    bq_fquantize(v[i], o, q);\n"
  "    if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "// The narrow entries' groups (p.fast_groups), up to four accesses at a time: their groups\n"
  "// reduced together, each group's scale found by one lane and handed to the others, then\n"
  "// the quantize, with the scale's form picked once for the accesses\n"
  "template <int TPR, int CPT, bool FULL>\n"
  "static __device__ __forceinline__ void bq_fused_groups(bq_red (&gr)[CPT], const bq_xchunk (&v)[CPT], const bq_gshape &gs,\n"
  "                                                       bq_i *y, int b, int nacc, int D, int yw) {\n"
  "  constexpr int N = CPT < 4 ? CPT : 4; // accesses at a time (more spill)\n"
  "#pragma unroll\n"
  "  for (int c0 = 0; c0 < CPT; c0 += N) {\n"
  "    bq_red g[N];\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < N; i++) g[i] = gr[c0 + i];\n"
  "    bq_red_lanes_n<N>(g, gs.gc);\n"
  "#if !BQ_FP8 && BQ_FT != BQ_TYPE_F64\n"
  "    // Each group's scale found once, not by each of its lanes: the warp's N * 32 / gc groups\n"
  "    // (at most 32 where gc >= N) go a lane each. Lane L takes the group k = L % ng of access\n"
  "    // c0 + L / ng (ng = 32 / gc groups an access in the warp), whose lanes start at k gc; then,\n"
  "    // where every one of them is bounded (uniform across the warp), each lane takes back its\n"
  "    // groups' quotient parameters, which are all the bounded quantize reads (the reciprocal,\n"
  "    // the scaled scale and the zero point). Otherwise every lane computes its own, below.\n"
  "    if (gs.gc >= N) {\n"
  "      const int L = threadIdx.x & 31, ng = 32 >> gs.gsh, pi = L >> (5 - gs.gsh), pk = L & (ng - 1);\n"
  "      bq_red m = bq_red_init();\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < N; i++) {\n"
  "        const bq_red x = bq_red_shfl<false>(g[i], pk << gs.gsh);\n"
  "        if (pi == i) m = x;\n"
  "      }\n"
  "      const bq_qp qm = bq_params_of(bq_red_round(m));\n"
  "      const int a0 = b + (threadIdx.x & ~31) + (pk << gs.gsh) + (c0 + pi) * TPR; // the group's first access\n"
  "      if (pi < N && (FULL || a0 < nacc)) bq_fused_group_out(gs, a0, qm);\n"
  "      if (__all_sync(0xffffffffu, qm.bounded || pi >= N)) {\n"
  "#pragma unroll\n"
  "        for (int i = 0; i < N; i++) {\n"
  "          const int src = i * ng + (L >> gs.gsh), a = b + threadIdx.x + (c0 + i) * TPR;\n"
  "          bq_qp qb = qm;\n"
  "          qb.s.rcp = __shfl_sync(0xffffffffu, qm.s.rcp, src);\n"
  "          qb.s.ss = __shfl_sync(0xffffffffu, qm.s.ss, src);\n"
  "#if BQ_ASYM\n"
  "          qb.zp = __shfl_sync(0xffffffffu, qm.zp, src);\n"
  "#endif\n"
  "          qb.bounded = true;\n"
  "          bq_qchunk o;\n"
  "          bq_fquantize(v[c0 + i], o, qb);\n"
  "          if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);\n"
  "        }\n"
  "        continue;\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "    bq_qp q[N];\n"
  "    bool all = true;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < N; i++) {\n"
  "      q[i] = bq_params_of(bq_red_round(g[i]));\n"
  "      all = all && (BQ_LEAN ? bq_is_lean(q[i]) : q[i].bounded); // FP8: the lean form or the general\n"
  "      const int a = b + threadIdx.x + (c0 + i) * TPR;\n"
  "      if ((FULL || a < nacc) && gs.sub == 0) bq_fused_group_out(gs, a, q[i]); // (again, where stored above: the same)\n"
  "    }\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < N; i++) {\n"
  "      const int a = b + threadIdx.x + (c0 + i) * TPR;\n"
  "      bq_qchunk o;\n"
  "      bq_qp qb = q[i];\n"
  "      if (all) {\n"
  "        qb.bounded = true;\n"
  "#if BQ_LEAN\n"
  "        qb.lean = true;\n"
  "#endif\n"
  "        bq_fquantize(v[c0 + i], o, qb);\n"
  "      } else {\n"
  "#if BQ_LEAN\n"
  "        qb.lean = false;\n"
  "#endif\n"
  "        bq_fquantize(v[c0 + i], o, qb);\n"
  "      }\n"
  "      if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "// DENSE: every stream's rows 16-byte aligned and D a multiple of V (the host's promise): no\n"
  "// element path. FULL: the row is exactly TPR CPT accesses (the host's promise too): no\n"
  "// access is checked against its end. RES: the code for a residual (RMSNorm), else none.\n"
  "template <int TPR, int CPT, bool HOLD, bool DENSE, bool FULL, bool RES>\n"
  "static __device__ __forceinline__ void bq_fused_row(const bq_fused_params &p, bq_i64 r, bq_c *ss_smem, bq_red *red_smem,\n"
  "                                                    bq_qp *q_smem) {\n"
  "  constexpr int R = BQ_THREADS / TPR; // the contract's lanes a thread holds\n"
  "  static_assert(BQ_THREADS % TPR == 0 && TPR % 32 == 0 && CPT % R == 0, \"lanes\");\n"
  "  // NARROW: the row held, dense, and y's rows aligned to a chunk of codes (the host's\n"
  "  // promise): the narrow entries and bq_fused_c2d, whose code has fewer branches an access:\n"
  "  // y's stores take one width, n's optional stores follow the pass that computes it, and per\n"
  "  // token the last pass picks the scale's form once for the row. (bq_fused_c8d keeps the\n"
  "  // general form: with it, it spills.)\n"
  "  constexpr bool NARROW = HOLD && DENSE && (TPR < BQ_THREADS || CPT <= 2);\n"
  "  constexpr bool XCS = TPR < BQ_THREADS && CPT == 8 && FULL; // bq_fused_m8f streams x (bq_fload)\n"
  "  const int t = threadIdx.x;\n"
  "  const int D = (int)p.cols, nacc = (D + BQ_VEC - 1) / BQ_VEC, batch = TPR * CPT;\n"
  "  const int nb = HOLD ? batch : nacc; // the batch loops' end\n"
  "  bq_xchunk v[CPT];\n"
  "  bq_c rstd = 0;\n"
  "#if BQ_RMS\n"
  "  // the shortest rows load the weight with the row, so that normalizing waits on no further\n"
  "  // load (longer ones keep the registers, which buy more blocks an SM)\n"
  "  constexpr bool WPRE = HOLD && CPT == 1;\n"
  "  constexpr bool RBATCH = CPT <= 2 || (TPR < BQ_THREADS && CPT <= 4); // the residual's loads: bq_rms_res, else bq_rms_res1\n"
  "  bq_xchunk wv[WPRE ? CPT : 1];\n"
  "  bq_c ss[R]; // lane t + j TPR's sum of squares, its accesses in ascending order\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < R; j++) ss[j] = 0;\n"
  "  for (int b = 0; b < nb; b += batch) { // (batch is a multiple of 256: access i is in lane t + (i % R) TPR)\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++) {\n"
  "      const int a = b + t + i * TPR;\n"
  "      if (FULL || a < nacc) {\n"
  "        bq_fload<false, DENSE, XCS>(v[i], (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);\n"
  "        if (RES && !RBATCH && p.res) bq_rms_res1<DENSE>(p, r, a, v[i]);\n"
  "        if (WPRE) bq_fload<true>(wv[WPRE ? i : 0], (const bq_t *)p.w, a, p.cols, p.aligned);\n"
  "      }\n"
  "    }\n"
  "    if (RES && RBATCH && p.res) bq_rms_res<TPR, CPT, DENSE, FULL>(p, r, b, nacc, v);\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++)\n"
  "      if (FULL || b + t + i * TPR < nacc) bq_add_squares(ss[i % R], v[i]);\n"
  "  }\n"
  "  rstd = bq_rstd<TPR>(p, ss, ss_smem);\n"
  "#endif\n"
  "  bq_i *y = (bq_i *)p.y + BQ_FYB(r * p.ys);\n"
  "  const int yw = BQ_FMX ? bq_width(y) : NARROW ? (int)sizeof(bq_qchunk) : bq_qwidth(y);\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  const bq_scale s = bq_scale_of((bq_c)p.scale);\n"
  "  const bq_zp z = bq_zp_of(p.zp);\n"
  "#elif BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  bq_red red = bq_red_init();\n"
  "#else\n"
  "  const bq_gshape gs = bq_gshape_of(p, r);\n"
  "#endif\n"
  "  for (int b = 0; b < nb; b += batch) {\n"
  "#if BQ_GRAN != BQ_GRAN_TOKEN\n"
  "    bq_red gr[CPT]; // per group: each access's own reduction (per tensor: unused)\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++) {\n"
  "      const int a = b + t + i * TPR;\n"
  "      const bool in = FULL || a < nacc;\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "      bq_red &rd = red; // the row's reduction\n"
  "#else\n"
  "      gr[i] = bq_red_init();\n"
  "      bq_red &rd = gr[i];\n"
  "#endif\n"
  "      if (in) {\n"
  "#if BQ_RMS\n"
  "        if (WPRE) bq_rms_nw(v[i], wv[WPRE ? i : 0], rstd, rd);\n"
  "        else if (HOLD) bq_rms_n<DENSE>(p, a, v[i], rstd, rd);\n"
  "        else bq_value(p, r, a, rstd, v[i], rd);\n"
  "#else\n"
  "        bq_value<DENSE>(p, r, a, rstd, v[i], rd);\n"
  "#endif\n"
  "        if (!NARROW && p.out) bq_fstore<DENSE>((bq_t *)p.out + r * p.os, v[i], a, D, p.aligned);\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "        bq_qchunk o;\n"
  "        bq_quantize_static(v[i], o, s, z);\n"
  "        bq_qstore<DENSE>(y, o, a, D, yw);\n"
  "#endif\n"
  "      }\n"
  "    }\n"
  "    if (NARROW && p.out) // n, once every access has it (one branch a row, not one an access)\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < CPT; i++)\n"
  "        if (FULL || b + t + i * TPR < nacc) bq_fstore<DENSE>((bq_t *)p.out + r * p.os, v[i], b + t + i * TPR, D, p.aligned);\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "#if !BQ_FMX\n"
  "    if (NARROW && p.fast_groups) bq_fused_groups<TPR, CPT, FULL>(gr, v, gs, y, b, nacc, D, yw);\n"
  "    else\n"
  "#endif\n"
  "    if (p.fast_groups) { // a group: gc consecutive lanes, one access each (all lanes shuffle)\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < CPT; i++) {\n"
  "        const int a = b + t + i * TPR;\n"
  "        const bq_red g = bq_red_round(bq_red_lanes(gr[i], gs.gc));\n"
  "        if (FULL || a < nacc) {\n"
  "#if BQ_FMX\n"
  "          bq_fmx_access(gs, g, v[i], y, a, yw);\n"
  "#else\n"
  "          const bq_qp q = bq_params_of(g);\n"
  "          if (gs.sub == 0) bq_fused_group_out(gs, a, q);\n"
  "          bq_qchunk o;\n"
  "          bq_fquantize(v[i], o, q);\n"
  "          bq_qstore<DENSE>(y, o, a, D, yw);\n"
  "#endif\n"
  "        }\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  const bq_qp q = bq_row_params<TPR>(p, r, red, red_smem, q_smem);\n"
  "  if (NARROW) { // the scale's form picked once for the row\n"
  "    if (BQ_LEAN ? bq_is_lean(q) : q.bounded) bq_fused_qrow<TPR, CPT, FULL, 1>(v, q, y, nacc, D, yw);\n"
  "    else bq_fused_qrow<TPR, CPT, FULL, 0>(v, q, y, nacc, D, yw);\n"
  "    return;\n"
  "  }\n"
  "  for (int b = 0; b < nb; b += batch) {\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < CPT; i++) {\n"
  "      const int a = b + t + i * TPR;\n"
  "      if (FULL || a < nacc) {\n"
  "        bq_red unused = bq_red_init();\n"
  "        if (!HOLD) bq_value(p, r, a, rstd, v[i], unused);\n"
  "        bq_qchunk o;\n"
  "        bq_fquantize(v[i], o, q);\n"
  "        bq_qstore<DENSE>(y, o, a, D, yw);\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "#elif BQ_GRAN == BQ_GRAN_GROUP\n"
  "#if BQ_FMX\n"
  "  if (!p.fast_groups) bq_fmx_generic(p, gs, r, y, rstd);\n"
  "  bq_fmx_pad(p, r, TPR);\n"
  "#else\n"
  "  if (!p.fast_groups) bq_groups_generic(p, r, y, rstd);\n"
  "#endif\n"
  "#endif\n"
  "}\n"
  "\n"
  "// ---- bq_fused_staged: rows staged in shared memory, the next one copied in while this one runs\n"
  "// A persistent block takes rows blockIdx.x, + gridDim.x, ...; two slots of shared memory\n"
  "// hold a row each (its streams: RMSNorm x, then the residual; gated: gate, then up, as\n"
  "// 16-byte accesses). While a row is worked on, cp.async brings the block's next row into\n"
  "// the other slot, so loads are always in flight, and no\n"
  "// register holds a row: any row that fits two slots is read from DRAM once. Thread t\n"
  "// copies exactly the accesses it later reads, so its own cp.async.wait_group is all the\n"
  "// synchronization a slot needs. Only rows whose streams start 16 bytes aligned come here.\n"
  "\n"
  "static __device__ __forceinline__ void bq_stage(const bq_fused_params &p, bq_i64 r, bq_u32 slot, int nacc) {\n"
  "  const bq_t *s0 = (const bq_t *)p.x + r * p.xs;\n"
  "#if BQ_RMS\n"
  "  const bq_t *s1 = p.res ? (const bq_t *)p.res + r * p.rs : (const bq_t *)0;\n"
  "#else\n"
  "  const bq_t *s1 = s0 + p.cols;\n"
  "#endif\n"
  "  for (int a = threadIdx.x; a < nacc; a += BQ_THREADS) {\n"
  "    const int e0 = a * BQ_VEC, left = (int)p.cols - e0;\n"
  "    const int bytes = (left < BQ_VEC ? left : BQ_VEC) * (int)sizeof(bq_t); // the rest reads as 0\n"
  "    bq_cp_async16(slot + (bq_u32)a * 16u, s0 + e0, bytes);\n"
  "    if (s1) bq_cp_async16(slot + (bq_u32)(nacc + a) * 16u, s1 + e0, bytes);\n"
  "  }\n"
  "}\n"
  "\n"
  "// One staged row: S[0, nacc) is x (RMSNorm; h after the first pass) or the gate (a after\n"
  "// the second), S[nacc, 2 nacc) the residual or up; W the weight (RMSNorm), staged once.\n"
  "static __device__ __forceinline__ void bq_staged_row(const bq_fused_params &p, bq_i64 r, bq_xchunk *S, const bq_xchunk *W,\n"
  "                                                     int nacc, bq_c *ss_smem, bq_red *red_smem, bq_qp *q_smem) {\n"
  "  const int t = threadIdx.x, D = (int)p.cols;\n"
  "  bq_c rstd = 0;\n"
  "#if BQ_RMS\n"
  "  bq_c ss[1] = {0};\n"
  "  bq_t *const rr = p.res ? (bq_t *)p.res + r * p.rs : (bq_t *)0;\n"
  "  for (int a = t; a < nacc; a += BQ_THREADS) {\n"
  "    bq_xchunk h = S[a];\n"
  "    if (rr) {\n"
  "      bq_add_chunk(h, S[nacc + a]);\n"
  "      bq_fstore(rr, h, a, D, true);\n"
  "      S[a] = h;\n"
  "    }\n"
  "    bq_add_squares(ss[0], h);\n"
  "  }\n"
  "  rstd = bq_rstd<BQ_THREADS>(p, ss, ss_smem);\n"
  "#endif\n"
  "  bq_i *y = (bq_i *)p.y + BQ_FYB(r * p.ys);\n"
  "  bq_t *const out = p.out ? (bq_t *)p.out + r * p.os : (bq_t *)0;\n"
  "  const int yw = BQ_FMX ? bq_width(y) : bq_qwidth(y);\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "  const bq_scale s = bq_scale_of((bq_c)p.scale);\n"
  "  const bq_zp z = bq_zp_of(p.zp);\n"
  "#elif BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  bq_red red = bq_red_init();\n"
  "#else\n"
  "  const bq_gshape gs = bq_gshape_of(p, r);\n"
  "#endif\n"
  "  for (int b = 0; b < nacc; b += BQ_THREADS) { // uniform trip count: the group path shuffles\n"
  "    const int a = b + t;\n"
  "    bq_xchunk v;\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "    bq_red &rd = red; // the row's reduction\n"
  "#else\n"
  "    bq_red gr = bq_red_init(); // per group: this access's (per tensor: unused)\n"
  "    bq_red &rd = gr;\n"
  "#endif\n"
  "    if (a < nacc) {\n"
  "      v = S[a];\n"
  "#if BQ_RMS\n"
  "      bq_xchunk wv;\n"
  "      if (p.wstage) wv = W[a];\n"
  "      else bq_fload<true>(wv, (const bq_t *)p.w, a, D, true);\n"
  "      bq_rms_nw(v, wv, rstd, rd);\n"
  "#else\n"
  "      bq_gate(v, S[nacc + a], rd);\n"
  "#endif\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "      S[a] = v; // quantized after the row's reduction\n"
  "#endif\n"
  "      if (out) bq_fstore(out, v, a, D, true);\n"
  "#if BQ_GRAN == BQ_GRAN_TENSOR\n"
  "      bq_qchunk o;\n"
  "      bq_quantize_static(v, o, s, z);\n"
  "      bq_qstore(y, o, a, D, yw);\n"
  "#endif\n"
  "    }\n"
  "#if BQ_GRAN == BQ_GRAN_GROUP\n"
  "    if (p.fast_groups) {\n"
  "      const bq_red g = bq_red_round(bq_red_lanes(gr, gs.gc));\n"
  "      if (a < nacc) {\n"
  "#if BQ_FMX\n"
  "        bq_fmx_access(gs, g, v, y, a, yw);\n"
  "#else\n"
  "        const bq_qp q = bq_params_of(g);\n"
  "        if (gs.sub == 0) bq_fused_group_out(gs, a, q);\n"
  "        bq_qchunk o;\n"
  "        bq_fquantize(v, o, q);\n"
  "        bq_qstore(y, o, a, D, yw);\n"
  "#endif\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "#if BQ_GRAN == BQ_GRAN_TOKEN\n"
  "  const bq_qp q = bq_row_params<BQ_THREADS>(p, r, red, red_smem, q_smem);\n"
  "  for (int a = t; a < nacc; a += BQ_THREADS) {\n"
  "    const bq_xchunk v = S[a];\n"
  "    bq_qchunk o;\n"
  "    bq_fquantize(v, o, q);\n"
  "    bq_qstore(y, o, a, D, yw);\n"
  "  }\n"
  "#elif BQ_GRAN == BQ_GRAN_GROUP\n"
  "#if BQ_FMX\n"
  "  if (!p.fast_groups) bq_fmx_generic(p, gs, r, y, rstd);\n"
  "  bq_fmx_pad(p, r, BQ_THREADS);\n"
  "#else\n"
  "  if (!p.fast_groups) bq_groups_generic(p, r, y, rstd);\n"
  "#endif\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_E_FUSED_STAGED\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_THREADS) BQ_FN_FUSED_STAGED(const bq_fused_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];\n"
  "  __shared__ bq_red red_smem[BQ_THREADS / 32];\n"
  "  __shared__ bq_qp q_smem;\n"
  "  const int nacc = ((int)p.cols + BQ_VEC - 1) / BQ_VEC;\n"
  "  // the weight (RMSNorm), then rows r, r + g, r + 2 g, ... in slots 0, 1, 0, ...\n"
  "  const int wbytes = BQ_RMS && p.wstage ? nacc * 16 : 0;\n"
  "  const bq_u32 wbase = bq_smem_addr(smem + BQ_ACT_BYTES), base = wbase + (bq_u32)wbytes;\n"
  "#if BQ_ACT_TAB\n"
  "  bq_act_fill();\n"
  "#endif\n"
  "#if BQ_RMS\n"
  "  for (int a = threadIdx.x; a < nacc && p.wstage; a += BQ_THREADS) {\n"
  "    const int e0 = a * BQ_VEC, left = (int)p.cols - e0;\n"
  "    bq_cp_async16(wbase + (bq_u32)a * 16u, (const bq_t *)p.w + e0, (left < BQ_VEC ? left : BQ_VEC) * (int)sizeof(bq_t));\n"
  "  }\n"
  "#endif\n"
  "  const bq_i64 g = gridDim.x;\n"
  "  if (blockIdx.x < p.rows) bq_stage(p, blockIdx.x, base, nacc);\n"
  "  bq_cp_commit();\n"
  "  int s = 0;\n"
  "  for (bq_i64 r = blockIdx.x; r < p.rows; r += g, s ^= 1) {\n"
  "    if (r + g < p.rows) bq_stage(p, r + g, base + (bq_u32)((s ^ 1) * p.slot), nacc); // the slot the last row used\n"
  "    bq_cp_commit();\n"
  "    bq_cp_wait<1>(); // this row's copies have landed; the next row's may be in flight\n"
  "    bq_staged_row(p, r, (bq_xchunk *)(smem + BQ_ACT_BYTES + wbytes + s * p.slot), (const bq_xchunk *)(smem + BQ_ACT_BYTES),\n"
  "                  nacc, ss_smem, red_smem, &q_smem);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "#if BQ_ACT_TAB\n"
  "#define BQ_ACT_FILL() bq_act_fill()\n"
  "#else\n"
  "#define BQ_ACT_FILL() (void)0\n"
  "#endif\n"
  "// MINB: blocks an SM the registers must allow (0: the compiler's choice); DENSE, FULL, RES: as\n"
  "// for bq_fused_row\n"
  "#define BQ_FUSED_ENTRY(name, TPR, CPT, HOLD, MINB, DENSE, FULL, RES)                               \\\n"
  "  extern \"C\" __global__ void __launch_bounds__(TPR, MINB) name(const bq_fused_params p) {    \\\n"
  "    __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];                                            \\\n"
  "    __shared__ bq_red red_smem[BQ_THREADS / 32];                                             \\\n"
  "    __shared__ bq_qp q_smem;                                                                 \\\n"
  "    BQ_ACT_FILL();                                                                           \\\n"
  "    for (bq_i64 r = blockIdx.x; r < p.rows; r += gridDim.x)                                  \\\n"
  "      bq_fused_row<TPR, CPT, HOLD, DENSE, FULL, RES>(p, r, ss_smem, red_smem, &q_smem);      \\\n"
  "  }\n"
  "// bq_fused_c2 (rows of 257 to 512 accesses, bf16 D = 4096) is held to more blocks an SM\n"
  "// than the compiler's 64 registers allow, where that spills nothing: more warps hide its\n"
  "// latency (H100, bf16 [8192, 4096]: RMSNorm per group 60.0 us at 4 blocks, 53.5 at 6).\n"
  "// RMSNorm takes 5 blocks (48 registers: at 40 the residual's batched loads and the\n"
  "// asymmetric reductions spill); the gated op with the activation's table 5 (at 6 it spills\n"
  "// and ran slower); the gated op that computes the formula keeps the compiler's choice (at\n"
  "// 48 registers it spills)\n"
  "#define BQ_C2_MINB (BQ_RMS || BQ_ACT_TAB ? 5 : 0)\n"
  "// bq_fused_c8 with the activation's table (gated rows of 1025 to 2048 accesses, which it\n"
  "// takes in place of the staged kernel) is held to 4 blocks an SM (64 registers): it spills\n"
  "// a few words, and ran faster (bf16 [8192, 14336]: 251 us at 3 blocks, 237 at 4); so is\n"
  "// RMSNorm per token, which the host gives such rows with a residual (it too ran faster at 4).\n"
  "// Per group the host gives them such rows too, at the compiler's choice of registers.\n"
  "#define BQ_C8_MINB (BQ_ACT_TAB || (BQ_RMS && BQ_GRAN == BQ_GRAN_TOKEN) ? 4 : 0)\n"
  "// (threads, accesses a thread): the host's bq__fused_shapes, by entry\n"
  "#if BQ_E_FUSED_C1\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C1, 256, 1, true, 0, false, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_C2\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C2, 256, 2, true, BQ_C2_MINB, false, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_C4\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C4, 256, 4, true, 0, false, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_C8\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C8, 256, 8, true, BQ_C8_MINB, false, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_LONG\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_LONG, 256, BQ_LONG_CPT, false, 0, false, false, true)\n"
  "#endif\n"
  "// the narrow entries: 128 threads a row, dense rows with y's rows aligned to a chunk of codes,\n"
  "// at most 80 registers (6 blocks an SM; bq_fused_m4f 64, 8 blocks: its loads all hoisted, it\n"
  "// asked for 71; bq_fused_m16 128, 4 blocks: its row's 64 registers); the f entries for rows\n"
  "// of exactly 512 or 1024 accesses. bq_fused_m4 and bq_fused_m4f take a residual too (the\n"
  "// wider ones spilled or ran slower with it)\n"
  "#if BQ_E_FUSED_M4\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_M4, 128, 4, true, 6, true, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_M8\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_M8, 128, 8, true, 6, true, false, false)\n"
  "#endif\n"
  "#if BQ_E_FUSED_M4F\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_M4F, 128, 4, true, 8, true, true, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_M8F\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_M8F, 128, 8, true, 6, true, true, false)\n"
  "#endif\n"
  "#if BQ_E_FUSED_M16\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_M16, 128, 16, true, 4, true, false, false)\n"
  "#endif\n"
  "// bq_fused_c2 and bq_fused_c8 for dense rows, a residual allowed: no element path, which\n"
  "// costs the wide entries registers (bq_fused_c8 spills with it, not without) and\n"
  "// instruction fetch\n"
  "#if BQ_E_FUSED_C2D\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C2D, 256, 2, true, BQ_C2_MINB, true, false, true)\n"
  "#endif\n"
  "#if BQ_E_FUSED_C8D\n"
  "BQ_FUSED_ENTRY(BQ_FN_FUSED_C8D, 256, 8, true, BQ_C8_MINB, true, false, true)\n"
  "#endif\n"
  "\n"
  "#if BQ_E_FUSED_AMAX\n"
  "// NVFP4 with the tensor scale computed, its first launches: the producer's amax over the\n"
  "// tensor, nothing else written (the residual's h computed, not stored). A block takes rows\n"
  "// blockIdx.x, + gridDim.x, ... and writes its amax to the workspace (f32; >= +0, never NaN);\n"
  "// then one block (p.nparts > 0) reduces the partials into amax[nparts]. Thread t is the\n"
  "// contract's lane t of RMSNorm's sum of squares; each row is read twice (the second from L2).\n"
  "#if BQ_RMS\n"
  "// h = T(x + residual) of access a, or x\n"
  "static __device__ __forceinline__ void bq_fmx_h(const bq_fused_params &p, bq_i64 r, int a, bq_xchunk &h) {\n"
  "  bq_fload<false>(h, (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);\n"
  "  if (p.res) {\n"
  "    bq_xchunk v;\n"
  "    bq_fload<false>(v, (const bq_t *)p.res + r * p.rs, a, p.cols, p.aligned);\n"
  "    bq_add_chunk(h, v);\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "extern \"C\" __global__ void __launch_bounds__(BQ_THREADS) BQ_FN_FUSED_AMAX(const bq_fused_params p) {\n"
  "#if BQ_RMS\n"
  "  __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];\n"
  "#endif\n"
  "  __shared__ bq_red red_smem[BQ_THREADS / 32];\n"
  "  float *ws = (float *)p.amax;\n"
  "  const int t = threadIdx.x, nacc = ((int)p.cols + BQ_VEC - 1) / BQ_VEC;\n"
  "  bq_red red = bq_red_init();\n"
  "  if (p.nparts) {\n"
  "    for (int i = t; i < p.nparts; i += BQ_THREADS) red.a = bq_max(red.a, (bq_c)ws[i]);\n"
  "  } else {\n"
  "    BQ_ACT_FILL();\n"
  "    for (bq_i64 r = blockIdx.x; r < p.rows; r += gridDim.x) {\n"
  "#if BQ_RMS\n"
  "      bq_c ss[1] = {0};\n"
  "      for (int a = t; a < nacc; a += BQ_THREADS) {\n"
  "        bq_xchunk h;\n"
  "        bq_fmx_h(p, r, a, h);\n"
  "        bq_add_squares(ss[0], h);\n"
  "      }\n"
  "      const bq_c rstd = bq_rstd<BQ_THREADS>(p, ss, ss_smem);\n"
  "      for (int a = t; a < nacc; a += BQ_THREADS) {\n"
  "        bq_xchunk h;\n"
  "        bq_fmx_h(p, r, a, h);\n"
  "        bq_rms_n<false>(p, a, h, rstd, red);\n"
  "      }\n"
  "#else\n"
  "      for (int a = t; a < nacc; a += BQ_THREADS) {\n"
  "        bq_xchunk v;\n"
  "        bq_value(p, r, a, 0, v, red);\n"
  "      }\n"
  "#endif\n"
  "    }\n"
  "    red = bq_red_round(red); // (the amax of the T values)\n"
  "  }\n"
  "  red = bq_red_team<false>(red, BQ_THREADS, red_smem);\n"
  "  if (t == 0) ws[p.nparts ? p.nparts : blockIdx.x] = (float)red.a;\n"
  "}\n"
  "#endif\n"
;
static const char bq__src_linear_cu[] =
  "// linear.cu - W8A8 linear layers: an int8 tensor-core GEMM with a fused dequantizing\n"
  "// epilogue, and the weight row sums that asymmetric activations need.\n"
  "//\n"
  "//   acc[m, n]  = sum_k a[m, k] * w[n, k]               exact int32 (mma.sync m16n8k32)\n"
  "//   acc'[m, n] = acc[m, n] - azp[m] * wsum[n]           asymmetric activations only\n"
  "//   y[m, n]    = Tout(C(acc') * C(sa[m]) * C(sw[n]) + C(bias[n]))\n"
  "//\n"
  "// a is [M, K] int8 (s8 or u8) with row stride lda; w is [N, K] s8, K contiguous (the\n"
  "// layout of nn.Linear.weight); y is [M, N] with row stride ldy. Every float operation is\n"
  "// an explicit round-to-nearest-even operation, so the result equals the CPU reference bit\n"
  "// for bit. The int32 arithmetic of acc' wraps (unsigned), which is exact whenever the\n"
  "// true value fits, as validation guarantees.\n"
  "//\n"
  "// FP8 linear layers (BQ_OP_FP8_LINEAR) take the same tiles with e4m3 weights, e4m3 or e5m2\n"
  "// activations and f32 accumulators; their tensor cores' sums are the hardware's own, so the\n"
  "// order in which they are formed is fixed instead (see bq_fp8_wgmma):\n"
  "//\n"
  "//   acc[m, n]  = +0, then for each 128-element block b of K in order acc = fma(P_b, s_b, acc):\n"
  "//                P_b[m, n] the tensor cores' sum of block b from zero, s_b = 1 (tensorwise,\n"
  "//                rowwise) or sa[m][b] * sw[n / 128][b] rounded to f32 (blockwise)\n"
  "//   y[m, n]    = Tout(acc * sa * sw + bias)      sa, sw: f32, one each or per row / column\n"
  "//                (blockwise: Tout(acc + bias))\n"
  "//\n"
  "// Prelude (besides common.cuh's BQ_FT = output type Tout, BQ_IT = activation int type):\n"
  "//   BQ_OP      BQ_OP_LINEAR_WEIGHT_SUMS: bq_weight_sums; BQ_OP_FP8_LINEAR: the FP8 tiles\n"
  "//              (bq_fp8_gemm, bq_fp8_wgmma); else (BQ_OP_SMOOTHQUANT_LINEAR) the GEMM entry\n"
  "//              points, which both int8 linear layers share\n"
  "//   BQ_WST     weight-scale (and per-token activation-scale) type: BQ_TYPE_F32, _F64, _F16, _BF16\n"
  "//   BQ_ASF32   1: per-token activation scales are f32 whatever BQ_WST says (QuantizedLinear)\n"
  "//   BQ_WGMMA   1: an sm_90a module, whose tiles are wgmma's (bq_gemm_wgmma; bq_gemm_large traps)\n"
  "//   BQ_LB_*    each entry point's __launch_bounds__: BQ_LB_GEMM_LARGE, _GEMV, _GEMV32, _GEMV64\n"
  "//              and _GEMM_WGMMA from the header's bq__linear_table, BQ_LB_WEIGHT_SUMS, or\n"
  "//              BQ_LB_FP8_GEMM and BQ_LB_FP8_WGMMA\n"
  "\n"
  "/* kernels_src/linear_abi.h - the linear layers' host/kernel interface (the int8 GEMM with\n"
  "   its dequantizing epilogue, and the weight sums), valid as C and as CUDA C++: their entry\n"
  "   points, their parameter block and its flags. linear.cu and the host (src/family_linear.h)\n"
  "   both include it. */\n"
  "#ifndef BQ_LINEAR_ABI_H\n"
  "#define BQ_LINEAR_ABI_H\n"
  "\n"
  "/* The GEMM's entry points: each one's index in a plan's module (bq__family.kernels, and\n"
  "   the rows of the host's bq__linear_table) and its name, the kernel's extern \"C\" function;\n"
  "   the weight sums' module has its one entry point at index 0. */\n"
  "enum { BQ__GEMM_LARGE = 0, BQ__GEMV = 1, BQ__GEMV32 = 2, BQ__GEMV64 = 3, BQ__GEMM_WGMMA = 4, BQ__GEMM_CONFIGS };\n"
  "#define BQ_FN_GEMM_LARGE bq_gemm_large /* 128 x 256 tiles on mma.sync */\n"
  "#define BQ_FN_GEMV bq_gemv             /* weight streaming, passes of 16 activation rows */\n"
  "#define BQ_FN_GEMV32 bq_gemv32         /* of 32 */\n"
  "#define BQ_FN_GEMV64 bq_gemv64         /* of 64 */\n"
  "#define BQ_FN_GEMM_WGMMA bq_gemm_wgmma /* 128 x 256 tiles on wgmma (an sm_90a module) */\n"
  "#define BQ_FN_WEIGHT_SUMS bq_weight_sums\n"
  "/* The FP8 layers' module: the mma.sync tiles elsewhere, or the wgmma tiles and weight\n"
  "   streaming in an sm_90a module (the others trap) */\n"
  "enum { BQ__FP8_GEMM = 0, BQ__FP8_WGMMA = 1, BQ__FP8_GEMV = 2, BQ__FP8_WGMMA_BLK = 3, BQ__FP8_GEMV_BLK = 4,\n"
  "       BQ__FP8_TMA = 5, BQ__FP8_TMA_BLK = 6 };\n"
  "#define BQ_FN_FP8_GEMM bq_fp8_gemm   /* 128 x 128 tiles on mma.sync (sm_89, sm_90) */\n"
  "#define BQ_FN_FP8_WGMMA bq_fp8_wgmma /* 128 x 128 tiles on wgmma (an sm_90a module) */\n"
  "#define BQ_FN_FP8_GEMV bq_fp8_gemv   /* M <= 64: 64 weight rows x 16 rows of x on wgmma (sm_90a) */\n"
  "#define BQ_FN_FP8_WGMMA_BLK bq_fp8_wgmma_blk /* ... the two with blockwise scales */\n"
  "#define BQ_FN_FP8_GEMV_BLK bq_fp8_gemv_blk\n"
  "#define BQ_FN_FP8_TMA bq_fp8_tma         /* the wgmma tiles fed by the tensor memory accelerator */\n"
  "#define BQ_FN_FP8_TMA_BLK bq_fp8_tma_blk /* ... with blockwise scales */\n"
  "\n"
  "/* (FP8 layers have no weight sums: blockwise, w_sums holds the activation scales' leading\n"
  "   dimension instead, so that the int8 kernels' parameter block stays as it was) */\n"
  "typedef struct bq_linear_params {\n"
  "  bq_u64 a, w, y, a_scales, a_zps, w_scales, w_sums, bias;\n"
  "  bq_i64 m, n, k, lda, ldy;\n"
  "  double a_scale; /* per-tensor activation scale, already rounded to C */\n"
  "  int a_zp;       /* per-tensor activation zero point */\n"
  "  int flags;      /* BQ_LF_* */\n"
  "  int tiles_m, tiles_n;\n"
  "} bq_linear_params;\n"
  "#define BQ_LF_SA_ROW 1 /* per-token activation scales a_scales[m]; else a_scale (FP8: a_scales[0]) */\n"
  "#define BQ_LF_ZP 2     /* asymmetric activations: subtract zp * wsum[n] */\n"
  "#define BQ_LF_ZP_ROW 4 /* per-token zero points a_zps[m]; else a_zp */\n"
  "#define BQ_LF_BIAS 8   /* add bias[n] */\n"
  "#define BQ_LF_A16 16   /* a and lda allow 16-byte accesses */\n"
  "#define BQ_LF_W16 32   /* w and k allow 16-byte accesses */\n"
  "#define BQ_LF_Y2 64    /* y and ldy allow two-element stores */\n"
  "#define BQ_LF_K0 128   /* K == 0: y = bias (or 0) */\n"
  "#define BQ_LF_Y8 256   /* y and ldy allow eight-element stores */\n"
  "#define BQ_LF_PDL 512  /* weight streaming launched while the activations' kernel runs */\n"
  "#define BQ_LF_SW_ROW 1024 /* FP8: per-channel weight scales w_scales[n]; else w_scales[0] */\n"
  "/* FP8 blockwise: a_scales[m][b] (m * lds + b, lds = w_sums) of 1 x 128 groups, w_scales[n / 128][b] of\n"
  "   128 x 128 blocks (b < ceil(K / 128)), applied to each K block's partial sum */\n"
  "#define BQ_LF_BLOCK 2048\n"
  "#define BQ_LF_SA_MN 4096 /* ... the activation scales MN-major: a_scales[b][m] (b * lds + m) */\n"
  "\n"
  "/* bq_fp8_tma's one parameter: the tensor maps (CUtensorMap, 128 bytes, 64-byte aligned,\n"
  "   written by cuTensorMapEncodeTiled) of the activations [M, K] and the weights [N, K], both\n"
  "   in boxes of 128 x 128 bytes in the 128-byte swizzle, then the usual parameter block */\n"
  "#ifdef __cplusplus\n"
  "#define BQ_ABI_ALIGN64 alignas(64)\n"
  "#else\n"
  "#define BQ_ABI_ALIGN64 _Alignas(64)\n"
  "#endif\n"
  "typedef struct bq_fp8_tma_params {\n"
  "  BQ_ABI_ALIGN64 bq_u64 tmap_a[16];\n"
  "  BQ_ABI_ALIGN64 bq_u64 tmap_w[16];\n"
  "  bq_linear_params p;\n"
  "} bq_fp8_tma_params;\n"
  "#endif\n"
  "\n"
  "// ---- scalars ---------------------------------------------------------------------------\n"
  "template <int CODE> static __device__ __forceinline__ bq_c bq_any_to_c(bq_u64 base, bq_i64 i) {\n"
  "  if (CODE == BQ_TYPE_F32) return (bq_c)((const float *)base)[i];\n"
  "  if (CODE == BQ_TYPE_F64) return (bq_c)((const double *)base)[i]; // only when C is f64\n"
  "  if (CODE == BQ_TYPE_F16) return (bq_c)bq_f16_to_f32(((const bq_u16 *)base)[i]);\n"
  "  return (bq_c)bq_bf16_to_f32(((const bq_u16 *)base)[i]);\n"
  "}\n"
  "\n"
  "#if BQ_FT == BQ_TYPE_F64\n"
  "static __device__ __forceinline__ bq_c bq_int_to_c(int v) { return __int2double_rn(v); }\n"
  "#else\n"
  "static __device__ __forceinline__ bq_c bq_int_to_c(int v) { return __int2float_rn(v); }\n"
  "#endif\n"
  "\n"
  "struct bq_row_q { bq_c sa; int zp; };\n"
  "struct bq_col_q { bq_c sw, bias; int wsum; };\n"
  "\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "// f32 scales: one each (BQ_LF_SA_ROW / BQ_LF_SW_ROW clear: element 0) or one a row / column;\n"
  "// blockwise scales multiply the K blocks' sums instead (bq_blk_scale), and the epilogue's are 1\n"
  "// (as where K == 0: y is the bias, and no scale is read)\n"
  "static __device__ __forceinline__ bq_row_q bq_row_of(const bq_linear_params &p, bq_i64 m) {\n"
  "  if (p.flags & (BQ_LF_BLOCK | BQ_LF_K0)) return bq_row_q{(bq_c)1, 0};\n"
  "  return bq_row_q{(bq_c)((const float *)p.a_scales)[(p.flags & BQ_LF_SA_ROW) ? m : 0], 0};\n"
  "}\n"
  "static __device__ __forceinline__ bq_col_q bq_col_of(const bq_linear_params &p, bq_i64 n) {\n"
  "  bq_col_q c;\n"
  "  c.sw = (p.flags & (BQ_LF_BLOCK | BQ_LF_K0)) ? (bq_c)1\n"
  "                                              : (bq_c)((const float *)p.w_scales)[(p.flags & BQ_LF_SW_ROW) ? n : 0];\n"
  "  c.bias = (p.flags & BQ_LF_BIAS) ? bq_to_c(((const bq_t *)p.bias)[n]) : (bq_c)0;\n"
  "  c.wsum = 0;\n"
  "  return c;\n"
  "}\n"
  "// The epilogue of one output: ((acc * sa) * sw) + bias, each step rounded in f32.\n"
  "static __device__ __forceinline__ bq_t bq_epilogue(float acc, const bq_row_q &r, const bq_col_q &c, int flags) {\n"
  "  if (flags & BQ_LF_K0) return bq_from_c((flags & BQ_LF_BIAS) ? c.bias : (bq_c)0);\n"
  "  bq_c v = bq_mul(bq_mul(acc, r.sa), c.sw);\n"
  "  if (flags & BQ_LF_BIAS) v = bq_add(v, c.bias);\n"
  "  return bq_from_c(v);\n"
  "}\n"
  "// Blockwise: the activation scales' leading dimension, which w_sums carries (linear_abi.h)\n"
  "static __device__ __forceinline__ bq_i64 bq_sa_ld(const bq_linear_params &p) { return (bq_i64)p.w_sums; }\n"
  "// Blockwise: where the scales of row m's and of weight block nb's K block b lie\n"
  "static __device__ __forceinline__ bq_i64 bq_sa_at(const bq_linear_params &p, bq_i64 m, int b) {\n"
  "  return (p.flags & BQ_LF_SA_MN) ? b * bq_sa_ld(p) + m : m * bq_sa_ld(p) + b;\n"
  "}\n"
  "static __device__ __forceinline__ bq_i64 bq_sw_at(const bq_linear_params &p, bq_i64 nb, int b) {\n"
  "  return nb * ((p.k + 127) >> 7) + b;\n"
  "}\n"
  "// Blockwise: the scales of K block b for rows m0 .. m0 + rows - 1 and weight block nb into\n"
  "// shared memory at dst (rows floats, then the weight's), a 4-byte cp.async each (thread t <\n"
  "// rows copies row m0 + t's, thread rows the weight's); rows past M are zero-filled.\n"
  "static __device__ __forceinline__ void bq_blk_scale_copy(const bq_linear_params &p, bq_u32 dst, bq_i64 m0, bq_i64 nb,\n"
  "                                                         int rows, int b, int tid) {\n"
  "  if (tid < rows) {\n"
  "    const bq_i64 m = m0 + tid;\n"
  "    const float *src = (const float *)p.a_scales + (m >= p.m ? 0 : bq_sa_at(p, m, b));\n"
  "    bq_cp_async4(dst + 4 * tid, src, m < p.m ? 4 : 0);\n"
  "  } else if (tid == rows) {\n"
  "    bq_cp_async4(dst + 4 * rows, (const float *)p.w_scales + bq_sw_at(p, nb, b), 4);\n"
  "  }\n"
  "}\n"
  "// What K block b's partial sum P of row m, column block nb (128 weight rows) is multiplied\n"
  "// by as it joins the accumulator, acc = fma(P, s, acc): blockwise sa[m][b] * sw[nb][b]\n"
  "// (rounded to f32), else 1 (acc + P). Rows past M (never stored) read no scale.\n"
  "static __device__ __forceinline__ float bq_blk_scale(const bq_linear_params &p, bq_i64 m, bq_i64 nb, int b) {\n"
  "  if (!(p.flags & BQ_LF_BLOCK) || m >= p.m) return 1.0f;\n"
  "  return __fmul_rn(((const float *)p.a_scales)[bq_sa_at(p, m, b)], ((const float *)p.w_scales)[bq_sw_at(p, nb, b)]);\n"
  "}\n"
  "#else\n"
  "static __device__ __forceinline__ bq_row_q bq_row_of(const bq_linear_params &p, bq_i64 m) {\n"
  "  bq_row_q r;\n"
  "  if (p.flags & BQ_LF_SA_ROW) r.sa = BQ_ASF32 ? (bq_c)((const float *)p.a_scales)[m] : bq_any_to_c<BQ_WST>(p.a_scales, m);\n"
  "  else r.sa = (bq_c)p.a_scale;\n"
  "  r.zp = !(p.flags & BQ_LF_ZP) ? 0 : (p.flags & BQ_LF_ZP_ROW) ? ((const int *)p.a_zps)[m] : p.a_zp;\n"
  "  return r;\n"
  "}\n"
  "\n"
  "static __device__ __forceinline__ bq_col_q bq_col_of(const bq_linear_params &p, bq_i64 n) {\n"
  "  bq_col_q c;\n"
  "  c.sw = bq_any_to_c<BQ_WST>(p.w_scales, n);\n"
  "  c.bias = (p.flags & BQ_LF_BIAS) ? bq_to_c(((const bq_t *)p.bias)[n]) : (bq_c)0;\n"
  "  c.wsum = (p.flags & BQ_LF_ZP) ? ((const int *)p.w_sums)[n] : 0;\n"
  "  return c;\n"
  "}\n"
  "\n"
  "// The epilogue of one output: ((acc' * sa) * sw) + bias, each step rounded in C.\n"
  "static __device__ __forceinline__ bq_t bq_epilogue(int acc, const bq_row_q &r, const bq_col_q &c, int flags) {\n"
  "  if (flags & BQ_LF_K0) return bq_from_c((flags & BQ_LF_BIAS) ? c.bias : (bq_c)0);\n"
  "  int a2 = (int)((bq_u32)acc - (bq_u32)r.zp * (bq_u32)c.wsum);\n"
  "  bq_c v = bq_mul(bq_mul(bq_int_to_c(a2), r.sa), c.sw);\n"
  "  if (flags & BQ_LF_BIAS) v = bq_add(v, c.bias);\n"
  "  return bq_from_c(v);\n"
  "}\n"
  "#endif\n"
  "\n"
  "// Two neighbouring outputs of row m (columns n and n + 1; n + 1 may be past N).\n"
  "static __device__ __forceinline__ void bq_store_pair(const bq_linear_params &p, bq_i64 m, bq_i64 n, bq_t v0, bq_t v1) {\n"
  "  bq_t *y = (bq_t *)p.y + m * p.ldy + n;\n"
  "  if ((p.flags & BQ_LF_Y2) && n + 1 < p.n) {\n"
  "    bq_chunk<bq_t, 2> c;\n"
  "    c.e[0] = v0;\n"
  "    c.e[1] = v1;\n"
  "    *(bq_chunk<bq_t, 2> *)y = c;\n"
  "  } else {\n"
  "    if (n < p.n) y[0] = v0;\n"
  "    if (n + 1 < p.n) y[1] = v1;\n"
  "  }\n"
  "}\n"
  "\n"
  "// ---- tensor-core and shared-memory primitives (cp.async: common.cuh) ----------------------------\n"
  "// The only inline PTX of this file. (tests/emulator supplies host versions of these under\n"
  "// BQ_EMULATED, to run this file on the CPU; NVRTC never sees that.)\n"
  "#ifndef BQ_EMULATED\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "#if BQ_IT == BQ_TYPE_E5M2\n"
  "#define BQ_MMA_F8 \".e5m2.e4m3\"\n"
  "#define BQ_MMA_F8_WX \".e4m3.e5m2\" /* weights as A, activations as B */\n"
  "#else\n"
  "#define BQ_MMA_F8 \".e4m3.e4m3\"\n"
  "#define BQ_MMA_F8_WX \".e4m3.e4m3\"\n"
  "#endif\n"
  "// FP8: f32 += A (activations, e4m3 or e5m2) x B (e4m3 weights), the int8 fragments' layout\n"
  "static __device__ __forceinline__ void bq_mma(float (&d)[4], bq_u32 a0, bq_u32 a1, bq_u32 a2, bq_u32 a3, bq_u32 b0, bq_u32 b1) {\n"
  "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32\" BQ_MMA_F8 \".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
  "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
  "               : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
  "}\n"
  "#else\n"
  "#if BQ_IT == BQ_TYPE_U8\n"
  "#define BQ_MMA_TYPES \".s32.u8.s8.s32\"\n"
  "#define BQ_MMA_TYPES_WG \".s32.u8.s8\"\n"
  "#else\n"
  "#define BQ_MMA_TYPES \".s32.s8.s8.s32\"\n"
  "#define BQ_MMA_TYPES_WG \".s32.s8.s8\"\n"
  "#endif\n"
  "\n"
  "static __device__ __forceinline__ void bq_mma(int (&d)[4], bq_u32 a0, bq_u32 a1, bq_u32 a2, bq_u32 a3, bq_u32 b0, bq_u32 b1) {\n"
  "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col\" BQ_MMA_TYPES \" {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
  "               : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3])\n"
  "               : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
  "}\n"
  "#endif\n"
  "\n"
  "static __device__ __forceinline__ void bq_ldmatrix4(bq_u32 (&r)[4], bq_u32 addr) {\n"
  "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
  "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3])\n"
  "               : \"r\"(addr));\n"
  "}\n"
  "\n"
  "#if BQ_WGMMA\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "// sm_90a: D[64 x 128] = A[64 x 32] B[128 x 32]^T (+ D when acc), both K-major in shared\n"
  "// memory; thread t of warp w holds in d[i] row 16 w + t / 4 + 8 ((i / 2) % 2), column\n"
  "// 8 (i / 4) + 2 (t % 4) + i % 2.\n"
  "static __device__ __forceinline__ void bq_wgmma_f8(float (&d)[64], bq_u64 da, bq_u64 db, int acc) {\n"
  "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %66, 0;\\n\"\n"
  "               \"wgmma.mma_async.sync.aligned.m64n128k32.f32\" BQ_MMA_F8 \" {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\\n}\\n\"\n"
  "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]), \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]), \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]), \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31]), \"+f\"(d[32]), \"+f\"(d[33]), \"+f\"(d[34]), \"+f\"(d[35]), \"+f\"(d[36]), \"+f\"(d[37]), \"+f\"(d[38]), \"+f\"(d[39]), \"+f\"(d[40]), \"+f\"(d[41]), \"+f\"(d[42]), \"+f\"(d[43]), \"+f\"(d[44]), \"+f\"(d[45]), \"+f\"(d[46]), \"+f\"(d[47]), \"+f\"(d[48]), \"+f\"(d[49]), \"+f\"(d[50]), \"+f\"(d[51]), \"+f\"(d[52]), \"+f\"(d[53]), \"+f\"(d[54]), \"+f\"(d[55]), \"+f\"(d[56]), \"+f\"(d[57]), \"+f\"(d[58]), \"+f\"(d[59]), \"+f\"(d[60]), \"+f\"(d[61]), \"+f\"(d[62]), \"+f\"(d[63])\n"
  "               : \"l\"(da), \"l\"(db), \"r\"(acc));\n"
  "}\n"
  "// ... and D[64 x 16] = W[64 x 32] X[16 x 32]^T: the weight-streaming shape, A the weights\n"
  "// (d[i] as above, i < 8)\n"
  "static __device__ __forceinline__ void bq_wgmma_f8_n16(float (&d)[8], bq_u64 da, bq_u64 db, int acc) {\n"
  "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %10, 0;\\n\"\n"
  "               \"wgmma.mma_async.sync.aligned.m64n16k32.f32\" BQ_MMA_F8_WX \" {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\\n}\\n\"\n"
  "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7])\n"
  "               : \"l\"(da), \"l\"(db), \"r\"(acc));\n"
  "}\n"
  "#else\n"
  "// sm_90a warpgroup MMA: D[64 x 256] (+)= A[64 x 32] B[256 x 32]^T, both K-major in shared\n"
  "// memory behind descriptors; thread t of warp w of the warpgroup holds in d[i] row\n"
  "// 16 w + t / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (t % 4) + i % 2.\n"
  "static __device__ __forceinline__ void bq_wgmma(int (&d)[128], bq_u64 da, bq_u64 db) {\n"
  "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n256k32\" BQ_MMA_TYPES_WG \" {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1;\\n\"\n"
  "               : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3]), \"+r\"(d[4]), \"+r\"(d[5]), \"+r\"(d[6]), \"+r\"(d[7]), \"+r\"(d[8]), \"+r\"(d[9]), \"+r\"(d[10]), \"+r\"(d[11]), \"+r\"(d[12]), \"+r\"(d[13]), \"+r\"(d[14]), \"+r\"(d[15]), \"+r\"(d[16]), \"+r\"(d[17]), \"+r\"(d[18]), \"+r\"(d[19]), \"+r\"(d[20]), \"+r\"(d[21]), \"+r\"(d[22]), \"+r\"(d[23]), \"+r\"(d[24]), \"+r\"(d[25]), \"+r\"(d[26]), \"+r\"(d[27]), \"+r\"(d[28]), \"+r\"(d[29]), \"+r\"(d[30]), \"+r\"(d[31]), \"+r\"(d[32]), \"+r\"(d[33]), \"+r\"(d[34]), \"+r\"(d[35]), \"+r\"(d[36]), \"+r\"(d[37]), \"+r\"(d[38]), \"+r\"(d[39]), \"+r\"(d[40]), \"+r\"(d[41]), \"+r\"(d[42]), \"+r\"(d[43]), \"+r\"(d[44]), \"+r\"(d[45]), \"+r\"(d[46]), \"+r\"(d[47]), \"+r\"(d[48]), \"+r\"(d[49]), \"+r\"(d[50]), \"+r\"(d[51]), \"+r\"(d[52]), \"+r\"(d[53]), \"+r\"(d[54]), \"+r\"(d[55]), \"+r\"(d[56]), \"+r\"(d[57]), \"+r\"(d[58]), \"+r\"(d[59]), \"+r\"(d[60]), \"+r\"(d[61]), \"+r\"(d[62]), \"+r\"(d[63]), \"+r\"(d[64]), \"+r\"(d[65]), \"+r\"(d[66]), \"+r\"(d[67]), \"+r\"(d[68]), \"+r\"(d[69]), \"+r\"(d[70]), \"+r\"(d[71]), \"+r\"(d[72]), \"+r\"(d[73]), \"+r\"(d[74]), \"+r\"(d[75]), \"+r\"(d[76]), \"+r\"(d[77]), \"+r\"(d[78]), \"+r\"(d[79]), \"+r\"(d[80]), \"+r\"(d[81]), \"+r\"(d[82]), \"+r\"(d[83]), \"+r\"(d[84]), \"+r\"(d[85]), \"+r\"(d[86]), \"+r\"(d[87]), \"+r\"(d[88]), \"+r\"(d[89]), \"+r\"(d[90]), \"+r\"(d[91]), \"+r\"(d[92]), \"+r\"(d[93]), \"+r\"(d[94]), \"+r\"(d[95]), \"+r\"(d[96]), \"+r\"(d[97]), \"+r\"(d[98]), \"+r\"(d[99]), \"+r\"(d[100]), \"+r\"(d[101]), \"+r\"(d[102]), \"+r\"(d[103]), \"+r\"(d[104]), \"+r\"(d[105]), \"+r\"(d[106]), \"+r\"(d[107]), \"+r\"(d[108]), \"+r\"(d[109]), \"+r\"(d[110]), \"+r\"(d[111]), \"+r\"(d[112]), \"+r\"(d[113]), \"+r\"(d[114]), \"+r\"(d[115]), \"+r\"(d[116]), \"+r\"(d[117]), \"+r\"(d[118]), \"+r\"(d[119]), \"+r\"(d[120]), \"+r\"(d[121]), \"+r\"(d[122]), \"+r\"(d[123]), \"+r\"(d[124]), \"+r\"(d[125]), \"+r\"(d[126]), \"+r\"(d[127])\n"
  "               : \"l\"(da), \"l\"(db));\n"
  "}\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n"
  "static __device__ __forceinline__ void bq_wg_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\"); }\n"
  "template <int N> static __device__ __forceinline__ void bq_wg_wait() {\n"
  "  asm volatile(\"wgmma.wait_group.sync.aligned %0;\\n\" ::\"n\"(N) : \"memory\");\n"
  "}\n"
  "// cp.async writes through the generic proxy; wgmma reads through the async one\n"
  "static __device__ __forceinline__ void bq_fence_proxy_async() { asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\"); }\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "// mbarriers (a 64-bit object in shared memory: arrivals and bytes still to come; its phases\n"
  "// alternate in parity) and the tensor memory accelerator's 2-D copies, which count their\n"
  "// bytes on one\n"
  "static __device__ __forceinline__ void bq_mbar_init(bq_u32 bar, int count) {\n"
  "  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" ::\"r\"(bar), \"r\"(count) : \"memory\");\n"
  "}\n"
  "static __device__ __forceinline__ void bq_mbar_init_fence() { asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\"); }\n"
  "static __device__ __forceinline__ void bq_mbar_arrive(bq_u32 bar) {\n"
  "  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\\n\" ::\"r\"(bar) : \"memory\");\n"
  "}\n"
  "// an arrival that also announces `bytes` to come from copies\n"
  "static __device__ __forceinline__ void bq_mbar_expect(bq_u32 bar, int bytes) {\n"
  "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n\" ::\"r\"(bar), \"r\"(bytes) : \"memory\");\n"
  "}\n"
  "// until the phase of parity `parity` has completed\n"
  "static __device__ __forceinline__ void bq_mbar_wait(bq_u32 bar, int parity) {\n"
  "  asm volatile(\"{\\n.reg .pred p;\\nBQ_WAIT:\\n\"\n"
  "               \"mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n\"\n"
  "               \"@!p bra BQ_WAIT;\\n}\\n\" ::\"r\"(bar), \"r\"(parity) : \"memory\");\n"
  "}\n"
  "// a warpgroup's registers a thread, lowered or raised (every thread of the warpgroup runs it)\n"
  "template <int N> static __device__ __forceinline__ void bq_setmaxnreg_dec() {\n"
  "  asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %0;\\n\" ::\"n\"(N));\n"
  "}\n"
  "template <int N> static __device__ __forceinline__ void bq_setmaxnreg_inc() {\n"
  "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %0;\\n\" ::\"n\"(N));\n"
  "}\n"
  "// the box of the tensor map at (c0 bytes along K, row c1) into shared memory at dst, counted on bar\n"
  "static __device__ __forceinline__ void bq_tma_load(bq_u32 dst, const void *tmap, int c0, int c1, bq_u32 bar) {\n"
  "  asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\\n\"\n"
  "               ::\"r\"(dst), \"l\"(tmap), \"r\"(c0), \"r\"(c1), \"r\"(bar) : \"memory\");\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "static __device__ __forceinline__ void bq_st_shared16(bq_u32 dst, uint4 v) {\n"
  "  asm volatile(\"st.shared.v4.u32 [%0], {%1,%2,%3,%4};\\n\" ::\"r\"(dst), \"r\"(v.x), \"r\"(v.y), \"r\"(v.z), \"r\"(v.w) : \"memory\");\n"
  "}\n"
  "#endif\n"
  "\n"
  "// 16 bytes of row `row` of an int8 matrix from column k, zero past k_end or for a row\n"
  "// that does not exist: a 16-byte load when `vec`, else byte by byte.\n"
  "static __device__ __forceinline__ uint4 bq_load16(const bq_u8 *base, bool row_ok, bq_i64 row, bq_i64 ld, bq_i64 k,\n"
  "                                                  bq_i64 k_end, bool vec) {\n"
  "  uint4 v = make_uint4(0, 0, 0, 0);\n"
  "  if (!row_ok || k >= k_end) return v;\n"
  "  const bq_u8 *s = base + row * ld + k;\n"
  "  if (vec && k + 16 <= k_end) return __ldg((const uint4 *)s);\n"
  "  bq_u32 w[4] = {0, 0, 0, 0};\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < 16; j++)\n"
  "    if (k + j < k_end) w[j >> 2] |= (bq_u32)s[j] << ((j & 3) * 8);\n"
  "  return make_uint4(w[0], w[1], w[2], w[3]);\n"
  "}\n"
  "\n"
  "// One 16-byte chunk of a tile into shared memory: cp.async (zero-filling whatever lies\n"
  "// past K or outside the matrix) when 16-byte aligned, else through registers.\n"
  "static __device__ __forceinline__ void bq_tile_chunk(bq_u32 dst, const bq_u8 *base, bool row_ok, bq_i64 row,\n"
  "                                                     bq_i64 ld, bq_i64 k, bq_i64 k_end, bool vec) {\n"
  "  if (vec) {\n"
  "    bq_i64 rem = row_ok ? k_end - k : 0;\n"
  "    int bytes = rem >= 16 ? 16 : rem > 0 ? (int)rem : 0;\n"
  "    bq_cp_async16(dst, bytes ? (const void *)(base + row * ld + k) : (const void *)base, bytes);\n"
  "  } else {\n"
  "    bq_st_shared16(dst, bq_load16(base, row_ok, row, ld, k, k_end, false));\n"
  "  }\n"
  "}\n"
  "\n"
  "#if BQ_OP != BQ_OP_LINEAR_WEIGHT_SUMS\n"
  "// ---- tiles in shared memory ---------------------------------------------------------------------\n"
  "// K moves through shared memory in slices of 128 bytes: a row of a slice is 8 chunks of 16\n"
  "// bytes, chunk c of row r stored at position c ^ (r & 7). ldmatrix and the copies are then\n"
  "// free of bank conflicts, and with slices 1024-byte aligned this is also the 128-byte\n"
  "// swizzle that wgmma's shared-memory descriptors read.\n"
  "#define BQ_BK 128\n"
  "template <int BM, int BN, int THREADS>\n"
  "static __device__ __forceinline__ void bq_load_tiles(const bq_linear_params &p, bq_u32 sa, bq_i64 m0, bq_i64 n0, int kt,\n"
  "                                                     int tid, const bq_u8 *A, const bq_u8 *W, bool avec, bool wvec) {\n"
  "  const bq_i64 k0 = (bq_i64)kt * BQ_BK;\n"
  "  const bq_u32 sb = sa + BM * BQ_BK;\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < BM * 8 / THREADS; i++) {\n"
  "    int c = tid + i * THREADS, r = c >> 3, cc = c & 7;\n"
  "    bq_tile_chunk(sa + r * BQ_BK + ((cc ^ (r & 7)) << 4), A, m0 + r < p.m, m0 + r, p.lda, k0 + cc * 16, p.k, avec);\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < BN * 8 / THREADS; i++) {\n"
  "    int c = tid + i * THREADS, r = c >> 3, cc = c & 7;\n"
  "    bq_tile_chunk(sb + r * BQ_BK + ((cc ^ (r & 7)) << 4), W, n0 + r < p.n, n0 + r, p.k, k0 + cc * 16, p.k, wvec);\n"
  "  }\n"
  "}\n"
  "\n"
  "// A thread's share of the copies, worked out once a tile: it copies chunk tid % 8 of rows\n"
  "// tid / 8 + (THREADS / 8) i of both operands. With THREADS / 8 a multiple of 8 every one\n"
  "// of them lands at the same swizzled offset within its row, so from slice to slice only k\n"
  "// moves. A slice that lies wholly inside A, W and K, with 16-byte alignment, then costs\n"
  "// one cp.async a chunk and no bounds arithmetic; the rest (edge tiles, the K tail,\n"
  "// unaligned operands) take bq_load_tiles.\n"
  "template <int BM, int BN, int THREADS> struct bq_tile_copier {\n"
  "  const bq_u8 *a, *w;    // this thread's first chunk of A and of W at k = 0\n"
  "  bq_i64 a_step, w_step; // THREADS / 8 rows further on\n"
  "  bq_u32 off;            // its offset within a slice\n"
  "  int fast_slices;       // slices [0, fast_slices) take the fast path\n"
  "\n"
  "  __device__ __forceinline__ bq_tile_copier(const bq_linear_params &p, bq_i64 m0, bq_i64 n0, int tid) {\n"
  "    static_assert(THREADS % 64 == 0 && (BM * 8) % THREADS == 0 && (BN * 8) % THREADS == 0, \"tile copier shape\");\n"
  "    const int r = tid >> 3, cc = tid & 7;\n"
  "    const bool inside = (p.flags & BQ_LF_A16) && (p.flags & BQ_LF_W16) && m0 + BM <= p.m && n0 + BN <= p.n;\n"
  "    fast_slices = inside ? (int)(p.k / BQ_BK) : 0;\n"
  "    a = (const bq_u8 *)p.a + (inside ? (m0 + r) * p.lda + cc * 16 : 0);\n"
  "    w = (const bq_u8 *)p.w + (inside ? (n0 + r) * p.k + cc * 16 : 0);\n"
  "    a_step = (bq_i64)(THREADS / 8) * p.lda;\n"
  "    w_step = (bq_i64)(THREADS / 8) * p.k;\n"
  "    off = r * BQ_BK + ((cc ^ (r & 7)) << 4);\n"
  "  }\n"
  "\n"
  "  __device__ __forceinline__ void load(const bq_linear_params &p, bq_u32 sa, bq_i64 m0, bq_i64 n0, int kt, int tid) const {\n"
  "    if (kt >= fast_slices) {\n"
  "      bq_load_tiles<BM, BN, THREADS>(p, sa, m0, n0, kt, tid, (const bq_u8 *)p.a, (const bq_u8 *)p.w,\n"
  "                                     p.flags & BQ_LF_A16, p.flags & BQ_LF_W16);\n"
  "      return;\n"
  "    }\n"
  "    const bq_i64 k0 = (bq_i64)kt * BQ_BK;\n"
  "    const bq_u8 *pa = a + k0, *pw = w + k0;\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BM * 8 / THREADS; i++) bq_cp_async16(sa + off + i * (THREADS / 8) * BQ_BK, pa + i * a_step, 16);\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < BN * 8 / THREADS; i++)\n"
  "      bq_cp_async16(sa + BM * BQ_BK + off + i * (THREADS / 8) * BQ_BK, pw + i * w_step, 16);\n"
  "  }\n"
  "};\n"
  "\n"
  "// The tile's column parameters (weight scale, bias, weight sum), staged in shared memory\n"
  "// while the main loop runs, so the epilogue reads them at shared-memory latency: thread\n"
  "// t < BN stages column n0 + t. Visible after the next __syncthreads.\n"
  "#define BQ_COLS_SMEM (256 * 24) // room for 256 columns of bq_col_q with C = f64\n"
  "template <int BN> static __device__ __forceinline__ void bq_stage_cols(const bq_linear_params &p, bq_col_q *cols, bq_i64 n0, int tid) {\n"
  "  if (tid < BN && n0 + tid < p.n) cols[tid] = bq_col_of(p, n0 + tid);\n"
  "}\n"
  "// ... and its 128 rows' parameters, after the columns: thread t < 128 stages row m0 + t\n"
  "#define BQ_ROWS_SMEM (128 * 16) // room for 128 rows of bq_row_q with C = f64\n"
  "static __device__ __forceinline__ void bq_stage_rows(const bq_linear_params &p, bq_row_q *rows, bq_i64 m0, int tid) {\n"
  "  if (tid < 128) rows[tid] = m0 + tid < p.m ? bq_row_of(p, m0 + tid) : bq_row_q{(bq_c)0, 0};\n"
  "}\n"
  "\n"
  "// The tiles' epilogue, through shared memory: the kernel has put its accumulators in `tile`\n"
  "// (BM x BN of ACC, int32 or f32, at a row pitch of BQ_EP_LD, in the pipeline's stages,\n"
  "// which are free by then), with the columns' and rows' parameters staged. Each warp takes\n"
  "// whole rows, a lane BN / 32 neighbouring columns, so that y is written in 8- or 16-byte\n"
  "// pieces where y allows and the epilogue is one short loop. (Unrolled over a thread's\n"
  "// accumulators it would be a large block of instructions, run once per tile and so always\n"
  "// from a cold instruction cache, which slows a GEMM that follows another module's kernel.)\n"
  "#define BQ_EP_LD(BN) ((BN) + 8) // the stores of mma fragments take the fewest wavefronts\n"
  "// a lane's accumulators of one row of the tile\n"
  "static __device__ __forceinline__ void bq_tile_get(const int *t, int (&v)[8]) {\n"
  "  const uint4 a = *(const uint4 *)t, b = *(const uint4 *)(t + 4);\n"
  "  v[0] = (int)a.x, v[1] = (int)a.y, v[2] = (int)a.z, v[3] = (int)a.w;\n"
  "  v[4] = (int)b.x, v[5] = (int)b.y, v[6] = (int)b.z, v[7] = (int)b.w;\n"
  "}\n"
  "template <int C> static __device__ __forceinline__ void bq_tile_get(const float *t, float (&v)[C]) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < C; i += 4) {\n"
  "    const float4 a = *(const float4 *)(t + i);\n"
  "    v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;\n"
  "  }\n"
  "}\n"
  "template <int BM, int BN, typename ACC>\n"
  "static __device__ __forceinline__ void bq_tile_epilogue(const bq_linear_params &p, const ACC *tile, const bq_col_q *cols,\n"
  "                                                        const bq_row_q *rows, bq_i64 m0, bq_i64 n0) {\n"
  "  constexpr int C = BN / 32; // a lane's columns: 32 lanes cover the tile's width\n"
  "  static_assert(C == 4 || C == 8, \"a lane's columns fill whole 16-byte reads of the tile\");\n"
  "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, c0 = C * lane;\n"
  "  const bq_i64 n = n0 + c0;\n"
  "  if (n >= p.n) return;\n"
  "  bq_col_q cq[C];\n"
  "#pragma unroll\n"
  "  for (int c = 0; c < C; c++) cq[c] = n + c < p.n ? cols[c0 + c] : cols[c0];\n"
  "  const bool yv = (p.flags & BQ_LF_Y8) && n + C <= p.n; // (y on the 8-element grid: on the C-element one)\n"
  "#pragma unroll 1\n"
  "  for (int r = warp; r < BM && m0 + r < p.m; r += nwarps) {\n"
  "    const bq_row_q rq = rows[r];\n"
  "    ACC v[C];\n"
  "    bq_tile_get(tile + r * BQ_EP_LD(BN) + c0, v);\n"
  "    bq_chunk<bq_t, C> out;\n"
  "#pragma unroll\n"
  "    for (int c = 0; c < C; c++) out.e[c] = bq_epilogue(v[c], rq, cq[c], p.flags);\n"
  "    if (yv) {\n"
  "      *(bq_chunk<bq_t, C> *)((bq_t *)p.y + (m0 + r) * p.ldy + n) = out;\n"
  "    } else {\n"
  "#pragma unroll\n"
  "      for (int c = 0; c < C; c += 2) bq_store_pair(p, m0 + r, n + c, out.e[c], out.e[c + 1]);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "// One accumulator pair of an mma fragment (row r, columns c and c + 1) into the tile.\n"
  "static __device__ __forceinline__ void bq_tile_put(int *tile, int ld, int r, int c, int v0, int v1) {\n"
  "  uint2 u;\n"
  "  u.x = (bq_u32)v0;\n"
  "  u.y = (bq_u32)v1;\n"
  "  *(uint2 *)(tile + r * ld + c) = u;\n"
  "}\n"
  "static __device__ __forceinline__ void bq_tile_put(float *tile, int ld, int r, int c, float v0, float v1) {\n"
  "  *(float2 *)(tile + r * ld + c) = make_float2(v0, v1);\n"
  "}\n"
  "\n"
  "// The tile a CTA computes: tiles in groups of 8 tile-rows that walk the tile-columns\n"
  "// together (L2 reuse).\n"
  "static __device__ __forceinline__ void bq_tile_of(const bq_linear_params &p, int bm, int bn, bq_i64 &m0, bq_i64 &n0) {\n"
  "  const int bid = blockIdx.x, per_group = 8 * p.tiles_n, first_m = (bid / per_group) * 8;\n"
  "  const int gsize = min(p.tiles_m - first_m, 8), in_group = bid % per_group;\n"
  "  m0 = (bq_i64)(first_m + in_group % gsize) * bm;\n"
  "  n0 = (bq_i64)(in_group / gsize) * bn;\n"
  "}\n"
  "\n"
  "// ---- the tiled GEMM (mma.sync) ----------------------------------------------------------------\n"
  "// A CTA computes a BM x BN tile of y; each warp a WM x WN piece of it, STAGES slices of K\n"
  "// in flight through cp.async.\n"
  "\n"
  "// Accumulators of I x J mma fragments, all zero.\n"
  "template <typename ACC, int I, int J> static __device__ __forceinline__ void bq_zero(ACC (&acc)[I][J][4]) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < I; i++)\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < J; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;\n"
  "}\n"
  "\n"
  "// A's mma fragments for step ks of the slice of K at sa: the warp's WM rows from wm WM\n"
  "// (ldmatrix). W's stay inline in bq_gemm_tiled: moved to a function they change the SASS.\n"
  "template <int WM>\n"
  "static __device__ __forceinline__ void bq_frags_a(bq_u32 (&af)[WM / 16][4], bq_u32 sa, int wm, int ks, int lane) {\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < WM / 16; i++) {\n"
  "    int r = wm * WM + i * 16 + (lane & 15), c = ks * 2 + (lane >> 4);\n"
  "    bq_ldmatrix4(af[i], sa + r * BQ_BK + ((c ^ (r & 7)) << 4));\n"
  "  }\n"
  "}\n"
  "\n"
  "// A warp's accumulators into the epilogue's tile: acc[i][j][2 h + e] is row\n"
  "// wm WM + 16 i + lane / 4 + 8 h, column wn WN + 8 j + 2 (lane % 4) + e\n"
  "template <int BN, int WM, int WN, typename ACC>\n"
  "static __device__ __forceinline__ void bq_gemm_put(ACC *tile, const ACC (&acc)[WM / 16][WN / 8][4], int wm, int wn,\n"
  "                                                   int lane) {\n"
  "  constexpr int MT = WM / 16, NT = WN / 8;\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < MT; i++)\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < NT; j++)\n"
  "#pragma unroll\n"
  "      for (int h = 0; h < 2; h++)\n"
  "        bq_tile_put(tile, BQ_EP_LD(BN), wm * WM + i * 16 + (lane >> 2) + 8 * h, wn * WN + j * 8 + (lane & 3) * 2,\n"
  "                    acc[i][j][2 * h], acc[i][j][2 * h + 1]);\n"
  "}\n"
  "\n"
  "// ACC: int (int8 operands: every step chained into acc) or float (FP8: a slice of K, 128\n"
  "// elements, is one block, whose four steps chain into part from zero; part then joins acc\n"
  "// through bq_blk_scale, block after block in order, as on the wgmma tiles)\n"
  "template <int BM, int BN, int WM, int WN, int STAGES, typename ACC>\n"
  "static __device__ __forceinline__ void bq_gemm_tiled(const bq_linear_params &p, unsigned char *smem) {\n"
  "  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;\n"
  "  constexpr int MT = WM / 16, NT = WN / 8, STAGE = (BM + BN) * BQ_BK;\n"
  "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
  "  const int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
  "  bq_i64 m0, n0;\n"
  "  bq_tile_of(p, BM, BN, m0, n0);\n"
  "  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);\n"
  "  const bq_u32 sbase = bq_smem_addr(smem);\n"
  "  const bq_tile_copier<BM, BN, THREADS> copier(p, m0, n0, tid);\n"
  "  auto load = [&](int stage, int kt) { copier.load(p, sbase + stage * STAGE, m0, n0, kt, tid); };\n"
  "  bq_col_q *cols = (bq_col_q *)(smem + STAGES * STAGE);\n"
  "  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);\n"
  "  bq_stage_cols<BN>(p, cols, n0, tid);\n"
  "  bq_stage_rows(p, rows, m0, tid);\n"
  "\n"
  "  constexpr bool FP8 = sizeof(ACC) == 4 && (ACC)0.5f != 0; // f32 accumulators: per-block promotion\n"
  "  ACC acc[MT][NT][4], part[MT][NT][4];\n"
  "  bq_zero(acc);\n"
  "#pragma unroll\n"
  "  for (int s = 0; s < STAGES - 1; s++) {\n"
  "    if (s < ktiles) load(s, s);\n"
  "    bq_cp_commit();\n"
  "  }\n"
  "  for (int kt = 0; kt < ktiles; kt++) {\n"
  "    bq_cp_wait<STAGES - 2>();\n"
  "    __syncthreads(); // slice kt has landed, and every warp is done with slice kt - 1\n"
  "    if (kt + STAGES - 1 < ktiles) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);\n"
  "    bq_cp_commit();\n"
  "    const bq_u32 sa = sbase + (kt % STAGES) * STAGE, sb = sa + BM * BQ_BK;\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "    float bs[MT][2]; // the block's scales of the lane's rows (loads in flight over the mma)\n"
  "    if constexpr (FP8) {\n"
  "      bq_zero(part);\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < MT; i++)\n"
  "#pragma unroll\n"
  "        for (int h = 0; h < 2; h++) bs[i][h] = bq_blk_scale(p, m0 + wm * WM + i * 16 + (lane >> 2) + 8 * h, n0 >> 7, kt);\n"
  "    }\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int ks = 0; ks < BQ_BK / 32; ks++) {\n"
  "      bq_u32 af[MT][4], bf[NT][2];\n"
  "      bq_frags_a<WM>(af, sa, wm, ks, lane);\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < NT; j += 2) {\n"
  "        int r = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);\n"
  "        bq_u32 t[4];\n"
  "        bq_ldmatrix4(t, sb + r * BQ_BK + ((c ^ (r & 7)) << 4));\n"
  "        bf[j][0] = t[0];\n"
  "        bf[j][1] = t[1];\n"
  "        bf[j + 1][0] = t[2];\n"
  "        bf[j + 1][1] = t[3];\n"
  "      }\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < MT; i++)\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < NT; j++)\n"
  "          bq_mma(FP8 ? part[i][j] : acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);\n"
  "    }\n"
  "#if BQ_OP == BQ_OP_FP8_LINEAR\n"
  "    if constexpr (FP8) {\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < MT; i++)\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < NT; j++)\n"
  "#pragma unroll\n"
  "          for (int e = 0; e < 4; e++) acc[i][j][e] = __fmaf_rn(part[i][j][e], bs[i][e >> 1], acc[i][j][e]);\n"
  "    }\n"
  "#endif\n"
  "  }\n"
  "  bq_cp_wait<0>();\n"
  "  __syncthreads(); // every warp is done with the stages; the staged columns and rows are visible\n"
  "\n"
  "  // the epilogue, through a tile in the stages\n"
  "  static_assert(BM * BQ_EP_LD(BN) * 4 <= STAGES * STAGE, \"the epilogue's tile fits in the stages\");\n"
  "  ACC *tile = (ACC *)smem;\n"
  "  bq_gemm_put<BN, WM, WN>(tile, acc, wm, wn, lane);\n"
  "  __syncthreads();\n"
  "  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);\n"
  "}\n"
  "\n"
  "#if !BQ_WGMMA\n"
  "// 128 x 256 tiles, 8 warps of 64 x 64, 3 slices in flight (144 KiB of shared memory). (A\n"
  "// 128 x 128 variant with two CTAs an SM is one template argument away; it is left out\n"
  "// until the benchmark shows a shape that needs it: every tile costs compile time.)\n"
  "#if BQ_E_GEMM_LARGE\n"
  "extern \"C\" __global__ void BQ_LB_GEMM_LARGE BQ_FN_GEMM_LARGE(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  bq_gemm_tiled<128, 256, 64, 64, 3, int>(p, smem);\n"
  "}\n"
  "#endif\n"
  "// FP8: 128 x 128 tiles with f32 accumulators, 8 warps of 32 x 64 (the block's partial sums\n"
  "// double the accumulators; 64 x 32 spills), 4 slices in flight; sm_89 and sm_90 modules\n"
  "#define BQ_F8G_STAGES 4\n"
  "#if BQ_E_FP8_GEMM\n"
  "extern \"C\" __global__ void BQ_LB_FP8_GEMM BQ_FN_FP8_GEMM(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  bq_gemm_tiled<128, 128, 32, 64, BQ_F8G_STAGES, float>(p, smem);\n"
  "}\n"
  "#endif\n"
  "#else\n"
  "// an sm_90a module tiles with wgmma only (the host never launches these there)\n"
  "#if BQ_E_GEMM_LARGE\n"
  "extern \"C\" __global__ void BQ_FN_GEMM_LARGE(const bq_linear_params p) { __trap(); }\n"
  "#endif\n"
  "#if BQ_E_FP8_GEMM\n"
  "extern \"C\" __global__ void BQ_FN_FP8_GEMM(const bq_linear_params p) { __trap(); }\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "// ---- sm_90a: warpgroup MMA (wgmma) --------------------------------------------------------------------\n"
  "// 128 x 256 tiles, two warpgroups of 64 x 256 (128 int32 accumulators a thread), four slices\n"
  "// of K in shared memory: the copy of slice kt + 2 overlaps the wgmma of slices kt and\n"
  "// kt - 1 (one wgmma group stays in flight, so the slice it reads is never the one being\n"
  "// refilled). Only modules for sm_90a have it (BQ_WGMMA); elsewhere the entry point traps.\n"
  "#define BQ_WG_STAGES 4\n"
  "#if BQ_WGMMA\n"
  "// A K-major operand in the 128-byte swizzle, rows of 128 bytes in groups of 8 that lie\n"
  "// 1024 bytes apart (the leading byte offset is unused in this mode): start address >> 4,\n"
  "// stride byte offset >> 4 at bit 32, swizzle mode 1 (128 bytes) at bit 62.\n"
  "static __device__ __forceinline__ bq_u64 bq_wg_desc(bq_u32 addr) {\n"
  "  return (bq_u64)((addr & 0x3FFFF) >> 4) | ((bq_u64)1 << 16) | ((bq_u64)(1024 >> 4) << 32) | ((bq_u64)1 << 62);\n"
  "}\n"
  "// A warpgroup's wgmma accumulators (m64nBN: BN / 2 a thread, of ACC) into the epilogue's\n"
  "// tile: thread (w, lane) of warpgroup wg holds in acc[4 j + 2 h + e] row 64 wg + 16 w +\n"
  "// lane / 4 + 8 h, column 8 j + 2 (lane % 4) + e.\n"
  "template <int BN, typename ACC>\n"
  "static __device__ __forceinline__ void bq_wg_put(ACC *tile, const ACC (&acc)[BN / 2], int wg, int w, int lane) {\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < BN / 8; j++)\n"
  "#pragma unroll\n"
  "    for (int h = 0; h < 2; h++)\n"
  "      bq_tile_put(tile, BQ_EP_LD(BN), 64 * wg + 16 * w + (lane >> 2) + 8 * h, 8 * j + 2 * (lane & 3), acc[4 * j + 2 * h],\n"
  "                  acc[4 * j + 2 * h + 1]);\n"
  "}\n"
  "\n"
  "#if BQ_E_GEMM_WGMMA\n"
  "extern \"C\" __global__ void BQ_LB_GEMM_WGMMA BQ_FN_GEMM_WGMMA(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  constexpr int BM = 128, BN = 256, STAGE = (BM + BN) * BQ_BK;\n"
  "  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;\n"
  "  bq_i64 m0, n0;\n"
  "  bq_tile_of(p, BM, BN, m0, n0);\n"
  "  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);\n"
  "  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups\n"
  "  const bq_tile_copier<BM, BN, 256> copier(p, m0, n0, tid);\n"
  "  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));\n"
  "  bq_col_q *cols = (bq_col_q *)(stages + BQ_WG_STAGES * STAGE);\n"
  "  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);\n"
  "  bq_stage_cols<BN>(p, cols, n0, tid);\n"
  "  bq_stage_rows(p, rows, m0, tid);\n"
  "\n"
  "  int acc[128];\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < 128; i++) acc[i] = 0;\n"
  "#pragma unroll\n"
  "  for (int s = 0; s < 2; s++) {\n"
  "    if (s < ktiles) copier.load(p, sbase + s * STAGE, m0, n0, s, tid);\n"
  "    bq_cp_commit();\n"
  "  }\n"
  "  for (int kt = 0; kt < ktiles; kt++) {\n"
  "    bq_cp_wait<1>();        // slice kt has landed (kt + 1 may still be in flight)\n"
  "    bq_fence_proxy_async(); // ... and is visible to the tensor cores\n"
  "    __syncthreads();        // every thread's part of it; every wgmma of slice kt - 2 is done\n"
  "    if (kt + 2 < ktiles)\n"
  "      copier.load(p, sbase + ((kt + 2) % BQ_WG_STAGES) * STAGE, m0, n0, kt + 2, tid);\n"
  "    bq_cp_commit();\n"
  "    const bq_u32 sa = sbase + (kt % BQ_WG_STAGES) * STAGE + wg * 64 * BQ_BK, sb = sbase + (kt % BQ_WG_STAGES) * STAGE + BM * BQ_BK;\n"
  "    bq_wg_fence();\n"
  "#pragma unroll\n"
  "    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma(acc, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32));\n"
  "    bq_wg_commit();\n"
  "    bq_wg_wait<1>();\n"
  "  }\n"
  "  bq_wg_wait<0>();\n"
  "  bq_cp_wait<0>();\n"
  "  __syncthreads(); // every wgmma and copy is done; the staged columns and rows are visible\n"
  "\n"
  "  // the epilogue, through the tile\n"
  "  int *tile = (int *)stages;\n"
  "  bq_wg_put<BN>(tile, acc, wg, w, lane);\n"
  "  __syncthreads();\n"
  "  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- sm_90a, FP8: the tensor cores' sums promoted to f32 every 128 elements of K -------------------\n"
  "// 128 x 128 tiles, two warpgroups of 64 x 128. A slice of K (128 elements) is summed by\n"
  "// four wgmma (the first not adding the accumulator: part starts from zero), waited for,\n"
  "// then joins acc in f32 (fma with the block's scale, 1 unless blockwise; a 128 x 128 tile\n"
  "// lies in one weight block), slice after slice in order: the rounding of the tensor cores\n"
  "// (whose FP8 sums keep fewer bits than f32) reaches over 128 products at most, and every\n"
  "// output is the same sum of the same partial sums whatever tile or M it falls in. Both\n"
  "// accumulator sets (64 + 64 a thread) would not fit with 256 columns. BQ_F8_STAGES slices\n"
  "// in flight: each warpgroup waits for its own wgmma every slice, so the copies run ahead.\n"
  "#define BQ_F8_STAGES 5\n"
  "#define BQ_F8_SCALES 144 // floats a stage for blockwise scales: 128 rows', then the weight block's\n"
  "#if BQ_E_FP8_WGMMA || BQ_E_FP8_WGMMA_BLK\n"
  "// BLK (blockwise scales, their own entry point so that the other modes' loop stays bare):\n"
  "// every stage also carries its block's scales, copied by cp.async with the tiles (thread t\n"
  "// < 128 the scale of row m0 + t, thread 128 the weight block's), so each block's scale\n"
  "// product s_b = sa * sw is at hand when its sum joins acc by fma(part, s_b, acc).\n"
  "template <bool BLK> static __device__ __forceinline__ void bq_fp8_wgmma_tiles(const bq_linear_params &p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  constexpr int BM = 128, BN = 128, STAGE = (BM + BN) * BQ_BK, S = BQ_F8_STAGES;\n"
  "  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;\n"
  "  bq_i64 m0, n0;\n"
  "  bq_tile_of(p, BM, BN, m0, n0);\n"
  "  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);\n"
  "  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups\n"
  "  const bq_tile_copier<BM, BN, 256> copier(p, m0, n0, tid);\n"
  "  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));\n"
  "  float *bscales = (float *)(stages + S * STAGE); // BLK: [S][BQ_F8_SCALES]\n"
  "  bq_col_q *cols = (bq_col_q *)(stages + S * STAGE + (BLK ? S * BQ_F8_SCALES * 4 : 0));\n"
  "  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);\n"
  "  bq_stage_cols<BN>(p, cols, n0, tid);\n"
  "  bq_stage_rows(p, rows, m0, tid);\n"
  "  auto load = [&](int s, int kt) {\n"
  "    copier.load(p, sbase + s * STAGE, m0, n0, kt, tid);\n"
  "    if constexpr (BLK) bq_blk_scale_copy(p, bq_smem_addr(bscales + s * BQ_F8_SCALES), m0, n0 >> 7, BM, kt, tid);\n"
  "  };\n"
  "\n"
  "  float acc[64], part[64];\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < 64; i++) acc[i] = 0.0f;\n"
  "#pragma unroll\n"
  "  for (int s = 0; s < S - 1; s++) {\n"
  "    if (s < ktiles) load(s, s);\n"
  "    bq_cp_commit();\n"
  "  }\n"
  "  for (int kt = 0; kt < ktiles; kt++) {\n"
  "    bq_cp_wait<S - 2>();    // slice kt has landed\n"
  "    bq_fence_proxy_async(); // ... and is visible to the tensor cores\n"
  "    __syncthreads();        // every thread's part of it; both warpgroups are done with slice kt - 1\n"
  "    if (kt + S - 1 < ktiles) load((kt + S - 1) % S, kt + S - 1);\n"
  "    bq_cp_commit();\n"
  "    const bq_u32 sa = sbase + (kt % S) * STAGE + wg * 64 * BQ_BK, sb = sbase + (kt % S) * STAGE + BM * BQ_BK;\n"
  "    bq_wg_fence();\n"
  "#pragma unroll\n"
  "    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8(part, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32), ks);\n"
  "    bq_wg_commit();\n"
  "    if constexpr (BLK) {\n"
  "      // the block's scales of the thread's two rows, read while the tensor cores sum\n"
  "      const float *bs = bscales + (kt % S) * BQ_F8_SCALES;\n"
  "      const int r = 64 * wg + 16 * w + (lane >> 2);\n"
  "      const float s0 = __fmul_rn(bs[r], bs[BM]), s1 = __fmul_rn(bs[r + 8], bs[BM]);\n"
  "      bq_wg_wait<0>();\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < 64; i++) acc[i] = __fmaf_rn(part[i], (i & 2) ? s1 : s0, acc[i]);\n"
  "    } else {\n"
  "      bq_wg_wait<0>();\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < 64; i++) acc[i] = __fadd_rn(acc[i], part[i]);\n"
  "    }\n"
  "  }\n"
  "  bq_cp_wait<0>();\n"
  "  __syncthreads(); // every copy is done; the staged columns and rows are visible\n"
  "\n"
  "  // the epilogue, through the tile\n"
  "  float *tile = (float *)stages;\n"
  "  bq_wg_put<BN>(tile, acc, wg, w, lane);\n"
  "  __syncthreads();\n"
  "  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_FP8_WGMMA\n"
  "extern \"C\" __global__ void BQ_LB_FP8_WGMMA BQ_FN_FP8_WGMMA(const bq_linear_params p) { bq_fp8_wgmma_tiles<false>(p); }\n"
  "#endif\n"
  "#if BQ_E_FP8_WGMMA_BLK\n"
  "extern \"C\" __global__ void BQ_LB_FP8_WGMMA BQ_FN_FP8_WGMMA_BLK(const bq_linear_params p) { bq_fp8_wgmma_tiles<true>(p); }\n"
  "#endif\n"
  "\n"
  "// ---- sm_90a, FP8, 16-byte aligned operands: the same sums fed by the tensor memory accelerator --\n"
  "// 192 x 128 tiles: a producer warpgroup and three consumer warpgroups of 64 rows, which meet\n"
  "// only at mbarriers: the producer's one thread copies slice g (the 192 x 128 and 128 x 128\n"
  "// boxes of x and w) into stage g % S once the consumers have released it (empty), each consumer\n"
  "// warpgroup waits for it (full), runs its four wgmma, and releases it as soon as they have\n"
  "// read it. One warpgroup's m64n128 wgmma alone keep the tensor cores about half busy, and\n"
  "// each warpgroup waits for its slice's sums before it promotes them: with three, two still\n"
  "// sum while the third promotes, and no thread that computes issues a copy. A CTA takes tiles\n"
  "// blockIdx.x, + gridDim.x, ... (the grid may be smaller than the tiles): the slices count on\n"
  "// across them, so the producer fills the next tile's stages while the consumers store this\n"
  "// one's outputs, straight from their registers. Blockwise, each consumer thread also copies\n"
  "// the block scales it reads (its two rows' and the weight block's) with cp.async into a ring\n"
  "// of its own in shared memory, BQ_F8T_AHEAD slices ahead of the slice it sums\n"
  "// (bq_f8t_scales), so neither the producer nor the full barrier waits on those loads. The\n"
  "// sums are those of bq_fp8_wgmma, formed and promoted in the same order (the copies\n"
  "// zero-fill past M, N and K as its do), and the epilogue is the same function: the same bits.\n"
  "#define BQ_F8T_STAGES 5\n"
  "#define BQ_F8T_WGS 3   // consumer warpgroups, 64 rows of the tile each\n"
  "#define BQ_F8T_AHEAD 4 // blockwise: slices a consumer thread's scale copies run ahead\n"
  "// Registers a thread, by warpgroup: launched at 128 (65,536 over 512 threads), the producer\n"
  "// warpgroup gives back what its one copying thread does not need, and each consumer thread\n"
  "// takes 152 (its 128 accumulators and the rest; 40 + 3 x 152 a warp on each scheduler)\n"
  "#define BQ_F8T_PRODUCER_REGS 40\n"
  "#define BQ_F8T_CONSUMER_REGS 152\n"
  "#if BQ_E_FP8_TMA || BQ_E_FP8_TMA_BLK\n"
  "// tile t of the grouped order bq_tile_of walks\n"
  "static __device__ __forceinline__ void bq_tile_at(const bq_linear_params &p, int t, int bm, int bn, bq_i64 &m0, bq_i64 &n0) {\n"
  "  const int per_group = 8 * p.tiles_n, first_m = (t / per_group) * 8;\n"
  "  const int gsize = min(p.tiles_m - first_m, 8), in_group = t % per_group;\n"
  "  m0 = (bq_i64)(first_m + in_group % gsize) * bm;\n"
  "  n0 = (bq_i64)(in_group / gsize) * bn;\n"
  "}\n"
  "// Blockwise: consumer thread c (row r of the tile, and r + 8) copies the scales slice gs\n"
  "// (counted over the CTA's tiles) multiplies its sums by into slot gs % (BQ_F8T_AHEAD + 1) of\n"
  "// the ring at `ring` ([slot][a row's, the row + 8's, the weight block's][C] floats, C the\n"
  "// consumer threads), rows past M zero-filled, and commits them as one group; a slice past\n"
  "// the CTA's last tile copies nothing but still commits its (empty) group, so that every\n"
  "// slice has one.\n"
  "static __device__ __forceinline__ void bq_f8t_scales(const bq_linear_params &p, bq_u32 ring, int gs, int ktiles,\n"
  "                                                     int r, int c) {\n"
  "  const int t = (int)blockIdx.x + gs / ktiles * (int)gridDim.x, kt = gs % ktiles;\n"
  "  if (t < p.tiles_m * p.tiles_n) {\n"
  "    bq_i64 m0, n0;\n"
  "    constexpr int C = 128 * BQ_F8T_WGS;\n"
  "    bq_tile_at(p, t, 64 * BQ_F8T_WGS, 128, m0, n0);\n"
  "    const bq_u32 d = ring + (gs % (BQ_F8T_AHEAD + 1)) * (3 * C * 4) + 4 * c;\n"
  "    const bq_i64 m = m0 + r;\n"
  "    const float *sa = (const float *)p.a_scales;\n"
  "    bq_cp_async4(d, sa + (m < p.m ? bq_sa_at(p, m, kt) : 0), m < p.m ? 4 : 0);\n"
  "    bq_cp_async4(d + C * 4, sa + (m + 8 < p.m ? bq_sa_at(p, m + 8, kt) : 0), m + 8 < p.m ? 4 : 0);\n"
  "    bq_cp_async4(d + 2 * C * 4, (const float *)p.w_scales + bq_sw_at(p, n0 >> 7, kt), 4);\n"
  "  }\n"
  "  bq_cp_commit();\n"
  "}\n"
  "template <bool BLK> static __device__ __forceinline__ void bq_fp8_tma_tiles(const bq_fp8_tma_params &q) {\n"
  "  const bq_linear_params &p = q.p;\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  constexpr int BM = 64 * BQ_F8T_WGS, BN = 128, STAGE = (BM + BN) * BQ_BK, S = BQ_F8T_STAGES, C = 128 * BQ_F8T_WGS;\n"
  "  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;\n"
  "  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK), tiles = p.tiles_m * p.tiles_n;\n"
  "  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups\n"
  "  const bq_u32 full = sbase + S * STAGE, empty = full + 8 * S; // S mbarriers each\n"
  "  const bq_u32 ring = empty + 8 * S; // BLK: the consumers' scale rings (bq_f8t_scales)\n"
  "  if (tid == 0) {\n"
  "    for (int s = 0; s < S; s++) {\n"
  "      bq_mbar_init(full + 8 * s, 1);    // the producer's arrival (and the boxes' bytes)\n"
  "      bq_mbar_init(empty + 8 * s, C);   // every consumer thread's\n"
  "    }\n"
  "    bq_mbar_init_fence();\n"
  "  }\n"
  "  __syncthreads();\n"
  "\n"
  "  // FP8 QuantizedLinear (BQ_LF_PDL): launched while the activations' kernel runs; the\n"
  "  // producer copies its first tile's first weight boxes, then every thread waits for that\n"
  "  // kernel (bq_wait_prior_grid) before anything it writes (x, its scales) is read\n"
  "  const bool pdl = p.flags & BQ_LF_PDL;\n"
  "  if (wg == BQ_F8T_WGS) { // the producer warpgroup: its registers go to the consumers\n"
  "    bq_setmaxnreg_dec<BQ_F8T_PRODUCER_REGS>();\n"
  "    if (tid != C) return;\n"
  "    int pre = 0; // slices whose weight box is already on its way\n"
  "    if (pdl && lane == 0 && (int)blockIdx.x < tiles) {\n"
  "      bq_i64 m0, n0;\n"
  "      bq_tile_at(p, blockIdx.x, BM, BN, m0, n0);\n"
  "      for (pre = 0; pre < S && pre < ktiles; pre++) {\n"
  "        bq_mbar_expect(full + 8 * pre, STAGE);\n"
  "        bq_tma_load(sbase + pre * STAGE + BM * BQ_BK, q.tmap_w, pre * BQ_BK, (int)n0, full + 8 * pre);\n"
  "      }\n"
  "    }\n"
  "    if (pdl) bq_wait_prior_grid();\n"
  "    int g = 0; // slices so far, over every tile of this CTA\n"
  "    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
  "      bq_i64 m0, n0;\n"
  "      bq_tile_at(p, t, BM, BN, m0, n0);\n"
  "      for (int kt = 0; kt < ktiles; kt++, g++) {\n"
  "        const int s = g % S;\n"
  "        if (g >= S) bq_mbar_wait(empty + 8 * s, (g / S - 1) & 1); // its last use is over\n"
  "        if (g >= pre) {\n"
  "          bq_mbar_expect(full + 8 * s, STAGE);\n"
  "          bq_tma_load(sbase + s * STAGE + BM * BQ_BK, q.tmap_w, kt * BQ_BK, (int)n0, full + 8 * s);\n"
  "        }\n"
  "        bq_tma_load(sbase + s * STAGE, q.tmap_a, kt * BQ_BK, (int)m0, full + 8 * s);\n"
  "      }\n"
  "    }\n"
  "    return;\n"
  "  }\n"
  "  bq_setmaxnreg_inc<BQ_F8T_CONSUMER_REGS>();\n"
  "  if (pdl) bq_wait_prior_grid();\n"
  "  // the thread's rows in a tile: r and r + 8\n"
  "  const int r = 64 * wg + 16 * w + (lane >> 2);\n"
  "  if constexpr (BLK)\n"
  "    for (int j = 0; j < BQ_F8T_AHEAD; j++) bq_f8t_scales(p, ring, j, ktiles, r, tid);\n"
  "  int g = 0;\n"
  "  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
  "    bq_i64 m0, n0;\n"
  "    bq_tile_at(p, t, BM, BN, m0, n0);\n"
  "    const bq_i64 m = m0 + r;\n"
  "    float acc[64], part[64];\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < 64; i++) acc[i] = 0.0f;\n"
  "    for (int kt = 0; kt < ktiles; kt++, g++) {\n"
  "      const int s = g % S;\n"
  "      if constexpr (BLK) bq_f8t_scales(p, ring, g + BQ_F8T_AHEAD, ktiles, r, tid);\n"
  "      bq_mbar_wait(full + 8 * s, (g / S) & 1);\n"
  "      const bq_u32 sa = sbase + s * STAGE + wg * 64 * BQ_BK, sb = sbase + s * STAGE + BM * BQ_BK;\n"
  "      bq_wg_fence();\n"
  "#pragma unroll\n"
  "      for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8(part, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32), ks);\n"
  "      bq_wg_commit();\n"
  "      float s0 = 1.0f, s1 = 1.0f; // BLK: the rows' block scale products (0 past M, never stored)\n"
  "      if constexpr (BLK) {\n"
  "        bq_cp_wait<BQ_F8T_AHEAD>(); // slice g's group has landed\n"
  "        const float *bs = (const float *)(smem + (ring - bq_smem_addr(smem))) + (g % (BQ_F8T_AHEAD + 1)) * 3 * C;\n"
  "        s0 = __fmul_rn(bs[tid], bs[2 * C + tid]), s1 = __fmul_rn(bs[C + tid], bs[2 * C + tid]);\n"
  "      }\n"
  "      bq_wg_wait<0>();\n"
  "      bq_mbar_arrive(empty + 8 * s);\n"
  "      if constexpr (BLK) {\n"
  "#pragma unroll\n"
  "        for (int i = 0; i < 64; i++) acc[i] = __fmaf_rn(part[i], (i & 2) ? s1 : s0, acc[i]);\n"
  "      } else {\n"
  "#pragma unroll\n"
  "        for (int i = 0; i < 64; i++) acc[i] = __fadd_rn(acc[i], part[i]);\n"
  "      }\n"
  "    }\n"
  "    // the epilogue from the accumulators: acc[4 j + 2 h + e] is row m + 8 h, column\n"
  "    // n0 + 8 j + 2 (lane % 4) + e (the columns' parameters read once for both rows)\n"
  "    const bq_row_q r0 = m < p.m ? bq_row_of(p, m) : bq_row_q{(bq_c)0, 0};\n"
  "    const bq_row_q r1 = m + 8 < p.m ? bq_row_of(p, m + 8) : bq_row_q{(bq_c)0, 0};\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < BN / 8; j++) {\n"
  "      const bq_i64 n = n0 + 8 * j + 2 * (lane & 3);\n"
  "      if (n >= p.n) continue;\n"
  "      const bq_col_q c0 = bq_col_of(p, n), c1 = n + 1 < p.n ? bq_col_of(p, n + 1) : c0;\n"
  "      if (m < p.m)\n"
  "        bq_store_pair(p, m, n, bq_epilogue(acc[4 * j], r0, c0, p.flags), bq_epilogue(acc[4 * j + 1], r0, c1, p.flags));\n"
  "      if (m + 8 < p.m)\n"
  "        bq_store_pair(p, m + 8, n, bq_epilogue(acc[4 * j + 2], r1, c0, p.flags),\n"
  "                      bq_epilogue(acc[4 * j + 3], r1, c1, p.flags));\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_FP8_TMA\n"
  "extern \"C\" __global__ void __launch_bounds__(128 * BQ_F8T_WGS + 128, 1) BQ_FN_FP8_TMA(const __grid_constant__ bq_fp8_tma_params q) {\n"
  "  bq_fp8_tma_tiles<false>(q);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_FP8_TMA_BLK\n"
  "extern \"C\" __global__ void __launch_bounds__(128 * BQ_F8T_WGS + 128, 1) BQ_FN_FP8_TMA_BLK(const __grid_constant__ bq_fp8_tma_params q) {\n"
  "  bq_fp8_tma_tiles<true>(q);\n"
  "}\n"
  "#endif\n"
  "\n"
  "// ---- sm_90a, FP8, M <= 64: weight streaming on the same partial sums --------------------------\n"
  "// The tiles' operands trade places: 64 weight rows are wgmma's A (m64), 16 activation rows\n"
  "// its B (n16). The tensor cores' sum of a 128-element block does not depend on the\n"
  "// instruction's shape or on which operand a row is in, so every output is the same sum of\n"
  "// the same partial sums as in bq_fp8_wgmma (the GPU test checks it bit for bit): a row's\n"
  "// result does not depend on M. A CTA (one warpgroup) owns 64 output columns and 16 rows of\n"
  "// x (blockIdx.y: passes of 16 rows, whose weight reads after the first come from L2); K\n"
  "// streams through BQ_F8V_STAGES stages of 16 + 64 rows of 128 bytes (x's, then w's), each\n"
  "// filled by every thread, so the weight's bytes in flight keep its SM reading.\n"
  "#define BQ_F8V_STAGES 8\n"
  "#define BQ_F8V_SCALES 20 // floats a stage for blockwise scales: 16 rows', then the weight block's\n"
  "#if BQ_E_FP8_GEMV || BQ_E_FP8_GEMV_BLK\n"
  "// BLK: the stages carry the block's scales as bq_fp8_wgmma_tiles' do (threads 0..15 the\n"
  "// rows', 16 the weight block's)\n"
  "template <bool BLK> static __device__ __forceinline__ void bq_fp8_gemv_body(const bq_linear_params &p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  constexpr int BX = 16, BW = 64, STAGE = (BX + BW) * BQ_BK, S = BQ_F8V_STAGES;\n"
  "  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
  "  const bq_i64 n0 = (bq_i64)blockIdx.x * BW, m0 = (bq_i64)blockIdx.y * BX;\n"
  "  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);\n"
  "  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups\n"
  "  // A thread copies chunk tid % 8 of row r = tid / 8 of x's 16 and of rows r + 16 i of w's 64,\n"
  "  // all at one swizzled offset. With 16-byte aligned operands and whole weight rows, one\n"
  "  // cp.async a chunk: x's rows past M and the K tail zero-filled (src-size 0); else the\n"
  "  // bounds-checked copies of the tiles (bq_load_tiles).\n"
  "  const int r = tid >> 3, cc = tid & 7;\n"
  "  const bool fast = (p.flags & BQ_LF_A16) && (p.flags & BQ_LF_W16) && n0 + BW <= p.n, xrow = m0 + r < p.m;\n"
  "  const bq_u8 *xs = (const bq_u8 *)p.a + (xrow ? (m0 + r) * p.lda + cc * 16 : 0);\n"
  "  const bq_u8 *ws = (const bq_u8 *)p.w + (fast ? (n0 + r) * p.k + cc * 16 : 0);\n"
  "  const bq_u32 off = r * BQ_BK + ((cc ^ (r & 7)) << 4);\n"
  "  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));\n"
  "  float *bscales = (float *)(stages + S * STAGE); // BLK: [S][BQ_F8V_SCALES]\n"
  "  // what: 1 the slice's rows of x (and blockwise scales), 2 its weight rows, 3 both\n"
  "  auto load = [&](int stage, int kt, int what) {\n"
  "    const bq_u32 d = sbase + stage * STAGE;\n"
  "    if constexpr (BLK)\n"
  "      if (what & 1) bq_blk_scale_copy(p, bq_smem_addr(bscales + stage * BQ_F8V_SCALES), m0, n0 >> 7, BX, kt, tid);\n"
  "    if (!fast) {\n"
  "      bq_load_tiles<BX, BW, 128>(p, d, m0, n0, kt, tid, (const bq_u8 *)p.a, (const bq_u8 *)p.w, p.flags & BQ_LF_A16,\n"
  "                                 p.flags & BQ_LF_W16);\n"
  "      return;\n"
  "    }\n"
  "    const bool in_k = (bq_i64)kt * BQ_BK + cc * 16 < p.k; // (K is a multiple of 16 here)\n"
  "    const bq_i64 k0 = (bq_i64)kt * BQ_BK;\n"
  "    if (what & 1)\n"
  "      bq_cp_async16(d + off, xrow && in_k ? (const void *)(xs + k0) : (const void *)ws, xrow && in_k ? 16 : 0);\n"
  "    if (what & 2)\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < BW / 16; i++)\n"
  "        bq_cp_async16(d + BX * BQ_BK + off + i * 16 * BQ_BK,\n"
  "                      in_k ? (const void *)(ws + i * 16 * p.k + k0) : (const void *)ws, in_k ? 16 : 0);\n"
  "  };\n"
  "  bq_col_q *cols = (bq_col_q *)(stages + S * STAGE + (BLK ? S * BQ_F8V_SCALES * 4 : 0));\n"
  "  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);\n"
  "  bq_stage_cols<BW>(p, cols, n0, tid);\n"
  "  // FP8 QuantizedLinear (BQ_LF_PDL): launched while the activations' kernel runs, the CTA\n"
  "  // copies the first stages' weight rows, then waits for that kernel (bq_wait_prior_grid)\n"
  "  // before anything it writes (x, its scales) is read. The weight copies join the first\n"
  "  // commit group below, so each stage's group still holds all of the stage.\n"
  "  const bool pdl = p.flags & BQ_LF_PDL;\n"
  "  if (pdl) {\n"
  "    if (fast)\n"
  "#pragma unroll\n"
  "      for (int s = 0; s < S - 1; s++)\n"
  "        if (s < ktiles) load(s, s, 2);\n"
  "    bq_wait_prior_grid();\n"
  "  }\n"
  "  bq_stage_rows(p, rows, m0, tid);\n"
  "\n"
  "  float acc[8], part[8];\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < 8; i++) acc[i] = 0.0f;\n"
  "#pragma unroll\n"
  "  for (int s = 0; s < S - 1; s++) {\n"
  "    if (s < ktiles) load(s, s, pdl && fast ? 1 : 3);\n"
  "    bq_cp_commit();\n"
  "  }\n"
  "  for (int kt = 0; kt < ktiles; kt++) {\n"
  "    bq_cp_wait<S - 2>();\n"
  "    bq_fence_proxy_async();\n"
  "    __syncthreads(); // slice kt has landed; slice kt - 1's wgmma are done (waited below)\n"
  "    if (kt + S - 1 < ktiles) load((kt + S - 1) % S, kt + S - 1, 3);\n"
  "    bq_cp_commit();\n"
  "    const bq_u32 sx = sbase + (kt % S) * STAGE, sw = sx + BX * BQ_BK;\n"
  "    bq_wg_fence();\n"
  "#pragma unroll\n"
  "    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8_n16(part, bq_wg_desc(sw + ks * 32), bq_wg_desc(sx + ks * 32), ks);\n"
  "    bq_wg_commit();\n"
  "    if constexpr (BLK) {\n"
  "      // the block's scales of the thread's rows of x (acc[i]'s: s[2 (i / 4) + i % 2])\n"
  "      const float *bs = bscales + (kt % S) * BQ_F8V_SCALES;\n"
  "      float sc[4];\n"
  "#pragma unroll\n"
  "      for (int q = 0; q < 4; q++) sc[q] = __fmul_rn(bs[8 * (q >> 1) + 2 * (lane & 3) + (q & 1)], bs[BX]);\n"
  "      bq_wg_wait<0>();\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < 8; i++) acc[i] = __fmaf_rn(part[i], sc[2 * (i >> 2) + (i & 1)], acc[i]);\n"
  "    } else {\n"
  "      bq_wg_wait<0>();\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < 8; i++) acc[i] = __fadd_rn(acc[i], part[i]);\n"
  "    }\n"
  "  }\n"
  "  bq_cp_wait<0>();\n"
  "  __syncthreads(); // every copy is done; the staged columns and rows are visible\n"
  "\n"
  "  // thread (w, lane) holds in acc[i] column (weight row) 16 w + lane / 4 + 8 ((i / 2) % 2) of\n"
  "  // row (of x) 8 (i / 4) + 2 (lane % 4) + i % 2: through a [16][64 + 4] tile in the stages,\n"
  "  // then a thread a column, rows in turn, each warp's stores 32 neighbouring outputs\n"
  "  float *tile = (float *)stages;\n"
  "#pragma unroll\n"
  "  for (int i = 0; i < 8; i++)\n"
  "    tile[(8 * (i / 4) + 2 * (lane & 3) + (i & 1)) * (BW + 4) + 16 * w + (lane >> 2) + 8 * ((i / 2) & 1)] = acc[i];\n"
  "  __syncthreads();\n"
  "  const int c = tid & (BW - 1);\n"
  "  if (n0 + c < p.n)\n"
  "#pragma unroll 1\n"
  "    for (int xr = tid / BW; xr < BX && m0 + xr < p.m; xr += 128 / BW)\n"
  "      ((bq_t *)p.y)[(m0 + xr) * p.ldy + n0 + c] = bq_epilogue(tile[xr * (BW + 4) + c], rows[xr], cols[c], p.flags);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_FP8_GEMV\n"
  "extern \"C\" __global__ void __launch_bounds__(128, 1) BQ_FN_FP8_GEMV(const bq_linear_params p) { bq_fp8_gemv_body<false>(p); }\n"
  "#endif\n"
  "#if BQ_E_FP8_GEMV_BLK\n"
  "extern \"C\" __global__ void __launch_bounds__(128, 1) BQ_FN_FP8_GEMV_BLK(const bq_linear_params p) {\n"
  "  bq_fp8_gemv_body<true>(p);\n"
  "}\n"
  "#endif\n"
  "#else\n"
  "#if BQ_E_GEMM_WGMMA\n"
  "extern \"C\" __global__ void BQ_FN_GEMM_WGMMA(const bq_linear_params p) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_WGMMA\n"
  "extern \"C\" __global__ void BQ_FN_FP8_WGMMA(const bq_linear_params p) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_GEMV\n"
  "extern \"C\" __global__ void BQ_FN_FP8_GEMV(const bq_linear_params p) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_WGMMA_BLK\n"
  "extern \"C\" __global__ void BQ_FN_FP8_WGMMA_BLK(const bq_linear_params p) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_GEMV_BLK\n"
  "extern \"C\" __global__ void BQ_FN_FP8_GEMV_BLK(const bq_linear_params p) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_TMA\n"
  "extern \"C\" __global__ void BQ_FN_FP8_TMA(const __grid_constant__ bq_fp8_tma_params q) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#if BQ_E_FP8_TMA_BLK\n"
  "extern \"C\" __global__ void BQ_FN_FP8_TMA_BLK(const __grid_constant__ bq_fp8_tma_params q) { __trap(); } // not an sm_90a module\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#if BQ_OP != BQ_OP_FP8_LINEAR\n"
  "// ---- M <= 64: weight streaming ----------------------------------------------------------------------\n"
  "// A CTA owns 16 output columns (two n8 tiles) for MT m16 tiles of rows. The weight is read\n"
  "// once, from memory, and sets the time; the activations (M x K bytes) are read by every CTA,\n"
  "// from L2. K moves through shared memory in stages of 512 bytes: a stage holds the 16\n"
  "// weight rows, then the xr = min(16 MT, M) activation rows that can exist, each row 512\n"
  "// bytes at a stride of BQ_GV_LD. The copies (cp.async) take each row's 512 bytes with one\n"
  "// warp instruction, so that the CTA reads its 16 weight rows (one contiguous block of\n"
  "// memory) in long runs. Then the 8 warps split the stage in 64-byte slices: lane\n"
  "// (g = lane / 4, q = lane % 4) reads 16 contiguous bytes of weight rows g and 8 + g and of\n"
  "// activation rows g and 8 + g of each m16 tile, straight into mma fragments: the dot\n"
  "// product is a sum over k, so the same permutation of k in both operands (lane quad q\n"
  "// holds k = 16q .. 16q + 15, split over two m16n8k32 steps) leaves it unchanged. The row\n"
  "// stride of 512 + 64 bytes keeps those reads free of bank conflicts. The warps meet in\n"
  "// shared memory at the end. A grid row (blockIdx.y) takes the next 16 * MT rows; its\n"
  "// weight reads then mostly hit L2.\n"
  "// Stages in flight: as many as let four CTAs share an SM, so that the grid of a large\n"
  "// weight runs in one wave: a partial second wave costs more than a shallower pipeline. The\n"
  "// host sizes shared memory the same way (bq__gemv_smem). Deeper pipelines do not pay, nor\n"
  "// do longer stages.\n"
  "#define BQ_GV_LD 576\n"
  "#define BQ_GV_STAGES(XR) max(2, min(4, 57344 / ((16 + (XR)) * BQ_GV_LD)))\n"
  "#define BQ_GV_SMEM(XR) (BQ_GV_STAGES(XR) * (16 + (XR)) * BQ_GV_LD) // XR = min(16 MT, M)\n"
  "\n"
  "// A weight-streaming CTA's shape and a thread's share of the copies into the stages.\n"
  "template <int MT> struct bq_gemv_cta {\n"
  "  enum : int { J = 2 + 2 * MT }; // the rows of a stage a thread copies (an enum: no storage)\n"
  "  int lane, warp, g, q;\n"
  "  bq_i64 n0, m0;\n"
  "  const bq_u8 *A, *W;\n"
  "  bool avec, wvec;\n"
  "  int xr, rows, STAGE, S, ktiles;\n"
  "  bq_u32 sbase;\n"
  "  const bq_u8 *wsrc, *asrc;\n"
  "  int ok; // bit j: row warp + 8 j exists\n"
  "  int fast;\n"
  "\n"
  "  // This thread copies bytes 16 lane .. of rows warp + 8 j of each stage (weight rows for\n"
  "  // j < 2, then activation rows). Tiles wholly inside K, with 16-byte aligned operands,\n"
  "  // take one cp.async a row and no bounds arithmetic; the K tail and unaligned operands\n"
  "  // take bq_tile_chunk, in a loop kept rolled (its byte loads would cost registers).\n"
  "  __device__ __forceinline__ bq_gemv_cta(const bq_linear_params &p, unsigned char *smem) {\n"
  "    const int tid = threadIdx.x;\n"
  "    lane = tid & 31;\n"
  "    warp = tid >> 5;\n"
  "    g = lane >> 2;\n"
  "    q = lane & 3;\n"
  "    n0 = (bq_i64)blockIdx.x * 16;\n"
  "    m0 = (bq_i64)blockIdx.y * 16 * MT;\n"
  "    A = (const bq_u8 *)p.a;\n"
  "    W = (const bq_u8 *)p.w;\n"
  "    avec = p.flags & BQ_LF_A16;\n"
  "    wvec = p.flags & BQ_LF_W16;\n"
  "    xr = (int)min((bq_i64)16 * MT, p.m);\n"
  "    rows = 16 + xr;\n"
  "    STAGE = rows * BQ_GV_LD;\n"
  "    S = BQ_GV_STAGES(xr);\n"
  "    ktiles = (int)((p.k + 511) / 512);\n"
  "    sbase = bq_smem_addr(smem);\n"
  "    wsrc = W + (n0 + warp) * p.k + lane * 16;\n"
  "    asrc = A + (m0 + warp) * p.lda + lane * 16;\n"
  "    ok = 0;\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < J; j++) {\n"
  "      const int r = warp + 8 * j;\n"
  "      if (r < 16 ? n0 + r < p.n : r < rows && m0 + r - 16 < p.m) ok |= 1 << j;\n"
  "    }\n"
  "    fast = wvec && avec ? (int)(p.k / 512) : 0;\n"
  "  }\n"
  "\n"
  "  // rows j in [jlo, jhi) of a stage: j < 2 the weight's, then the activations'\n"
  "  __device__ __forceinline__ void load(const bq_linear_params &p, int stage, int kt, int jlo, int jhi) const {\n"
  "    const bq_u32 d = sbase + stage * STAGE + warp * BQ_GV_LD + lane * 16;\n"
  "    if (kt < fast) {\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < J; j++) {\n"
  "        const bool has = ok >> j & 1;\n"
  "        const bq_u8 *src = j < 2 ? wsrc + (8 * j * p.k + (bq_i64)kt * 512) : asrc + (8 * (j - 2) * p.lda + (bq_i64)kt * 512);\n"
  "        if (j >= jlo && j < jhi && warp + 8 * j < rows)\n"
  "          bq_cp_async16(d + j * 8 * BQ_GV_LD, has ? (const void *)src : (const void *)W, has ? 16 : 0);\n"
  "      }\n"
  "      return;\n"
  "    }\n"
  "    const bq_i64 k = (bq_i64)kt * 512 + lane * 16;\n"
  "#pragma unroll 1\n"
  "    for (int j = jlo; j < jhi; j++) {\n"
  "      const int r = warp + 8 * j;\n"
  "      if (r < 16) bq_tile_chunk(d + j * 8 * BQ_GV_LD, W, n0 + r < p.n, n0 + r, p.k, k, p.k, wvec);\n"
  "      else if (r < rows) bq_tile_chunk(d + j * 8 * BQ_GV_LD, A, m0 + r - 16 < p.m, m0 + r - 16, p.lda, k, p.k, avec);\n"
  "    }\n"
  "  }\n"
  "};\n"
  "\n"
  "// A lane's share of one m16 tile's products with both n8 tiles: its fragments a0, a1 of\n"
  "// the activation rows and w0, w1 of the weight rows, in m16n8k32 steps.\n"
  "static __device__ __forceinline__ void bq_gemv_mma(int (&d0)[4], int (&d1)[4], const uint4 &a0, const uint4 &a1,\n"
  "                                                   const uint4 &w0, const uint4 &w1) {\n"
  "  bq_mma(d0, a0.x, a1.x, a0.y, a1.y, w0.x, w0.y);\n"
  "  bq_mma(d0, a0.z, a1.z, a0.w, a1.w, w0.z, w0.w);\n"
  "  bq_mma(d1, a0.x, a1.x, a0.y, a1.y, w1.x, w1.y);\n"
  "  bq_mma(d1, a0.z, a1.z, a0.w, a1.w, w1.z, w1.w);\n"
  "}\n"
  "\n"
  "// The parameters of a finisher's rows m and m + 8 (zero past M)\n"
  "static __device__ __forceinline__ void bq_gemv_rows(const bq_linear_params &p, bq_i64 m, bq_row_q (&rq)[2]) {\n"
  "#pragma unroll\n"
  "  for (int h = 0; h < 2; h++) rq[h] = m + h * 8 < p.m ? bq_row_of(p, m + h * 8) : bq_row_q{(bq_c)0, 0};\n"
  "}\n"
  "\n"
  "// The warps meet in shared memory: partial sums red[w][t][i][e][lane], 8 MT KiB (at\n"
  "// least two stages of 17 rows hold it). The finishers sum them and store their outputs.\n"
  "template <int MT>\n"
  "static __device__ __forceinline__ void bq_gemv_finish(const bq_linear_params &p, const bq_gemv_cta<MT> &cta,\n"
  "                                                      unsigned char *smem, const int (&acc)[2][MT][4], int et, int ei,\n"
  "                                                      bq_i64 en, bool finisher, const bq_row_q (&rq)[2],\n"
  "                                                      const bq_col_q &c0, const bq_col_q &c1) {\n"
  "  const int warp = cta.warp, lane = cta.lane, g = cta.g;\n"
  "  const bq_i64 m0 = cta.m0;\n"
  "  int *red = (int *)smem;\n"
  "#pragma unroll\n"
  "  for (int t = 0; t < 2; t++)\n"
  "#pragma unroll\n"
  "    for (int i = 0; i < MT; i++)\n"
  "#pragma unroll\n"
  "      for (int e = 0; e < 4; e++) red[(((warp * 2 + t) * MT + i) * 4 + e) * 32 + lane] = acc[t][i][e];\n"
  "  __syncthreads();\n"
  "  if (!finisher) return;\n"
  "  int s[4];\n"
  "#pragma unroll\n"
  "  for (int e = 0; e < 4; e++) {\n"
  "    bq_u32 v = 0;\n"
  "#pragma unroll\n"
  "    for (int w = 0; w < 8; w++) v += (bq_u32)red[(((w * 2 + et) * MT + ei) * 4 + e) * 32 + lane];\n"
  "    s[e] = (int)v;\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int h = 0; h < 2; h++) {\n"
  "    const bq_i64 m = m0 + 16 * ei + g + h * 8;\n"
  "    if (m < p.m)\n"
  "      bq_store_pair(p, m, en, bq_epilogue(s[2 * h], rq[h], c0, p.flags), bq_epilogue(s[2 * h + 1], rq[h], c1, p.flags));\n"
  "  }\n"
  "}\n"
  "\n"
  "template <int MT> static __device__ __forceinline__ void bq_gemv_body(const bq_linear_params &p, unsigned char *smem) {\n"
  "  const bq_gemv_cta<MT> cta(p, smem);\n"
  "  constexpr int J = bq_gemv_cta<MT>::J;\n"
  "  const int warp = cta.warp, g = cta.g, q = cta.q, xr = cta.xr, STAGE = cta.STAGE, S = cta.S, ktiles = cta.ktiles;\n"
  "  auto load = [&](int stage, int kt, int jlo, int jhi) { cta.load(p, stage, kt, jlo, jhi); };\n"
  "\n"
  "  // The epilogue's parameters (warp t * MT + i finishes n8 tile t of m16 tile i), then the\n"
  "  // first stages. Launched while the activations' kernel runs (BQ_LF_PDL: QuantizedLinear),\n"
  "  // the first stages' weight rows come first, then the column parameters, and only after\n"
  "  // that kernel has finished (bq_wait_prior_grid) the row parameters and the activation\n"
  "  // rows; commit group 0 then holds the weight rows of every first stage, which only makes\n"
  "  // them land sooner. (Without such a kernel to overlap, that order would slow the weight\n"
  "  // streaming, so it is taken only then.)\n"
  "  const bool pdl = p.flags & BQ_LF_PDL;\n"
  "  if (pdl)\n"
  "    for (int s = 0; s < S - 1; s++)\n"
  "      if (s < ktiles) load(s, s, 0, 2);\n"
  "  const int et = warp / MT, ei = warp % MT;\n"
  "  const bq_i64 en = cta.n0 + et * 8 + q * 2;\n"
  "  const bool finisher = warp < 2 * MT && en < p.n;\n"
  "  bq_col_q c0, c1;\n"
  "  bq_row_q rq[2];\n"
  "  if (finisher) {\n"
  "    c0 = bq_col_of(p, en);\n"
  "    c1 = en + 1 < p.n ? bq_col_of(p, en + 1) : c0;\n"
  "  }\n"
  "  if (pdl) bq_wait_prior_grid();\n"
  "  if (finisher) bq_gemv_rows(p, cta.m0 + 16 * ei + g, rq);\n"
  "  for (int s = 0; s < S - 1; s++) {\n"
  "    if (s < ktiles) load(s, s, pdl ? 2 : 0, J);\n"
  "    bq_cp_commit();\n"
  "  }\n"
  "\n"
  "  int acc[2][MT][4];\n"
  "  bq_zero(acc);\n"
  "  for (int kt = 0, cur = 0, nxt = S - 1; kt < ktiles; kt++) { // cur = kt % S, nxt = (kt + S - 1) % S\n"
  "    if (S == 2) bq_cp_wait<0>();\n"
  "    else if (S == 3) bq_cp_wait<1>();\n"
  "    else bq_cp_wait<2>();\n"
  "    __syncthreads(); // tile kt has landed, and every warp is done with tile kt - 1\n"
  "    if (kt + S - 1 < ktiles) load(nxt, kt + S - 1, 0, J);\n"
  "    bq_cp_commit();\n"
  "    const unsigned char *st = smem + cur * STAGE + warp * 64 + q * 16;\n"
  "    cur = cur + 1 == S ? 0 : cur + 1;\n"
  "    nxt = nxt + 1 == S ? 0 : nxt + 1;\n"
  "    const uint4 w0 = *(const uint4 *)(st + g * BQ_GV_LD), w1 = *(const uint4 *)(st + (8 + g) * BQ_GV_LD);\n"
  "    const uint4 z = make_uint4(0, 0, 0, 0);\n"
  "#pragma unroll\n"
  "    for (int t = 0; t < MT; t++) { // activation rows past xr are not in shared memory: zeros\n"
  "      const int r0 = 16 * t + g, r1 = 16 * t + 8 + g;\n"
  "      const uint4 a0 = r0 < xr ? *(const uint4 *)(st + (16 + r0) * BQ_GV_LD) : z;\n"
  "      const uint4 a1 = r1 < xr ? *(const uint4 *)(st + (16 + r1) * BQ_GV_LD) : z;\n"
  "      bq_gemv_mma(acc[0][t], acc[1][t], a0, a1, w0, w1);\n"
  "    }\n"
  "  }\n"
  "  bq_cp_wait<0>(); // (only empty groups are left)\n"
  "  __syncthreads(); // every warp is done with the stages: they take the partial sums\n"
  "\n"
  "  bq_gemv_finish(p, cta, smem, acc, et, ei, en, finisher, rq, c0, c1);\n"
  "}\n"
  "\n"
  "// M <= 16, 32, 64: one, two or four m16 tiles; BQ_GV_SMEM(min(16 MT, M)) bytes of dynamic\n"
  "// shared memory\n"
  "#if BQ_E_GEMV\n"
  "extern \"C\" __global__ void BQ_LB_GEMV BQ_FN_GEMV(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  bq_gemv_body<1>(p, smem);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_GEMV32\n"
  "extern \"C\" __global__ void BQ_LB_GEMV32 BQ_FN_GEMV32(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  bq_gemv_body<2>(p, smem);\n"
  "}\n"
  "#endif\n"
  "#if BQ_E_GEMV64\n"
  "extern \"C\" __global__ void BQ_LB_GEMV64 BQ_FN_GEMV64(const bq_linear_params p) {\n"
  "  BQ_DYNAMIC_SMEM(smem);\n"
  "  bq_gemv_body<4>(p, smem);\n"
  "}\n"
  "#endif\n"
  "#endif\n"
  "\n"
  "#else\n"
  "// ---- weight row sums: wsum[n] = sum_k w[n, k], for asymmetric activations --------------------\n"
  "// A warp per row; 16-byte loads summed with dp4a against ones.\n"
  "#if BQ_E_WEIGHT_SUMS\n"
  "extern \"C\" __global__ void BQ_LB_WEIGHT_SUMS BQ_FN_WEIGHT_SUMS(const bq_linear_params p) {\n"
  "  const int lane = threadIdx.x & 31;\n"
  "  const bq_i64 n = (bq_i64)blockIdx.x * 8 + (threadIdx.x >> 5);\n"
  "  if (n >= p.n) return;\n"
  "  const bool wvec = p.flags & BQ_LF_W16;\n"
  "  int s = 0;\n"
  "  for (bq_i64 k = (bq_i64)lane * 16; k < p.k; k += 32 * 16) {\n"
  "    uint4 v = bq_load16((const bq_u8 *)p.w, true, n, p.k, k, p.k, wvec);\n"
  "    s = __dp4a((int)v.x, 0x01010101, s);\n"
  "    s = __dp4a((int)v.y, 0x01010101, s);\n"
  "    s = __dp4a((int)v.z, 0x01010101, s);\n"
  "    s = __dp4a((int)v.w, 0x01010101, s);\n"
  "  }\n"
  "#pragma unroll\n"
  "  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);\n"
  "  if (lane == 0) ((int *)p.w_sums)[n] = s;\n"
  "}\n"
  "#endif\n"
  "#endif\n"
;
static const char bq__src_mx_cu[] =
  "// mx.cu - the microscaling formats: groups of G elements along a row, each group with a\n"
  "// one-byte scale: UE8M0 (MXFP8: E4M3 or E5M2 elements; MXFP4: E2M1 elements), or E4M3\n"
  "// times an f32 tensor scale g (NVFP4: E2M1 elements). Quantize, dequantize and fake\n"
  "// quantize (static scales; forward and backward) and dynamic quantize (scales from the\n"
  "// data). docs/numerics.md, \"Microscaling\".\n"
  "// Prelude defines (besides common.cuh's, where BQ_IT may be BQ_TYPE_E2M1 and BQ_ST\n"
  "// BQ_TYPE_UE8M0 or BQ_TYPE_E4M3): BQ_OP and BQ_DIR (quantize, dequantize and fake quantize\n"
  "// in either direction, dynamic quantize forward); BQ_MX_LAYOUT 0 row-major, 1 MN-major, 2\n"
  "// blocked (the 128 x 4 tiles of block-scaled GEMMs); BQ_MX_RULE, dynamic quantize's scale\n"
  "// rule (bq_scale_rule's values: UE8M0 1-5, NVFP4 6-7).\n"
  "//\n"
  "// bq_mx_lanes, where a group is 2^k 16-byte accesses of floats (k <= 5) and every row starts\n"
  "// on the 16-byte grid: a thread takes one access's elements, the lanes of a group reduce its\n"
  "// amax by shuffles. Otherwise a thread takes a group, consecutive threads consecutive groups\n"
  "// of a row, so a warp's loads cover a contiguous span. bq_mx16 and bq_mx32 hold their group\n"
  "// in registers (16-byte accesses where every group starts aligned, else element by element);\n"
  "// bq_mx_any takes any G, reading a dynamic group twice (the second read from L1). E2M1 codes\n"
  "// go two a byte, the lower index in the low nibble. In the blocked layout dynamic quantize\n"
  "// writes the padding's scale bytes 0 (the group walks take the padded tiles as items;\n"
  "// bq_mx_lanes, as its walk says).\n"
  "\n"
  "/* kernels_src/mx_abi.h - the microscaling formats' host/kernel interface, valid as C and as\n"
  "   CUDA C++: its entry points and its parameter block. mx.cu and the host (src/family_mx.h)\n"
  "   both include it. */\n"
  "#ifndef BQ_MX_ABI_H\n"
  "#define BQ_MX_ABI_H\n"
  "\n"
  "/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name.\n"
  "   bq_mx_lanes: a thread takes 16 bytes of floats and a group the 2^k lanes its floats span;\n"
  "   the others: a thread takes a group, of 16 or 32 elements held in registers (the formats'\n"
  "   sizes), or of any other size read twice (dynamic) from L1. */\n"
  "enum {\n"
  "  BQ__MX_G16,    /* bq_mx16: groups of 16 */\n"
  "  BQ__MX_G32,    /* bq_mx32: groups of 32 */\n"
  "  BQ__MX_ANY,    /* bq_mx_any: any group size */\n"
  "  BQ__MX_AMAX,   /* bq_mx_amax: NVFP4 dynamic quantize's first passes, the tensor's amax */\n"
  "  BQ__MX_LANES   /* bq_mx_lanes: groups of 2^k 16-byte accesses (k <= 5), all on the 16-byte grid */\n"
  "};\n"
  "#define BQ_FN_MX16 bq_mx16\n"
  "#define BQ_FN_MX32 bq_mx32\n"
  "#define BQ_FN_MX_ANY bq_mx_any\n"
  "#define BQ_FN_MX_AMAX bq_mx_amax\n"
  "#define BQ_FN_MX_LANES bq_mx_lanes\n"
  "\n"
  "typedef struct bq_mx_params {\n"
  "  bq_u64 x, y, scales;      /* y: E2M1 codes two a byte, else a byte an element */\n"
  "  bq_u64 dy, dx;            /* backward: dy (y's strides) read, dx (x's strides) written */\n"
  "  bq_u64 tensor_scale;      /* NVFP4: the f32 tensor scale g read (0: none) */\n"
  "  bq_u64 out_tensor_scale;  /* NVFP4 dynamic: where g is written */\n"
  "  bq_u64 amax;              /* NVFP4 dynamic: the workspace, a partial amax (f32) a block */\n"
  "  bq_u64 enc;               /* NVFP4_TE with the tensor scale computed: its encode factor (f32,\n"
  "                               in the workspace after the partials); 0: 1 / g */\n"
  "  bq_i64 rows, cols, xs, ys; /* element strides between rows of x and y */\n"
  "  bq_i64 group, ngroups, grs; /* G, groups a row, the scales' leading dimension (rows, MN) */\n"
  "  bq_i64 items;             /* groups walked: rows x groups, or the blocked layout's padded\n"
  "                               tiles (whose padding entries dynamic quantize writes 0) */\n"
  "  bq_i64 pgroups;           /* blocked: groups a padded row (ngroups rounded up to 4) */\n"
  "  double bound;             /* args.amax_bound (0: none) */\n"
  "  int finish, nparts;       /* bq_mx_amax: 0 the partials' pass, 1 the pass that reduces nparts\n"
  "                               partials and writes g */\n"
  "  /* bq_mx_lanes: items are a lane's 2^lacc pieces (16 bytes of floats each), ppr pieces a\n"
  "     row; a group takes 2^lshift pieces. fast: rows x ppr < 2^31, rows by fd (ppr's\n"
  "     divider). prows: dynamic quantize into the blocked layout, the padded rows (whose scales\n"
  "     it writes 0). avec: bq_mx_amax reads x by pieces too (x's rows on the 16-byte grid).\n"
  "     lacc 1 (quantize forward without the rotation): two pieces a lane */\n"
  "  bq_i64 ppr, prows;\n"
  "  bq_fastdiv fd;\n"
  "  int lshift, fast, avec, lacc;\n"
  "  /* stochastic rounding (BQ_SR): the draws' key and the index of element (0, 0); the same\n"
  "     key draws the fused rotation's signs */\n"
  "  bq_u32 seed_lo, seed_hi;\n"
  "  bq_u64 offset;\n"
  "  /* the fused rotation (BQ_MX_ROT, bq_mx_lanes): blocks of 2^rlog2; rsigns: the random signs */\n"
  "  int rlog2, rsigns;\n"
  "} bq_mx_params;\n"
  "#endif\n"
  "// (the formats' conversions, scale rules and layouts are common.cuh's, which fused.cu shares)\n"
  "\n"
  "// ---- the walk --------------------------------------------------------------------------------\n"
  "// Item's row and group (items walk rows of pgroups groups: the groups a row has, or in dynamic\n"
  "// quantize's blocked layout its padded tiles' rows and groups too) and its scale's index;\n"
  "// false in the padding\n"
  "static __device__ __forceinline__ bool bq_mx_at(const bq_mx_params &p, bq_i64 item, bq_i64 &r, bq_i64 &g, bq_i64 &si) {\n"
  "  r = item / p.pgroups;\n"
  "  g = item - r * p.pgroups;\n"
  "  si = bq_mx_sidx(r, g, p.ngroups, p.grs);\n"
  "  return r < p.rows && g < p.ngroups;\n"
  "}\n"
  "\n"
  "static __device__ __forceinline__ void bq_mx_put_scale(const bq_mx_params &p, bq_i64 si, int code) {\n"
  "  ((bq_u8 *)p.scales)[si] = (bq_u8)code;\n"
  "}\n"
  "static __device__ __forceinline__ float bq_mx_g(const bq_mx_params &p) {\n"
  "#if BQ_MX_NV\n"
  "  return *(const float *)p.tensor_scale;\n"
  "#else\n"
  "  (void)p;\n"
  "  return 1.0f;\n"
  "#endif\n"
  "}\n"
  "// Transformer Engine's encode factor: the amax pass's, or 1 / g of a given tensor scale\n"
  "static __device__ __forceinline__ float bq_mx_enc(const bq_mx_params &p, float g) {\n"
  "#if BQ_MX_NV && BQ_MX_RULE == 7\n"
  "  return p.enc ? *(const float *)p.enc : __fdiv_rn(1.0f, g);\n"
  "#else\n"
  "  (void)p, (void)g;\n"
  "  return 1.0f;\n"
  "#endif\n"
  "}\n"
  "\n"
  "#if BQ_SR\n"
  "// The draws of a run-time group's elements, taken in order: a generator call per set of 8\n"
  "struct bq_mx_draws {\n"
  "  bq_u64 i0, b;\n"
  "  bq_u32 k0, k1, c[4];\n"
  "  __device__ __forceinline__ bq_mx_draws(const bq_mx_params &p, bq_i64 ei)\n"
  "      : i0(p.offset + (bq_u64)ei), b(~0ull), k0(p.seed_lo), k1(p.seed_hi) {}\n"
  "  __device__ __forceinline__ bq_u32 at(bq_i64 j) {\n"
  "    const bq_u64 i = i0 + (bq_u64)j;\n"
  "    if (i >> 3 != b) b = i >> 3, bq_sr_block(b, k0, k1, c);\n"
  "    return bq_sr_pick(c, i);\n"
  "  }\n"
  "};\n"
  "#endif\n"
  "\n"
  "// The fused rotation (bq_mx_lanes with p.rlog2 > 0): a lane's elements and the lanes of its\n"
  "// block (n / E of them, aligned in the warp: every row holds whole blocks and the walk's items\n"
  "// are whole warps), its signs and the factor, fixed for the thread (its elements' place in\n"
  "// their block, (item E) % n, does not change along the walk)\n"
  "struct bq_mx_rot {\n"
  "  int lane, log2n;\n"
  "  bq_u32 neg, mask;\n"
  "  bq_c cn;\n"
  "};\n"
  "template <int E> static __device__ __forceinline__ bq_mx_rot bq_mx_rot_of(const bq_mx_params &p, bq_i64 t0) {\n"
  "  bq_mx_rot r;\n"
  "  const int n = 1 << p.rlog2, L = n > E ? n / E : 1;\n"
  "  r.lane = (int)(threadIdx.x & 31);\n"
  "  r.log2n = p.rlog2;\n"
  "  r.mask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (r.lane & -L);\n"
  "  r.cn = bq_rot_c(p.rlog2);\n"
  "  // (one Philox call: E divides 128)\n"
  "  r.neg = p.rsigns ? bq_rot_signs<E>((int)((t0 * E) % n), n, p.seed_lo, p.seed_hi) : 0u;\n"
  "  return r;\n"
  "}\n"
  "// x's elements rotated (forward) and rounded to T, or dequantize's outputs rotated back\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_mx_rotate(bq_chunk<bq_t, N> &v, const bq_mx_rot &r, bool backward) {\n"
  "  bq_c c[N];\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < N; k++) c[k] = bq_to_c(v.e[k]);\n"
  "  bq_rot_apply<N>(c, r.lane, r.log2n, r.neg, r.cn, backward, r.mask);\n"
  "#pragma unroll\n"
  "  for (int k = 0; k < N; k++) v.e[k] = bq_from_c(c[k]);\n"
  "}\n"
  "\n"
  "#if !(BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD)\n"
  "// A group's scale: dynamic quantize's from its amax (capped at the bound), stored at si;\n"
  "// else the one stored there\n"
  "// (put: this thread stores it, the first of the lanes a group spans)\n"
  "static __device__ __forceinline__ int bq_mx_group_code(const bq_mx_params &p, bq_c amax, bq_i64 si, float g, bool put) {\n"
  "#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE\n"
  "  if (p.bound > 0 && !(amax <= (bq_c)p.bound)) amax = (bq_c)p.bound;\n"
  "  const int code = bq_mx_rule(amax, g, bq_mx_enc(p, g));\n"
  "  if (put) bq_mx_put_scale(p, si, code);\n"
  "  return code;\n"
  "#else\n"
  "  (void)amax, (void)put, (void)g;\n"
  "  return ((const bq_u8 *)p.scales)[si];\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_mx_scale bq_mx_group_scale(const bq_mx_params &p, bq_c amax, bq_i64 si, float g,\n"
  "                                                                bool put) {\n"
  "  return bq_mx_scale_of(bq_mx_group_code(p, amax, si, g, put), g);\n"
  "}\n"
  "\n"
  "#if BQ_OP == BQ_OP_DEQUANTIZE && BQ_IT == BQ_TYPE_E2M1 && BQ_FT != BQ_TYPE_F64\n"
  "// The f32 values of four E2M1 codes (c: element j in bits 4j to 4j + 3), exact: the\n"
  "// magnitudes' bf16 bits (0, 0.5, 1, 1.5, 2, 3, 4, 6: 0000 3f00 3f80 3fc0 4000 4040 4080\n"
  "// 40c0) from a table of their high bytes and one of their low bytes, four lookups a prmt (a\n"
  "// selector nibble picks one of 8 bytes), paired up by a third, then each code's sign bit\n"
  "static __device__ __forceinline__ void bq_e2m1_f32x4(bq_u32 c, float (&v)[4]) {\n"
  "  const bq_u32 m = c & 0x7777u;\n"
  "  const bq_u32 hi = bq_prmt(0x3f3f3f00u, 0x40404040u, m), lo = bq_prmt(0xc0800000u, 0xc0804000u, m);\n"
  "#pragma unroll\n"
  "  for (int j = 0; j < 4; j += 2) { // b: [lo j, hi j, lo j + 1, hi j + 1], bf16 bits of j and j + 1\n"
  "    const bq_u32 b = bq_prmt(lo, hi, (bq_u32)(j | (j + 4) << 4 | (j + 1) << 8 | (j + 5) << 12));\n"
  "    v[j] = __uint_as_float(b << 16 | (c << (28 - 4 * j) & 0x80000000u));\n"
  "    v[j + 1] = __uint_as_float((b & 0xffff0000u) | (c << (24 - 4 * j) & 0x80000000u));\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "// (E2M1 two elements a step from bf16 and f16, bq_e2m1_pairs and bq_nv_pairs: common.cuh,\n"
  "// which the fused producers share)\n"
  "\n"
  "// One group of N elements (N = G, or 0: p.group at run time) at x + x0, y + y0 (elements),\n"
  "// scale index si, the first element's row-major index ei (stochastic rounding's draws).\n"
  "// Fixed N: the group in registers, moved in accesses as wide as its alignment allows. Or N\n"
  "// elements of a group that 2^lsh lanes of a warp take together (bq_mx_lanes): dynamic\n"
  "// quantize's amax is then the lanes' (max is exact in any order), and the first of them\n"
  "// stores the scale; with the fused rotation (rot: bq_mx_lanes' walk), x's elements are\n"
  "// rotated and rounded to T before anything else, and dequantize's outputs rotated back.\n"
  "template <int N, bool ROT = false>\n"
  "static __device__ __forceinline__ void bq_mx_one(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, bq_i64 ei,\n"
  "                                                 float g, int lsh = 0, bool al = false, const bq_mx_rot *rot = 0) {\n"
  "  (void)ei, (void)rot;\n"
  "#if BQ_OP == BQ_OP_DEQUANTIZE\n"
  "  const bq_mx_scale s = bq_mx_scale_of(((const bq_u8 *)p.scales)[si], g);\n"
  "  const bq_u8 *q = (const bq_u8 *)p.x + BQ_MX_YB(x0); // codes in, floats out\n"
  "  bq_t *out = (bq_t *)p.y + y0;\n"
  "  if (N) {\n"
  "    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;\n"
  "    bq_load(c, q, al ? 16 : bq_width(q));\n"
  "    bq_chunk<bq_t, (N > 0 ? N : 1)> o;\n"
  "#if BQ_IT == BQ_TYPE_E2M1 && BQ_FT != BQ_TYPE_F64\n"
  "    if (N % 4 == 0) { // (the same values as bq_mx_elem_to_c's, four codes a step)\n"
  "#pragma unroll\n"
  "      for (int u = 0; u < N / 4; u++) {\n"
  "        float v[4];\n"
  "        bq_e2m1_f32x4((bq_u32)c.e[2 * u] | (bq_u32)c.e[2 * u + 1] << 8, v);\n"
  "#pragma unroll\n"
  "        for (int k = 0; k < 4; k++) o.e[4 * u + k] = bq_from_c(bq_mul(v[k], s.sc));\n"
  "      }\n"
  "    } else\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < N; j++) {\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "      const int code = (c.e[j >> 1] >> ((j & 1) * 4)) & 15;\n"
  "#else\n"
  "      const int code = c.e[j];\n"
  "#endif\n"
  "      o.e[j] = bq_from_c(bq_mul(bq_mx_elem_to_c(code), s.sc));\n"
  "    }\n"
  "    if (ROT) bq_mx_rotate<(N > 0 ? N : 1)>(o, *rot, true);\n"
  "    bq_store(out, o, al ? 16 : bq_width(out));\n"
  "  } else {\n"
  "    for (bq_i64 j = 0; j < p.group; j++) {\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "      const int code = (q[j >> 1] >> ((j & 1) * 4)) & 15;\n"
  "#else\n"
  "      const int code = q[j];\n"
  "#endif\n"
  "      out[j] = bq_from_c(bq_mul(bq_mx_elem_to_c(code), s.sc));\n"
  "    }\n"
  "  }\n"
  "#else // quantize, dynamic quantize: x -> codes\n"
  "  const bq_t *x = (const bq_t *)p.x + x0;\n"
  "  bq_u8 *y = (bq_u8 *)p.y + BQ_MX_YB(y0);\n"
  "  if (N) {\n"
  "    bq_chunk<bq_t, (N > 0 ? N : 1)> v;\n"
  "    bq_load(v, x, al ? 16 : bq_width(x));\n"
  "    if (ROT) bq_mx_rotate<(N > 0 ? N : 1)>(v, *rot, false);\n"
  "    bq_c amax = 0;\n"
  "    const int lane = (int)(threadIdx.x & 31);\n"
  "    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE) {\n"
  "#if BQ_MX_NV_PAIRS\n"
  "      // max |x| on the packed pairs (bq_hmax2_xabs, from +0: NaN operands dropped), the two\n"
  "      // halves widened at the end: exact, as the halves' maximum is one of the elements\n"
  "      bq_u32 m = 0;\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < N / 2; j++) m = bq_hmax2_xabs(m, ((const bq_u32 *)v.e)[j]);\n"
  "      m &= 0x7fff7fffu;\n"
  "      amax = bq_max(bq_to_c((bq_t)(m & 0xffffu)), bq_to_c((bq_t)(m >> 16)));\n"
  "#else\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < N; j++) amax = bq_max(amax, bq_abs(bq_to_c(v.e[j]))); // (fmax drops NaN)\n"
  "#endif\n"
  "      const int n = 1 << lsh;\n"
  "      const bq_u32 mask = n == 32 ? 0xffffffffu : ((1u << n) - 1u) << (lane & -n);\n"
  "      for (int off = 1; off < n; off <<= 1) amax = bq_max(amax, __shfl_xor_sync(mask, amax, off));\n"
  "    }\n"
  "    const int code = bq_mx_group_code(p, amax, si, g, (lane & ((1 << lsh) - 1)) == 0);\n"
  "    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;\n"
  "#if BQ_MX_NV_PAIRS\n"
  "    { // (the short form's range tested on the scale alone: no reciprocal for these groups)\n"
  "      const float sc = __fmul_rn(g, bq_e4m3_f32(code));\n"
  "      if (N % 8 == 0 && sc > 0.0f && bq_scale_is_plain(sc)) {\n"
  "        bq_nv_pairs<(N > 0 ? N : 8)>(v, sc, c);\n"
  "        bq_store(y, c, al ? 16 : bq_width(y));\n"
  "        return;\n"
  "      }\n"
  "    }\n"
  "#endif\n"
  "    const bq_mx_scale s = bq_mx_scale_of(code, g);\n"
  "#if BQ_SR\n"
  "    bq_u32 u[N > 0 ? N : 1];\n"
  "    bq_sr_draws(p.offset + (bq_u64)ei, p.seed_lo, p.seed_hi, u);\n"
  "#endif\n"
  "#if BQ_MX_HALF_PAIRS\n"
  "    if (N % 8 == 0 && !(s.rcp < BQ_H2_MIN) && !(s.rcp > BQ_H2_MAX)) { // (rcp a normal half, or NaN)\n"
  "      bq_e2m1_pairs<(N > 0 ? N : 8)>(v, s.rcp, c);\n"
  "      bq_store(y, c, al ? 16 : bq_width(y));\n"
  "      return;\n"
  "    }\n"
  "#endif\n"
  "#if BQ_MX_NV_FAST && !BQ_SR\n"
  "    // (NVFP4: the quotient's form chosen once for the N elements)\n"
  "    constexpr int NN = N > 0 ? N : 1;\n"
  "    int qv[NN];\n"
  "    bq_c cv[NN];\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < NN; j++) cv[j] = bq_to_c(v.e[j]);\n"
  "    bq_mx_quantize_n<NN>(cv, s, qv);\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < N; j++) {\n"
  "#if BQ_MX_NV_FAST && !BQ_SR\n"
  "      const int q = qv[j];\n"
  "#elif BQ_SR\n"
  "      const int q = bq_mx_quantize_sr(bq_to_c(v.e[j]), s, u[j]);\n"
  "#else\n"
  "      const int q = bq_mx_quantize(bq_to_c(v.e[j]), s);\n"
  "#endif\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "      if (j & 1) c.e[j >> 1] = (bq_u8)(c.e[j >> 1] | (q << 4));\n"
  "      else c.e[j >> 1] = (bq_u8)q;\n"
  "#else\n"
  "      c.e[j] = (bq_u8)q;\n"
  "#endif\n"
  "    }\n"
  "    bq_store(y, c, al ? 16 : bq_width(y));\n"
  "  } else {\n"
  "    bq_c amax = 0;\n"
  "    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE)\n"
  "      for (bq_i64 j = 0; j < p.group; j++) amax = bq_max(amax, bq_abs(bq_to_c(x[j])));\n"
  "    const bq_mx_scale s = bq_mx_group_scale(p, amax, si, g, true);\n"
  "#if BQ_SR\n"
  "    bq_mx_draws w(p, ei);\n"
  "#define BQ_MX_Q(j) bq_mx_quantize_sr(bq_to_c(x[j]), s, w.at(j))\n"
  "#else\n"
  "#define BQ_MX_Q(j) bq_mx_quantize(bq_to_c(x[j]), s)\n"
  "#endif\n"
  "#if BQ_IT == BQ_TYPE_E2M1\n"
  "    for (bq_i64 j = 0; j < p.group; j += 2) y[j >> 1] = (bq_u8)(BQ_MX_Q(j) | (BQ_MX_Q(j + 1) << 4));\n"
  "#else\n"
  "    for (bq_i64 j = 0; j < p.group; j++) y[j] = (bq_u8)BQ_MX_Q(j);\n"
  "#endif\n"
  "#undef BQ_MX_Q\n"
  "  }\n"
  "#endif\n"
  "}\n"
  "\n"
  "#endif\n"
  "\n"
  "#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD\n"
  "// Fake quantize forward (y = T(value(q) sc)) and the backward passes, elements of T in and\n"
  "// out: quantize dx = m ? T(dy / sc) : +0, dequantize dx = T(dy sc), fake quantize\n"
  "// dx = m ? dy : +0, with m = (|x / sc| <= max) read on the quotient (NaN: 0).\n"
  "static __device__ __forceinline__ bq_c bq_mx_quotient(bq_c x, const bq_mx_scale &s) {\n"
  "#if BQ_MX_NV\n"
  "  return bq_div(x, s.sc);\n"
  "#else\n"
  "  return bq_mul(x, s.rcp);\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ bq_t bq_mx_elem_out(bq_t x, bq_t dy, const bq_mx_scale &s, bq_u32 u) {\n"
  "  (void)u;\n"
  "#if BQ_DIR == BQ_DIR_FORWARD // fake quantize\n"
  "  (void)dy;\n"
  "#if BQ_SR\n"
  "  return bq_from_c(bq_mul(bq_mx_elem_to_c(bq_mx_quantize_sr(bq_to_c(x), s, u)), s.sc));\n"
  "#else\n"
  "  return bq_from_c(bq_mul(bq_mx_elem_to_c(bq_mx_quantize(bq_to_c(x), s)), s.sc));\n"
  "#endif\n"
  "#elif BQ_OP == BQ_OP_DEQUANTIZE\n"
  "  (void)x;\n"
  "  return bq_from_c(bq_mul(bq_to_c(dy), s.sc));\n"
  "#else\n"
  "  const bool m = bq_abs(bq_mx_quotient(bq_to_c(x), s)) <= (bq_c)BQ_MX_MAX;\n"
  "#if BQ_OP == BQ_OP_QUANTIZE\n"
  "  return m ? bq_from_c(bq_mx_quotient(bq_to_c(dy), s)) : bq_from_c((bq_c)0);\n"
  "#else\n"
  "  return m ? dy : bq_from_c((bq_c)0);\n"
  "#endif\n"
  "#endif\n"
  "}\n"
  "// One group: x at x0 (and dx there), y / dy at y0, elements of T, the first element's\n"
  "// row-major index ei; fixed N in registers\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_mx_one_t(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, bq_i64 ei,\n"
  "                                                   float g, bool al = false) {\n"
  "  (void)ei;\n"
  "  const bq_mx_scale s = bq_mx_scale_of(((const bq_u8 *)p.scales)[si], g);\n"
  "#if BQ_DIR == BQ_DIR_FORWARD\n"
  "  const bq_t *in = (const bq_t *)p.x + x0, *din = in; // (din unused)\n"
  "  bq_t *out = (bq_t *)p.y + y0;\n"
  "#else\n"
  "  const bq_t *in = (const bq_t *)p.x + x0, *din = (const bq_t *)p.dy + y0;\n"
  "  bq_t *out = (bq_t *)p.dx + x0;\n"
  "#endif\n"
  "  const bool need_x = BQ_DIR == BQ_DIR_FORWARD || BQ_OP != BQ_OP_DEQUANTIZE;\n"
  "  const bool need_dy = BQ_DIR == BQ_DIR_BACKWARD;\n"
  "  if (N) {\n"
  "    bq_chunk<bq_t, (N > 0 ? N : 1)> a, b, o;\n"
  "    if (need_x) bq_load(a, in, al ? 16 : bq_width(in));\n"
  "    if (need_dy) bq_load(b, din, al ? 16 : bq_width(din));\n"
  "    bq_u32 u[N > 0 ? N : 1] = {0};\n"
  "#if BQ_SR\n"
  "    bq_sr_draws(p.offset + (bq_u64)ei, p.seed_lo, p.seed_hi, u);\n"
  "#endif\n"
  "#pragma unroll\n"
  "    for (int j = 0; j < N; j++) o.e[j] = bq_mx_elem_out(need_x ? a.e[j] : b.e[j], need_dy ? b.e[j] : a.e[j], s, u[j]);\n"
  "    bq_store(out, o, al ? 16 : bq_width(out));\n"
  "  } else {\n"
  "#if BQ_SR\n"
  "    bq_mx_draws w(p, ei);\n"
  "#define BQ_MX_U(j) w.at(j)\n"
  "#else\n"
  "#define BQ_MX_U(j) 0u\n"
  "#endif\n"
  "    for (bq_i64 j = 0; j < p.group; j++)\n"
  "      out[j] = bq_mx_elem_out(need_x ? in[j] : din[j], need_dy ? din[j] : in[j], s, BQ_MX_U(j));\n"
  "#undef BQ_MX_U\n"
  "  }\n"
  "}\n"
  "#endif\n"
  "\n"
  "template <int N>\n"
  "static __device__ __forceinline__ void bq_mx_walk(const bq_mx_params &p) {\n"
  "  const float g = bq_mx_g(p);\n"
  "  const bq_i64 n = N ? N : p.group;\n"
  "  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;\n"
  "  for (bq_i64 item = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; item < p.items; item += step) {\n"
  "    bq_i64 r, gi, si;\n"
  "    if (!bq_mx_at(p, item, r, gi, si)) { // the blocked layout's padding (dynamic quantize walks it)\n"
  "      bq_mx_put_scale(p, si, 0);\n"
  "      continue;\n"
  "    }\n"
  "#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD\n"
  "    bq_mx_one_t<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, r * p.cols + gi * n, g);\n"
  "#else\n"
  "    bq_mx_one<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, r * p.cols + gi * n, g);\n"
  "#endif\n"
  "  }\n"
  "}\n"
  "\n"
  "// bq_mx_lanes: item i is the i-th piece of BQ_MX_E elements (16 bytes of floats) in row\n"
  "// order, or with p.lacc the i-th pair of them, so a warp's accesses cover a contiguous span\n"
  "// of each stream; a group's 2^lshift pieces sit in consecutive lanes of one warp (the grid\n"
  "// and the block are whole warps and every row holds whole groups). In dynamic quantize's\n"
  "// blocked layout the thread that puts a row's last scale writes that row's padding groups 0,\n"
  "// and the grid the padded rows'.\n"
  "#define BQ_MX_E (16 / (int)sizeof(bq_t))\n"
  "// Piece i's row (pieces of BQ_MX_E elements, p.ppr a row): bq_mx_lanes' walk and bq_mx_amax's\n"
  "static __device__ __forceinline__ bq_i64 bq_mx_piece_row(const bq_mx_params &p, bq_i64 i) {\n"
  "  return p.fast ? (bq_i64)bq_div_u31((bq_u32)i, p.fd) : bq_div64(i, p.ppr);\n"
  "}\n"
  "#if BQ_E_MX_LANES\n"
  "// (quantize forward without the rotation may give a lane two pieces: A = 2)\n"
  "#define BQ_MX_TWO_PIECES (BQ_OP == BQ_OP_QUANTIZE && BQ_DIR != BQ_DIR_BACKWARD && !BQ_MX_ROT)\n"
  "template <int A> static __device__ __forceinline__ void bq_mx_lanes_loop(const bq_mx_params &p) {\n"
  "  const float g = bq_mx_g(p);\n"
  "  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x, t0 = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
  "#if BQ_MX_ROT && !(BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD)\n"
  "  const bq_mx_rot rot = bq_mx_rot_of<BQ_MX_E>(p, t0);\n"
  "#endif\n"
  "  for (bq_i64 i = t0; i < p.items; i += step) {\n"
  "    const bq_i64 r = bq_mx_piece_row(p, i * A); // (a lane's pieces lie in one group)\n"
  "    const bq_i64 c = i * A - r * p.ppr, gi = c >> p.lshift, e0 = c * BQ_MX_E;\n"
  "    const bq_i64 si = bq_mx_sidx(r, gi, p.ngroups, p.grs);\n"
  "#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD\n"
  "    bq_mx_one_t<BQ_MX_E>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, true);\n"
  "#else\n"
  "#if BQ_MX_ROT\n"
  "    bq_mx_one<BQ_MX_E, true>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, p.lshift, true, &rot);\n"
  "#else\n"
  "    bq_mx_one<A * BQ_MX_E>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, p.lshift - (A == 2), true);\n"
  "#endif\n"
  "#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE && BQ_MX_LAYOUT == 2\n"
  "    if (c == p.ppr - (1 << p.lshift)) // the row's last group's first lane\n"
  "      for (bq_i64 k = p.ngroups; k < p.pgroups; k++) bq_mx_put_scale(p, bq_mx_sidx(r, k, p.ngroups, p.grs), 0);\n"
  "#endif\n"
  "#endif\n"
  "  }\n"
  "#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE && BQ_MX_LAYOUT == 2\n"
  "  for (bq_i64 t = t0; t < (p.prows - p.rows) * p.pgroups; t += step) {\n"
  "    const bq_i64 r = p.rows + t / p.pgroups;\n"
  "    bq_mx_put_scale(p, bq_mx_sidx(r, t - (r - p.rows) * p.pgroups, p.ngroups, p.grs), 0);\n"
  "  }\n"
  "#endif\n"
  "}\n"
  "static __device__ __forceinline__ void bq_mx_lanes_walk(const bq_mx_params &p) {\n"
  "#if BQ_MX_TWO_PIECES\n"
  "  if (p.lacc) {\n"
  "    bq_mx_lanes_loop<2>(p);\n"
  "    return;\n"
  "  }\n"
  "#endif\n"
  "  bq_mx_lanes_loop<1>(p);\n"
  "}\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_MX_LANES(const bq_mx_params p) { bq_mx_lanes_walk(p); }\n"
  "#endif\n"
  "\n"
  "#if BQ_E_MX16\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_MX16(const bq_mx_params p) { bq_mx_walk<16>(p); }\n"
  "#endif\n"
  "#if BQ_E_MX32\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_MX32(const bq_mx_params p) { bq_mx_walk<32>(p); }\n"
  "#endif\n"
  "#if BQ_E_MX_ANY\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_MX_ANY(const bq_mx_params p) { bq_mx_walk<0>(p); }\n"
  "#endif\n"
  "\n"
  "#if BQ_E_MX_AMAX\n"
  "// NVFP4 dynamic quantize's tensor scale, in two launches of a grid-stride max (NaN elements\n"
  "// skipped: fmaxf drops them): blocks write their partial amax to the workspace, then one\n"
  "// block reduces the partials and writes g = amax / (448 * 6) to out_tensor_scale (1 where\n"
  "// amax is 0 or infinite).\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_MX_AMAX(const bq_mx_params p) {\n"
  "  __shared__ float part[8];\n"
  "  float *ws = (float *)p.amax;\n"
  "  float a = 0.0f;\n"
  "  if (p.finish) {\n"
  "    for (int i = (int)threadIdx.x; i < p.nparts; i += (int)blockDim.x) a = fmaxf(a, ws[i]);\n"
  "  } else if (p.avec) { // rows of whole 16-byte accesses on the grid: an access a thread\n"
  "    const bq_i64 step = (bq_i64)gridDim.x * blockDim.x, n = p.rows * p.ppr;\n"
  "#if BQ_MX_ROT\n"
  "    // the amax of the rotated values, which bq_mx_lanes then quantizes (the same walk); the\n"
  "    // loop is warp-uniform, lanes past the end rotating zeros (their blocks' lanes are all\n"
  "    // past it), so that every lane of a warp takes the same shuffles\n"
  "    const bq_mx_rot rot = bq_mx_rot_of<BQ_MX_E>(p, (bq_i64)blockIdx.x * blockDim.x + threadIdx.x);\n"
  "    const bq_i64 lane = threadIdx.x & 31;\n"
  "    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i - lane < n; i += step) {\n"
  "      bq_chunk<bq_t, BQ_MX_E> v;\n"
  "      if (i < n) {\n"
  "        const bq_i64 r = bq_mx_piece_row(p, i);\n"
  "        bq_load(v, (const bq_t *)p.x + r * p.xs + (i - r * p.ppr) * BQ_MX_E, 16);\n"
  "      } else {\n"
  "#pragma unroll\n"
  "        for (int k = 0; k < BQ_MX_E; k++) v.e[k] = bq_from_c((bq_c)0);\n"
  "      }\n"
  "      bq_mx_rotate<BQ_MX_E>(v, rot, false);\n"
  "#else\n"
  "    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
  "      const bq_i64 r = bq_mx_piece_row(p, i);\n"
  "      bq_chunk<bq_t, BQ_MX_E> v;\n"
  "      bq_load(v, (const bq_t *)p.x + r * p.xs + (i - r * p.ppr) * BQ_MX_E, 16);\n"
  "#endif\n"
  "#pragma unroll\n"
  "      for (int k = 0; k < BQ_MX_E; k++) a = fmaxf(a, (float)bq_abs(bq_to_c(v.e[k])));\n"
  "    }\n"
  "  } else {\n"
  "    const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;\n"
  "    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.rows * p.cols; i += step) {\n"
  "      const bq_i64 r = i / p.cols;\n"
  "      a = fmaxf(a, (float)bq_abs(bq_to_c(((const bq_t *)p.x)[r * p.xs + (i - r * p.cols)])));\n"
  "    }\n"
  "  }\n"
  "  for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));\n"
  "  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x == 0) {\n"
  "    for (int w = 1; w < (int)(blockDim.x >> 5); w++) a = fmaxf(a, part[w]);\n"
  "    if (!p.finish) {\n"
  "      ws[blockIdx.x] = a;\n"
  "    } else {\n"
  "      float enc;\n"
  "      const float g = bq_mx_tensor_scale(a, enc);\n"
  "#if BQ_MX_RULE == 7\n"
  "      ws[p.nparts] = enc; // (Transformer Engine's rule reads it)\n"
  "#else\n"
  "      (void)enc;\n"
  "#endif\n"
  "      *(float *)p.out_tensor_scale = g;\n"
  "    }\n"
  "  }\n"
  "}\n"
  "#endif\n"
;
static const char bq__src_rotate_cu[] =
  "// rotate.cu - the block-diagonal Walsh-Hadamard rotation along each row (docs/numerics.md,\n"
  "// \"Rotation\"): blocks of n = 2^log2n elements; forward y = T((H (s x)) c), inverse\n"
  "// x = T(s ((H y) c)), c = C(1 / sqrt(n)), s a sign vector (+1, or random from Philox4x32-10\n"
  "// keyed by the seed), H applied as the fixed butterfly h = 1, 2, ..., n / 2.\n"
  "// Prelude defines (besides common.cuh's): BQ_DIR (forward: rotate; backward: the inverse).\n"
  "//\n"
  "// A warp takes a segment of 32 E consecutive elements of a row (E per lane: the entry\n"
  "// point's), which holds whole blocks (32 E >= n, both powers of two); the butterfly's stages\n"
  "// with h < E run in a lane's registers, the others between lanes (lane ^ h / E) by shuffles.\n"
  "// Each stage computes every pair of the contract's stage, so the bits do not depend on E,\n"
  "// the grid or which lane holds what. The sign vector is the same for every block: a lane's\n"
  "// E signs are drawn once.\n"
  "\n"
  "/* kernels_src/rotate_abi.h - the Hadamard rotation's host/kernel interface, valid as C and as\n"
  "   CUDA C++: its entry points and its parameter block. rotate.cu and the host\n"
  "   (src/family_rotate.h) both include it. */\n"
  "#ifndef BQ_ROTATE_ABI_H\n"
  "#define BQ_ROTATE_ABI_H\n"
  "\n"
  "/* The entry points: a lane holds E = 2, 4 or 8 consecutive elements of a row (the host picks\n"
  "   the larger of 16 bytes of T and n / 32), a warp 32 E of them, whole blocks of n */\n"
  "enum { BQ__ROTATE_E2, BQ__ROTATE_E4, BQ__ROTATE_E8 };\n"
  "#define BQ_FN_ROTATE2 bq_rotate2\n"
  "#define BQ_FN_ROTATE4 bq_rotate4\n"
  "#define BQ_FN_ROTATE8 bq_rotate8\n"
  "\n"
  "typedef struct bq_rotate_params {\n"
  "  bq_u64 x, y;\n"
  "  bq_i64 rows, cols, xs, ys; /* element strides between rows */\n"
  "  bq_i64 segs;               /* warps' segments a row: cols / (32 E) rounded up */\n"
  "  bq_u32 seed_lo, seed_hi;   /* the sign vector's key (random_signs) */\n"
  "  int log2n;                 /* the block: n = 2^log2n */\n"
  "  int signs;                 /* 1: the random sign vector, 0: all +1 */\n"
  "} bq_rotate_params;\n"
  "#endif\n"
  "\n"
  "// One warp item's E elements a lane: r's segment, loaded (zeros past the row's end) ...\n"
  "template <int E> struct bq_rot_item {\n"
  "  bq_c c[E];\n"
  "  bq_i64 r, e0;\n"
  "};\n"
  "template <int E>\n"
  "static __device__ __forceinline__ void bq_rot_load(const bq_rotate_params &p, bq_i64 item, int lane, bq_rot_item<E> &it) {\n"
  "  it.r = item / p.segs;\n"
  "  it.e0 = (item - it.r * p.segs) * 32 * E + (bq_i64)lane * E;\n"
  "  const bq_t *x = (const bq_t *)p.x + it.r * p.xs + it.e0;\n"
  "  if (it.e0 + E <= p.cols) {\n"
  "    bq_chunk<bq_t, E> v;\n"
  "    bq_load(v, x, bq_width(x));\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++) it.c[k] = bq_to_c(v.e[k]);\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++) it.c[k] = it.e0 + k < p.cols ? bq_to_c(x[k]) : (bq_c)0;\n"
  "  }\n"
  "}\n"
  "// ... rotated (common.cuh's bq_rot_apply: every lane of the warp takes part) and stored\n"
  "template <int E>\n"
  "static __device__ __forceinline__ void bq_rot_finish(const bq_rotate_params &p, int lane, bq_u32 neg, bq_c cn,\n"
  "                                                     bq_rot_item<E> &it) {\n"
  "  bq_c *c = it.c;\n"
  "  bq_rot_apply<E>(it.c, lane, p.log2n, neg, cn, BQ_DIR == BQ_DIR_BACKWARD, 0xffffffffu);\n"
  "  bq_t *y = (bq_t *)p.y + it.r * p.ys + it.e0;\n"
  "  if (it.e0 + E <= p.cols) {\n"
  "    bq_chunk<bq_t, E> o;\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++) o.e[k] = bq_from_c(c[k]);\n"
  "    bq_store(y, o, bq_width(y));\n"
  "  } else {\n"
  "#pragma unroll\n"
  "    for (int k = 0; k < E; k++)\n"
  "      if (it.e0 + k < p.cols) y[k] = bq_from_c(c[k]);\n"
  "  }\n"
  "}\n"
  "\n"
  "// A warp takes two items a pass, both loaded before either is rotated: twice the bytes in\n"
  "// flight (the loop is warp-uniform, so every lane shuffles)\n"
  "template <int E>\n"
  "static __device__ __forceinline__ void bq_rotate_walk(const bq_rotate_params &p) {\n"
  "  const int lane = threadIdx.x & 31, n = 1 << p.log2n;\n"
  "  // the signs of this lane's elements j = (lane E + k) % n (one Philox word set: E divides 128)\n"
  "  const bq_u32 neg = p.signs ? bq_rot_signs<E>(lane * E, n, p.seed_lo, p.seed_hi) : 0u;\n"
  "  const bq_c cn = bq_rot_c(p.log2n);\n"
  "  const bq_i64 items = p.rows * p.segs;\n"
  "  const bq_i64 warp = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = ((bq_i64)gridDim.x * blockDim.x) >> 5;\n"
  "  for (bq_i64 item = warp; item < items; item += 2 * nwarps) {\n"
  "    bq_rot_item<E> a, b;\n"
  "    const bool two = item + nwarps < items;\n"
  "    bq_rot_load<E>(p, item, lane, a);\n"
  "    if (two) bq_rot_load<E>(p, item + nwarps, lane, b);\n"
  "    bq_rot_finish<E>(p, lane, neg, cn, a);\n"
  "    if (two) bq_rot_finish<E>(p, lane, neg, cn, b);\n"
  "  }\n"
  "}\n"
  "\n"
  "#if BQ_E_ROTATE2\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_ROTATE2(const bq_rotate_params p) { bq_rotate_walk<2>(p); }\n"
  "#endif\n"
  "#if BQ_E_ROTATE4\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_ROTATE4(const bq_rotate_params p) { bq_rotate_walk<4>(p); }\n"
  "#endif\n"
  "#if BQ_E_ROTATE8\n"
  "extern \"C\" __global__ void __launch_bounds__(256) BQ_FN_ROTATE8(const bq_rotate_params p) { bq_rotate_walk<8>(p); }\n"
  "#endif\n"
;
BQ__FN const char *bq__text_affine_cu(void) { return bq__src_affine_cu; }
BQ__FN const char *bq__text_common_cuh(void) { return bq__src_common_cuh; }
BQ__FN const char *bq__text_dynamic_cu(void) { return bq__src_dynamic_cu; }
BQ__FN const char *bq__text_fused_cu(void) { return bq__src_fused_cu; }
BQ__FN const char *bq__text_linear_cu(void) { return bq__src_linear_cu; }
BQ__FN const char *bq__text_mx_cu(void) { return bq__src_mx_cu; }
BQ__FN const char *bq__text_rotate_cu(void) { return bq__src_rotate_cu; }
/* END EMBEDDED KERNELS */

#endif /* BARACUDA_QUANT_IMPLEMENTATION_DONE */
#endif /* BARACUDA_QUANT_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
LICENSE (MIT)

Copyright (c) 2026 The baracuda_quant authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
