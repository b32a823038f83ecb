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
size.
Bytes are the minimal traffic: rope reads and writes the rotated part of q and k and reads the
positions and one cos/sin row per token; kv_append reads k, v and the slots and writes the
cache rows. Target (the issue): >= 80% of the copy ceiling for each op.
"""
import torch

from ops import Case, ptr

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


def rope_case(h, label, neox=True, theta_mode=False, tokens=T, targets=()):
    A = rope_args(h)
    cache = cos_sin_cache(D)
    nbytes = 2 * tokens * (HQ + HK) * D * 2 + tokens * 8 + tokens * D * 4
    compiled = torch.compile(peer_rope, dynamic=False)

    def make():
        qkv = torch.randn(tokens, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16)
        pos = torch.randint(0, MAX_POS, (tokens,), device="cuda", dtype=torch.int64)
        q, k, _ = qkv_views(qkv)
        a = A(q=ptr(q), k=ptr(k), positions=ptr(pos), cos_sin_cache=0 if theta_mode else ptr(cache),
              tokens=tokens, num_q_heads=HQ, num_kv_heads=HK, head_dim=D, rot_dim=D,
              q_stride=qkv.shape[1], k_stride=qkv.shape[1], max_pos=MAX_POS, theta=10000.0,
              dtype=BF16, positions_dtype=1, style=0 if neox else 1)
        src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8).random_()
        return {"qkv": qkv, "pos": pos, "args": a, "src": src, "dst": torch.empty_like(src)}

    def talon(s, stream):
        h.call("talon_rope", s["args"], stream)

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

    def peer(fn):
        return lambda s: fn(s["pos"], *qkv_views(s["qkv"])[:2], cache, neox)

    return Case("rope", label, make, talon,
                {"eager": peer(peer_rope), "compile": peer(compiled),
                 "copy": lambda s: s["dst"].copy_(s["src"])},
                bytes=nbytes, check=check, targets=targets)


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
        return {"qkv": qkv, "kc": kc, "vc": vc, "slots": slots, "args": a,
                "src": src, "dst": torch.empty_like(src)}

    def talon(s, stream):
        h.call("talon_kv_append", s["args"], stream)

    def args_of(s):
        _, k, v = qkv_views(s["qkv"])
        return s["kc"], s["vc"], k, v, s["slots"], fp8, ks, vs, hnd

    def check(s):
        _, k, v = qkv_views(s["qkv"])
        for cache, x, sc in ((s["kc"], k, ks), (s["vc"], v, vs)):
            sl = s["slots"]
            got = cache[sl // PAGE, :, sl % PAGE] if hnd else cache.view(-1, HK * D)[sl]
            want = (x.float() / sc).clamp(-448, 448).to(torch.float8_e4m3fn) if fp8 else x
            assert torch.equal(got.reshape(-1, HK * D).view(torch.uint8),
                               want.contiguous().view(torch.uint8)), \
                "talon_kv_append: cache rows differ from the torch conversion"

    return Case("kv_append", label, make, talon,
                {"eager": lambda s: peer_kv(*args_of(s)),
                 "compile": lambda s: compiled(*args_of(s)),
                 "copy": lambda s: s["dst"].copy_(s["src"])},
                bytes=nbytes, check=check, targets=targets)


def cases(h):
    return [
        rope_case(h, "T=4096 Hq32 Hk8 D128 NeoX cache", targets=TARGET),
        rope_case(h, "T=4096 Hq32 Hk8 D128 GPT-J cache", neox=False),
        rope_case(h, "T=4096 Hq32 Hk8 D128 NeoX theta", theta_mode=True),
        rope_case(h, "T=64 Hq32 Hk8 D128 NeoX cache", tokens=64),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16", targets=TARGET),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16->fp8", fp8=True, targets=TARGET),
        kv_case(h, "T=64 Hk8 D128 page16 bf16", tokens=64),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16 HND", hnd=True),
        kv_case(h, "T=4096 Hk8 D128 page16 bf16->fp8 HND", fp8=True, hnd=True),
        # past the per-call floor (~5 us here): the kernels' streaming rate
        rope_case(h, "T=32768 Hq32 Hk8 D128 NeoX cache", tokens=32768),
        kv_case(h, "T=32768 Hk8 D128 page16 bf16", tokens=32768),
        kv_case(h, "T=32768 Hk8 D128 page16 bf16->fp8", fp8=True, tokens=32768),
    ]
