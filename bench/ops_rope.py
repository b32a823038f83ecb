"""Benchmark cases of talon_rope and talon_kv_append (bench/ops.py runs them).

Llama-3-8B shapes at 4096 tokens: Hq 32, Hk 8, D 128, bf16, page 16. q and k are views into a
fused qkv buffer [tokens, (32 + 8 + 8) * 128], as an engine holds them after the QKV GEMM.
Peers: vLLM's reference formula for rope in torch (RotaryEmbedding.forward_native: gather the
cos/sin rows, rotate, concatenate the pass-through part; it returns new tensors, so it is
spared talon's in-place write-back) and index_copy_ into the cache views for kv_append
(fp8: x / scale, clamped to +-448, cast to float8_e4m3fn; for the HND cache layout an
indexed assignment), eager and torch.compile; and, for
scale (both ops), "copy": a torch device-to-device copy moving the same number of bytes (half
read, half written), which shows what the per-call floor leaves of the copy ceiling at this
size. Optional peers (ops_norm's loaders; one that cannot be imported or has no kernel for
the case is named, with the reason, in the row's "skipped_peers"): "flashinfer": rope by
apply_rope_with_cos_sin_cache_inplace on the same qkv views and cache (is_neox as talon's case;
in place, as talon), kv_append by append_paged_kv_cache on the same bf16 caches (NHD or HND)
with the whole cache as one request whose pages are in order, so a token's position is its
slot (it only copies: no fp8 cases); "liger": Liger-Kernel's rope_forward (NeoX only) in place
on contiguous copies of q and k made with each set, with each token's cos/sin row (HF's
cat(freqs, freqs) layout: Liger takes no positions) gathered with the set too. Each is checked
against talon's output on the same inputs (rope: within 2^-7 |x|; kv_append: the written rows
bit for bit); one that differs is reported as "<peer>_error", not timed.
Bytes are the minimal traffic: rope reads and writes the rotated part of q and k and reads the
positions and one cos/sin row per token; kv_append reads k, v and the slots and writes the
cache rows. Target (the issue): >= 80% of the copy ceiling for each op.
"""
import torch

from ops import Case, ptr
from ops_norm import PeerCheck, flashinfer, liger, note_skipped

T, HQ, HK, D, PAGE, MAX_POS = 4096, 32, 8, 128, 16, 8192
BF16, F16, FP8 = 0, 1, 4
TARGET = [("pct_copy", ">=", 80.0, ">= 80% of the copy ceiling")]


def rope_args(h):
    return h.struct("talon_rope_args")


def kv_args(h):
    return h.struct("talon_kv_append_args")


def cos_sin_cache(rot, theta=10000.0):
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float64, device="cuda") / rot)
    f = torch.arange(MAX_POS, dtype=torch.float64, device="cuda")[:, None] * inv[None, :]
    return torch.cat([f.cos(), f.sin()], dim=-1).float()


def qkv_views(qkv):
    return qkv[:, :HQ * D], qkv[:, HQ * D:(HQ + HK) * D], qkv[:, (HQ + HK) * D:]


# ---------------------------------------------------------------- rope
def peer_rope(positions, q, k, cache, neox, rot=D):
    """vLLM RotaryEmbedding.forward_native (_apply_rotary_emb_torch), new tensors out."""
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)

    def apply(x):
        x = x.reshape(x.shape[0], -1, D)
        xr, xp = x[..., :rot], x[..., rot:]
        c, s = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
        if neox:
            x1, x2 = torch.chunk(xr, 2, dim=-1)
        else:
            x1, x2 = xr[..., ::2], xr[..., 1::2]
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        o = torch.cat((o1, o2), dim=-1) if neox else torch.stack((o1, o2), dim=-1).flatten(-2)
        return torch.cat((o, xp), dim=-1).flatten(1)
    return apply(q), apply(k)


