"""talon_quant_fp8 beside torch (bench/ops.py runs it).

in [rows, cols] bf16 (N(0, 1) times a per-row magnitude in 2^[-4, 4]) -> e4m3 out and fp32
scales: per tensor (a given scale), per token (dynamic, one scale per row) and per group of
128 columns (dynamic, DeepSeek-V3's activations; group-major scales). Peers: "eager", the torch
sequence (amax, scale = max(amax / 448, 2^-126), x / scale cast to float8_e4m3fn; per tensor
clamped to +-448 first), and "compile", the same under torch.compile. Bytes: 2 read + 1
written per element, plus the scales. Check: on the last timed set, talon's bytes and scales
equal the eager peer's (IEEE fp32 quotients, rounded to nearest even; the peer divides by a
device tensor: by a Python number torch multiplies by the reciprocal instead).
Target (issue 21): >= 85% of the copy ceiling at rows >= 4096.

rmsnorm_quant_fp8 (norm_quant_case): rmsnorm (with a residual: fused_add_rmsnorm) straight to
e4m3 with per-token scales, or a given per-tensor scale. Peers: "talon_2ops", talon_rmsnorm
(talon_fused_add_rmsnorm) then talon_quant_fp8, the unfused sequence the issue compares with;
"eager" and "compile", torch's rmsnorm (F.rms_norm) rounded to bf16, then the quantisation
above. Bytes: 2 read + 1 written per element (residual: + 2 read + 2 written), plus the
scales. Check: talon's bytes and scales equal talon_2ops' (bit for bit by construction).
Target (issue 21): the fused op >= 1.3x talon_2ops.
"""
from ops import Case, ptr
import ops_norm
from ops_norm import compiled

MODES = {"tensor": 0, "token": 1, "group": 2}
BF16 = 0


