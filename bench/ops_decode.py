"""Decode attention over a paged KV cache (bench/ops.py family).

talon_decode_attention on pages scattered at random (a permutation of the page ids), against
PyTorch SDPA (cuDNN and flash backends) on the same K/V laid out contiguously [B, Hk, L, D]
with a query of length 1 and enable_gqa=True. bf16, D=128, Hq=32, Hk=8, page 16; GB/s counts
the K and V bytes read once. Also: fp8 e4m3 KV at the same shapes (peers on the bf16 copy of
the same values); MHA (32 kv heads) at B=16 L=4096 and head_dim 256 (16 query heads over 8)
at B=32 L=4096, each in bf16 and fp8; the three target shapes with the caches in the HND
layout ([pages, Hk, page, D]); the B=64 case with each request's pages in order (the cost of
scattered pages); a sweep of forced split counts beside the automatic choice.
Peers "flashinfer" and "flashinfer_tc" (where ops_norm's loader imports FlashInfer; else named,
with the reason, in the row's "skipped_peers"): BatchDecodeWithPagedKVCacheWrapper with
use_tensor_cores False / True on talon's own caches (NHD or HND), its indices each set's page
table, planned in make() (outside the timed calls) for that set; fp8 KV with k_scale = v_scale =
talon's scale, CUDA cores only (the pack of ../shared/peers has no e4m3 tensor-core decode, and
head_dim 128 kernels only: the D=256 cases skip both). Their output is checked against talon's
(within twice talon's tolerance to the fp32 reference); one that differs is reported as
"<peer>_error", not timed.
"""
import ctypes
import math

from ops import Case, ptr
from ops_norm import PeerCheck, flashinfer, note_skipped

HQ, HK, D, PS = 32, 8, 128, 16
BF16, FP8 = 0, 4
NHD, HND = 0, 1


