"""Prefill attention (bench/ops.py family).

talon_prefill_attention on a ragged batch (q, k, v [tokens, heads, head_dim], cu_seqlens)
against PyTorch SDPA with the cuDNN and flash backends on the same data viewed as [B, H, L, D]
(equal lengths; enable_gqa where the heads differ), and FlashInfer's FlashAttention-3 backend
(single_prefill_with_kv_cache(..., backend="fa3"), one call per request, so only on batches of
1 or 2; bf16 hd128 is what ../shared/peers packs) where it imports, and its batch kernel over the
same ragged tensors (BatchPrefillWithRaggedKVCacheWrapper(backend="fa3"): "flashinfer_fa3_batch",
every bf16 hd128 case; packed as the paged one below). bf16, inputs N(0, 1). TFLOP/s count
4 * sum(q_len * kv_len) * Hq * D, halved when causal (the convention FlashAttention reports).
Check: on the last timed set, against SDPA's flash (or cuDNN) output of the same inputs, or
for ragged batches an fp32 SDPA per request: |talon - ref| <= 2^-7 max|ref| + 4e-3 (talon
and the flash peers round the softmax weights to bf16).
Targets (issue 22, 16k tokens per call: B=2 x L=8192, Hq=Hk=16 at hd128, 32 heads at hd64,
8 at hd256): hd128 causal >= 1.05x cuDNN SDPA and >= 1.0x FlashInfer FA3; hd128 non-causal
>= 1.0x cuDNN; hd64 >= 1.05x cuDNN; hd256 >= 1.0x cuDNN; L=1024 causal hd128 (B=16) >=
1.15x cuDNN; varlen: 32 requests of random lengths 200..8000 within 8% of the throughput of
32 equal requests of about the same total (the dense row after it).

talon_prefill_attention_paged (chunked prefill over a cached prefix): new tokens of each request
at the end of its keys, k/v in a paged cache (pages shuffled), against the same attention on
contiguous k/v: talon_prefill_attention ("talon_contiguous": the cost of paging), FlashInfer's
FA3 single prefill (batch of 1; causal aligned bottom-right) and SDPA with a lower-right causal
bias; and FlashInfer's FA3 batch prefill over the same paged cache ("flashinfer_fa3_paged",
bf16 caches; its module is not in ../shared/peers' pack: add
gen_batch_prefill_module("fa3", bf16, bf16, bf16, int32, 128, 128, 0, False, False, False) to
fi_pack.py's list and rebuild). Check: an fp32 reference of the first and last query heads,
for talon and for FA3 paged. Target (issue 22): 2048 new
tokens over a 30000-token prefix, page 16, GQA 32/8 hd128 >= 560 TFLOP/s.

fp8 (fp8_case): e4m3 q/k/v with per-tensor scales, B=2 x L=8192 and B=16 x L=1024 causal,
beside FlashInfer's FA3 fp8 where its modules are packed; targets (issue 22): hd128
non-causal >= 950 TFLOP/s, hd256 >= 1100.
"""
import ctypes
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


def flashinfer_fa3_batch(layout=None):
    """A new FlashInfer FA3 batch prefill wrapper: over a paged cache of this layout (0 NHD,
    1 HND; the call engines make for chunked prefill), or over ragged contiguous k/v (layout
    None). One per input set, as its plan holds the lengths and page lists."""
    import flashinfer
    ws = torch.empty(128 << 20, device="cuda", dtype=torch.uint8)
    if layout is None:
        return flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, kv_layout="NHD", backend="fa3")
    return flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, kv_layout="NHD" if layout == 0 else "HND",
                                                          backend="fa3")


_FA3_BATCH_SKIP = {}


