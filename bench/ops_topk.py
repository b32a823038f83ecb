"""talon_topk beside torch.topk (sorted, on the same tensors): the issue's targets at fp32
V=128256 k=50 and V=262144 k=1024, plus k=1024 at V=128256, a bf16 case and two small shapes of
the two-kernel path (B=4 V=128256, B=2 V=262144; it reaches up to B=64 at V=128256) and two
sampled shapes whose chunking differs from the targets' (B=65 V=128256, B=100 V=262144)."""
import ctypes

from ops import Case, I64, ptr

DTYPES = {"fp32": 2, "bf16": 0, "fp16": 1}  # talon_dtype


def cases(h):
    import torch
    Args = h.struct("talon_topk_args")
    h.lib.talon_topk_workspace_size.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(Args), ctypes.POINTER(I64)]
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    def case(B, V, k, dt="fp32", targets=()):
        shape, n = Args(), I64()
        shape.rows, shape.cols = B, V
        h._check("talon_topk_workspace_size",
                 h.lib.talon_topk_workspace_size(h.ctx, ctypes.byref(shape), ctypes.byref(n)))
        nbytes = n.value
        ws = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

        def make():
            x = torch.randn(B, V, device="cuda", dtype=tdt[dt])
            return {"x": x, "v": torch.empty(B, k, device="cuda", dtype=tdt[dt]),
                    "i": torch.empty(B, k, device="cuda", dtype=torch.int32)}

        def talon(s, stream):
            a = Args(ptr(s["v"]), ptr(s["i"]), ptr(s["x"]), ptr(ws), nbytes, B, V, k, 0, 1,
                     DTYPES[dt])
            h.call("talon_topk", a, stream)

        def check(s):
            want = torch.topk(s["x"], k, dim=-1, sorted=True).values
            torch.cuda.synchronize()
            assert torch.equal(s["v"], want), "values differ from torch.topk"
            idx = s["i"].long()
            assert torch.equal(torch.gather(s["x"], 1, idx), s["v"]), "values != x[indices]"
            assert torch.equal(idx.sort(dim=1).values.diff(dim=1) > 0,
                               torch.ones(B, k - 1, dtype=torch.bool, device="cuda")), \
                "repeated index"

        return Case("topk", f"B={B} V={V} k={k} {dt} sorted", make, talon,
                    {"torch": lambda s: torch.topk(s["x"], k, dim=-1, sorted=True)},
                    bytes=B * V * s_elem(dt), check=check, targets=targets)

    def s_elem(dt):
        return 4 if dt == "fp32" else 2

    return [
        case(1, 128256, 50, targets=[("us", "<=", 15.0, "fp32 V=128256 k=50 B=1 <= 15 us")]),
        case(64, 128256, 50, targets=[("us", "<=", 40.0, "fp32 V=128256 k=50 B=64 <= 40 us")]),
        case(256, 128256, 50),
        case(256, 262144, 1024,
             targets=[("us", "<=", 130.0, "fp32 V=262144 k=1024 B=256 <= 130 us")]),
        case(1, 128256, 1024),
        case(64, 128256, 1024),
        case(64, 128256, 50, "bf16"),
        case(4, 128256, 50),
        case(2, 262144, 1024),
        case(65, 128256, 50),
        case(100, 262144, 1024),
    ]