def cases(h):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    Args = h.struct("talon_decode_attention_args")
    h.struct("talon_merge_attention_states_args")
    h.lib.talon_decode_attention_workspace_size.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)]

    def args_for(s, splits):
        a = Args()
        a.o, a.lse, a.q = ptr(s["o"]), ptr(s["lse"]), ptr(s["q"])
        a.k_cache, a.v_cache = ptr(s["k_cache"]), ptr(s["v_cache"])
        a.page_table, a.kv_lens = ptr(s["pt"]), ptr(s["lens"])
        a.batch, a.num_qo_heads, a.num_kv_heads, a.head_dim = s["B"], s["hq"], s["hk"], s["d"]
        a.page_size, a.max_kv_len, a.num_splits = PS, s["L"], splits
        a.dtype = BF16
        a.kv_dtype = FP8 if s["fp8"] else BF16
        a.k_scale = a.v_scale = s["scale"]
        a.layout = HND if s["hnd"] else NHD
        n = ctypes.c_int64()
        h._check("talon_decode_attention_workspace_size",
                 h.lib.talon_decode_attention_workspace_size(h.ctx, ctypes.byref(a), ctypes.byref(n)))
        return a, n.value

    def make(B, L, fp8=False, splits=0, in_order=False, hq=HQ, hk=HK, d=D, hnd=False, fi_tc=()):
        pages = B * (L // PS)
        kv = {}
        for name in ("k", "v"):
            x = torch.randn((pages, hk, PS, d) if hnd else (pages, PS, hk, d), device="cuda",
                            dtype=torch.bfloat16)
            if fp8:
                cache = (x.float() * 4.0).to(torch.float8_e4m3fn)  # scale 0.25: values ~N(0, 4)
                x = (cache.float() * 0.25).to(torch.bfloat16)      # the peers' (dequantised) copy
            else:
                cache = x
            kv[name] = (cache, x)
        pt = (torch.arange(pages, device="cuda", dtype=torch.int32) if in_order else
              torch.randperm(pages, device="cuda", dtype=torch.int32)).view(B, L // PS)
        s = {"B": B, "L": L, "hq": hq, "hk": hk, "d": d, "fp8": fp8, "hnd": hnd,
             "scale": 0.25 if fp8 else 1.0, "pt": pt,
             "k_cache": kv["k"][0], "v_cache": kv["v"][0],
             "q": torch.randn(B, hq, d, device="cuda", dtype=torch.bfloat16),
             "o": torch.empty(B, hq, d, device="cuda", dtype=torch.bfloat16),
             "lse": torch.empty(B, hq, device="cuda", dtype=torch.float32),
             "lens": torch.full((B,), L, device="cuda", dtype=torch.int32)}
        # contiguous [B, Hk, L, D] copies for the peers: token t of request b is in page
        # pt[b, t // PS] at offset t % PS
        for name in ("k", "v"):
            x = kv[name][1][pt.long()]  # [B, L / PS, PS, Hk, D] (HND: [B, L / PS, Hk, PS, D])
            x = x.transpose(1, 2) if hnd else x.reshape(B, L, hk, d).transpose(1, 2)
            s[name] = x.reshape(B, hk, L, d).contiguous()
        a, ws = args_for(s, splits)
        s["ws"] = torch.empty(max(ws, 16), device="cuda", dtype=torch.uint8)
        a.workspace, a.workspace_bytes = ptr(s["ws"]), ws
        s["args"] = a
        if fi_tc:
            s["fi_o"] = torch.empty_like(s["o"])
        for tc in fi_tc:
            s[fi_name(tc)] = fi_plan(s, tc)
        return s

    def talon(s, stream):
        h.call("talon_decode_attention", s["args"], stream)

    def sdpa(backend):
        def run(s):
            q4 = s["q"].view(s["B"], s["hq"], 1, s["d"])
            with sdpa_kernel(backend):
                if "kx" not in s:
                    try:
                        return F.scaled_dot_product_attention(q4, s["k"], s["v"], enable_gqa=True)
                    except RuntimeError:
                        # a backend without GQA reads K/V expanded to Hq heads
                        s["kx"] = s["k"].repeat_interleave(s["hq"] // s["hk"], dim=1)
                        s["vx"] = s["v"].repeat_interleave(s["hq"] // s["hk"], dim=1)
                return F.scaled_dot_product_attention(q4, s["kx"], s["vx"])
        return run

    def check(s):
        torch.cuda.synchronize()
        B, hq, hk, d = s["B"], s["hq"], s["hk"], s["d"]
        q = s["q"].float().view(B, hk, hq // hk, d)
        k, v = s["k"].float(), s["v"].float()  # [B, Hk, L, D]
        sc = torch.einsum("bhgd,bhld->bhgl", q, k) / math.sqrt(d)
        lse = torch.logsumexp(sc, dim=-1).reshape(B, hq)
        o = torch.einsum("bhgl,bhld->bhgd", torch.softmax(sc, dim=-1), v).reshape(B, hq, d)
        err = (s["o"].float() - o).abs().max().item()
        tol = 2e-3 + 2 ** -7 * o.abs().max().item()
        assert err <= tol, f"talon o differs from fp32 attention by {err} (tol {tol})"
        lerr = (s["lse"] - lse).abs().max().item()
        assert lerr <= 1e-3, f"talon lse differs by {lerr}"

    peers = {"sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
             "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION)}
    fi, fi_why = flashinfer()
    fi_ws = []  # one float workspace for all the wrappers: they run one at a time

    def fi_name(tc):
        return "flashinfer_tc" if tc else "flashinfer"

    def fi_plan(s, tc):
        """A wrapper planned on set s's page table (or the error, for the peer to raise)."""
        try:
            if not fi_ws:
                fi_ws.append(torch.zeros(256 * 2**20, device="cuda", dtype=torch.uint8))
            B, npages = s["B"], s["L"] // PS  # L is whole pages: every last page is full
            w = fi.BatchDecodeWithPagedKVCacheWrapper(fi_ws[0], "HND" if s["hnd"] else "NHD",
                                                      use_tensor_cores=tc)
            w.plan(torch.arange(B + 1, device="cuda", dtype=torch.int32) * npages,
                   s["pt"].flatten(), torch.full((B,), PS, device="cuda", dtype=torch.int32),
                   s["hq"], s["hk"], s["d"], PS, q_data_type=torch.bfloat16,
                   kv_data_type=s["k_cache"].dtype)
            return w
        except Exception as exc:
            return exc

    def fi_run(tc):
        def run(s):
            w = s[fi_name(tc)]
            if isinstance(w, Exception):
                raise w
            sc = s["scale"] if s["fp8"] else None  # a v_scale adds a kernel: fp8 only
            return w.run(s["q"], (s["k_cache"], s["v_cache"]), k_scale=sc, v_scale=sc,
                         out=s["fi_o"])
        return run

    def case(label, nbytes, targets=(), extra=None, **shape):
        """A Case of make(**shape) with the SDPA peers, extra ones and FlashInfer's where the
        pack has its kernel."""
        pc, skipped, fi_tc = PeerCheck(), {}, []
        d = shape.get("d", D)
        if fi is None:
            skipped["flashinfer"] = skipped["flashinfer_tc"] = fi_why
        elif d != 128:
            skipped["flashinfer"] = skipped["flashinfer_tc"] = (
                f"head_dim {d}: the FlashInfer pack (../shared/peers) has head_dim 128 only")
        elif shape.get("fp8"):
            fi_tc.append(False)
            skipped["flashinfer_tc"] = ("no e4m3-KV tensor-core decode in the FlashInfer pack "
                                        "(../shared/peers)")
        else:
            fi_tc += [False, True]
        p = dict(peers, **(extra or {}))
        for tc in fi_tc:
            p[fi_name(tc)] = pc.guard(fi_name(tc), fi_run(tc))

        def make_set():
            if skipped:
                note_skipped("decode_attention", skipped)
            return make(fi_tc=fi_tc, **shape)

        def check_with_peers(s):
            check(s)
            o = s["o"].float()
            tol = 2 * (2e-3 + 2 ** -7 * o.abs().max().item())  # talon's and the peer's
            for tc in fi_tc:
                def fi_check(tc=tc):
                    fi_run(tc)(s)
                    err = (s["fi_o"].float() - o).abs().max().item()
                    assert err <= tol, f"{fi_name(tc)}: o differs from talon's by {err} (tol {tol})"
                pc.verify(fi_name(tc), fi_check)

        return Case("decode_attention", label, make_set, talon, p, bytes=nbytes,
                    check=check_with_peers, targets=targets,
                    meta={"skipped_peers": skipped} if skipped else None)

    out = []
    shapes = [(64, 4096, [("gbs", ">=", 2800, "B=64 L=4096 >= 2800 GB/s"),
                          ("sdpa_cudnn_over_talon", ">=", 1.03, "B=64 L=4096 >= 1.03x cuDNN SDPA (issue 20)")]),
              (1, 32768, [("gbs", ">=", 2000, "B=1 L=32768 >= 2000 GB/s")]),
              (256, 512, [("gbs", ">=", 2200, "B=256 L=512 >= 2200 GB/s")])]
    for B, L, targets in shapes:
        out.append(case(f"B={B} L={L} bf16 page {PS}", 2 * B * L * HK * D * 2, targets, B=B, L=L))
    for B, L, _ in shapes:
        out.append(case(f"B={B} L={L} fp8 KV page {PS}", 2 * B * L * HK * D, B=B, L=L, fp8=True))
    # The HND layout: a kv head's rows of a page contiguous (4 KB at page 16)
    for B, L, _ in shapes:
        for fp8 in (False, True):
            kind = "fp8 KV" if fp8 else "bf16"
            out.append(case(f"B={B} L={L} {kind} page {PS} HND",
                            2 * B * L * HK * D * (1 if fp8 else 2), B=B, L=L, fp8=fp8, hnd=True))
    # Hq 64 over 8 (Llama-3-70B): issue 20's FlashInfer gap
    out.append(case(f"B=128 L=2048 64/8 bf16 page {PS}", 2 * 128 * 2048 * HK * D * 2,
                    [("flashinfer_tc_over_talon", ">=", 1.05, ">= 1.05x FlashInfer (tensor cores)"),
                     ("sdpa_cudnn_over_talon", ">=", 1.0, ">= 1.0x cuDNN SDPA")],
                    B=128, L=2048, hq=64))
    # The same group of 8 with an fp8 cache, and where the split rule fills the GPU (one CTA a
    # kv head: 8 heads per CTA)
    out.append(case(f"B=128 L=2048 64/8 fp8 KV page {PS}", 2 * 128 * 2048 * HK * D, B=128, L=2048,
                    hq=64, fp8=True))
    for B, L in ((16, 4096), (1, 32768)):
        out.append(case(f"B={B} L={L} 64/8 bf16 page {PS}", 2 * B * L * HK * D * 2, B=B, L=L, hq=64))
    # One request, short to medium context: the split rule's latency regime (<= 1.5 CTAs/SM)
    for L in (2048, 8192, 16384):
        out.append(case(f"B=1 L={L} bf16 page {PS}", 2 * L * HK * D * 2, B=1, L=L))
    # MHA (one query head per kv head: no sharing of K/V loads), same bytes as B=64 GQA
    for fp8 in (False, True):
        out.append(case(f"B=16 L=4096 MHA 32/32 {'fp8 KV' if fp8 else 'bf16'} page {PS}",
                        2 * 16 * 4096 * 32 * D * (1 if fp8 else 2), B=16, L=4096, fp8=fp8,
                        hq=32, hk=32))
    # head_dim 256 (Gemma-2 9B: 16 query heads over 8 kv heads), same bytes as B=64 D=128
    for fp8 in (False, True):
        out.append(case(f"B=32 L=4096 D=256 16/8 {'fp8 KV' if fp8 else 'bf16'} page {PS}",
                        2 * 32 * 4096 * 8 * 256 * (1 if fp8 else 2), B=32, L=4096, fp8=fp8,
                        hq=16, hk=8, d=256))
    # The paging's cost: each request's pages in order, so the caches are [B, L, Hk, D] and
    # cuDNN can read them in place (sdpa_cudnn_bshd: a head's rows 2 KB apart, as talon reads).
    def cudnn_bshd(s):
        k, v = (s[n].view(s["B"], s["L"], HK, D).transpose(1, 2) for n in ("k_cache", "v_cache"))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(s["q"].view(s["B"], HQ, 1, D), k, v, enable_gqa=True)
    out.append(case(f"B=64 L=4096 bf16 page {PS} pages in order", 2 * 64 * 4096 * HK * D * 2,
                    extra={"sdpa_cudnn_bshd": cudnn_bshd}, B=64, L=4096, in_order=True))
    sweep = {(64, 4096): [2], (1, 32768): [16, 24, 32, 33, 48, 64, 66, 128],
             (1, 8192): [8, 16, 32, 33, 64]}
    for (B, L), splits in sweep.items():
        for n in splits:
            out.append(Case("decode_attention_splits", f"B={B} L={L} splits={n}",
                            lambda B=B, L=L, n=n: make(B, L, False, n), talon, {},
                            bytes=2 * B * L * HK * D * 2, check=check))
    return out
