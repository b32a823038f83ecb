"""Benchmarks of talon_moe_align_block_size and talon_moe_sum (see bench/ops.py for the method).

moe_align peers: a torch alignment written to be fair and fast, all on the GPU and free of
host synchronisation: stable argsort by expert, a scatter_add count, cumsum of the padded counts, one
scatter into a sentinel-filled buffer, searchsorted for the block experts. Its output is the
same as talon's (both order a group by ascending flat index), so `check` compares exactly.
The same torch version replayed from a CUDA graph (torch_graph) shows its GPU time alone.
moe_sum peers: (x * w[..., None]).sum(1) in fp32 then cast, eager and torch.compile.
"""
from ops import Case, ptr

torch = None


def ops_error(exc):
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def capacity(tokens, k, experts, block):
    n = tokens * k
    sorted_cap = n + min(experts, n) * (block - 1)
    return sorted_cap, (sorted_cap + block - 1) // block


def torch_align(ids, experts, block, sorted_cap, blocks_cap):
    """vLLM's moe_align_block_size in torch ops; groups in ascending flat index."""
    flat = ids.reshape(-1)
    n = flat.numel()
    valid = (flat >= 0) & (flat < experts)
    key = torch.where(valid, flat, experts).long()
    # scatter_add, not bincount: bincount reads its maximum back to the host
    counts = torch.zeros(experts + 1, dtype=torch.long, device=ids.device)
    counts.scatter_add_(0, key, torch.ones_like(key))
    padded = (counts[:experts] + block - 1) // block * block
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(key, stable=True)
    skey = key[order]
    first = torch.cumsum(counts, 0) - counts  # first rank of each expert in `order`
    e = skey.clamp(max=experts - 1)
    pos = torch.arange(n, device=ids.device) - first[skey] + starts[e]
    pos = torch.where(skey < experts, pos, sorted_cap)  # invalid ids land in a dropped slot
    out = torch.full((sorted_cap + 1,), n, dtype=torch.int32, device=ids.device)
    out.scatter_(0, pos, order.int())
    total = ends[-1:]
    b = torch.arange(blocks_cap, device=ids.device) * block
    eids = torch.searchsorted(ends, b, right=True)
    eids = torch.where(b < total, eids, -1).int()
    return out[:sorted_cap], eids, total.int()


def align_case(h, tokens, k, experts, block, targets=()):
    Args = h.struct("talon_moe_align_block_size_args")
    scap, bcap = capacity(tokens, k, experts, block)

    def make():
        ids = torch.rand(tokens, experts, device="cuda").topk(k, dim=1).indices.int()
        s = {"ids": ids,
             "sorted": torch.empty(scap, dtype=torch.int32, device="cuda"),
             "eids": torch.empty(bcap, dtype=torch.int32, device="cuda"),
             "npost": torch.empty(1, dtype=torch.int32, device="cuda"), "graph": None}
        # The torch version captured in a CUDA graph: its GPU time without Python's launches.
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch_align(ids, experts, block, scap, bcap)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                s["graph_out"] = torch_align(ids, experts, block, scap, bcap)
            s["graph"] = g
        except Exception as exc:  # reported as the peer's error
            s["graph_error"] = ops_error(exc)
        return s

    def graph_peer(s):
        if s["graph"] is None:
            raise RuntimeError(s.get("graph_error", "no graph"))
        s["graph"].replay()

    def talon(s, stream):
        a = Args(ptr(s["sorted"]), ptr(s["eids"]), ptr(s["npost"]), ptr(s["ids"]), tokens, k,
                 experts, block, scap, bcap)
        h.call("talon_moe_align_block_size", a, stream)

    def peer(s):
        return torch_align(s["ids"], experts, block, scap, bcap)

    def check(s):
        ref_sorted, ref_eids, ref_total = peer(s)
        torch.cuda.synchronize()
        assert torch.equal(s["npost"], ref_total), (s["npost"], ref_total)
        assert torch.equal(s["sorted"], ref_sorted), "sorted_token_ids differ from torch"
        assert torch.equal(s["eids"], ref_eids), "expert_ids differ from torch"

    return Case("moe_align_block_size", f"T={tokens} E={experts} k={k} block={block}", make,
                talon, {"torch": peer, "torch_graph": graph_peer}, check=check, targets=targets)


