"""Numpy implementations of qtune's quantization rules (team brief, "Quantization rules").

Everything is float32 arithmetic; np.rint rounds half to even and float32 -> float16 casts round to
nearest even, which is exactly what the rules ask for. Scalars are wrapped in np.float32 so numpy never
promotes an expression to float64.

Matrices are Hugging Face Linear weights W [N = out, K = in] unless stated otherwise.
"""
import numpy as np

F32 = np.float32
AWQ_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)  # nibble index holding logical element e of a packed word


def _f16(x):
    """Round float32 values to fp16 (RNE) and widen back to float32 (exact)."""
    return np.asarray(x, dtype=F32).astype(np.float16).astype(F32)


# ---------------------------------------------------------------------------------------------- Q8_0
def qwen3c_group_size(dim, ks):
    """qwen3.c's rule: 64, halved while dim % G != 0; it must then divide every in-feature count K."""
    g = 64
    while dim % g != 0:
        g //= 2
    for k in ks:
        if k % g != 0:
            raise ValueError(f"Q8_0 group {g} does not divide in-features {k}")
    return g


def q8_0_quantize(w, group):
    """Returns (q int8 [N*K], scales float32 [N*K/G]) over groups of the flattened row-major tensor."""
    w = np.ascontiguousarray(w, dtype=F32)
    if w.shape[-1] % group != 0:
        raise ValueError(f"Q8_0 group {group} does not divide K={w.shape[-1]}")
    g = w.reshape(-1, group)
    amax = np.max(np.abs(g), axis=1)
    scale = (amax / F32(127.0)).astype(F32)
    safe = np.where(scale == 0, F32(1.0), scale).astype(F32)
    q = np.rint(g / safe[:, None]).astype(F32)
    q = np.where(scale[:, None] == 0, F32(0.0), q)
    return q.astype(np.int8).reshape(-1), scale


def q8_0_dequantize(q, scales, shape, group):
    q = np.asarray(q, dtype=np.int8).reshape(-1, group).astype(F32)
    return (q * np.asarray(scales, dtype=F32)[:, None]).astype(F32).reshape(shape)


# ------------------------------------------------------------------------------------ INT8 group-wise
def int8_gw_quantize(w, group, asym):
    """Per output column n, groups of G along K (TensorRT-LLM fpA_intB semantics).

    Returns (u8 [K][N] with +128 bias, scales fp16 [K/G][N], zeros fp16 [K/G][N] or None)."""
    w = np.asarray(w, dtype=F32)
    n, k = w.shape
    if k % group != 0:
        raise ValueError(f"INT8 group {group} does not divide K={k}")
    wt = np.ascontiguousarray(w.T)                 # [K][N]
    grp = wt.reshape(k // group, group, n)         # [K/G][G][N]
    if not asym:
        amax = np.max(np.abs(grp), axis=1)
        s = _f16(amax / F32(127.0))
        safe = np.where(s == 0, F32(1.0), s).astype(F32)
        q = np.clip(np.rint(grp / safe[:, None, :]), -127, 127).astype(F32)
        q = np.where(s[:, None, :] == 0, F32(0.0), q)
        z = None
    else:
        mn = np.min(grp, axis=1)
        mx = np.max(grp, axis=1)
        s = _f16((mx - mn) / F32(255.0))
        z = _f16(mn + F32(128.0) * s)
        safe = np.where(s == 0, F32(1.0), s).astype(F32)
        q = np.clip(np.rint((grp - z[:, None, :]) / safe[:, None, :]), -128, 127).astype(F32)
        q = np.where(s[:, None, :] == 0, F32(0.0), q)
    u8 = (q.astype(np.int32) + 128).astype(np.uint8).reshape(k, n)
    return (u8, s.astype(np.float16), None if z is None else z.astype(np.float16))


def int8_gw_dequantize(u8, scales, zeros, group):
    """Inverse of int8_gw_quantize; returns W [N][K] float32."""
    k, n = u8.shape
    q = (u8.astype(np.int32) - 128).astype(F32).reshape(k // group, group, n)
    s = scales.astype(F32)[:, None, :]
    w = (q * s).astype(F32)
    if zeros is not None:
        w = (w + zeros.astype(F32)[:, None, :]).astype(F32)
    return np.ascontiguousarray(w.reshape(k, n).T)


# ---------------------------------------------------------------------------------------------- AWQ
def awq_quantize(w, group):
    """AWQ_INT4 round-to-nearest with zero point, per output column, groups of G along K.

    Returns (q int32 [K][N] in 0..15, zeros int32 [K/G][N] in 0..15, scales fp16 [K/G][N])."""
    w = np.asarray(w, dtype=F32)
    n, k = w.shape
    if k % group != 0 or n % 8 != 0:
        raise ValueError(f"AWQ needs K % G == 0 and N % 8 == 0 (K={k}, N={n}, G={group})")
    grp = np.ascontiguousarray(w.T).reshape(k // group, group, n)
    mn = np.min(grp, axis=1)
    mx = np.max(grp, axis=1)
    s = _f16(np.maximum(mx - mn, F32(1e-5)) / F32(15.0))
    zero = np.clip(np.rint(-mn / s), 0, 15).astype(F32)
    q = np.clip(np.rint(grp / s[:, None, :]) + zero[:, None, :], 0, 15)
    return (q.astype(np.int32).reshape(k, n), zero.astype(np.int32), s.astype(np.float16))


def awq_dequantize_int(q, zeros, scales, group):
    """w[n][k] = (q[k][n] - z[k/G][n]) * s[k/G][n] in float32; returns W [N][K]."""
    k, n = q.shape
    qg = q.reshape(k // group, group, n).astype(F32)
    d = ((qg - zeros.astype(F32)[:, None, :]) * scales.astype(F32)[:, None, :]).astype(F32)
    return np.ascontiguousarray(d.reshape(k, n).T)


def awq_pack(vals):
    """AutoAWQ GEMM packing of a [R][N] array of nibbles into int32 [R][N/8]:
    logical element e of each group of 8 columns goes to nibble AWQ_ORDER[e]."""
    vals = np.asarray(vals, dtype=np.uint32)
    r, n = vals.shape
    v = vals.reshape(r, n // 8, 8)
    word = np.zeros((r, n // 8), dtype=np.uint32)
    for e in range(8):
        word |= (v[:, :, e] & np.uint32(0xF)) << np.uint32(4 * AWQ_ORDER[e])
    return word.view(np.int32)


def awq_unpack(words):
    """Inverse of awq_pack: int32 [R][N/8] -> int32 [R][N]."""
    w = np.asarray(words).view(np.uint32)
    r, m = w.shape
    out = np.empty((r, m, 8), dtype=np.int32)
    for e in range(8):
        out[:, :, e] = ((w >> np.uint32(4 * AWQ_ORDER[e])) & np.uint32(0xF)).astype(np.int32)
    return out.reshape(r, m * 8)


def fp16_round(w):
    """The value a float32 tensor has after being stored as fp16."""
    return _f16(w)
