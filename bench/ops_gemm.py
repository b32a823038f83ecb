"""talon_gemm beside cuBLAS (bench/ops.py runs it).

D = epilogue(A . B^T), A [M, K] activations, B [N, K] weights (nn.Linear), bf16 in and out,
inputs N(0, 1). Peers: "cublas" F.linear (cuBLAS through torch; with its bias epilogue where
there is a bias), the unfused sequences after it ("cublas+eager": F.gelu / + c / silu * up in
torch; "cublas+talon": talon_silu_and_mul after F.linear), "addmm" (cuBLAS with beta = 1
into c) for the residual, "compile" (torch.compile of the unfused sequence) on the fused
cases, and "talon_plain" (talon_gemm without the epilogue, same inputs) to show what an
epilogue costs. TFLOP/s count 2 M N K (gated: 2 M 2I K). Decode shapes (M <= 64) are
weight-bandwidth bound: bytes = weights + activations in + out.
Check: on the last timed set, against an fp32 torch product of the same inputs:
|talon - ref| <= 2^-8 |ref| + 2^-14 (|A| . |B|^T) (the GPU test's tolerance, in torch).
Targets (issue 21): 8192^3 >= 1.0x cuBLAS; LLM shapes (M 512, 4096, 16384 x (N, K) (6144,
4096), (4096, 4096), (28672, 4096), (4096, 14336)) each >= 0.95x cuBLAS (geometric mean >=
1.02x: the closing note computes it); decode M 1, 16, 64 at (14336, 4096) and (4096, 14336):
>= 2700 GB/s and >= 1.1x cuBLAS; bias+GELU and residual <= 3% over the plain GEMM; SwiGLU
up-projection M 4096, I 14336, K 4096 >= 1.25x cuBLAS + talon_silu_and_mul.

FP8 (fp8_case): e4m3 A and B (N(0, 1) rounded), bf16 out, scales per tensor (device scalars)
or per row (A per token, B per output channel), all in [0.5, 1.5). Peers: torch._scaled_mm
(cuBLASLt) with its default accumulation ("scaled_mm") and with use_fast_accum=True
("scaled_mm_fast", the accumulation talon's kernels use). Check against the fp32 product of
the dequantised inputs: |talon - ref| <= 2^-7 |ref| + 2^-9 (|A| . |B|^T) (scaled): the fp8
accumulator keeps fewer bits than fp32; the GPU test holds the exact bounds. Targets: 8192^3
per tensor >= 1.0x torch._scaled_mm, row-wise >= 1.0x.
Block scales (DeepSeek-V3: A per row and 128 of K, group-major [K/128, M]; B per 128 x 128
block, [N/128, K/128]): peer torch._scaled_mm with blockwise 1x128 / 128x128 scales (cuBLASLt)
where this torch accepts them (else the row names the error); check as above with each
block's scales. Targets at the DeepSeek-V3 shapes (M 4096; (N, K) (7168, 16384), (4096,
7168), (24576, 1536), (7168, 2048)): >= 1.1x the blockwise peer, >= 1300 TFLOP/s at the first.
"""
import torch
import torch.nn.functional as F

from ops import Case, ptr
from ops_norm import compiled

BF16, F16, FP8 = 0, 1, 4
ACT = {"none": 0, "relu": 1, "silu": 2, "gelu": 3, "gelu_tanh": 4}
SCALE = {"tensor": 1, "row": 2, "block": 3}


def check_against_fp32(what, d, a, w, epilogue, magnitude=lambda y32, mag: mag):
    """epilogue(y32) is the fp32 result from the fp32 product y32; tolerance as the GPU test,
    2^-8 |ref| + 2^-14 magnitude(y32, |A| . |B|^T) (gated: the gate's and up's terms)."""
    y32 = a.float() @ w.float().t()
    mag = a.float().abs() @ w.float().abs().t()
    ref = epilogue(y32)
    err = (d.float() - ref).abs()
    tol = 2.0 ** -8 * ref.abs() + 2.0 ** -14 * magnitude(y32, mag)
    bad = (err > tol) | ~torch.isfinite(d.float())
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} elements off, first at {i}: "
                             f"{d.flatten()[i].item()} vs {ref.flatten()[i].item()}")