def flashinfer_fa3_batch_skip(layout=None):
    """Why flashinfer_fa3_batch(layout) cannot run here, or None; probed once per layout (a
    one-request plan builds or loads its module, and fails here where it is not packed)."""
    if layout not in _FA3_BATCH_SKIP:
        try:
            w = flashinfer_fa3_batch(layout)
            one = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
            if layout is None:
                w.plan(one, one, 8, 8, 128, causal=True, q_data_type=torch.bfloat16,
                       kv_data_type=torch.bfloat16)
            else:
                w.plan(one, one, one[:1], one[1:], 8, 8, 128, 16, causal=True,
                       q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
            _FA3_BATCH_SKIP[layout] = None
        except Exception as exc:  # not installed: skipped, noted in the JSON
            _FA3_BATCH_SKIP[layout] = f"{type(exc).__name__}: {exc}"[:200]
    return _FA3_BATCH_SKIP[layout]


def ragged_inputs(total_q, total_kv, hq, hk, d, q0s, k0s, dv=None):
    """q, k, v N(0, 1) bf16 [tokens, heads, d] (v and o: dv), o and lse, and the cu_seqlens."""
    dt = torch.bfloat16
    dv = dv or d
    return {"q": torch.randn(total_q, hq, d, device="cuda", dtype=dt),
            "k": torch.randn(total_kv, hk, d, device="cuda", dtype=dt),
            "v": torch.randn(total_kv, hk, dv, device="cuda", dtype=dt),
            "o": torch.empty(total_q, hq, dv, device="cuda", dtype=dt),
            "lse": torch.empty(total_q, hq, device="cuda", dtype=torch.float32),
            "cu_q": torch.tensor(q0s, device="cuda", dtype=torch.int32),
            "cu_k": torch.tensor(k0s, device="cuda", dtype=torch.int32)}


def with_workspace(h, s, args, ws, paged=False):
    """Gives args (in s) a workspace of the bytes talon's workspace size function asks for
    (more than 16 where the call splits its last tiles' keys), as tensor s[ws]; every case's
    args get theirs here."""
    fn = "talon_prefill_attention_paged_workspace_size" if paged else "talon_prefill_attention_workspace_size"
    n = ctypes.c_int64()
    h._check(fn, getattr(h.lib, fn)(h.ctx, ctypes.byref(s[args]), ctypes.byref(n)))
    s[ws] = torch.empty(max(n.value, 16), device="cuda", dtype=torch.uint8)
    s[args].workspace, s[args].workspace_bytes = ptr(s[ws]), n.value


def prefill_case(h, lens, hq, hk, d, causal, label, targets=(), kv_lens=None, dv=None):
    Args = h.struct("talon_prefill_attention_args")
    kv_lens = kv_lens or lens
    B = len(lens)
    total_q, total_kv = sum(lens), sum(kv_lens)
    q0s = [sum(lens[:b]) for b in range(B + 1)]
    k0s = [sum(kv_lens[:b]) for b in range(B + 1)]
    pairs = sum(q * k for q, k in zip(lens, kv_lens))
    dv = dv or d
    flops = 2 * pairs * hq * (d + dv) // (2 if causal else 1)
    equal = len(set(lens)) == 1 and lens == kv_lens
    fa3, fa3_skip = flashinfer_fa3()
    # FlashInfer FA3's batch kernel over the same ragged tensors (bf16 hd128 is what is packed)
    fa3_ragged_skip = flashinfer_fa3_batch_skip() if d == 128 and dv == 128 else "head_dim: not packed"
    fa3_ragged = fa3_ragged_skip is None

    def make():
        s = ragged_inputs(total_q, total_kv, hq, hk, d, q0s, k0s, dv)
        s["args"] = Args(o=ptr(s["o"]), lse=ptr(s["lse"]), q=ptr(s["q"]), k=ptr(s["k"]),
                         v=ptr(s["v"]), cu_seqlens_q=ptr(s["cu_q"]), cu_seqlens_k=ptr(s["cu_k"]),
                         batch=B, total_q=total_q, total_kv=total_kv, max_seqlen_q=max(lens),
                         num_qo_heads=hq, num_kv_heads=hk, head_dim=d, v_head_dim=dv,
                         causal=int(causal), dtype=BF16)
        with_workspace(h, s, "args", "ws")
        if fa3_ragged:  # its planner reads the lengths on the host, here, once
            s["fa3_ragged"] = flashinfer_fa3_batch()
            s["fa3_ragged"].plan(s["cu_q"], s["cu_k"], hq, hk, d, causal=causal,
                                 q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        return s

    def talon(s, stream):
        h.call("talon_prefill_attention", s["args"], stream)

    def bhld(s, name, heads, L):
        return s[name].view(B, L, heads, s[name].shape[-1]).transpose(1, 2)

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

    def fa3_ragged_run(s):
        return s["fa3_ragged"].run(s["q"], s["k"], s["v"])

    peers, meta = {}, {"dtype": "bf16", "batch": B, "hq": hq, "hk": hk, "head_dim": d,
                       "v_head_dim": dv, "causal": causal, "total_q": total_q}
    if equal:
        peers["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
        peers["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    if fa3 is not None and d == 128 and hq == hk and B <= 2:
        peers["flashinfer_fa3"] = fa3_run  # one call per request: fair for a batch of 1 or 2
    elif fa3 is None:
        meta["skipped_peers"] = {"flashinfer_fa3": fa3_skip}
    if fa3_ragged:
        peers["flashinfer_fa3_batch"] = fa3_ragged_run
    else:
        meta.setdefault("skipped_peers", {})["flashinfer_fa3_batch"] = fa3_ragged_skip

    def check(s):
        torch.cuda.synchronize()
        ref = None
        for name in ("sdpa_flash", "sdpa_cudnn"):
            if name in peers:
                try:
                    ref = peers[name](s).transpose(1, 2).reshape(total_q, hq, dv).float()
                    break
                except RuntimeError:
                    continue
        if ref is None:  # ragged: request by request, fp32 SDPA
            ref = torch.empty(total_q, hq, dv, device="cuda")
            for b in range(B):
                q = s["q"][q0s[b]:q0s[b + 1]].float().transpose(0, 1)
                k = s["k"][k0s[b]:k0s[b + 1]].float().transpose(0, 1)
                v = s["v"][k0s[b]:k0s[b + 1]].float().transpose(0, 1)
                ref[q0s[b]:q0s[b + 1]] = F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=hq != hk).transpose(0, 1)
        err = (s["o"].float() - ref).abs().max().item()
        tol = 2.0 ** -7 * ref.abs().max().item() + 4e-3
        assert math.isfinite(err) and err <= tol, f"talon o differs from the reference by {err} (tol {tol})"
        if fa3_ragged:  # the peer read the ragged batch right
            err = (fa3_ragged_run(s).float() - ref).abs().max().item()
            assert err <= tol, f"FA3 batch differs from the reference by {err} (tol {tol})"

    return Case("prefill_attention", label, make, talon, peers, check=check, flops=flops,
                targets=targets, meta=meta)


def paged_case(h, new, prefix, hq, hk, d, page, layout, label, targets=(), kv8=False):
    """B = len(new) requests, request b: new[b] queries over prefix[b] + new[b] keys (causal).
    kv8: fp8 e4m3 caches (per-tensor scales amax / 448); k and v are their dequantised values,
    which the peers and the check read."""
    Args = h.struct("talon_prefill_attention_paged_args")
    Contig = h.struct("talon_prefill_attention_args")
    B = len(new)
    kv = [p + n for p, n in zip(prefix, new)]
    total_q, total_kv = sum(new), sum(kv)
    q0s = [sum(new[:b]) for b in range(B + 1)]
    k0s = [sum(kv[:b]) for b in range(B + 1)]
    pages = [(L + page - 1) // page for L in kv]
    num_pages, stride = sum(pages) + 8, max(pages)
    flops = 4 * hq * d * sum(n * p + n * (n + 1) // 2 for n, p in zip(new, prefix))
    fa3, fa3_skip = flashinfer_fa3()
    # FlashInfer FA3 over the same paged cache (bf16 caches: its fp8 k/v needs fp8 q)
    fa3_paged_skip = "fp8 caches: FA3 takes fp8 k/v only with fp8 q" if kv8 else flashinfer_fa3_batch_skip(layout)
    fa3_paged = fa3_paged_skip is None
    nhd = layout == 0

    def make():
        dt = torch.bfloat16
        s = ragged_inputs(total_q, total_kv, hq, hk, d, q0s, k0s)
        scales = {}
        if kv8:
            for name in ("k", "v"):
                scales[name] = s[name].float().abs().max().item() / 448
                s[name] = ((s[name].float() / scales[name]).to(torch.float8_e4m3fn).float()
                           * scales[name]).to(dt)
        s["o2"] = torch.empty_like(s["o"])
        s["lens"] = torch.tensor(kv, device="cuda", dtype=torch.int32)
        shape = (num_pages, page, hk, d) if nhd else (num_pages, hk, page, d)
        perm = torch.randperm(num_pages, device="cuda").to(torch.int32)
        table = torch.full((B, stride), -1, device="cuda", dtype=torch.int32)
        for name in ("k", "v"):
            s[name + "_cache"] = torch.zeros(shape, device="cuda", dtype=dt)
        used = 0
        for b in range(B):
            ids = perm[used:used + pages[b]]
            used += pages[b]
            table[b, :pages[b]] = ids
            for name in ("k", "v"):
                src = torch.zeros(pages[b] * page, hk, d, device="cuda", dtype=dt)
                src[:kv[b]] = s[name][k0s[b]:k0s[b + 1]]
                src = src.view(pages[b], page, hk, d)
                s[name + "_cache"][ids.long()] = src if nhd else src.transpose(1, 2)
        if kv8:  # exact: the bf16 values are e4m3 values times the scale
            for name in ("k", "v"):
                s[name + "_cache"] = (s[name + "_cache"].float() / scales[name]).to(torch.float8_e4m3fn)
        s["table"] = table
        s["args"] = Args(o=ptr(s["o"]), lse=ptr(s["lse"]), q=ptr(s["q"]),
                         k_cache=ptr(s["k_cache"]), v_cache=ptr(s["v_cache"]),
                         page_table=ptr(table), kv_lens=ptr(s["lens"]), cu_seqlens_q=ptr(s["cu_q"]),
                         batch=B, total_q=total_q, max_seqlen_q=max(new), max_kv_len=max(kv),
                         num_pages=num_pages, page_size=page, page_table_stride=stride,
                         num_qo_heads=hq, num_kv_heads=hk, head_dim=d, causal=1, dtype=BF16,
                         layout=layout, kv_dtype=4 if kv8 else 0, k_scale=scales.get("k", 0.0),
                         v_scale=scales.get("v", 0.0))
        s["contig"] = Contig(o=ptr(s["o2"]), lse=ptr(s["lse"]), q=ptr(s["q"]), k=ptr(s["k"]),
                             v=ptr(s["v"]), cu_seqlens_q=ptr(s["cu_q"]), cu_seqlens_k=ptr(s["cu_k"]),
                             batch=B,
                             total_q=total_q, total_kv=total_kv, max_seqlen_q=max(new),
                             num_qo_heads=hq, num_kv_heads=hk, head_dim=d, causal=1, dtype=BF16)
        with_workspace(h, s, "args", "ws", paged=True)
        with_workspace(h, s, "contig", "ws2")
        if fa3_paged:  # its planner reads the page lists on the host, here, once
            s["fa3_paged"] = flashinfer_fa3_batch(layout)
            lens = torch.tensor(kv, dtype=torch.int32)
            npages = torch.tensor(pages, dtype=torch.int32)
            indptr = torch.cat([torch.zeros(1, dtype=torch.int32), npages.cumsum(0).to(torch.int32)])
            indices = torch.cat([table[b, :pages[b]].cpu() for b in range(B)])
            s["fa3_paged"].plan(torch.tensor(q0s, dtype=torch.int32).cuda(), indptr.cuda(), indices.cuda(),
                           (lens - (npages - 1) * page).cuda(), hq, hk, d, page, causal=True,
                           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        return s

    def talon(s, stream):
        h.call("talon_prefill_attention_paged", s["args"], stream)

    def contiguous(s):
        h.call("talon_prefill_attention", s["contig"], torch.cuda.current_stream().cuda_stream)

    def sdpa_lower_right(s):
        from torch.nn.attention.bias import causal_lower_right
        out = None
        for b in range(B):
            q = s["q"][q0s[b]:q0s[b + 1]].transpose(0, 1).unsqueeze(0)
            k = s["k"][k0s[b]:k0s[b + 1]].transpose(0, 1).unsqueeze(0)
            v = s["v"][k0s[b]:k0s[b + 1]].transpose(0, 1).unsqueeze(0)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(new[b], kv[b]),
                                                 enable_gqa=hq != hk)
        return out

    def fa3_run(s):
        return fa3(s["q"], s["k"], s["v"], causal=True, backend="fa3")

    def fa3_paged_run(s):
        return s["fa3_paged"].run(s["q"], (s["k_cache"], s["v_cache"]))

    peers = {"talon_contiguous": contiguous}
    meta = {"dtype": "bf16", "kv_dtype": "fp8_e4m3" if kv8 else "bf16", "batch": B, "hq": hq,
            "hk": hk, "head_dim": d, "causal": True, "page_size": page, "layout": "NHD" if nhd else "HND", "total_q": total_q,
            "total_kv": total_kv}
    if B == 1:
        peers["sdpa_lower_right"] = sdpa_lower_right
        if fa3 is not None and d == 128:
            peers["flashinfer_fa3"] = fa3_run
        elif fa3 is None:
            meta["skipped_peers"] = {"flashinfer_fa3": fa3_skip}
    if fa3_paged:
        peers["flashinfer_fa3_paged"] = fa3_paged_run
    else:
        meta.setdefault("skipped_peers", {})["flashinfer_fa3_paged"] = fa3_paged_skip

    def check(s):
        torch.cuda.synchronize()
        scale = 1.0 / math.sqrt(d)
        worst, tol = 0.0, 0.0
        peer_o = fa3_paged_run(s) if fa3_paged else None  # the peer read the cache right
        for b in range(B):
            for hh in (0, hq - 1):
                g = hh // (hq // hk)
                q = s["q"][q0s[b]:q0s[b + 1], hh].float()
                k = s["k"][k0s[b]:k0s[b + 1], g].float()
                v = s["v"][k0s[b]:k0s[b + 1], g].float()
                sc = (q @ k.T) * scale
                i = torch.arange(new[b], device="cuda").unsqueeze(1) + prefix[b]
                j = torch.arange(kv[b], device="cuda").unsqueeze(0)
                ref = torch.softmax(sc.masked_fill(j > i, float("-inf")), dim=-1) @ v
                head_tol = 2.0 ** -7 * ref.abs().max().item() + 4e-3
                worst = max(worst, (s["o"][q0s[b]:q0s[b + 1], hh].float() - ref).abs().max().item())
                tol = max(tol, head_tol)
                if peer_o is not None:
                    err = (peer_o[q0s[b]:q0s[b + 1], hh].float() - ref).abs().max().item()
                    assert err <= head_tol, f"FA3 paged differs by {err} (tol {head_tol})"
        assert math.isfinite(worst) and worst <= tol, f"talon o differs from the reference by {worst} (tol {tol})"

    return Case("prefill_attention_paged", label, make, talon, peers, check=check, flops=flops,
                targets=targets, meta=meta)


def fp8_case(h, lens, heads, d, causal, label, targets=()):
    """fp8 e4m3 q, k, v (per-tensor scales: amax / 448), o bf16, B equal requests. Peers: the
    same attention in bf16 on the dequantised values, talon's ("talon_bf16") and cuDNN SDPA's
    (torch has no fp8 attention), and FlashInfer's FA3 on the same fp8 tensors
    (single_prefill_with_kv_cache with per-head dequantisation scales, o bf16, one call per
    request: batches of 1 or 2; its fp8 modules need ../shared/peers' fi_pack.py entries
    `gen_single_prefill_module("fa3", e4m3, e4m3, bf16, d, d, 0, False, False, False)`, else
    skipped with the reason). Check: against fp32 SDPA of the dequantised values,
    |o - ref| <= 2^-4 max|ref| + 4e-3 (P rounded to e4m3), talon's and FA3's."""
    Args = h.struct("talon_prefill_attention_args")
    B, L = len(lens), lens[0]
    total = sum(lens)
    q0s = [sum(lens[:b]) for b in range(B + 1)]
    flops = 4 * sum(x * x for x in lens) * heads * d // (2 if causal else 1)
    FP8 = 4
    fa3, fa3_skip = flashinfer_fa3()

    def make():
        s = ragged_inputs(total, total, heads, heads, d, q0s, q0s)
        s["o16"] = torch.empty_like(s["o"])
        scales = {}
        for name in ("q", "k", "v"):
            scales[name] = s[name].float().abs().max().item() / 448
            s[name + "8"] = (s[name].float() / scales[name]).to(torch.float8_e4m3fn)
            s[name] = (s[name + "8"].float() * scales[name]).to(torch.bfloat16)  # dequantised
        common = dict(lse=ptr(s["lse"]), cu_seqlens_q=ptr(s["cu_q"]), cu_seqlens_k=ptr(s["cu_k"]),
                      batch=B, total_q=total, total_kv=total,
                      max_seqlen_q=L, num_qo_heads=heads, num_kv_heads=heads, head_dim=d,
                      causal=int(causal))
        s["args"] = Args(o=ptr(s["o"]), q=ptr(s["q8"]), k=ptr(s["k8"]), v=ptr(s["v8"]),
                         dtype=FP8, q_scale=scales["q"],
                         k_scale=scales["k"], v_scale=scales["v"], **common)
        s["args16"] = Args(o=ptr(s["o16"]), q=ptr(s["q"]), k=ptr(s["k"]), v=ptr(s["v"]),
                           dtype=BF16, **common)
        with_workspace(h, s, "args", "ws")
        with_workspace(h, s, "args16", "ws16")
        for name in ("q", "k", "v"):  # FA3's per-head dequantisation scales
            s["fa3_" + name] = torch.full((heads,), scales[name], device="cuda")
        return s

    def talon(s, stream):
        h.call("talon_prefill_attention", s["args"], stream)

    def talon_bf16(s):
        h.call("talon_prefill_attention", s["args16"], torch.cuda.current_stream().cuda_stream)

    def bhld(x):
        return x.view(B, L, heads, d).transpose(1, 2)

    def sdpa_cudnn(s):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(bhld(s["q"]), bhld(s["k"]), bhld(s["v"]),
                                                  is_causal=causal)

    def fa3_run(s, outs=None):  # outs: a list that gets each request's o (the check)
        for b in range(B):
            sl = slice(q0s[b], q0s[b + 1])
            o = fa3(s["q8"][sl], s["k8"][sl], s["v8"][sl], scale_q=s["fa3_q"], scale_k=s["fa3_k"],
                    scale_v=s["fa3_v"], o_dtype=torch.bfloat16, causal=causal, backend="fa3")
            if outs is not None:
                outs.append(o)

    peers = {"talon_bf16": talon_bf16, "sdpa_cudnn": sdpa_cudnn}
    meta = {"dtype": "fp8_e4m3", "batch": B, "hq": heads, "hk": heads, "head_dim": d,
            "causal": causal, "total_q": total}
    if fa3 is None:
        meta["skipped_peers"] = {"flashinfer_fa3": fa3_skip}
    elif B <= 2:
        peers["flashinfer_fa3"] = fa3_run

    def check(s):
        torch.cuda.synchronize()
        ref = torch.empty(total, heads, d, device="cuda")
        for b in range(B):
            for h0 in range(0, heads, 4):  # fp32 scores of 4 heads at a time
                sl = slice(q0s[b], q0s[b + 1])
                q, k, v = (s[n][sl, h0:h0 + 4].float().transpose(0, 1) for n in ("q", "k", "v"))
                ref[sl, h0:h0 + 4] = F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal).transpose(0, 1)
        err = (s["o"].float() - ref).abs().max().item()
        tol = 2.0 ** -4 * ref.abs().max().item() + 4e-3
        assert math.isfinite(err) and err <= tol, f"talon o differs from the reference by {err} (tol {tol})"
        if "flashinfer_fa3" in peers:  # the peer's scales were read as meant
            outs = []
            try:
                fa3_run(s, outs)
            except Exception:  # not runnable here (e.g. its module not packed): timing noted why
                outs = []
            if outs:
                err = (torch.cat(outs).float() - ref).abs().max().item()
                assert math.isfinite(err) and err <= tol, f"FA3 fp8 differs from the reference by {err} (tol {tol})"

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
    for causal in (True, False):
        out.append(prefill_case(h, [L] * B, 16, 16, 192, causal,
                                f"B={B} L={L} H=16 q/k 192 v 128 {'causal' if causal else 'full'}",
                                dv=128))
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
    for d, heads, need in ((128, 16, 950), (256, 8, 1100)):
        for causal in (False, True):
            t = [] if causal else [("tflops", ">=", need, f">= {need} TFLOP/s")]
            out.append(fp8_case(h, [L] * B, heads, d, causal,
                                f"fp8 B={B} L={L} H={heads} hd{d} {'causal' if causal else 'full'}",
                                targets=t))
    # short prompts in fp8 too (the tile shape is chosen by head_dim alone)
    out.append(fp8_case(h, [1024] * 16, 16, 128, True, "fp8 B=16 L=1024 H=16 hd128 causal"))
    out.append(fp8_case(h, [1024] * 16, 8, 256, True, "fp8 B=16 L=1024 H=8 hd256 causal"))
    out.append(paged_case(h, [2048], [30000], 32, 8, 128, 16, 0,
                          "2048 new over 30000 cached, page 16 NHD, GQA 32/8 hd128",
                          targets=[("tflops", ">=", 560, ">= 560 TFLOP/s")]))
    out.append(paged_case(h, [2048], [30000], 32, 8, 128, 16, 1,
                          "2048 new over 30000 cached, page 16 HND, GQA 32/8 hd128"))
    out.append(paged_case(h, [2048], [30000], 32, 8, 128, 1, 0,
                          "2048 new over 30000 cached, page 1 NHD, GQA 32/8 hd128"))
    for n in (1024, 512):  # short chunks over a long prefix: few tiles
        out.append(paged_case(h, [n], [30000], 32, 8, 128, 16, 0,
                              f"{n} new over 30000 cached, page 16 NHD, GQA 32/8 hd128"))
    out.append(paged_case(h, [512] * 8, [4096] * 8, 32, 8, 128, 16, 0,
                          "chunked: 8 x 512 new over 4096 cached, page 16 NHD, GQA 32/8 hd128"))
    out.append(paged_case(h, [2048], [30000], 32, 8, 128, 16, 0,
                          "2048 new over 30000 cached, page 16 NHD, GQA 32/8 hd128, fp8 caches",
                          kv8=True))
    out.append(paged_case(h, [2048], [30000], 32, 8, 128, 1, 0,
                          "2048 new over 30000 cached, page 1 NHD, GQA 32/8 hd128, fp8 caches",
                          kv8=True))
    return out