def moe_sum_ref(x, w):
    return (x.float() * w[..., None]).sum(1).to(x.dtype)


def sum_case(h, tokens, k, hidden, weighted=True, dtype_name="bf16", targets=(), with_compile=False):
    Args = h.struct("talon_moe_sum_args")
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
    compiled = torch.compile(moe_sum_ref) if with_compile else None

    def make():
        x = torch.empty(tokens, k, hidden, dtype=dtype, device="cuda").uniform_(-1, 1)
        w = torch.rand(tokens, k, device="cuda")
        return {"x": x, "w": w if weighted else None,
                "out": torch.empty(tokens, hidden, dtype=dtype, device="cuda")}

    def talon(s, stream):
        a = Args(ptr(s["out"]), ptr(s["x"]), ptr(s["w"]), tokens, k, hidden,
                 0 if dtype_name == "bf16" else 1)
        h.call("talon_moe_sum", a, stream)

    ones = None

    def weights(s):
        nonlocal ones
        if s["w"] is not None:
            return s["w"]
        if ones is None:
            ones = torch.ones(tokens, k, device="cuda")
        return ones

    if weighted:
        peers = {"torch": lambda s: moe_sum_ref(s["x"], s["w"])}
        if compiled:
            peers["torch_compile"] = lambda s: compiled(s["x"], s["w"])
    else:
        peers = {"torch": lambda s: s["x"].sum(1)}

    def check(s):
        ref = moe_sum_ref(s["x"], weights(s))
        torch.cuda.synchronize()
        err = (s["out"].float() - ref.float()).abs().max().item()
        assert err <= 2e-2 * max(1.0, ref.float().abs().max().item()), f"max error {err}"

    nbytes = tokens * k * hidden * 2 + (tokens * k * 4 if weighted else 0) + tokens * hidden * 2
    return Case("moe_sum", f"T={tokens} k={k} H={hidden} {dtype_name}"
                + ("" if weighted else " plain"), make, talon, peers, bytes=nbytes,
                check=check, targets=targets)


def cases(h):
    global torch
    import torch as _torch  # ops.torch is None here: ops.py runs as __main__, this is a 2nd copy
    torch = _torch
    return [
        align_case(h, 16, 8, 256, 64, [("us", "<=", 6.0, "moe_align T=16 E=256 k=8 <= 6 us")]),
        align_case(h, 64, 8, 256, 64),    # 512 ids: the small kernel's 16 warps, one step each
        align_case(h, 256, 8, 256, 64),
        align_case(h, 512, 8, 256, 64),   # 4096 ids: c8 cluster, one id per thread
        align_case(h, 1024, 8, 256, 64),  # 8192 ids: c8
        align_case(h, 4096, 8, 256, 64, [("us", "<=", 12.0, "moe_align T=4096 E=256 k=8 <= 12 us")]),
        align_case(h, 16384, 8, 256, 64, [("us", "<=", 20.0, "moe_align T=16384 E=256 k=8 <= 20 us")]),
        align_case(h, 4096, 8, 256, 128),
        align_case(h, 65536, 8, 512, 128),
        sum_case(h, 4096, 8, 4096, with_compile=True, targets=[
            ("pct_copy", ">=", 85.0, "moe_sum T=4096 k=8 H=4096 bf16 >= 85% of copy")]),
        sum_case(h, 4096, 8, 4096, weighted=False),
        sum_case(h, 16, 8, 4096),
        sum_case(h, 4096, 2, 7168, dtype_name="f16"),
        sum_case(h, 4096, 4, 4096),
    ]
