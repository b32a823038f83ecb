"""talon_moe_gemm: the expert computation of an MoE layer beside torch (bench/ops.py runs it).

One routing per case (uniform: each token's k experts distinct and uniformly drawn; or Zipf
1.2 skewed), aligned once by talon_moe_align_block_size (block 128) outside the timing, as
an engine does once per layer; inputs x [T, H] N(0, 1), weights N(0, 1) / sqrt(fan-in), bf16.
talon (timed): gate/up (x by token, SwiGLU fused, sorted rows [sorted, I]; at decode, T <= 64,
pair rows [T * k, I], talon.h's recipe) -> down (router weights in the epilogue, rows
[T * k, H]) -> talon_moe_sum into [T, H]. "talon_sorted" (decode): the same with the
intermediate in sorted rows.
Peers on the same routing and tensors:
  "torch": the same work in torch ops: index_select gather of x into expert-grouped rows
    (each group padded to 16 rows, as torch._grouped_mm's users pad), torch._grouped_mm
    (CUTLASS), silu(gate) * up, torch._grouped_mm, times the router weights, index_add_ into
    [T, H];
  "grouped_mm": its two torch._grouped_mm calls alone on pre-gathered inputs (the issue's
    "two GEMMs alone");
  "dense": cuBLAS (F.linear) of the same two products as one dense GEMM each (rows T * k,
    one expert's weights): the ceiling a grouped GEMM approaches.
TFLOP/s count 2 T k (2 I H + H I) (no padding). Decode (T <= 64): bytes = the weights of the
experts the routing touches + activations in and out.
Check: 16 tokens of talon's [T, H] against fp64 products of their experts' weights (the
intermediate rounded to bf16 as talon stores it): |talon - ref| <= 2^-7 (|ref| + sum_j
|w_j y_j|) + 2^-12 sum_j |w_j| (|w2| . |h|): talon rounds each expert's output y_j to bf16
before the sum, and its fp32 gate/up sums round a few h elements to the other neighbour
(each off by 2^-8 |h|). A wrong expert, row or weight is off by O(|y|), far above this.
(The torch pipeline rounds more, e.g. bf16 atomics in index_add_, so it is no reference.)
Targets (issue 23): bf16 T = 4096: Mixtral >= 1.15x torch and >= 0.95x grouped_mm alone;
Qwen3-30B-A3B and DeepSeek-V3 >= 550 TFLOP/s; decode T <= 64 >= 2800 GB/s of weights touched.

talon_grouped_gemm (op "grouped_gemm"): one GEMM over groups, beside torch._grouped_mm on the
same tensors. Contiguous: a routing's per-expert row counts, each group padded to 128 rows
(the layout's tiles; torch gets the same rows through offs). Masked: [G, 256, K] with random
counts per group (expert-parallel decode); torch._grouped_mm runs the 3D batch whole (it has
no counts). Gated cases fuse SwiGLU; the "torch" peer adds silu(gate) * up after the GEMM,
"grouped_mm" is the GEMM alone. TFLOP/s count the rows in use only (no padding). Check: 16
rows of d (in use) against fp64 products, |talon - ref| <= 2^-7 |ref| + 2^-12 (|a| . |b|).
"moe_block": the whole MoE block with talon alone (router top-k from bf16 logits, sigmoid
with a correction bias and renormalised weights as DeepSeek-V3 scores, moe_align, gate/up,
down, moe_sum) against its two GEMMs alone ("gemms": the same two talon_moe_gemm calls on
the same routing); issue 23: at DeepSeek-V3 T=16 <= 1.15x the two GEMMs. Checked as the
moe_gemm cases, on the ids and weights the router wrote.
fp8 cases: e4m3 a and b (N(0, 1) rounded) with DeepSeek-V3 block scales in [0.5, 1.5) (a
1 x 128, b 128 x 128), bf16 d; peers: torch._scaled_grouped_mm with row-wise scales (a per
row, b per output column: a coarser scaling than talon's, the fp8 grouped GEMM torch has;
contiguous only) and torch._grouped_mm on bf16 copies ("grouped_mm": what the bf16 path
costs). The check dequantizes with the block scales. "fp8 row" cases: talon with the same
row-wise scales as torch._scaled_grouped_mm (scale TALON_GEMM_SCALE_ROW: the same work), its
output also checked against that peer's.
gpt-oss-20b / -120b cases: the moe_gemm pipeline with gpt-oss's expert biases (both GEMMs) and
its SwiGLU with a limit (TALON_GEMM_ACT_CLAMPED_SWIGLU, alpha 1.702, limit 7) fused; torch's
pipeline adds each row's expert bias after its grouped GEMMs and runs the clamped SwiGLU as
gpt-oss's reference code does. Weights bf16 (the released MXFP4 experts dequantised).
"""
import torch
import torch.nn.functional as F

from ops import Case, ptr

BF16, FP8 = 0, 4
SCALE_ROW, SCALE_BLOCK = 2, 3
ROWS = {"sorted": 0, "token": 1, "pair": 2}
SILU, NONE = 2, 0
CLAMPED_SWIGLU = 5
OSS_ALPHA, OSS_LIMIT = 1.702, 7.0  # gpt-oss's SwiGLU
MODELS = {  # experts, k, hidden, intermediate
    "Mixtral-8x7B": (8, 2, 4096, 14336),
    "Qwen3-30B-A3B": (128, 8, 2048, 768),
    "DeepSeek-V3": (256, 8, 7168, 2048),
    "gpt-oss-20b": (32, 4, 2880, 2880),
    "gpt-oss-120b": (128, 4, 2880, 2880),
}
_biases = {}  # gpt-oss: the experts' biases of the model in _weights
_weights = {}  # one model's weights at a time (DeepSeek-V3's are 22.5 GB)
_case_weights = {}  # the grouped case being measured: its b (and fp8 scales, bf16 copy)


