"""A small AWQ layer with its packed tensors and unpacked values, so C++ packers and unpackers can be
checked against AutoAWQ's GEMM layout without Python."""
import os

import numpy as np

import quant

K, N, G, SEED = 64, 32, 32, 5


def layer():
    """W [N][K] with a few groups chosen to hit the rule's edge cases."""
    rng = np.random.Generator(np.random.PCG64(SEED))
    w = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    w[0, 0:G] = 0.0                          # constant group: scale from the 1e-5 floor, zero 0
    w[1, 0:G] = np.abs(w[1, 0:G]) + 0.01     # all positive: -min/s < 0, zero clamps to 0
    w[2, G:2 * G] = -np.abs(w[2, G:2 * G]) - 0.01  # all negative: zero clamps to 15, low q clamp to 0
    w[3, G:2 * G] = 0.25                     # constant non-zero group
    return w


def write(outdir):
    os.makedirs(outdir, exist_ok=True)
    w = layer()
    q, z, s = quant.awq_quantize(w, G)
    qweight, qzeros = quant.awq_pack(q), quant.awq_pack(z)
    assert np.array_equal(quant.awq_unpack(qweight), q) and np.array_equal(quant.awq_unpack(qzeros), z)
    deq = quant.awq_dequantize_int(q, z, s, G)
    files = {
        "weight.f32": (w, "<f4", [N, K], "input W [N=out][K=in] float32"),
        "qweight.i32": (qweight, "<i4", [K, N // 8], "AutoAWQ qweight int32 [K][N/8]"),
        "qzeros.i32": (qzeros, "<i4", [K // G, N // 8], "AutoAWQ qzeros int32 [K/G][N/8]"),
        "scales.f16": (s, "<f2", [K // G, N], "AutoAWQ scales fp16 [K/G][N]"),
        "q.u8": (q.astype(np.uint8), "u1", [K, N], "unpacked q[k][n], 0..15"),
        "zeros.u8": (z.astype(np.uint8), "u1", [K // G, N], "unpacked zero[k/G][n], 0..15"),
        "dequant.f32": (deq, "<f4", [N, K], "(q - zero) * scale in float32, as W [N][K]"),
    }
    desc = {"K": K, "N": N, "group_size": G, "seed": SEED,
            "rule": "AWQ_INT4 of the team brief: s = f16(max(mx-mn,1e-5)/15), zero = clamp(rint(-mn/s),0,15), "
                    "q = clamp(rint(w/s)+zero,0,15)",
            "packing": "element 8j+e of a row goes to nibble AWQ_ORDER[e] of word j, AWQ_ORDER = "
                       "[0,4,1,5,2,6,3,7] (AutoAWQ WQLinear_GEMM: nibble i holds element [0,2,4,6,1,3,5,7][i])",
            "edge_cases": {"n=0, group 0": "all zero", "n=1, group 0": "all positive",
                           "n=2, group 1": "all negative", "n=3, group 1": "constant 0.25"},
            "files": {}}
    for fname, (arr, dt, shape, what) in files.items():
        np.ascontiguousarray(arr).astype(dt).tofile(os.path.join(outdir, fname))
        desc["files"][f"awq_packing/{fname}"] = {"dtype": dt, "shape": shape, "content": what}
    # One word spelled out, for a reader of the manifest.
    desc["example_word"] = {"row": 0, "word": 1, "logical_values": q[0, 8:16].tolist(),
                            "packed_hex": f"0x{int(qweight.view(np.uint32)[0, 1]):08x}"}
    return desc
