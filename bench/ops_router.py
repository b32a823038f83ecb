"""bench/ops.py cases for talon_moe_router_topk: router logits -> top-k expert ids and weights.

Peers: torch eager softmax (fp32) + topk, and the same under torch.compile; for the
DeepSeek-V3 variant, sigmoid + correction bias for the selection, weights gathered from the
unbiased scores. Targets (the issue): <= 8 us at T=4096, E=128 and E=256, k=8, fp32 logits.
Each check compares talon's output with torch on the last timed set: the weights must equal
torch's top-k scores, and the experts talon chose must carry those scores in torch's ranking
(so a tie broken differently is not a failure, a wrong expert is).
"""
from ops import Case, ptr

torch = None

DTYPES = {"f32": 2, "bf16": 0, "f16": 1}


def _torch_dtype(name):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]


def peer_softmax_topk(x, k):
    return torch.topk(torch.softmax(x.float(), dim=-1), k, dim=-1)


def peer_sigmoid_bias_topk(x, bias, k):
    s = torch.sigmoid(x.float())
    _, ids = torch.topk(s + bias, k, dim=-1)
    return s.gather(1, ids), ids


def case(h, tokens, experts, k, dtype="f32", sigmoid_bias=False, targets=(), compiled=True):
    Args = h.struct("talon_moe_router_topk_args")
    tdt = _torch_dtype(dtype)

    def make():
        x = torch.randn(tokens, experts, device="cuda", dtype=torch.float32).mul_(2).to(tdt)
        s = {"x": x,
             "w": torch.empty(tokens, k, device="cuda", dtype=torch.float32),
             "ids": torch.empty(tokens, k, device="cuda", dtype=torch.int32)}
        if sigmoid_bias:
            s["bias"] = torch.rand(experts, device="cuda", dtype=torch.float32).sub_(0.5).mul_(0.2)
        s["args"] = Args(ptr(s["w"]), ptr(s["ids"]), ptr(x), ptr(s.get("bias")), tokens, experts,
                         k, 0, DTYPES[dtype], 1 if sigmoid_bias else 0, 0)
        return s

    def talon(s, stream):
        h.call("talon_moe_router_topk", s["args"], stream)

    if sigmoid_bias:
        def eager(s):
            return peer_sigmoid_bias_topk(s["x"], s["bias"], k)
        comp_fn = torch.compile(peer_sigmoid_bias_topk)

        def comp(s):
            return comp_fn(s["x"], s["bias"], k)
    else:
        def eager(s):
            return peer_softmax_topk(s["x"], k)
        comp_fn = torch.compile(peer_softmax_topk)

        def comp(s):
            return comp_fn(s["x"], k)

    def check(s):
        torch.cuda.synchronize()
        x = s["x"].float()
        ids = s["ids"].long()
        assert int(ids.min()) >= 0 and int(ids.max()) < experts, "ids out of range"
        assert bool((ids.sort(dim=-1).values.diff(dim=-1) != 0).all()), "repeated expert"
        if sigmoid_bias:
            score = torch.sigmoid(x)
            key = score + s["bias"]
        else:
            score = key = torch.softmax(x, dim=-1)
        want_key, _ = torch.topk(key, k, dim=-1)
        torch.testing.assert_close(key.gather(1, ids), want_key, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(s["w"], score.gather(1, ids), rtol=1e-5, atol=1e-7)

    peers = {"torch": eager}
    if compiled:
        peers["compile"] = comp
    elem = 4 if dtype == "f32" else 2
    label = f"T={tokens} E={experts} k={k} {dtype}" + (" sigmoid+bias" if sigmoid_bias else "")
    return Case("moe_router_topk", label, make, talon, peers,
                bytes=tokens * experts * elem + tokens * k * 8, check=check, targets=targets)


def cases(h):
    global torch
    import torch as _torch
    torch = _torch
    return [
        case(h, 4096, 128, 8, targets=[("us", "<=", 8.0, "T=4096 E=128 k=8 fp32 <= 8 us")]),
        case(h, 4096, 256, 8, targets=[("us", "<=", 8.0, "T=4096 E=256 k=8 fp32 <= 8 us")]),
        case(h, 64, 64, 6),
        case(h, 4096, 256, 8, dtype="bf16"),
        case(h, 4096, 256, 8, sigmoid_bias=True),
        case(h, 65536, 256, 8, dtype="bf16", compiled=False),
    ]