def gemm_case(h, m, n, k, label, epi="none", gated=False, targets=(), decode=False, runs=None):
    Args = h.struct("talon_gemm_args")
    brows = 2 * n if gated else n
    dt = torch.bfloat16

    def fields(s, act=0, bias=0, c=0, is_gated=0):
        return Args(d=ptr(s["d"]), a=ptr(s["a"]), b=ptr(s["w"]), bias=bias, c=c, m=m, n=n, k=k,
                    act=act, gated=is_gated, dtype=BF16, out_dtype=BF16)

    def make():
        s = {"a": torch.randn(m, k, device="cuda", dtype=dt),
             "w": torch.randn(brows, k, device="cuda", dtype=dt),
             "d": torch.empty(m, n, device="cuda", dtype=dt)}
        if epi == "bias_gelu":
            s["bias"] = torch.randn(n, device="cuda", dtype=dt)
            s["args"] = fields(s, ACT["gelu"], ptr(s["bias"]))
        elif epi == "residual":
            s["c0"] = torch.randn(m, n, device="cuda", dtype=dt)
            s["d"].copy_(s["c0"])
            s["args"] = fields(s, c=ptr(s["d"]))  # in place: d += A B^T, the residual stream
        elif gated:
            s["args"] = fields(s, ACT["silu"], is_gated=1)
            s["y"] = torch.empty(m, 2 * n, device="cuda", dtype=dt)
            s["act_args"] = h.struct("talon_silu_and_mul_args")(
                out=ptr(s["d"]), **{"in": ptr(s["y"])}, rows=m, cols=n, dtype=BF16)
        else:
            s["args"] = fields(s)
        if epi != "none" or gated:
            s["plain_d"] = torch.empty(m, brows, device="cuda", dtype=dt)
            s["plain_args"] = Args(d=ptr(s["plain_d"]), a=ptr(s["a"]), b=ptr(s["w"]), m=m,
                                   n=brows, k=k, dtype=BF16, out_dtype=BF16)
        return s

    def talon(s, stream):
        h.call("talon_gemm", s["args"], stream)

    def talon_plain(s):
        h.call("talon_gemm", s["plain_args"], torch.cuda.current_stream().cuda_stream)

    peers = {}
    if epi == "none" and not gated:
        peers["cublas"] = lambda s: F.linear(s["a"], s["w"])
    elif epi == "bias_gelu":
        peers["cublas+eager"] = lambda s: F.gelu(F.linear(s["a"], s["w"], s["bias"]))
        peers["compile"] = (lambda f: lambda s: f(s["a"], s["w"], s["bias"]))(
            compiled(lambda a, w, b: F.gelu(F.linear(a, w, b))))
        peers["talon_plain"] = talon_plain
    elif epi == "residual":
        peers["cublas+eager"] = lambda s: s["d"].add_(F.linear(s["a"], s["w"]))
        peers["addmm"] = lambda s: s["d"].addmm_(s["a"], s["w"].t())
        peers["compile"] = (lambda f: lambda s: f(s["a"], s["w"], s["d"]))(
            compiled(lambda a, w, c: c.add_(F.linear(a, w))))
        peers["talon_plain"] = talon_plain
    elif gated:
        def swiglu_eager(s):
            y = F.linear(s["a"], s["w"])
            return F.silu(y[:, :n]) * y[:, n:]

        def cublas_talon(s):
            torch.mm(s["a"], s["w"].t(), out=s["y"])
            h.call("talon_silu_and_mul", s["act_args"], torch.cuda.current_stream().cuda_stream)
        peers["cublas+eager"] = swiglu_eager
        peers["cublas+talon"] = cublas_talon
        peers["compile"] = (lambda f: lambda s: f(s["a"], s["w"]))(
            compiled(lambda a, w: (lambda y: F.silu(y[:, :n]) * y[:, n:])(F.linear(a, w))))
        peers["talon_plain"] = talon_plain

    def check(s):
        stream = torch.cuda.current_stream().cuda_stream
        if epi == "residual":
            s["d"].copy_(s["c0"])
        h.call("talon_gemm", s["args"], stream)
        torch.cuda.synchronize()
        if epi == "bias_gelu":
            ep = lambda y: F.gelu(y + s["bias"].float())
        elif epi == "residual":
            ep = lambda y: y + s["c0"].float()
        elif gated:
            ep = lambda y: F.silu(y[:, :n]) * y[:, n:]
        else:
            ep = lambda y: y
        if gated:  # the magnitude of act(g) * u: |g| |u| terms, bounded by the gate's and up's
            check_against_fp32(f"gemm {label}", s["d"], s["a"], s["w"], ep,
                               lambda y32, mag: mag[:, :n] * (y32[:, n:].abs() + mag[:, n:]))
        else:
            check_against_fp32(f"gemm {label}", s["d"], s["a"], s["w"], ep)

    flops = 2 * m * brows * k
    bytes_ = (brows * k + m * k + m * n) * 2 if decode else None
    return Case("gemm", label, make, talon, peers, bytes=bytes_, check=check, targets=targets,
                flops=flops, runs=runs or (30 if flops > 1e12 else 100),
                meta={"m": m, "n": n, "k": k, "epilogue": epi, "gated": gated})