def weights(model):
    if model not in _weights:
        _weights.clear()
        torch.cuda.empty_cache()
        e, _, hid, inter = MODELS[model]
        g = torch.Generator(device="cuda").manual_seed(23)
        w13 = torch.empty(e, 2 * inter, hid, device="cuda", dtype=torch.bfloat16)
        w2 = torch.empty(e, hid, inter, device="cuda", dtype=torch.bfloat16)
        for i in range(e):  # per expert: no fp32 temporary of the whole tensor
            w13[i].copy_(torch.randn(2 * inter, hid, device="cuda", generator=g) / hid ** 0.5)
            w2[i].copy_(torch.randn(hid, inter, device="cuda", generator=g) / inter ** 0.5)
        _weights[model] = (w13, w2)
    return _weights[model]


def biases(model):
    """gpt-oss's expert biases: b13 [E, 2I] (gate, up), b2 [E, H], N(0, 1) / 4, bf16."""
    if model not in _biases:
        _biases.clear()
        e, _, hid, inter = MODELS[model]
        g = torch.Generator(device="cuda").manual_seed(29)
        _biases[model] = tuple((torch.randn(*shape, device="cuda", generator=g) / 4).to(torch.bfloat16)
                               for shape in ((e, 2 * inter), (e, hid)))
    return _biases[model]


def oss_glu(gate, up):
    """gpt-oss's SwiGLU with a limit (talon's TALON_GEMM_ACT_CLAMPED_SWIGLU)."""
    gate = gate.clamp(max=OSS_LIMIT)
    up = up.clamp(min=-OSS_LIMIT, max=OSS_LIMIT)
    return gate * torch.sigmoid(OSS_ALPHA * gate) * (up + 1)


def decode(tokens):
    """Decode sizes: talon.h's MoE recipe keeps the intermediate in pair rows there."""
    return tokens <= 64