def reference(mode, torch):
    e4m3 = torch.float8_e4m3fn
    # a device tensor, so amax / 448 is an IEEE division (a Python number would make torch
    # multiply by its reciprocal, which rounds some scales differently)
    d448 = torch.tensor(448.0, device="cuda")

    def quant(x, s):
        if mode == "tensor":
            return (x.float() / s).clamp(-448.0, 448.0).to(e4m3), s
        if mode == "token":
            amax = x.abs().amax(dim=1, keepdim=True).float()
            s = (amax / d448).clamp(min=2.0 ** -126)
            return (x.float() / s).to(e4m3), s.view(-1)
        rows, cols = x.shape
        g = x.view(rows, cols // 128, 128)
        amax = g.abs().amax(dim=2, keepdim=True).float()
        s = (amax / d448).clamp(min=2.0 ** -126)
        return (g.float() / s).to(e4m3).view(rows, cols), s.view(rows, cols // 128).t()
    return quant


def quant_case(h, mode, rows, cols, targets=()):
    torch = ops_norm.torch
    A = h.struct("talon_quant_fp8_args")
    groups = cols // 128
    n_scales = 1 if mode == "tensor" else rows if mode == "token" else groups * rows

    def make():
        mag = torch.exp2(torch.randint(-4, 5, (rows, 1), device="cuda").float())
        s = {"x": (torch.randn(rows, cols, device="cuda") * mag).to(torch.bfloat16),
             "q": torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn),
             "s": torch.empty(n_scales, device="cuda")}
        if mode == "tensor":
            s["s"].fill_(0.05)
        s["args"] = A(out=ptr(s["q"]), **{"in": ptr(s["x"])}, scale=ptr(s["s"]), rows=rows,
                      cols=cols, mode=MODES[mode], dtype=BF16)
        if mode == "group" and rows % 4:
            raise ValueError("group-major scales pad rows to a multiple of 4")
        return s

    def talon(s, stream):
        h.call("talon_quant_fp8", s["args"], stream)

    ref = reference(mode, torch)
    fixed = torch.tensor(0.05, device="cuda")
    peers = {"eager": lambda s: ref(s["x"], fixed),
             "compile": (lambda f: lambda s: f(s["x"], fixed))(compiled(ref))}

    def check(s):
        h.call("talon_quant_fp8", s["args"], torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        q, sc = ref(s["x"], fixed)
        if mode != "tensor":
            want = sc.reshape(-1) if mode == "token" else sc.reshape(groups, rows).reshape(-1)
            if not torch.equal(s["s"], want):
                raise AssertionError(f"quant {mode}: scales differ from torch's")
        if not torch.equal(s["q"].view(torch.uint8), q.view(torch.uint8)):
            bad = int((s["q"].view(torch.uint8) != q.view(torch.uint8)).sum())
            raise AssertionError(f"quant {mode}: {bad} bytes differ from torch's")

    bytes_ = rows * cols * 3 + n_scales * 4
    return Case("quant_fp8", f"{mode} bf16 {rows}x{cols}", make, talon, peers, bytes=bytes_,
                check=check, targets=targets,
                meta={"rows": rows, "cols": cols, "mode": mode, "dtype": "bf16"})


def norm_quant_case(h, mode, rows, cols, residual, targets=()):
    torch = ops_norm.torch
    F = ops_norm.F
    A = h.struct("talon_rmsnorm_quant_fp8_args")
    R, FA = h.struct("talon_rmsnorm_args"), h.struct("talon_fused_add_rmsnorm_args")
    Q = h.struct("talon_quant_fp8_args")
    n_scales = rows if mode == "token" else 1
    eps = 1e-6

    def make():
        s = {"x": torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16),
             "r": torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16),
             "w": (0.5 + torch.rand(cols, device="cuda")).to(torch.bfloat16),
             "q": torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn),
             "q2": torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn),
             "y": torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16),
             "s": torch.full((n_scales,), 0.01, device="cuda"),
             "s2": torch.full((n_scales,), 0.01, device="cuda")}
        s["r0"] = s["r"].clone()
        s["args"] = A(out=ptr(s["q"]), scale=ptr(s["s"]), **{"in": ptr(s["x"])},
                      residual=ptr(s["r"]) if residual else 0, weight=ptr(s["w"]), rows=rows,
                      cols=cols, eps=eps, mode=MODES[mode], dtype=BF16)
        if residual:  # in place on y (a copy of x), as fused_add_rmsnorm works
            s["norm_args"] = FA(**{"in": ptr(s["y"])}, residual=ptr(s["r"]), weight=ptr(s["w"]),
                                rows=rows, cols=cols, eps=eps, dtype=BF16)
        else:
            s["norm_args"] = R(out=ptr(s["y"]), **{"in": ptr(s["x"])}, weight=ptr(s["w"]),
                               rows=rows, cols=cols, eps=eps, dtype=BF16)
        s["q_args"] = Q(out=ptr(s["q2"]), **{"in": ptr(s["y"])}, scale=ptr(s["s2"]), rows=rows,
                        cols=cols, mode=MODES[mode], dtype=BF16)
        return s

    def talon(s, stream):
        h.call("talon_rmsnorm_quant_fp8", s["args"], stream)

    def two_ops(s):
        stream = torch.cuda.current_stream().cuda_stream
        if residual:
            s["y"].copy_(s["x"])
        h.call("talon_fused_add_rmsnorm" if residual else "talon_rmsnorm", s["norm_args"], stream)
        h.call("talon_quant_fp8", s["q_args"], stream)

    quant = reference(mode, torch)
    fixed = torch.tensor(0.01, device="cuda")

    def torch_seq(x, r, w):
        if residual:
            r = r.add_(x)
            x = r
        y = F.rms_norm(x.float(), (cols,), w.float(), eps).to(torch.bfloat16)
        return quant(y, fixed)

    peers = {"talon_2ops": two_ops,
             "eager": lambda s: torch_seq(s["x"], s["r"], s["w"]),
             "compile": (lambda f: lambda s: f(s["x"], s["r"], s["w"]))(compiled(torch_seq))}

    def check(s):
        stream = torch.cuda.current_stream().cuda_stream
        s["r"].copy_(s["r0"])
        h.call("talon_rmsnorm_quant_fp8", s["args"], stream)
        r1 = s["r"].clone()
        s["r"].copy_(s["r0"])
        two_ops(s)
        torch.cuda.synchronize()
        if not torch.equal(s["q"].view(torch.uint8), s["q2"].view(torch.uint8)):
            raise AssertionError("rmsnorm_quant_fp8: bytes differ from rmsnorm then quant_fp8")
        if not torch.equal(s["s"], s["s2"]) or (residual and not torch.equal(r1, s["r"])):
            raise AssertionError("rmsnorm_quant_fp8: scales or residual differ")

    bytes_ = rows * cols * (7 if residual else 3) + cols * 2 + n_scales * 4
    label = f"{'add+' if residual else ''}rmsnorm->fp8 {mode} bf16 {rows}x{cols}"
    return Case("rmsnorm_quant_fp8", label, make, talon, peers, bytes=bytes_, check=check,
                targets=targets, meta={"rows": rows, "cols": cols, "mode": mode,
                                       "residual": residual, "dtype": "bf16"})


def cases(h):
    out = []
    for residual in (False, True):
        for mode in ("token", "tensor"):
            for rows in (4096, 16384):
                out.append(norm_quant_case(h, mode, rows, 4096, residual,
                                           targets=[("talon_2ops_over_talon", ">=", 1.3,
                                                     ">= 1.3x rmsnorm then quant_fp8")]))
    for mode in ("tensor", "token", "group"):
        # 768 columns: a small expert's intermediate (Qwen3-30B-A3B), the MoE fp8 path's quant
        for rows, cols in ((4096, 4096), (16384, 4096), (4096, 7168), (16384, 7168),
                           (16384, 768), (49152, 768)):
            out.append(quant_case(h, mode, rows, cols,
                                  targets=[("pct_copy", ">=", 85.0, ">= 85% of the copy ceiling")]))
        out.append(quant_case(h, mode, 16, 4096))
    return out
