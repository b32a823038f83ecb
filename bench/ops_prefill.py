"""Prefill attention (bench/ops.py family).

talon_prefill_attention on a ragged batch (q, k, v [tokens, heads, head_dim], cu_seqlens)
against PyTorch SDPA with the cuDNN and flash backends on the same data viewed as [B, H, L, D]
(equal lengths; enable_gqa where the heads differ), and FlashInfer's FlashAttention-3 backend
(single_prefill_with_kv_cache(..., backend="fa3"), one call per request, so only on batches of
1 or 2; bf16 hd128 is what ../shared/peers packs) where it imports. bf16, inputs N(0, 1). TFLOP/s count
4 * sum(q_len * kv_len) * Hq * D, halved when causal (the convention FlashAttention reports).
Check: on the last timed set, against SDPA's flash (or cuDNN) output of the same inputs, or
for ragged batches an fp32 SDPA per request: |talon - ref| <= 2^-7 max|ref| + 4e-3 (talon
and the flash peers round the softmax weights to bf16).
Targets (issue 22, 16k tokens per call: B=2 x L=8192, Hq=Hk=16 at hd128, 32 heads at hd64,
8 at hd256): hd128 causal >= 1.05x cuDNN SDPA and >= 1.0x FlashInfer FA3; hd128 non-causal
>= 1.0x cuDNN; hd64 >= 1.05x cuDNN; hd256 >= 1.0x cuDNN; L=1024 causal hd128 (B=16) >=
1.15x cuDNN; varlen: 32 requests of random lengths 200..8000 within 8% of the throughput of
32 equal requests of about the same total (the dense row after it).
"""
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ops import Case, ptr

BF16 = 0


def flashinfer_fa3():
    """FlashInfer's FA3 single prefill, or the reason it is not available."""
    try:
        import flashinfer
        return flashinfer.single_prefill_with_kv_cache, None
    except Exception as exc:  # not installed on this machine: skipped, noted in the JSON
        return None, f"{type(exc).__name__}: {exc}"[:200]


