"""talon_topk beside torch.topk (sorted, on the same tensors): the issue's targets at fp32
V=128256 k=50 and V=262144 k=1024, plus k=1024 at V=128256, two bf16 cases (bf16 ties more:
at B=256 V=262144 k=1024 about 50 keys share each value near the k-th) and two small shapes of
the two-kernel path (B=4 V=128256, B=2 V=262144; it reaches up to B=64 at V=128256) and two
sampled shapes whose chunking differs from the targets' (B=65 V=128256, B=100 V=262144).
Peer "flashinfer" (where ops_norm's loader imports FlashInfer; else named, with the reason, in
the row's "skipped_peers"): flashinfer.top_k(x, k, sorted=True), sorted as talon's cases (it
sorts its selection with torch.sort). Checked against talon's output: the same values, sorted
(where values tie at the k-th place either may return other indices of them), each at its
index, no index twice; one that differs is reported as "flashinfer_error", not timed. talon
has no masked-logits case, so FlashInfer's sampling.top_k_mask_logits is not a peer here."""
import ctypes

from ops import Case, I64, ptr
from ops_norm import PeerCheck, flashinfer, note_skipped

DTYPES = {"fp32": 2, "bf16": 0, "fp16": 1}  # talon_dtype


def cases(h):
    import torch
    Args = h.struct("talon_topk_args")
    h.lib.talon_topk_workspace_size.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(Args), ctypes.POINTER(I64)]
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    fi, fi_why = flashinfer()

    def case(B, V, k, dt="fp32", targets=()):
        shape, n = Args(), I64()
        shape.rows, shape.cols = B, V
        h._check("talon_topk_workspace_size",
                 h.lib.talon_topk_workspace_size(h.ctx, ctypes.byref(shape), ctypes.byref(n)))
        nbytes = n.value
        ws = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        pc, skipped = PeerCheck(), {}
        peers = {"torch": lambda s: torch.topk(s["x"], k, dim=-1, sorted=True)}
        if fi is None:
            skipped["flashinfer"] = fi_why
        else:
            peers["flashinfer"] = pc.guard("flashinfer", lambda s: fi.top_k(s["x"], k, sorted=True))

        def make():
            if skipped:
                note_skipped("topk", skipped)
            x = torch.randn(B, V, device="cuda", dtype=tdt[dt])
            return {"x": x, "v": torch.empty(B, k, device="cuda", dtype=tdt[dt]),
                    "i": torch.empty(B, k, device="cuda", dtype=torch.int32)}

        def talon(s, stream):
            a = Args(ptr(s["v"]), ptr(s["i"]), ptr(s["x"]), ptr(ws), nbytes, B, V, k, 0, 1,
                     DTYPES[dt])
            h.call("talon_topk", a, stream)

        def same_selection(who, s, values, indices):
            """values: each row's k largest of x, as talon's (sorted), each at its index."""
            idx = indices.long()
            assert torch.equal(values.sort(dim=1, descending=True).values, s["v"]), \
                f"{who}: values differ from talon's"
            assert torch.equal(torch.gather(s["x"], 1, idx), values), f"{who}: values != x[indices]"
            assert bool((idx.sort(dim=1).values.diff(dim=1) > 0).all()), f"{who}: repeated index"

        def check(s):
            want = torch.topk(s["x"], k, dim=-1, sorted=True).values
            torch.cuda.synchronize()
            assert torch.equal(s["v"], want), "values differ from torch.topk"
            same_selection("talon", s, s["v"], s["i"])
            if "flashinfer" in peers:
                pc.verify("flashinfer", lambda: same_selection(
                    "flashinfer", s, *fi.top_k(s["x"], k, sorted=True)))

        return Case("topk", f"B={B} V={V} k={k} {dt} sorted", make, talon, peers,
                    bytes=B * V * s_elem(dt), check=check, targets=targets,
                    meta={"skipped_peers": skipped} if skipped else None)

    def s_elem(dt):
        return 4 if dt == "fp32" else 2

    return [
        case(1, 128256, 50, targets=[("us", "<=", 15.0, "fp32 V=128256 k=50 B=1 <= 15 us")]),
        case(64, 128256, 50, targets=[("us", "<=", 40.0, "fp32 V=128256 k=50 B=64 <= 40 us")]),
        case(256, 128256, 50),
        case(256, 262144, 1024,
             targets=[("us", "<=", 120.0, "fp32 V=262144 k=1024 B=256 <= 120 us")]),
        case(1, 128256, 1024),
        case(64, 128256, 1024),
        case(64, 128256, 50, "bf16"),
        case(256, 262144, 1024, "bf16"),
        case(4, 128256, 50),
        case(2, 262144, 1024),
        case(65, 128256, 50),
        case(100, 262144, 1024),
    ]