def fp8_case(h, m, n, k, scale, label, targets=(), decode=False):
    Args = h.struct("talon_gemm_args")
    e4m3 = torch.float8_e4m3fn

    def make():
        s = {"a": torch.randn(m, k, device="cuda").to(e4m3),
             "w": torch.randn(n, k, device="cuda").to(e4m3),
             "d": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)}
        if scale == "tensor":
            s["sa"] = 0.5 + torch.rand((), device="cuda")
            s["sb"] = 0.5 + torch.rand((), device="cuda")
            s["sa_mm"], s["sb_mm"] = s["sa"], s["sb"]
        elif scale == "block":  # talon's layouts; torch's views of them ([M, K/128], [K/128, N/128])
            kb, m4 = (k + 127) // 128, (m + 3) // 4 * 4
            s["sa"] = 0.5 + torch.rand(kb, m4, device="cuda")
            s["sb"] = 0.5 + torch.rand((n + 127) // 128, kb, device="cuda")
            s["sa_mm"], s["sb_mm"] = s["sa"][:, :m].t(), s["sb"].t()
        else:
            s["sa"] = 0.5 + torch.rand(m, device="cuda")
            s["sb"] = 0.5 + torch.rand(n, device="cuda")
            s["sa_mm"], s["sb_mm"] = s["sa"].view(m, 1), s["sb"].view(1, n)
        s["args"] = Args(d=ptr(s["d"]), a=ptr(s["a"]), b=ptr(s["w"]), a_scale=ptr(s["sa"]),
                         b_scale=ptr(s["sb"]), m=m, n=n, k=k, dtype=FP8, out_dtype=BF16,
                         scale=SCALE[scale])
        return s

    def talon(s, stream):
        h.call("talon_gemm", s["args"], stream)

    def scaled_mm(fast):
        return lambda s: torch._scaled_mm(s["a"], s["w"].t(), scale_a=s["sa_mm"],
                                          scale_b=s["sb_mm"], out_dtype=torch.bfloat16,
                                          use_fast_accum=fast)

    peers = {"scaled_mm": scaled_mm(False)}
    if scale != "block":
        peers["scaled_mm_fast"] = scaled_mm(True)

    def check(s):
        h.call("talon_gemm", s["args"], torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        a, w = s["a"].float(), s["w"].float()
        if scale == "block":  # the scales spread over the elements they scale
            a = a * s["sa_mm"].repeat_interleave(128, dim=1)[:, :k]
            w = w * s["sb"].repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
            sa = sb = torch.ones((), device="cuda")
        else:
            sa = s["sa_mm"].float().reshape(-1, 1) if scale == "row" else s["sa_mm"].float()
            sb = s["sb_mm"].float().reshape(1, -1) if scale == "row" else s["sb_mm"].float()
        ref = (a @ w.t()) * sa * sb
        mag = (a.abs() @ w.abs().t()) * sa * sb
        err = (s["d"].float() - ref).abs()
        bad = (err > 2.0 ** -7 * ref.abs() + 2.0 ** -9 * mag) | ~torch.isfinite(s["d"].float())
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            raise AssertionError(f"gemm {label}: {int(bad.sum())} elements off, first at {i}: "
                                 f"{s['d'].flatten()[i].item()} vs {ref.flatten()[i].item()}")

    flops = 2 * m * n * k
    bytes_ = n * k + m * k + m * n * 2 if decode else None
    return Case("gemm", label, make, talon, peers, bytes=bytes_, check=check, targets=targets,
                flops=flops, runs=30 if flops > 1e12 else 100,
                meta={"m": m, "n": n, "k": k, "dtype": "e4m3", "scale": scale})


def cases(h):
    out = [gemm_case(h, 8192, 8192, 8192, "bf16 8192x8192x8192",
                     targets=[("cublas_over_talon", ">=", 1.0, ">= 1.0x cuBLAS")])]
    for m in (512, 4096, 16384):
        for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)):
            out.append(gemm_case(h, m, n, k, f"bf16 M={m} N={n} K={k}",
                                 targets=[("cublas_over_talon", ">=", 0.95, ">= 0.95x cuBLAS")]))
    for m in (1, 16, 64):
        for n, k in ((14336, 4096), (4096, 14336)):
            out.append(gemm_case(h, m, n, k, f"bf16 decode M={m} N={n} K={k}", decode=True,
                                 targets=[("gbs", ">=", 2700.0, ">= 2700 GB/s of weights"),
                                          ("cublas_over_talon", ">=", 1.1, ">= 1.1x cuBLAS")]))
    out.append(gemm_case(h, 4096, 4096, 4096, "bf16 M=4096 N=4096 K=4096 bias+gelu",
                         epi="bias_gelu",
                         targets=[("talon_plain_over_talon", ">=", 0.97,
                                   "<= 3% over the plain GEMM")]))
    out.append(gemm_case(h, 4096, 4096, 4096, "bf16 M=4096 N=4096 K=4096 residual in place",
                         epi="residual",
                         targets=[("talon_plain_over_talon", ">=", 0.97,
                                   "<= 3% over the plain GEMM")]))
    out.append(gemm_case(h, 4096, 14336, 4096, "bf16 SwiGLU M=4096 I=14336 K=4096", gated=True,
                         targets=[("cublas+talon_over_talon", ">=", 1.25,
                                   ">= 1.25x cuBLAS + silu_and_mul")]))
    for scale in ("tensor", "row"):
        out.append(fp8_case(h, 8192, 8192, 8192, scale, f"fp8 {scale} 8192x8192x8192",
                            targets=[("scaled_mm_over_talon", ">=", 1.0,
                                      ">= 1.0x torch._scaled_mm")]))
    for m in (512, 4096, 16384):
        for n, k in ((6144, 4096), (28672, 4096), (4096, 14336)):
            out.append(fp8_case(h, m, n, k, "row", f"fp8 row M={m} N={n} K={k}"))
    for m in (1, 16, 64):
        for n, k in ((14336, 4096), (4096, 14336)):
            out.append(fp8_case(h, m, n, k, "row", f"fp8 row decode M={m} N={n} K={k}",
                                decode=True))
    # DeepSeek-V3 decode projections with block scales (the transposed kernel), and a short
    # prefill chunk (128-row tiles, split-K in pairs)
    for n, k in ((4096, 7168), (7168, 2048)):
        out.append(fp8_case(h, 16, n, k, "block", f"fp8 block decode M=16 N={n} K={k}",
                            decode=True))
    out.append(gemm_case(h, 128, 4096, 14336, "bf16 M=128 N=4096 K=14336", decode=True))
    for n, k in ((7168, 16384), (4096, 7168), (24576, 1536), (7168, 2048)):
        t = [("scaled_mm_over_talon", ">=", 1.1, ">= 1.1x torch._scaled_mm blockwise")]
        if (n, k) == (7168, 16384):
            t.append(("tflops", ">=", 1300.0, ">= 1300 TFLOP/s"))
        out.append(fp8_case(h, 4096, n, k, "block", f"fp8 block M=4096 N={n} K={k}", targets=t))
    return out