def routing(tokens, experts, k, zipf, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if zipf:
        p = torch.arange(1, experts + 1, device="cuda", dtype=torch.float) ** -1.2
        ids = torch.multinomial(p.expand(tokens, experts), k, generator=g)
    else:
        ids = torch.rand(tokens, experts, device="cuda", generator=g).topk(k, dim=1).indices
    w = 0.25 + torch.rand(tokens, k, device="cuda", generator=g)
    return ids.int().contiguous(), w.contiguous()


def check_block(model, what, xe, ids, topw, out, oss=False):
    """16 tokens of out against an fp64 reference of their experts (the module docstring's
    tolerance); oss: gpt-oss's biases and SwiGLU."""
    w13, w2 = weights(model)
    b13, b2 = biases(model) if oss else (None, None)
    _, k, hid, inter = MODELS[model]
    tokens = out.shape[0]
    for t in torch.linspace(0, tokens - 1, min(tokens, 16)).long().tolist():
        x = xe[t].double()
        ref = torch.zeros(hid, device="cuda", dtype=torch.double)
        mag = torch.zeros(hid, device="cuda", dtype=torch.double)
        terms = torch.zeros(hid, device="cuda", dtype=torch.double)
        for j in range(k):
            ex = int(ids[t, j])
            g = w13[ex].double() @ x
            if oss:
                g += b13[ex].double()
                hh = oss_glu(g[:inter], g[inter:]).to(torch.bfloat16).double()
                y = float(topw[t, j]) * (w2[ex].double() @ hh + b2[ex].double())
            else:
                hh = (F.silu(g[:inter]) * g[inter:]).to(torch.bfloat16).double()
                y = float(topw[t, j]) * (w2[ex].double() @ hh)
            ref += y
            mag += y.abs()
            terms += float(topw[t, j]) * (w2[ex].double().abs() @ hh.abs())
        got = out[t].double()
        tol = 2.0 ** -7 * (ref.abs() + mag) + 2.0 ** -12 * terms
        bad = ((got - ref).abs() > tol) | ~torch.isfinite(got)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise AssertionError(f"{what}: token {t}: {int(bad.sum())} elements off, first at "
                                 f"{i}: {got[i].item()} vs {ref[i].item()}")


def moe_layout(h, tokens, e, k, ids, topw):
    """moe_align's layout of a routing (aligned once, not timed), and torch's grouping of the
    same pairs: by expert (stable), each group padded to 16 rows; a padding row reads token
    `tokens` (a zero row) with weight 0."""
    pairs = tokens * k
    scap = pairs + min(e, pairs) * 127
    bcap = (scap + 127) // 128
    L = {"scap": scap, "bcap": bcap,
         "sorted": torch.empty(scap, dtype=torch.int32, device="cuda"),
         "experts": torch.empty(bcap, dtype=torch.int32, device="cuda"),
         "npost": torch.empty(1, dtype=torch.int32, device="cuda")}
    h.call("talon_moe_align_block_size", h.struct("talon_moe_align_block_size_args")(
        sorted_token_ids=ptr(L["sorted"]), expert_ids=ptr(L["experts"]),
        num_tokens_post_padded=ptr(L["npost"]), topk_ids=ptr(ids), tokens=tokens, k=k,
        experts=e, block_size=128, sorted_capacity=scap, expert_ids_capacity=bcap),
        torch.cuda.current_stream().cuda_stream)
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=e)
    padded = (counts + 15) // 16 * 16
    ends = torch.cumsum(padded, 0)
    L["total"] = int(ends[-1])
    slot = torch.arange(pairs, device="cuda") - (torch.cumsum(counts, 0) - counts)[flat[order]] \
        + (ends - padded)[flat[order]]
    src = torch.full((L["total"],), pairs, dtype=torch.long, device="cuda")
    src[slot] = order
    L["tok"] = torch.where(src < pairs, src // k, tokens)
    L["roww"] = torch.cat([topw.reshape(-1), torch.zeros(1, device="cuda")])[src].to(torch.bfloat16)
    L["offs"] = ends.int()
    L["touched"] = int((counts > 0).sum())
    return L


def block_case(h, model, tokens, targets=()):
    """The whole MoE block with talon alone against its two GEMMs alone (module docstring)."""
    e, k, hid, inter = MODELS[model]
    pairs = tokens * k
    scap = pairs + min(e, pairs) * 127
    bcap = (scap + 127) // 128
    h_rows = ROWS["pair"] if decode(tokens) else ROWS["sorted"]

    def make():
        w13, w2 = weights(model)
        s = {"logits": torch.randn(tokens, e, device="cuda", dtype=torch.bfloat16),
             "bias": 0.1 * torch.randn(e, device="cuda"),
             "ids": torch.empty(tokens, k, dtype=torch.int32, device="cuda"),
             "topw": torch.empty(tokens, k, device="cuda"),
             "sorted": torch.empty(scap, dtype=torch.int32, device="cuda"),
             "experts": torch.empty(bcap, dtype=torch.int32, device="cuda"),
             "npost": torch.empty(1, dtype=torch.int32, device="cuda"),
             "xe": torch.randn(tokens, hid, device="cuda", dtype=torch.bfloat16),
             "h": torch.empty(pairs if decode(tokens) else scap, inter, device="cuda",
                              dtype=torch.bfloat16),
             "y": torch.empty(pairs, hid, device="cuda", dtype=torch.bfloat16),
             "out": torch.empty(tokens, hid, device="cuda", dtype=torch.bfloat16)}
        s["router"] = h.struct("talon_moe_router_topk_args")(
            topk_weights=ptr(s["topw"]), topk_ids=ptr(s["ids"]), logits=ptr(s["logits"]),
            correction_bias=ptr(s["bias"]), tokens=tokens, experts=e, k=k, logits_dtype=BF16,
            scoring=1, renormalize=1)
        s["align"] = h.struct("talon_moe_align_block_size_args")(
            sorted_token_ids=ptr(s["sorted"]), expert_ids=ptr(s["experts"]),
            num_tokens_post_padded=ptr(s["npost"]), topk_ids=ptr(s["ids"]), tokens=tokens, k=k,
            experts=e, block_size=128, sorted_capacity=scap, expert_ids_capacity=bcap)
        Args = h.struct("talon_moe_gemm_args")
        common = dict(sorted_token_ids=ptr(s["sorted"]), expert_ids=ptr(s["experts"]),
                      num_tokens_post_padded=ptr(s["npost"]), tokens=tokens, topk=k, experts=e,
                      block_size=128, sorted_capacity=scap, expert_ids_capacity=bcap, dtype=BF16)
        s["up"] = Args(d=ptr(s["h"]), a=ptr(s["xe"]), b=ptr(w13), n=inter, k=hid, gated=1,
                       act=SILU, a_rows=ROWS["token"], d_rows=h_rows, **common)
        s["down"] = Args(d=ptr(s["y"]), a=ptr(s["h"]), b=ptr(w2), topk_weights=ptr(s["topw"]),
                         n=hid, k=inter, act=NONE, a_rows=h_rows, d_rows=ROWS["pair"],
                         **common)
        s["sum"] = h.struct("talon_moe_sum_args")(out=ptr(s["out"]), **{"in": ptr(s["y"])},
                                                   tokens=tokens, k=k, hidden=hid, dtype=BF16)
        # the routing the GEMMs-alone peer runs on (the router's own, aligned once)
        stream = torch.cuda.current_stream().cuda_stream
        h.call("talon_moe_router_topk", s["router"], stream)
        h.call("talon_moe_align_block_size", s["align"], stream)
        return s

    def talon(s, stream):
        h.call("talon_moe_router_topk", s["router"], stream)
        h.call("talon_moe_align_block_size", s["align"], stream)
        h.call("talon_moe_gemm", s["up"], stream)
        h.call("talon_moe_gemm", s["down"], stream)
        h.call("talon_moe_sum", s["sum"], stream)

    def gemms(s):
        stream = torch.cuda.current_stream().cuda_stream
        h.call("talon_moe_gemm", s["up"], stream)
        h.call("talon_moe_gemm", s["down"], stream)

    def check(s):
        talon(s, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        check_block(model, f"moe_block {model} T={tokens}", s["xe"], s["ids"].cpu(),
                    s["topw"].cpu(), s["out"])

    w13_bytes = e * 3 * inter * hid * 2  # an upper bound for the bytes: all experts
    return Case("moe_block", f"{model} T={tokens} router+align+gemms+sum", make, talon,
                {"gemms": gemms}, check=check, targets=targets, flops=2 * pairs * 3 * inter * hid,
                runs=100, meta={"model": model, "tokens": tokens, "experts": e, "k": k,
                                "hidden": hid, "inter": inter, "weights_bytes": w13_bytes})


def moe_case(h, model, tokens, zipf=False, targets=()):
    """oss (the gpt-oss models): biases on both GEMMs and CLAMPED_SWIGLU; torch's pipeline adds
    them (the bias of each row's expert) around its grouped GEMMs."""
    e, k, hid, inter = MODELS[model]
    oss = model.startswith("gpt-oss")
    pairs = tokens * k
    label = f"{model} T={tokens}{' zipf' if zipf else ''}"
    Args = h.struct("talon_moe_gemm_args")
    ids, topw = routing(tokens, e, k, zipf, 7 + tokens)
    L = moe_layout(h, tokens, e, k, ids, topw)
    scap, bcap, total, tok, roww, offs, touched = (L[x] for x in (
        "scap", "bcap", "total", "tok", "roww", "offs", "touched"))
    sorted_ids, expert_ids, npost = L["sorted"], L["experts"], L["npost"]

    at_decode = decode(tokens)
    h_rows = ROWS["pair"] if at_decode else ROWS["sorted"]

    def make():
        w13, w2 = weights(model)
        # x: the first T rows of xe, whose last row is the zero row torch's padding reads
        s = {"xe": torch.randn(tokens + 1, hid, device="cuda", dtype=torch.bfloat16),
             "h": torch.empty(pairs if at_decode else scap, inter, device="cuda",
                              dtype=torch.bfloat16),
             "y": torch.empty(pairs, hid, device="cuda", dtype=torch.bfloat16),
             "out": torch.empty(tokens, hid, device="cuda", dtype=torch.bfloat16)}
        s["xe"][tokens].zero_()
        common = dict(sorted_token_ids=ptr(sorted_ids), expert_ids=ptr(expert_ids),
                      num_tokens_post_padded=ptr(npost), tokens=tokens, topk=k, experts=e,
                      block_size=128, sorted_capacity=scap, expert_ids_capacity=bcap,
                      dtype=BF16)
        up_epi, down_epi = dict(act=SILU), {}
        if oss:
            b13, b2 = biases(model)
            up_epi = dict(act=CLAMPED_SWIGLU, act_alpha=OSS_ALPHA, act_limit=OSS_LIMIT, bias=ptr(b13))
            down_epi = dict(bias=ptr(b2))
        s["up"] = Args(d=ptr(s["h"]), a=ptr(s["xe"]), b=ptr(w13), n=inter, k=hid, gated=1,
                       a_rows=ROWS["token"], d_rows=h_rows, **up_epi, **common)
        s["down"] = Args(d=ptr(s["y"]), a=ptr(s["h"]), b=ptr(w2), topk_weights=ptr(topw),
                         n=hid, k=inter, act=NONE, a_rows=h_rows, d_rows=ROWS["pair"],
                         **down_epi, **common)
        if at_decode:  # the sorted intermediate at decode, for the "talon_sorted" peer
            s["hs16"] = torch.empty(scap, inter, device="cuda", dtype=torch.bfloat16)
            s["up_s"] = Args(d=ptr(s["hs16"]), a=ptr(s["xe"]), b=ptr(w13), n=inter, k=hid,
                             gated=1, a_rows=ROWS["token"], d_rows=ROWS["sorted"], **up_epi,
                             **common)
            s["down_s"] = Args(d=ptr(s["y"]), a=ptr(s["hs16"]), b=ptr(w2), topk_weights=ptr(topw),
                               n=hid, k=inter, act=NONE, a_rows=ROWS["sorted"],
                               d_rows=ROWS["pair"], **down_epi, **common)
        s["sum"] = h.struct("talon_moe_sum_args")(out=ptr(s["out"]), **{"in": ptr(s["y"])},
                                                   tokens=tokens, k=k, hidden=hid, dtype=BF16)
        # the torch peers' pre-gathered inputs (grouped_mm alone)
        s["xs"] = s["xe"].index_select(0, tok)
        s["hs"] = torch.randn(total, inter, device="cuda", dtype=torch.bfloat16)
        return s

    def talon(s, stream):
        h.call("talon_moe_gemm", s["up"], stream)
        h.call("talon_moe_gemm", s["down"], stream)
        h.call("talon_moe_sum", s["sum"], stream)

    # the expert of each of torch's grouped rows (its biases' row)
    row_expert = torch.repeat_interleave(torch.arange(e, device="cuda"),
                                         torch.diff(offs, prepend=offs.new_zeros(1)).long())

    def talon_sorted(s):
        stream = torch.cuda.current_stream().cuda_stream
        h.call("talon_moe_gemm", s["up_s"], stream)
        h.call("talon_moe_gemm", s["down_s"], stream)
        h.call("talon_moe_sum", s["sum"], stream)

    def torch_pipeline(s):
        w13, w2 = weights(model)
        xs = s["xe"].index_select(0, tok)
        y1 = torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)
        if oss:
            b13, b2 = biases(model)
            y1 = y1 + b13.index_select(0, row_expert)
            hh = oss_glu(y1[:, :inter], y1[:, inter:])
            y2 = (torch._grouped_mm(hh, w2.transpose(-2, -1), offs=offs)
                  + b2.index_select(0, row_expert)) * roww[:, None]
        else:
            hh = F.silu(y1[:, :inter]) * y1[:, inter:]
            y2 = torch._grouped_mm(hh, w2.transpose(-2, -1), offs=offs) * roww[:, None]
        out = torch.zeros(tokens + 1, hid, device="cuda", dtype=torch.bfloat16)
        return out.index_add_(0, tok, y2)[:tokens]

    def grouped_mm(s):
        w13, w2 = weights(model)
        torch._grouped_mm(s["xs"], w13.transpose(-2, -1), offs=offs)
        torch._grouped_mm(s["hs"], w2.transpose(-2, -1), offs=offs)

    def dense(s):
        w13, w2 = weights(model)
        F.linear(s["xs"][:pairs], w13[0])
        F.linear(s["hs"][:pairs], w2[0])

    def check(s):
        talon(s, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        check_block(model, f"moe_gemm {label}", s["xe"], ids, topw, s["out"], oss)

    flops = 2 * pairs * (2 * inter * hid + hid * inter)
    bytes_ = (touched * 3 * inter * hid + 2 * tokens * hid) * 2 if at_decode else None
    peers = {"torch": torch_pipeline, "grouped_mm": grouped_mm, "dense": dense}
    if at_decode:
        peers["talon_sorted"] = talon_sorted
    return Case("moe_gemm", label, make, talon, peers,
                bytes=bytes_, check=check, targets=targets, flops=flops,
                runs=30 if flops > 1e12 else 100,
                meta={"model": model, "tokens": tokens, "experts": e, "k": k, "hidden": hid,
                      "inter": inter, "routing": "zipf" if zipf else "uniform",
                      "experts_touched": touched, "epilogue": "bias, clamped SwiGLU" if oss else "SwiGLU"})


_weights_fp8 = {}  # one model's e4m3 weights and per-channel scales


def weights_fp8(model):
    """The bf16 weights quantised per output channel: w = e4m3(w / s) x s, s = amax / 448."""
    if model not in _weights_fp8:
        _weights_fp8.clear()
        out = []
        for w in weights(model):
            q = torch.empty(w.shape, device="cuda", dtype=torch.float8_e4m3fn)
            sc = torch.empty(w.shape[:2], device="cuda")
            for i in range(w.shape[0]):  # per expert: no fp32 temporary of the whole tensor
                sc[i] = w[i].abs().amax(-1).float().clamp_min(2.0 ** -126) / 448
                q[i] = (w[i].float() / sc[i][:, None]).to(torch.float8_e4m3fn)
            out += [q, sc]
        _weights_fp8[model] = tuple(out)
    return _weights_fp8[model]


_weights_fp8_block = {}  # one model's e4m3 weights and 128 x 128 block scales


def weights_fp8_block(model):
    """The bf16 weights quantised per 128 x 128 block (DeepSeek-V3's checkpoint layout):
    w = e4m3(w / s) x s, s = the block's amax / 448, scales [E, rows / 128, k / 128]."""
    if model not in _weights_fp8_block:
        _weights_fp8_block.clear()
        out = []
        for w in weights(model):
            E, n, kk = w.shape
            q = torch.empty(w.shape, device="cuda", dtype=torch.float8_e4m3fn)
            sc = torch.empty(E, n // 128, kk // 128, device="cuda")
            for i in range(E):
                b = w[i].float().view(n // 128, 128, kk // 128, 128)
                sc[i] = b.abs().amax((1, 3)).clamp_min(2.0 ** -126) / 448
                q[i] = (b / sc[i][:, None, :, None]).view(n, kk).to(torch.float8_e4m3fn)
            out += [q, sc]
        _weights_fp8_block[model] = tuple(out)
    return _weights_fp8_block[model]


def quant_groups(x):
    """torch's e4m3 per row and 128 columns (talon_quant_fp8's GROUP rule), the scales
    group-major [cols / 128, rows rounded up to 4] as block-scaled GEMMs read them."""
    rows, cols = x.shape
    g = x.float().view(rows, cols // 128, 128)
    sc = g.abs().amax(-1).clamp_min(2.0 ** -126) / 448
    q = (g / sc[:, :, None]).view(rows, cols).to(torch.float8_e4m3fn)
    st = torch.zeros(cols // 128, (rows + 3) // 4 * 4, device="cuda")
    st[:, :rows] = sc.t()
    return q, st


def moe_fp8_case(h, model, tokens, block=False):
    """The expert computation in fp8 as an fp8 engine runs it, with per-token x per-channel
    scales (or, block, DeepSeek-V3's block scales: 1 x 128 for x, 128 x 128 for the weights):
    x quantised per token (per token and group; outside the timing, as rmsnorm_quant_fp8 leaves
    it), then gate/up (SiLU and mul) -> talon_quant_fp8 per token (group) of the intermediate ->
    down (router weights) -> moe_sum. Peers: the same with torch._scaled_grouped_mm and torch's
    row-wise quantisation ("torch_fp8", also the reference the output is checked against:
    within 2^-4 of the output's largest magnitude, 2^-3 with block scales, which quantise
    differently), its two scaled GEMMs alone on pre-gathered inputs, talon's bf16 moe_gemm
    pipeline, (block) talon's row-scaled pipeline ("talon_row"), and at decode (T <= 64, where
    talon's intermediate is in pair rows) talon's pipeline with it in sorted rows
    ("talon_sorted")."""
    e, k, hid, inter = MODELS[model]
    pairs = tokens * k
    Args = h.struct("talon_moe_gemm_args")
    ids, topw = routing(tokens, e, k, False, 7 + tokens)
    L = moe_layout(h, tokens, e, k, ids, topw)
    scap, bcap, total, tok, roww, offs, touched = (L[x] for x in (
        "scap", "bcap", "total", "tok", "roww", "offs", "touched"))
    sorted_ids, expert_ids, npost = L["sorted"], L["experts"], L["npost"]

    def quant_rows(x):  # torch's per-row e4m3, the rule of talon_quant_fp8's TOKEN mode
        sc = x.abs().amax(1).float().clamp_min(2.0 ** -126) / 448
        return (x.float() / sc[:, None]).to(torch.float8_e4m3fn), sc

    at_decode = decode(tokens)

    def make():
        w13q, s13, w2q, s2 = weights_fp8(model)
        w13, w2 = weights(model)
        if block:
            w13b, s13b, w2b, s2b = weights_fp8_block(model)
        s = {"xe": torch.randn(tokens + 1, hid, device="cuda", dtype=torch.bfloat16),
             "y": torch.empty(pairs, hid, device="cuda", dtype=torch.bfloat16),
             "out": torch.empty(tokens, hid, device="cuda", dtype=torch.bfloat16),
             "h16": torch.empty(scap, inter, device="cuda", dtype=torch.bfloat16)}
        s["xe"][tokens].zero_()
        s["xq"], s["sx"] = quant_rows(s["xe"])
        if block:
            s["xb"], s["sxb"] = quant_groups(s["xe"][:tokens])
        common = dict(sorted_token_ids=ptr(sorted_ids), expert_ids=ptr(expert_ids),
                      num_tokens_post_padded=ptr(npost), tokens=tokens, topk=k, experts=e,
                      block_size=128, sorted_capacity=scap, expert_ids_capacity=bcap)

        def calls(tag, h_rows):
            """gate/up, quant and down (tag "" or "_s": row scales, "_b" or "_b_s": block
            scales) with the intermediate h in h_rows' layout (its own buffers, keys ending in
            tag)."""
            rows = pairs if h_rows == ROWS["pair"] else scap
            hb, hq = (torch.zeros(rows, inter, device="cuda", dtype=torch.bfloat16),
                      torch.empty(rows, inter, device="cuda", dtype=torch.float8_e4m3fn))
            blocked = tag.startswith("_b")
            if blocked:  # block scales: group-major [I / 128, rows rounded up to 4]
                sh = torch.empty(inter // 128, (rows + 3) // 4 * 4, device="cuda")
                ax, sx, wu, su, wd, sd, scale = s["xb"], s["sxb"], w13b, s13b, w2b, s2b, SCALE_BLOCK
            else:
                sh = torch.empty(rows, device="cuda")
                ax, sx, wu, su, wd, sd, scale = s["xq"], s["sx"], w13q, s13, w2q, s2, SCALE_ROW
            s["bufs" + tag] = (hb, hq, sh)
            s["up" + tag] = Args(d=ptr(hb), a=ptr(ax), b=ptr(wu), n=inter, k=hid, gated=1, act=SILU,
                                 a_rows=ROWS["token"], d_rows=h_rows, dtype=FP8, scale=scale,
                                 a_scale=ptr(sx), b_scale=ptr(su), **common)
            s["quant" + tag] = h.struct("talon_quant_fp8_args")(
                out=ptr(hq), scale=ptr(sh), rows=rows, cols=inter, mode=2 if blocked else 1,
                dtype=BF16, **{"in": ptr(hb)})
            s["down" + tag] = Args(d=ptr(s["y"]), a=ptr(hq), b=ptr(wd), topk_weights=ptr(topw),
                                   n=hid, k=inter, act=NONE, a_rows=h_rows, d_rows=ROWS["pair"],
                                   dtype=FP8, scale=scale, a_scale=ptr(sh), b_scale=ptr(sd),
                                   **common)

        # the intermediate in pair rows at decode (talon.h's MoE recipe), else sorted; at
        # decode also sorted (tags "_s"), the "talon_sorted" peer. Block: talon's pipeline is
        # the block one, the row one the "talon_row" peer.
        for tag in ("", "_b") if block else ("",):
            calls(tag, ROWS["pair"] if at_decode else ROWS["sorted"])
            if at_decode:
                calls(tag + "_s", ROWS["sorted"])
        s["sum"] = h.struct("talon_moe_sum_args")(out=ptr(s["out"]), **{"in": ptr(s["y"])},
                                                   tokens=tokens, k=k, hidden=hid, dtype=BF16)
        s["up16"] = Args(d=ptr(s["h16"]), a=ptr(s["xe"]), b=ptr(w13), n=inter, k=hid, gated=1,
                         act=SILU, a_rows=ROWS["token"], d_rows=ROWS["sorted"], dtype=BF16,
                         **common)
        s["down16"] = Args(d=ptr(s["y"]), a=ptr(s["h16"]), b=ptr(w2), topk_weights=ptr(topw),
                           n=hid, k=inter, act=NONE, a_rows=ROWS["sorted"],
                           d_rows=ROWS["pair"], dtype=BF16, **common)
        # the scaled GEMMs' pre-gathered inputs
        s["xs"] = s["xq"].view(torch.uint8).index_select(0, tok).view(torch.float8_e4m3fn)
        s["sxs"] = s["sx"].index_select(0, tok)
        s["hs"], s["shs"] = quant_rows(torch.randn(total, inter, device="cuda",
                                                   dtype=torch.bfloat16))
        return s

    def pipeline(tag):  # the row-scaled calls (tag "") or the block-scaled ones ("_b")
        def run(s, stream):
            h.call("talon_moe_gemm", s["up" + tag], stream)
            h.call("talon_quant_fp8", s["quant" + tag], stream)
            h.call("talon_moe_gemm", s["down" + tag], stream)
            h.call("talon_moe_sum", s["sum"], stream)
        return run

    row_pipeline = pipeline("")
    talon = pipeline("_b") if block else row_pipeline

    def torch_fp8(s):
        w13q, s13, w2q, s2 = weights_fp8(model)
        xs = s["xq"].view(torch.uint8).index_select(0, tok).view(torch.float8_e4m3fn)
        y1 = torch._scaled_grouped_mm(xs, w13q.transpose(-2, -1), s["sx"].index_select(0, tok),
                                      s13, offs=offs, out_dtype=torch.bfloat16)
        hq, sh = quant_rows(F.silu(y1[:, :inter]) * y1[:, inter:])
        y2 = torch._scaled_grouped_mm(hq, w2q.transpose(-2, -1), sh, s2, offs=offs,
                                      out_dtype=torch.bfloat16) * roww[:, None]
        out = torch.zeros(tokens + 1, hid, device="cuda", dtype=torch.bfloat16)
        return out.index_add_(0, tok, y2)[:tokens]

    def scaled_gemms(s):
        w13q, s13, w2q, s2 = weights_fp8(model)
        torch._scaled_grouped_mm(s["xs"], w13q.transpose(-2, -1), s["sxs"], s13, offs=offs,
                                 out_dtype=torch.bfloat16)
        torch._scaled_grouped_mm(s["hs"], w2q.transpose(-2, -1), s["shs"], s2, offs=offs,
                                 out_dtype=torch.bfloat16)

    def talon_bf16(s):
        stream = torch.cuda.current_stream().cuda_stream
        h.call("talon_moe_gemm", s["up16"], stream)
        h.call("talon_moe_gemm", s["down16"], stream)
        h.call("talon_moe_sum", s["sum"], stream)

    def check(s):
        talon(s, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        got, want = s["out"].float(), torch_fp8(s).float()
        err = (got - want).abs().max().item()
        scale = want.abs().max().item()
        tol = (2.0 ** -3 if block else 2.0 ** -4) * scale
        if not err <= tol or not torch.isfinite(got).all():
            raise AssertionError(f"moe_gemm fp8 {model} T={tokens}: max |talon - torch fp8| "
                                 f"{err} against max |out| {scale}")

    flops = 2 * pairs * (2 * inter * hid + hid * inter)
    # decode: the e4m3 weight bytes of the experts touched (and x in, out)
    bytes_ = touched * 3 * inter * hid + 3 * tokens * hid if at_decode else None
    peers = {"torch_fp8": torch_fp8, "scaled_grouped_mm": scaled_gemms, "talon_bf16": talon_bf16}
    if block:
        peers["talon_row"] = lambda s: row_pipeline(s, torch.cuda.current_stream().cuda_stream)
    if at_decode:  # talon's pipeline with the intermediate in sorted rows
        sorted_pipeline = pipeline("_b_s" if block else "_s")
        peers["talon_sorted"] = lambda s: sorted_pipeline(s, torch.cuda.current_stream().cuda_stream)
    kind = "fp8 block" if block else "fp8 row"
    return Case("moe_gemm", f"{kind} {model} T={tokens}", make, talon, peers,
                bytes=bytes_, check=check, flops=flops, runs=30 if flops > 1e12 else 100,
                meta={"model": model, "tokens": tokens, "experts": e, "k": k, "hidden": hid,
                      "inter": inter, "dtype": kind, "routing": "uniform"})


def grouped_case(h, label, layout, groups, counts, n, k, gated, fp8=False, scale=SCALE_BLOCK):
    """talon_grouped_gemm over `groups` groups whose rows in use are counts (a cpu list); fp8
    with block scales or (scale SCALE_ROW) the row-wise ones of torch._scaled_grouped_mm."""
    row = fp8 and scale == SCALE_ROW
    masked = layout == "masked"
    kb = (k + 127) // 128
    max_m = 256
    if masked:
        rows = groups * max_m
        used = [(g * max_m, c) for g, c in enumerate(counts)]
    else:
        padded = [(c + 127) // 128 * 128 for c in counts]
        rows = sum(padded)
        starts = [sum(padded[:g]) for g in range(groups)]
        used = list(zip(starts, counts))
        tile_groups = torch.tensor([g for g in range(groups) for _ in range(padded[g] // 128)],
                                   dtype=torch.int32, device="cuda")
        offs = torch.tensor([starts[g] + padded[g] for g in range(groups)], dtype=torch.int32,
                            device="cuda")
    group_rows = torch.tensor(counts, dtype=torch.int32, device="cuda")
    b_rows = (2 if gated else 1) * n
    sample = [(g, s0 + r) for g, (s0, c) in enumerate(used) for r in ((0, c - 1) if c else ())]
    sample = sample[::max(1, len(sample) // 16)][:16]

    def case_weights():
        """b once for every input set of this case (DeepSeek-V3's gate/up: 15 GB in bf16),
        the previous case's freed first."""
        if _case_weights.get("label") != label:
            _case_weights.clear()
            _weights.clear()
            torch.cuda.empty_cache()
            w = {"label": label}
            if fp8:
                w["b"] = torch.randn(groups, b_rows, k, device="cuda",
                                     dtype=torch.bfloat16).to(torch.float8_e4m3fn)
                w["b16"] = w["b"].to(torch.bfloat16)
                w["sb"] = 0.5 + torch.rand(groups, (b_rows + 127) // 128, kb, device="cuda")
                w["sb_row"] = 0.5 + torch.rand(groups, b_rows, device="cuda")
            else:
                w["b"] = torch.randn(groups, b_rows, k, device="cuda",
                                     dtype=torch.bfloat16).mul_(k ** -0.5)
            _case_weights.update(w)
        return _case_weights

    def make():
        w = case_weights()
        s = {"a": torch.randn(rows, k, device="cuda", dtype=torch.bfloat16),
             "b": w["b"],
             "d": torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)}
        Args = h.struct("talon_grouped_gemm_args")  # here: an older --base build lacks it
        fields = dict(d=ptr(s["d"]), a=ptr(s["a"]), b=ptr(s["b"]), groups=groups, n=n, k=k,
                      gated=gated, act=SILU if gated else NONE, dtype=BF16)
        if fp8:
            rows4 = (rows + 3) // 4 * 4
            s["a"] = s["a"].to(torch.float8_e4m3fn)
            s["sa"] = 0.5 + torch.rand(kb, rows4, device="cuda")
            s["sb"] = w["sb"]
            # the peers' inputs: bf16 copies; row-wise scales for torch._scaled_grouped_mm
            s["a16"] = s["a"].to(torch.bfloat16)
            s["b16"], s["sb_row"] = w["b16"], w["sb_row"]
            s["sa_row"] = 0.5 + torch.rand(rows, device="cuda")
            fields.update(a=ptr(s["a"]), dtype=FP8, scale=scale,
                          a_scale=ptr(s["sa_row"] if row else s["sa"]),
                          b_scale=ptr(s["sb_row"] if row else s["sb"]))
        if masked:
            s["args"] = Args(group_rows=ptr(group_rows), rows=max_m, layout=1, **fields)
        else:
            s["args"] = Args(tile_groups=ptr(tile_groups), rows=rows, layout=0, **fields)
        return s

    def talon(s, stream):
        h.call("talon_grouped_gemm", s["args"], stream)

    def gemm(s):
        a, b = (s["a16"], s["b16"]) if fp8 else (s["a"], s["b"])
        bt = b.transpose(-2, -1)
        if masked:
            return torch._grouped_mm(a.view(groups, max_m, k), bt)
        return torch._grouped_mm(a, bt, offs=offs)

    def scaled_grouped_mm(s):
        return torch._scaled_grouped_mm(s["a"], s["b"].transpose(-2, -1), s["sa_row"],
                                        s["sb_row"], offs=offs, out_dtype=torch.bfloat16)

    def torch_full(s):
        y = gemm(s)
        return F.silu(y[..., :n]) * y[..., n:] if gated else y

    def check(s):
        talon(s, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        for g, r in sample:
            x, w = s["a"][r].double(), s["b"][g].double()
            if row:
                x = x * s["sa_row"][r].double()
                w = w * s["sb_row"][g].double()[:, None]
            elif fp8:  # the block scales spread over the elements they scale
                x = x * s["sa"][:, r].double().repeat_interleave(128)[:k]
                sb = s["sb"][g].double().repeat_interleave(128, 0)[:b_rows]
                w = w * sb.repeat_interleave(128, 1)[:, :k]
            y = w @ x
            mag = w.abs() @ x.abs()
            if gated:
                ref = F.silu(y[:n]) * y[n:]
                mag = mag[:n] * y[n:].abs() + mag[n:] * y[:n].abs()
            else:
                ref = y
            got = s["d"][r].double()
            tol = 2.0 ** -7 * ref.abs() + 2.0 ** -12 * mag
            bad = ((got - ref).abs() > tol) | ~torch.isfinite(got)
            if bad.any():
                i = int(bad.nonzero()[0])
                raise AssertionError(f"grouped_gemm {label}: group {g} row {r}: "
                                     f"{int(bad.sum())} elements off, first at {i}: "
                                     f"{got[i].item()} vs {ref[i].item()}")
        if row and not gated and not masked:  # the same work as the peer: the same result
            want = scaled_grouped_mm(s).float()
            got = s["d"].float()
            rows_used = torch.cat([torch.arange(s0, s0 + c, device="cuda") for s0, c in used if c])
            err = (got[rows_used] - want[rows_used]).abs().max().item()
            scale_ = want[rows_used].abs().max().item()
            if not err <= 2.0 ** -6 * scale_:
                raise AssertionError(f"grouped_gemm {label}: max |talon - torch._scaled_grouped_mm| "
                                     f"{err} against max |d| {scale_}")

    flops = 2 * sum(counts) * b_rows * k
    peers = {"torch": torch_full, "grouped_mm": gemm}
    if fp8:
        peers = {"grouped_mm": gemm}
        if not masked:
            peers["scaled_grouped_mm"] = scaled_grouped_mm
        if row and gated and not masked:  # the whole of talon's work: the GEMM, then silu * up
            def scaled_torch(s):
                y = scaled_grouped_mm(s)
                return F.silu(y[:, :n]) * y[:, n:]
            peers["scaled_grouped_mm+silu"] = scaled_torch
    return Case("grouped_gemm", label, make, talon, peers, check=check, flops=flops,
                runs=30 if flops > 1e12 else 100,
                meta={"layout": layout, "groups": groups, "rows": rows, "rows_in_use": sum(counts),
                      "n": n, "k": k, "gated": gated,
                      "dtype": ("fp8 row" if row else "fp8 block") if fp8 else "bf16"})


def grouped_cases():
    """Contiguous: the gate/up (gated) and down GEMMs of Qwen3-30B-A3B and DeepSeek-V3 at
    T = 4096 on a uniform routing's counts; masked: 32 local experts of DeepSeek-V3 with up to
    256 rows each (counts uniform in [0, 256])."""
    out = []
    for model in ("Qwen3-30B-A3B", "DeepSeek-V3"):
        e, k, hid, inter = MODELS[model]
        ids, _ = routing(4096, e, k, False, 11)
        counts = torch.bincount(ids.reshape(-1).long(), minlength=e).tolist()
        out.append((f"contiguous {model} gate/up T=4096", "contiguous", e, counts, inter, hid, 1))
        out.append((f"contiguous {model} down T=4096", "contiguous", e, counts, hid, inter, 0))
    g = torch.Generator().manual_seed(5)
    counts = torch.randint(0, 257, (32,), generator=g).tolist()
    out.append(("masked DeepSeek-V3 32 experts x 256 gate/up", "masked", 32, counts, 2048, 7168, 1))
    out.append(("masked DeepSeek-V3 32 experts x 256 down", "masked", 32, counts, 7168, 2048, 0))
    # fp8 block scales (issue 23: DeepSeek-V3 T=4096 contiguous >= 1200 TFLOP/s, masked with
    # 256 rows per group >= 900; docs/notes/moe_gemm.md bounds the first by weight bandwidth)
    e, k, hid, inter = MODELS["DeepSeek-V3"]
    ids, _ = routing(4096, e, k, False, 11)
    dsv3 = torch.bincount(ids.reshape(-1).long(), minlength=e).tolist()
    fp8 = "fp8 contiguous DeepSeek-V3"
    out.append((f"{fp8} gate/up T=4096", "contiguous", e, dsv3, inter, hid, 1, True))
    out.append((f"{fp8} down T=4096", "contiguous", e, dsv3, hid, inter, 0, True))
    # per-token x per-channel scales, the same work as torch._scaled_grouped_mm (row-wise)
    for model in ("Qwen3-30B-A3B", "DeepSeek-V3"):
        e, k, hid, inter = MODELS[model]
        ids, _ = routing(4096, e, k, False, 11)
        cnt = torch.bincount(ids.reshape(-1).long(), minlength=e).tolist()
        fp8 = f"fp8 row contiguous {model}"
        out.append((f"{fp8} gate/up T=4096", "contiguous", e, cnt, inter, hid, 1, True, SCALE_ROW))
        out.append((f"{fp8} down T=4096", "contiguous", e, cnt, hid, inter, 0, True, SCALE_ROW))
    full = [256] * 32
    for name, c in (("", counts), (" full", full)):
        fp8 = f"fp8 masked DeepSeek-V3 32 experts x 256{name}"
        out.append((f"{fp8} gate/up", "masked", 32, c, 2048, 7168, 1, True))
        out.append((f"{fp8} down", "masked", 32, c, 7168, 2048, 0, True))
    return out


def cases(h):
    out = [moe_case(h, "Mixtral-8x7B", 4096,
                    targets=[("torch_over_talon", ">=", 1.15, ">= 1.15x the torch pipeline"),
                             ("grouped_mm_over_talon", ">=", 0.95,
                              ">= 0.95x its two GEMMs alone")])]
    out.append(moe_case(h, "Mixtral-8x7B", 64, targets=[("gbs", ">=", 2800.0, ">= 2800 GB/s")]))
    for model in ("Qwen3-30B-A3B", "DeepSeek-V3"):
        out.append(moe_case(h, model, 4096, targets=[("tflops", ">=", 550.0, ">= 550 TFLOP/s")]))
        out.append(moe_case(h, model, 16384))
        out.append(moe_case(h, model, 4096, zipf=True))
        for t in (16, 64):
            out.append(moe_case(h, model, t, targets=[("gbs", ">=", 2800.0, ">= 2800 GB/s")]))
    out += [moe_fp8_case(h, model, t) for model in ("Qwen3-30B-A3B", "DeepSeek-V3")
            for t in (4096, 64, 16)]
    out += [moe_fp8_case(h, "DeepSeek-V3", t, block=True) for t in (4096, 64, 16)]
    out += [grouped_case(h, *c) for c in grouped_cases()]
    out.append(block_case(h, "DeepSeek-V3", 16, targets=[
        ("gemms_over_talon", ">=", 1 / 1.15, "<= 1.15x the time of its two GEMMs alone")]))
    out.append(block_case(h, "Qwen3-30B-A3B", 16))
    out += [moe_case(h, model, t) for model in ("gpt-oss-20b", "gpt-oss-120b") for t in (4096, 64, 16)]
    return out