def rope_fp32(positions, q, k, cache, neox, rot=D):
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)

    def apply(x):
        x = x.float().reshape(x.shape[0], -1, D).clone()
        c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
        if neox:
            x1, x2 = x[..., :rot // 2].clone(), x[..., rot // 2:rot].clone()
            x[..., :rot // 2], x[..., rot // 2:rot] = x1 * c - x2 * s, x2 * c + x1 * s
        else:
            x1, x2 = x[..., 0:rot:2].clone(), x[..., 1:rot:2].clone()
            x[..., 0:rot:2], x[..., 1:rot:2] = x1 * c - x2 * s, x2 * c + x1 * s
        return x.flatten(1)
    return apply(q), apply(k)


def liger_rope(rope_forward, q, k, cos, sin):
    """Liger's rope_forward in place on contiguous q [T, Hq*D], k [T, Hk*D]: it takes
    [batch, heads, seq, dim] views and rotates their [batch, seq, heads, dim] storage (copied
    first unless contiguous: hence the copies, not the qkv views); cos, sin [T, D]: the rows of
    the tokens' positions."""
    t = q.shape[0]
    rope_forward(q.view(1, t, HQ, D).transpose(1, 2), k.view(1, t, HK, D).transpose(1, 2), cos, sin)


def near_talon(peer, got, want):
    """A peer's bf16 rotation against talon's: each is within about 2^-8 |x| of the exact value
    (talon's check), so the two within 2^-7 |x| (and a little absolute) of each other."""
    want = want.float()
    err = (got.float() - want).abs()
    tol = 2**-7 * want.abs() + 1e-4 * (1 + want.abs())
    assert bool((err <= tol).all()), f"{peer}: differs from talon_rope by up to {float(err.max())}"


def rope_case(h, label, neox=True, theta_mode=False, tokens=T, targets=()):
    A = rope_args(h)
    cache = cos_sin_cache(D)
    nbytes = 2 * tokens * (HQ + HK) * D * 2 + tokens * 8 + tokens * D * 4
    compiled = torch.compile(peer_rope, dynamic=False)
    fi, fi_why = flashinfer()
    lg, lg_why = liger()
    skipped, pc = {}, PeerCheck()
    if fi is None:
        skipped["flashinfer"] = fi_why
    if lg is None:
        skipped["liger"] = lg_why
    elif not neox:
        skipped["liger"] = "Liger-Kernel's rope is the NeoX (rotate-half) form only"
        lg = None

    def make():
        qkv = torch.randn(tokens, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16)
        pos = torch.randint(0, MAX_POS, (tokens,), device="cuda", dtype=torch.int64)
        q, k, _ = qkv_views(qkv)
        a = A(q=ptr(q), k=ptr(k), positions=ptr(pos), cos_sin_cache=0 if theta_mode else ptr(cache),
              tokens=tokens, num_q_heads=HQ, num_kv_heads=HK, head_dim=D, rot_dim=D,
              q_stride=qkv.shape[1], k_stride=qkv.shape[1], max_pos=MAX_POS, theta=10000.0,
              dtype=BF16, positions_dtype=1, style=0 if neox else 1)
        src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8).random_()
        s = {"qkv": qkv, "pos": pos, "args": a, "src": src, "dst": torch.empty_like(src)}
        if lg is not None:
            s["lq"], s["lk"] = q.contiguous(), k.contiguous()
            cos, sin = cache.index_select(0, pos).chunk(2, dim=-1)
            s["cos"], s["sin"] = cos.repeat(1, 2), sin.repeat(1, 2)
        if skipped:
            note_skipped("rope", skipped)
        return s

    def talon(s, stream):
        h.call("talon_rope", s["args"], stream)

    def fi_rope(pos, q, k):  # in place on the qkv views, as talon
        fi.rope.apply_rope_with_cos_sin_cache_inplace(pos, q, k, D, cache, is_neox=neox)

    def check(s):
        s["qkv"].copy_(torch.randn_like(s["qkv"]))
        before = s["qkv"].clone()
        q0, k0, _ = qkv_views(before)
        talon(s, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        q, k, v = qkv_views(s["qkv"])
        rq, rk = rope_fp32(s["pos"], q0, k0, cache, neox)
        for got, want in ((q, rq), (k, rk)):
            err = (got.float() - want).abs()
            tol = 2**-8 * want.abs() + 1e-5 * (1 + want.abs())
            assert bool((err <= tol).all()), f"talon_rope differs from fp32 torch by {err.max()}"
        assert torch.equal(v, qkv_views(before)[2]), "talon_rope touched v"

        def fi_check():  # on a copy of the inputs talon rotated
            fq, fk, _ = qkv_views(before.clone())
            fi_rope(s["pos"], fq, fk)
            near_talon("flashinfer", fq, q)
            near_talon("flashinfer", fk, k)

        def liger_check():
            lq, lk = q0.contiguous(), k0.contiguous()
            liger_rope(lg["rope"], lq, lk, s["cos"], s["sin"])
            near_talon("liger", lq, q)
            near_talon("liger", lk, k)
        for name, fn in (("flashinfer", fi_check), ("liger", liger_check)):
            if name in peers:
                pc.verify(name, fn)

    def peer(fn):
        return lambda s: fn(s["pos"], *qkv_views(s["qkv"])[:2], cache, neox)

    peers = {"eager": peer(peer_rope), "compile": peer(compiled),
             "copy": lambda s: s["dst"].copy_(s["src"])}
    if fi is not None:
        peers["flashinfer"] = pc.guard("flashinfer",
                                       lambda s: fi_rope(s["pos"], *qkv_views(s["qkv"])[:2]))
    if lg is not None:
        peers["liger"] = pc.guard("liger", lambda s: liger_rope(lg["rope"], s["lq"], s["lk"],
                                                                s["cos"], s["sin"]))
    return Case("rope", label, make, talon, peers, bytes=nbytes, check=check, targets=targets,
                meta={"skipped_peers": skipped} if skipped else None)


# ---------------------------------------------------------------- kv_append
def peer_kv(kc, vc, k, v, slots, fp8, ks, vs, hnd=False):
    if fp8:  # index_copy_ has no float8 kernel: move the bytes
        k = (k.float() / ks).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
        v = (v.float() / vs).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
        kc, vc = kc.view(torch.uint8), vc.view(torch.uint8)
    if hnd:  # [pages, HK, PAGE, D]: a token's heads are PAGE rows apart
        kc[slots // PAGE, :, slots % PAGE] = k.reshape(-1, HK, D)
        vc[slots // PAGE, :, slots % PAGE] = v.reshape(-1, HK, D)
        return
    kc.view(-1, HK, D).index_copy_(0, slots, k.reshape(-1, HK, D))
    vc.view(-1, HK, D).index_copy_(0, slots, v.reshape(-1, HK, D))


def kv_case(h, label, fp8=False, tokens=T, targets=(), hnd=False):
    A = kv_args(h)
    ks, vs = (0.5, 0.25) if fp8 else (0.0, 0.0)
    compiled = torch.compile(peer_kv, dynamic=False)
    pages = (tokens * 2 + PAGE - 1) // PAGE
    elem = 1 if fp8 else 2
    nbytes = 2 * tokens * HK * D * 2 + tokens * 8 + 2 * tokens * HK * D * elem
    cdt = torch.float8_e4m3fn if fp8 else torch.bfloat16
    fi, fi_why = flashinfer()
    skipped, pc = {}, PeerCheck()
    if fi is None:
        skipped["flashinfer"] = fi_why
    elif fp8:
        skipped["flashinfer"] = ("append_paged_kv_cache copies into a cache of the input's "
                                 "dtype: no bf16 -> fp8 conversion with a scale")
        fi = None
    else:  # the whole cache as one request, its pages in order: a token's position is its slot
        fi_batch = torch.zeros(tokens, device="cuda", dtype=torch.int32)
        fi_pages = torch.arange(pages, device="cuda", dtype=torch.int32)
        fi_indptr = torch.tensor([0, pages], device="cuda", dtype=torch.int32)
        fi_last = torch.tensor([PAGE], device="cuda", dtype=torch.int32)

    def make():
        qkv = torch.randn(tokens, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16)
        _, k, v = qkv_views(qkv)
        kc = torch.empty((pages, HK, PAGE, D) if hnd else (pages, PAGE, HK, D), device="cuda",
                         dtype=cdt)
        vc = torch.empty_like(kc)
        slots = torch.randperm(pages * PAGE, device="cuda")[:tokens].contiguous()
        a = A(k_cache=ptr(kc), v_cache=ptr(vc), k=ptr(k), v=ptr(v), slot_mapping=ptr(slots),
              tokens=tokens, num_kv_heads=HK, head_dim=D, num_pages=pages, page_size=PAGE,
              k_stride=qkv.shape[1], v_stride=qkv.shape[1], k_scale=ks, v_scale=vs,
              dtype=BF16, cache_dtype=FP8 if fp8 else BF16, layout=int(hnd))
        # the same traffic as a plain device copy: what any kernel of this size costs here
        src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8).random_()
        s = {"qkv": qkv, "kc": kc, "vc": vc, "slots": slots, "args": a,
             "src": src, "dst": torch.empty_like(src)}
        if fi is not None:
            s["fi_pos"] = slots.int()
        if skipped:
            note_skipped("kv_append", skipped)
        return s

    def talon(s, stream):
        h.call("talon_kv_append", s["args"], stream)

    def fi_append(s, kc, vc):
        _, k, v = qkv_views(s["qkv"])
        fi.page.append_paged_kv_cache(k.view(tokens, HK, D), v.view(tokens, HK, D), fi_batch,
                                      s["fi_pos"], (kc, vc), fi_pages, fi_indptr, fi_last,
                                      "HND" if hnd else "NHD")

    def written(cache, sl):  # the cache rows of slots sl, as bytes [tokens, HK * D * elem]
        rows = cache[sl // PAGE, :, sl % PAGE] if hnd else cache.view(-1, HK * D)[sl]
        return rows.reshape(-1, HK * D).view(torch.uint8)

    def args_of(s):
        _, k, v = qkv_views(s["qkv"])
        return s["kc"], s["vc"], k, v, s["slots"], fp8, ks, vs, hnd

    def check(s):
        _, k, v = qkv_views(s["qkv"])
        for cache, x, sc in ((s["kc"], k, ks), (s["vc"], v, vs)):
            want = (x.float() / sc).clamp(-448, 448).to(torch.float8_e4m3fn) if fp8 else x
            assert torch.equal(written(cache, s["slots"]), want.contiguous().view(torch.uint8)), \
                "talon_kv_append: cache rows differ from the torch conversion"

        def fi_check():  # into zeroed caches of its own, then the same rows as talon's
            kc, vc = torch.zeros_like(s["kc"]), torch.zeros_like(s["vc"])
            fi_append(s, kc, vc)
            for mine, theirs in ((s["kc"], kc), (s["vc"], vc)):
                assert torch.equal(written(theirs, s["slots"]), written(mine, s["slots"])), \
                    "flashinfer: cache rows differ from talon's"
        if "flashinfer" in peers:
            pc.verify("flashinfer", fi_check)

    peers = {"eager": lambda s: peer_kv(*args_of(s)),
             "compile": lambda s: compiled(*args_of(s)),
             "copy": lambda s: s["dst"].copy_(s["src"])}
    if fi is not None:
        peers["flashinfer"] = pc.guard("flashinfer", lambda s: fi_append(s, s["kc"], s["vc"]))
    return Case("kv_append", label, make, talon, peers, bytes=nbytes, check=check,
                targets=targets, meta={"skipped_peers": skipped} if skipped else None)


def cases(h):
    return [
        rope_case(h, "T=4096 Hq32 Hk8 D128 NeoX cache", targets=TARGET),
        rope_case(h, "T=4096 Hq32 Hk8 D128 GPT-J cache", neox=False),
        rope_case(h, "T=4096 Hq32 Hk8 D128 NeoX theta", theta_mode=True),
        rope_case(h, "T=64 Hq32 Hk8 D128 NeoX cache", tokens=64),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16", targets=TARGET + [
            ("flashinfer_over_talon", ">=", 1.05, ">= 1.05x FlashInfer (issue 20)")]),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16->fp8", fp8=True, targets=TARGET),
        kv_case(h, "T=64 Hk8 D128 page16 bf16", tokens=64),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16 HND", hnd=True),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16->fp8 HND", fp8=True, hnd=True),
        # past the per-call floor (~5 us here): the kernels' streaming rate
        rope_case(h, "T=32768 Hq32 Hk8 D128 NeoX cache", tokens=32768),
        kv_case(h, "T=32768 Hk8 D128 page16 bf16", tokens=32768),
        kv_case(h, "T=32768 Hk8 D128 page16 bf16->fp8", fp8=True, tokens=32768),
    ]