def prefill_case(h, lens, hq, hk, d, causal, label, targets=(), kv_lens=None):
    Args = h.struct("talon_prefill_attention_args")
    kv_lens = kv_lens or lens
    B = len(lens)
    total_q, total_kv = sum(lens), sum(kv_lens)
    q0s = [sum(lens[:b]) for b in range(B + 1)]
    k0s = [sum(kv_lens[:b]) for b in range(B + 1)]
    pairs = sum(q * k for q, k in zip(lens, kv_lens))
    flops = 4 * pairs * hq * d // (2 if causal else 1)
    equal = len(set(lens)) == 1 and lens == kv_lens
    fa3, fa3_skip = flashinfer_fa3()

    def make():
        dt = torch.bfloat16
        s = {"q": torch.randn(total_q, hq, d, device="cuda", dtype=dt),
             "k": torch.randn(total_kv, hk, d, device="cuda", dtype=dt),
             "v": torch.randn(total_kv, hk, d, device="cuda", dtype=dt),
             "o": torch.empty(total_q, hq, d, device="cuda", dtype=dt),
             "lse": torch.empty(total_q, hq, device="cuda", dtype=torch.float32),
             "cu_q": torch.tensor(q0s, device="cuda", dtype=torch.int32),
             "cu_k": torch.tensor(k0s, device="cuda", dtype=torch.int32)}
        s["args"] = Args(o=ptr(s["o"]), lse=ptr(s["lse"]), q=ptr(s["q"]), k=ptr(s["k"]),
                         v=ptr(s["v"]), cu_seqlens_q=ptr(s["cu_q"]), cu_seqlens_k=ptr(s["cu_k"]),
                         batch=B, total_q=total_q, total_kv=total_kv, max_seqlen_q=max(lens),
                         num_qo_heads=hq, num_kv_heads=hk, head_dim=d, causal=int(causal),
                         dtype=BF16)
        return s

    def talon(s, stream):
        h.call("talon_prefill_attention", s["args"], stream)

    def bhld(s, name, heads, L):
        return s[name].view(B, L, heads, d).transpose(1, 2)

    def sdpa(backend):
        def run(s):
            L = lens[0]
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(
                    bhld(s, "q", hq, L), bhld(s, "k", hk, L), bhld(s, "v", hk, L),
                    is_causal=causal, enable_gqa=hq != hk)
        return run

    def fa3_run(s):
        out = None
        for b in range(B):
            out = fa3(s["q"][q0s[b]:q0s[b + 1]], s["k"][k0s[b]:k0s[b + 1]],
                      s["v"][k0s[b]:k0s[b + 1]], causal=causal, backend="fa3")
        return out

    peers, meta = {}, {"dtype": "bf16", "batch": B, "hq": hq, "hk": hk, "head_dim": d,
                       "causal": causal, "total_q": total_q}
    if equal:
        peers["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
        peers["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    if fa3 is not None and d == 128 and hq == hk and B <= 2:
        peers["flashinfer_fa3"] = fa3_run  # one call per request: fair for a batch of 1 or 2
    elif fa3 is None:
        meta["skipped_peers"] = {"flashinfer_fa3": fa3_skip}

    def check(s):
        torch.cuda.synchronize()
        ref = None
        for name in ("sdpa_flash", "sdpa_cudnn"):
            if name in peers:
                try:
                    ref = peers[name](s).transpose(1, 2).reshape(total_q, hq, d).float()
                    break
                except RuntimeError:
                    continue
        if ref is None:  # ragged: request by request, fp32 SDPA
            ref = torch.empty(total_q, hq, d, device="cuda")
            for b in range(B):
                q = s["q"][q0s[b]:q0s[b + 1]].float().transpose(0, 1)
                k = s["k"][k0s[b]:k0s[b + 1]].float().transpose(0, 1)
                v = s["v"][k0s[b]:k0s[b + 1]].float().transpose(0, 1)
                ref[q0s[b]:q0s[b + 1]] = F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=hq != hk).transpose(0, 1)
        err = (s["o"].float() - ref).abs().max().item()
        tol = 2.0 ** -7 * ref.abs().max().item() + 4e-3
        assert math.isfinite(err) and err <= tol, f"talon o differs from the reference by {err} (tol {tol})"

    return Case("prefill_attention", label, make, talon, peers, check=check, flops=flops,
                targets=targets, meta=meta)


def cases(h):
    out = []
    L, B = 8192, 2
    for d, heads in ((128, 16), (64, 32), (256, 8)):
        for causal in (True, False):
            need = 1.05 if d == 64 or (d == 128 and causal) else 1.0
            t = [("sdpa_cudnn_over_talon", ">=", need, f">= {need}x cuDNN SDPA")]
            if d == 128 and causal:
                t.append(("flashinfer_fa3_over_talon", ">=", 1.0, ">= 1.0x FlashInfer FA3"))
            out.append(prefill_case(h, [L] * B, heads, heads, d, causal,
                                    f"B={B} L={L} H={heads} hd{d} {'causal' if causal else 'full'}",
                                    targets=t))
    out.append(prefill_case(h, [1024] * 16, 16, 16, 128, True, "B=16 L=1024 H=16 hd128 causal",
                            targets=[("sdpa_cudnn_over_talon", ">=", 1.15, ">= 1.15x cuDNN SDPA")]))
    out.append(prefill_case(h, [L] * B, 32, 8, 128, True, f"B={B} L={L} GQA 32/8 hd128 causal"))
    # varlen: 32 requests of random lengths in [200, 8000], beside 32 equal requests of about
    # the same total
    g = torch.Generator().manual_seed(22)
    lens = torch.randint(200, 8001, (32,), generator=g).tolist()
    eq = sum(lens) // 32 // 64 * 64
    out.append(prefill_case(h, lens, 16, 16, 128, True,
                            f"varlen 32 requests 200..8000 ({sum(lens)} tokens) hd128 causal"))
    out.append(prefill_case(h, [eq] * 32, 16, 16, 128, True,
                            f"B=32 L={eq} (dense, same total) hd128 causal"))
    return out
