"""talon_rmsnorm, talon_fused_add_rmsnorm and talon_layernorm (bench/ops.py runs them).

Shapes: those of the earlier C harness, bf16 (rmsnorm also f16 at 16384x8192), plus the
mid-size shapes of the FlashInfer comparison (rmsnorm 4096x5120 and 2048x7168,
fused_add_rmsnorm 2048x7168, layernorm 4096x5120). Inputs: activations uniform in [-2, 2],
weights in [0.5, 1.5], biases in [-0.5, 0.5]; eps 1e-6 (rms), 1e-5 (layer); layernorm always
with a bias. Runs: 100, or 50 when the input is >= 128 MiB.
Peers: "eager" F.rms_norm (a manual fp32 rmsnorm where torch has none), x + r then
F.rms_norm, F.layer_norm; "compile": the same under torch.compile (dynamic=False, compiled
afresh for every shape); "liger": Liger-Kernel's Triton forward kernels
(rms_norm_forward with casting "llama", fused_add_rms_norm_forward, layer_norm_forward), and
"flashinfer": flashinfer.norm.rmsnorm / fused_add_rmsnorm (in place, as talon), each where it
can be imported (../shared/peers/README.md); one that cannot is left out and named, with the
reason, in the row's "skipped_peers". The eager, compile and liger peers write new tensors.
Bytes: rmsnorm reads in and writes out, + the weight once; layernorm
also the bias; fused_add_rmsnorm reads in and residual and writes both (4 x rows x cols).
Check: on the last timed set, talon's output against an fp32 torch reference with
tests/common/opcheck.c's tolerance (atol + rtol |ref| + 2^-18 magnitude; rtol 2^-7 bf16,
2^-10 f16); fused_add_rmsnorm's new residual must be round(in + residual) bit for bit (fresh
inputs, as it works in place). Targets (issue 2's): 16384x8192 bf16: >= 90% of the copy
ceiling and >= 1.15x faster than torch.compile; 64x8192 bf16: <= 5 us.
The helpers below (optional peers, torch.compile per shape, the check) serve ops_act.py too;
the optional peers and PeerCheck (a peer's output held to talon's) also ops_rope, ops_decode and
ops_topk.
"""
import importlib
import sys

from ops import Case, ptr
from timing import short_error

torch = None
F = None
DTYPES = {"bf16": 0, "f16": 1}  # talon_dtype
RMS_EPS, LN_EPS = 1e-6, 1e-5
LARGE_BYTES = 128 * 2**20  # 50 runs from this input size on
NOISE = 2.0**-18  # tests/common/opcheck.c OPCHECK_NOISE


def setup():
    global torch, F
    if torch is None:
        import torch as _torch  # ops.torch is None here: ops.py runs as __main__
        import torch.nn.functional as _F
        torch, F = _torch, _F


def tdtype(dt):
    return {"bf16": torch.bfloat16, "f16": torch.float16}[dt]


def runs_for(in_bytes):
    return 50 if in_bytes >= LARGE_BYTES else 100


# ---------------------------------------------------------------- optional peers
_optional = {}


def optional(name, load):
    """(module or None, reason): `load()` once per process; any exception means not importable
    (the peer is skipped, with the reason in the JSON), never an error of the benchmark."""
    if name not in _optional:
        try:
            _optional[name] = (load(), None)
        except Exception as exc:  # ImportError, or a package that fails while importing
            _optional[name] = (None, f"not importable: {type(exc).__name__}: {exc}".splitlines()[0][:200])
    return _optional[name]


def liger():
    def load():  # the submodules' forward functions (the default Triton implementations)
        def mod(name):
            return importlib.import_module("liger_kernel.ops." + name)
        return {"rms_norm": mod("rms_norm").rms_norm_forward,
                "fused_add_rms_norm": mod("fused_add_rms_norm").fused_add_rms_norm_forward,
                "layer_norm": mod("layer_norm").layer_norm_forward,
                "swiglu_fused": mod("swiglu").swiglu_fused_gate_up_forward,
                "geglu_tanh": mod("geglu").geglu_forward,
                "rope": mod("rope").rope_forward}
    return optional("liger", load)


def flashinfer():
    def load():
        import flashinfer as fi
        import flashinfer.activation  # noqa: F401
        import flashinfer.norm  # noqa: F401
        import flashinfer.page  # noqa: F401
        import flashinfer.rope  # noqa: F401
        return fi
    return optional("flashinfer", load)


