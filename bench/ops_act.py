"""talon_silu_and_mul and talon_gelu_and_mul (erf and tanh) (bench/ops.py runs them).

out[r, j] = act(in[r, j]) * in[r, I + j], in [rows, 2 I], out [rows, I], I = 14336 (Llama-3-8B
and Mixtral FFN width): the shapes of the earlier C harness, 64 and 16384 rows, bf16, and
silu_and_mul also f16 at 16384. The label gives the input, rows x (2 x I); "cols" in the JSON
row is I, as in that harness's results (tools/release-notes matches the rows of both by dtype,
rows and cols). gelu_erf_and_mul / gelu_tanh_and_mul are talon_gelu_and_mul with
TALON_GELU_ERF / TALON_GELU_TANH. Inputs uniform in [-2, 2]; runs 100, or 50 when the input is
>= 128 MiB.
Peers: "eager" F.silu(x[:, :I]) * x[:, I:] and F.gelu(x[:, :I], approximate=
"none" / "tanh") * x[:, I:]; "compile": the same under torch.compile (dynamic=False, afresh for
every shape); "liger": Liger-Kernel's swiglu_fused_gate_up_forward (reads the fused input, as
talon) and, for tanh, geglu_forward (Liger has no erf GEGLU; its kernel takes gate and up as two
tensors of one row stride, so those cases also hold the two halves, contiguous, for it);
"flashinfer": flashinfer.activation.silu_and_mul / gelu_and_mul / gelu_tanh_and_mul, where
importable (the pack of ../shared/peers builds silu_and_mul only: the others report an error).
A peer that cannot be imported is left out, named in the row's "skipped_peers".
Bytes: 2 x I read and I written per row. Check: on the last timed set, against an
fp32 torch reference with tests/common/opcheck.c's tolerance (magnitude |gate x up|).
Targets (issue 2's): silu_and_mul bf16 16384 x (2 x 14336): >= 90% of the copy ceiling and at
least as fast as torch.compile.
"""
from ops import Case, ptr
import ops_norm
from ops_norm import DTYPES, assert_close, compiled, flashinfer, liger, meta, note_skipped, runs_for

I = 14336
OPS = {"silu_and_mul": None, "gelu_erf_and_mul": "none", "gelu_tanh_and_mul": "tanh"}
GELU_ERF, GELU_TANH = 0, 1  # talon_gelu_approx


def act_case(h, op, rows, cols=I, dt="bf16", targets=()):
    torch, F = ops_norm.torch, ops_norm.F
    dtype = ops_norm.tdtype(dt)
    approx = OPS[op]
    silu = approx is None
    A = h.struct("talon_silu_and_mul_args" if silu else "talon_gelu_and_mul_args")
    in_bytes = rows * 2 * cols * 2
    lg, lg_why = liger()
    liger_split = lg is not None and approx == "tanh"

    def make():
        x = torch.empty(rows, 2 * cols, device="cuda", dtype=dtype).uniform_(-2, 2)
        s = {"x": x, "out": torch.empty(rows, cols, device="cuda", dtype=dtype)}
        f = {"out": ptr(s["out"]), "in": ptr(x), "rows": rows, "cols": cols, "dtype": DTYPES[dt]}
        if not silu:
            f["approx"] = GELU_TANH if approx == "tanh" else GELU_ERF
        s["args"] = A(**f)
        if liger_split:
            s["gate"], s["up"] = x[:, :cols].contiguous(), x[:, cols:].contiguous()
        if skipped:
            note_skipped(op, skipped)
        return s

    def talon(s, stream):
        h.call("talon_silu_and_mul" if silu else "talon_gelu_and_mul", s["args"], stream)

    if silu:
        def eager(x):
            return F.silu(x[:, :cols]) * x[:, cols:]
    else:
        def eager(x):
            return F.gelu(x[:, :cols], approximate=approx) * x[:, cols:]

    def check(s):
        torch.cuda.synchronize()
        xf = s["x"].float()
        g, u = xf[:, :cols], xf[:, cols:]
        ref = (F.silu(g) if silu else F.gelu(g, approximate=approx)) * u
        assert_close(f"{op} out", s["out"], ref, (g * u).abs(), dt)

    comp = compiled(eager)
    peers = {"eager": lambda s: eager(s["x"]), "compile": lambda s: comp(s["x"])}
    skipped = {}
    if lg is None:
        skipped["liger"] = lg_why
    elif silu:
        peers["liger"] = lambda s: lg["swiglu_fused"](s["x"])
    elif approx == "tanh":
        peers["liger"] = lambda s: lg["geglu_tanh"](s["gate"], s["up"])
    else:
        skipped["liger"] = "Liger-Kernel has no erf GEGLU (its geglu is the tanh form)"
    fi, fi_why = flashinfer()
    if fi is None:
        skipped["flashinfer"] = fi_why
    else:
        name = {"silu_and_mul": "silu_and_mul", "gelu_erf_and_mul": "gelu_and_mul",
                "gelu_tanh_and_mul": "gelu_tanh_and_mul"}[op]
        fn = getattr(fi.activation, name, None)
        if fn is None:
            skipped["flashinfer"] = f"flashinfer.activation has no {name}"
        else:
            peers["flashinfer"] = lambda s: fn(s["x"], out=s["out"])

    extra = {"in_cols": 2 * cols}
    if not silu:
        extra["approx"] = "tanh" if approx == "tanh" else "erf"
    api = "talon_silu_and_mul" if silu else "talon_gelu_and_mul"
    return Case(op, f"{dt} {rows}x(2x{cols})", make, talon, peers, bytes=2 * 3 * rows * cols,
                check=check, targets=targets, runs=runs_for(in_bytes),
                meta=meta(api, dt, rows, cols, skipped, **extra))


def cases(h):
    ops_norm.setup()
    big = [("pct_copy", ">=", 90.0, "silu_and_mul bf16 16384x(2x14336): >= 90% of the copy ceiling"),
           ("compile_over_talon", ">=", 1.0,
            "silu_and_mul bf16 16384x(2x14336): at least as fast as torch.compile")]
    return [act_case(h, "silu_and_mul", 64), act_case(h, "silu_and_mul", 16384, targets=big),
            act_case(h, "silu_and_mul", 16384, dt="f16"),
            act_case(h, "gelu_erf_and_mul", 64), act_case(h, "gelu_erf_and_mul", 16384),
            act_case(h, "gelu_tanh_and_mul", 64), act_case(h, "gelu_tanh_and_mul", 16384)]
