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