class PeerCheck:
    """Peers held to talon's output. The case's check, once talon's output is verified, calls
    verify(name, fn) with fn running the peer on talon's inputs and asserting it gives talon's
    output; a peer that fails or raises there is not timed: its guard(name, run) raises the
    reason, which run_case reports as "<peer>_error" (no speed of a wrong kernel is reported)."""

    def __init__(self):
        self.wrong = {}

    def guard(self, name, run):
        def guarded(s):
            if name in self.wrong:
                raise AssertionError(self.wrong[name])
            return run(s)
        return guarded

    def verify(self, name, fn):
        try:
            fn()
        except Exception as exc:
            self.wrong[name] = f"not talon's output on the same inputs: {short_error(exc)}"


_noted = set()


def note_skipped(op, skipped):
    """Once per process and op, on stderr, when a case of op actually runs."""
    for peer, why in skipped.items():
        if (op, peer) not in _noted:
            _noted.add((op, peer))
            print(f"note: {op}: peer {peer} skipped ({why})", file=sys.stderr, flush=True)


def compiled(fn):
    """fn under torch.compile(dynamic=False), compiled afresh for this case on its first call
    (in the warm-up): torch._dynamo.reset() first, so the guards and recompile
    limits of earlier shapes of the same function do not apply."""
    state = {}

    def run(*args):
        if "fn" not in state:
            importlib.import_module("torch._dynamo").reset()
            state["fn"] = torch.compile(fn, dynamic=False)
        return state["fn"](*args)
    return run


def assert_close(what, got, ref, mag, dt):
    """tests/common/opcheck.c's tolerance: |got - ref| <= atol + rtol |ref| + 2^-18 mag."""
    rtol, atol = (2.0**-7, 1e-5) if dt == "bf16" else (2.0**-10, 1e-6)
    err = (got.float() - ref).abs()
    tol = atol + rtol * ref.abs() + NOISE * mag
    bad = ~(err <= tol)  # NaN fails
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} elements off the fp32 reference; first "
                             f"at flat index {i}: {float(got.flatten()[i])} vs "
                             f"{float(ref.flatten()[i])} (tol {float(tol.flatten()[i]):.3g}); "
                             f"max err/tol {float((err / tol).max()):.3g}")


def meta(api, dt, rows, cols, skipped, **extra):
    """The case's api, dtype, rows, cols (and extra fields) and the peers left out
    (skipped_peers: {peer: reason}); ops.py copies them into the row. tools/release-notes
    keys these rows by dtype, rows and cols, as in the earlier C harness's results."""
    m = {"api": api, "dtype": dt, "rows": rows, "cols": cols, **extra}
    if skipped:
        m["skipped_peers"] = dict(skipped)
    return m


# ---------------------------------------------------------------- torch peers
def rms_eager(x, w):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps=RMS_EPS)
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + RMS_EPS) * w.float()).to(x.dtype)


def fused_eager(x, r, w):
    r = x + r
    return rms_eager(r, w), r


def ln_eager(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS)


def rms_ref(x, w):
    xf = x.float()
    return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + RMS_EPS) * w.float()


# ---------------------------------------------------------------- cases
def norm_case(h, op, rows, cols, dt="bf16", targets=()):
    dtype = tdtype(dt)
    fused, ln = op == "fused_add_rmsnorm", op == "layernorm"
    A = h.struct(f"talon_{op}_args")
    in_bytes = rows * cols * 2
    nbytes = 2 * ((4 if fused else 2) * rows * cols + (2 if ln else 1) * cols)

    def make():
        s = {"x": torch.empty(rows, cols, device="cuda", dtype=dtype).uniform_(-2, 2),
             "w": torch.empty(cols, device="cuda", dtype=dtype).uniform_(0.5, 1.5)}
        if fused:
            s["r"] = torch.empty(rows, cols, device="cuda", dtype=dtype).uniform_(-2, 2)
            a = A(**{"in": ptr(s["x"]), "residual": ptr(s["r"]), "weight": ptr(s["w"]),
                     "rows": rows, "cols": cols, "eps": RMS_EPS, "dtype": DTYPES[dt]})
        else:
            s["out"] = torch.empty(rows, cols, device="cuda", dtype=dtype)
            f = {"out": ptr(s["out"]), "in": ptr(s["x"]), "weight": ptr(s["w"]), "rows": rows,
                 "cols": cols, "eps": LN_EPS if ln else RMS_EPS, "dtype": DTYPES[dt]}
            if ln:
                s["b"] = torch.empty(cols, device="cuda", dtype=dtype).uniform_(-0.5, 0.5)
                f["bias"] = ptr(s["b"])
            a = A(**f)
        s["args"] = a
        if skipped:
            note_skipped(op, skipped)
        return s

    def talon(s, stream):
        h.call(f"talon_{op}", s["args"], stream)

    def check(s):
        if fused:  # in place: fresh inputs, one call, the reference from them
            s["x"].uniform_(-2, 2)
            s["r"].uniform_(-2, 2)
            x0, r0 = s["x"].clone(), s["r"].clone()
            talon(s, torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            want_r = x0 + r0  # torch's bf16/f16 add: fp32 sum, one rounding (the contract)
            assert torch.equal(s["r"], want_r), \
                "fused_add_rmsnorm: the new residual is not round(in + residual) bit for bit"
            ref = rms_ref(want_r, s["w"])
            assert_close("fused_add_rmsnorm in (output)", s["x"], ref, ref.abs(), dt)
            return
        torch.cuda.synchronize()
        if ln:
            xf = s["x"].float()
            ref = F.layer_norm(xf, (cols,), s["w"].float(), s["b"].float(), LN_EPS)
            mean = xf.mean(-1, keepdim=True)
            rstd = torch.rsqrt(xf.var(-1, unbiased=False, keepdim=True) + LN_EPS)
            mag = (xf.abs() + mean.abs()) * rstd * s["w"].float().abs() + s["b"].float().abs()
        else:
            ref = rms_ref(s["x"], s["w"])
            mag = ref.abs()
        assert_close(f"{op} out", s["out"], ref, mag, dt)

    peers, skipped = {}, {}
    if fused:
        eager = fused_eager
        peers["eager"] = lambda s: eager(s["x"], s["r"], s["w"])
    elif ln:
        eager = ln_eager
        peers["eager"] = lambda s: eager(s["x"], s["w"], s["b"])
    else:
        eager = rms_eager
        peers["eager"] = lambda s: eager(s["x"], s["w"])
    comp = compiled(eager)
    peers["compile"] = (lambda s: comp(s["x"], s["r"], s["w"])) if fused else \
        (lambda s: comp(s["x"], s["w"], s["b"])) if ln else (lambda s: comp(s["x"], s["w"]))

    lg, why = liger()
    if lg is None:
        skipped["liger"] = why
    elif fused:
        peers["liger"] = lambda s: lg["fused_add_rms_norm"](s["x"], s["r"], s["w"], RMS_EPS, 0.0, "llama")
    elif ln:
        peers["liger"] = lambda s: lg["layer_norm"](s["x"], s["w"], s["b"], LN_EPS)
    else:
        peers["liger"] = lambda s: lg["rms_norm"](s["x"], s["w"], RMS_EPS, 0.0, "llama", None)

    fi, why = flashinfer()
    if fi is None:
        skipped["flashinfer"] = why
    elif fused:
        peers["flashinfer"] = lambda s: fi.norm.fused_add_rmsnorm(s["x"], s["r"], s["w"], eps=RMS_EPS)
    elif ln:
        skipped["flashinfer"] = "no layernorm kernel in the FlashInfer pack (../shared/peers)"
    else:
        peers["flashinfer"] = lambda s: fi.norm.rmsnorm(s["x"], s["w"], eps=RMS_EPS, out=s["out"])

    return Case(op, f"{dt} {rows}x{cols}", make, talon, peers, bytes=nbytes, check=check,
                targets=targets, runs=runs_for(in_bytes),
                meta=meta(f"talon_{op}", dt, rows, cols, skipped))


def cases(h):
    setup()
    out = []
    for op in ("rmsnorm", "fused_add_rmsnorm", "layernorm"):
        big = [("pct_copy", ">=", 90.0, f"{op} bf16 16384x8192: >= 90% of the copy ceiling"),
               ("compile_over_talon", ">=", 1.15,
                f"{op} bf16 16384x8192: >= 1.15x faster than torch.compile")]
        small = [("us", "<=", 5.0, f"{op} bf16 64x8192: <= 5 us")]
        if op == "rmsnorm":  # next to no work: the per-call floor of the method
            out.append(norm_case(h, op, 1, 8))
        out += [norm_case(h, op, 1, 4096), norm_case(h, op, 64, 8192, targets=small),
                norm_case(h, op, 4096, 4096), norm_case(h, op, 16384, 8192, targets=big)]
        if op == "rmsnorm":
            out.append(norm_case(h, op, 16384, 8192, "f16"))
    # the mid-size shapes of the FlashInfer comparison
    out += [norm_case(h, "rmsnorm", 4096, 5120), norm_case(h, "rmsnorm", 2048, 7168),
            norm_case(h, "fused_add_rmsnorm", 2048, 7168), norm_case(h, "layernorm", 4096, 5120)]
    return out
