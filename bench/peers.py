#!/usr/bin/env python3
"""Times PyTorch peers (eager and torch.compile) on the shapes of a talon-bench JSON.

    python3 bench/peers.py --talon build/bench-talon.json --out bench/results

For every talon entry (op, dtype, rows, cols) the peer runs on identical shapes with the same
method as talon-bench: random inputs rotating over buffer sets totalling more than 4x the
50 MiB L2 (at least 2 sets), the talon entry's warm-up and run counts, each run between its own
pair of CUDA events, median reported. Ratios are peer_us / talon_us: > 1 means talon is faster.
Writes <out>/<date>-<gpu-slug>.json (talon results + peer timings + ratios + targets) and
prints a table and the project's targets (a report: exit status 0 whether they pass or not).

    --targets FILE   only re-print the targets of an existing combined JSON (no GPU needed)
    --dry-run        no torch: fake peer timings, to check the reading/formatting logic
"""
import argparse
import datetime
import gc
import json
import math
import sys
import time

from timing import short_error, slug, time_fn, write_json

L2_BYTES = 50 * 2**20
ROTATE_BYTES = 4 * L2_BYTES
ELEM_BYTES = 2  # bf16 / f16
SPIN_US = 60  # GPU spin queued per timed call (timing.time_fn)

torch = None  # imported in main() unless --dry-run / --targets FILE
F = None
DEVICE = "cuda"

# ---------------------------------------------------------------- peers
# The eager peers; torch.compile compiles each afresh for every shape (time_peers).


def peer_rmsnorm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def peer_fused_add_rmsnorm(x, r, w):
    r = x + r
    return F.rms_norm(r, (r.shape[-1],), w, eps=1e-6), r


def peer_layernorm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def peer_silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[:, :d]) * x[:, d:]


def peer_gelu_erf_and_mul(x):
    d = x.shape[-1] // 2
    return F.gelu(x[:, :d], approximate="none") * x[:, d:]


def peer_gelu_tanh_and_mul(x):
    d = x.shape[-1] // 2
    return F.gelu(x[:, :d], approximate="tanh") * x[:, d:]


PEERS = {
    "rmsnorm": peer_rmsnorm,
    "fused_add_rmsnorm": peer_fused_add_rmsnorm,
    "layernorm": peer_layernorm,
    "silu_and_mul": peer_silu_and_mul,
    "gelu_erf_and_mul": peer_gelu_erf_and_mul,
    "gelu_tanh_and_mul": peer_gelu_tanh_and_mul,
}
GATED = ("silu_and_mul", "gelu_erf_and_mul", "gelu_tanh_and_mul")

# (shape, low, high) of each input, in the peer's argument order; values as in talon-bench:
# activations uniform in [-2, 2], weights in [0.5, 1.5], biases in [-0.5, 0.5].


def input_specs(e):
    op, rows, cols = e["op"], e["rows"], e["cols"]
    x = ((rows, cols), -2.0, 2.0)
    w = ((cols,), 0.5, 1.5)
    if op == "rmsnorm":
        return [x, w]
    if op == "fused_add_rmsnorm":
        return [x, x, w]
    if op == "layernorm":
        return [x, w, ((cols,), -0.5, 0.5)]
    if op in GATED:
        return [((rows, 2 * cols), -2.0, 2.0)]
    raise ValueError(f"unknown op {op!r}")


def num_sets(specs):
    set_bytes = sum(math.prod(shape) * ELEM_BYTES for shape, _, _ in specs)
    return max(2, ROTATE_BYTES // set_bytes + 1), set_bytes


# ---------------------------------------------------------------- formatting helpers


def shape_str(e):
    if e["op"] in GATED:
        return f"{e['rows']}x(2x{e['cols']})"
    return f"{e['rows']}x{e['cols']}"


def fmt(v, spec, width):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}{spec}}"


def ratio(peer_us, talon_us):
    if peer_us is None or not talon_us:
        return None
    return peer_us / talon_us


def print_table(doc):
    print(f"\n{doc['gpu']}, {doc['date']}, torch {doc.get('torch', '-')}, "
          f"copy ceiling {doc['copy_gbs']:.0f} GB/s; ratios = peer us / talon us (> 1: talon faster)")
    hdr = (f"{'op':<18} {'dtype':<5} {'shape':>16} {'talon us':>9} {'eager us':>9} "
           f"{'compile us':>10} {'talon GB/s':>10} {'% copy':>6} {'eager/talon':>11} "
           f"{'compile/talon':>13}")
    print(hdr)
    print("-" * len(hdr))
    for e in doc["results"]:
        print(f"{e['op']:<18} {e['dtype']:<5} {shape_str(e):>16} {fmt(e['us'], '.2f', 9)} "
              f"{fmt(e.get('eager_us'), '.2f', 9)} {fmt(e.get('compile_us'), '.2f', 10)} "
              f"{fmt(e['gbs'], '.0f', 10)} {fmt(e['pct_copy'], '.1f', 6)} "
              f"{fmt(e.get('eager_over_talon'), '.2f', 11)} "
              f"{fmt(e.get('compile_over_talon'), '.2f', 13)}")
        if e.get("compile_error"):
            print(f"    torch.compile failed: {e['compile_error']}")
        if e.get("eager_error"):
            print(f"    eager failed: {e['eager_error']}")
        if e.get("peer_error"):
            print(f"    peers failed: {e['peer_error']}")


# ---------------------------------------------------------------- targets

# (op, rows, cols, result field, comparison, threshold, text); all bf16
TARGETS = []
for _op in ("rmsnorm", "fused_add_rmsnorm", "layernorm"):
    TARGETS.append((_op, 16384, 8192, "pct_copy", ">=", 90.0, ">= 90% of the copy ceiling"))
    TARGETS.append((_op, 16384, 8192, "compile_over_talon", ">=", 1.15,
                    ">= 1.15x faster than torch.compile"))
for _op in ("rmsnorm", "fused_add_rmsnorm", "layernorm"):
    TARGETS.append((_op, 64, 8192, "us", "<=", 5.0, "<= 5 us"))
TARGETS.append(("silu_and_mul", 16384, 14336, "pct_copy", ">=", 90.0, ">= 90% of the copy ceiling"))
TARGETS.append(("silu_and_mul", 16384, 14336, "compile_over_talon", ">=", 1.0,
                "at least as fast as torch.compile"))
UNITS = {"pct_copy": "%", "compile_over_talon": "x", "us": " us"}


def check_targets(results):
    by_key = {(e["op"], e["dtype"], e["rows"], e["cols"]): e for e in results}
    out = []
    for op, rows, cols, field, cmp, thr, text in TARGETS:
        e = by_key.get((op, "bf16", rows, cols))
        value = None if e is None else e.get(field)
        if value is None:
            status = "N/A"  # not measured (filtered out, or the peer failed)
        elif cmp == ">=":
            status = "PASS" if value >= thr else "FAIL"
        else:
            status = "PASS" if value <= thr else "FAIL"
        shape = f"{rows}x(2x{cols})" if op in GATED else f"{rows}x{cols}"
        out.append({"op": op, "dtype": "bf16", "rows": rows, "cols": cols, "metric": field,
                    "cmp": cmp, "threshold": thr, "value": value, "status": status,
                    "text": f"{op} bf16 {shape}: {text}"})
    return out


def print_targets(targets):
    print("\ntargets (bf16):")
    for t in targets:
        v = "no data" if t["value"] is None else f"{t['value']:.2f}{UNITS[t['metric']]}"
        print(f"  {t['status']:<4}  {t['text']:<68} measured {v}")
    n = sum(t["status"] == "PASS" for t in targets)
    print(f"  {n}/{len(targets)} pass")


# ---------------------------------------------------------------- timing (torch)


def make_sets(e, dtype):
    specs = input_specs(e)
    n, set_bytes = num_sets(specs)
    sets = []
    for _ in range(n):
        sets.append(tuple(torch.empty(shape, dtype=dtype, device=DEVICE).uniform_(lo, hi)
                          for shape, lo, hi in specs))
    torch.cuda.synchronize()
    return sets, set_bytes


def free_cuda():
    gc.collect()
    torch.cuda.empty_cache()


def raise_compile_limits():
    cfg = torch._dynamo.config
    for name, value in (("recompile_limit", 64), ("cache_size_limit", 64),
                        ("accumulated_recompile_limit", 1024),
                        ("accumulated_cache_size_limit", 1024)):
        try:
            if hasattr(cfg, name) and getattr(cfg, name) < value:
                setattr(cfg, name, value)
        except Exception:  # renamed/aliased across versions: best effort
            pass


def time_peers(e, use_compile, talon_warmup):
    """Fills e with eager_us / compile_us (None on failure) for one talon entry."""
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[e["dtype"]]
    warmup = int(e.get("warmup", talon_warmup))
    runs = int(e.get("runs", 50))
    fn = PEERS[e["op"]]
    sets, set_bytes = make_sets(e, dtype)
    e["peer_sets"] = len(sets)
    e["peer_set_bytes"] = set_bytes
    e["eager_us"] = e["compile_us"] = None
    try:
        e["eager_us"], e["eager_min_us"] = time_fn(lambda s: fn(*s), sets, warmup, runs,
                                                   SPIN_US)
    except Exception as exc:
        e["eager_error"] = short_error(exc)
        free_cuda()
    if use_compile:
        try:
            # A fresh compile per shape: one function reused across shapes piles up guards
            # and recompiles (seen: 1x8 then 1x4096 ran 13x slower than its own compile).
            torch._dynamo.reset()
            cfn = torch.compile(fn, dynamic=False)
            t0 = time.perf_counter()
            cfn(*sets[0])  # compiles for this shape (outside the timed region)
            torch.cuda.synchronize()
            e["compile_s"] = round(time.perf_counter() - t0, 2)
            e["compile_us"], e["compile_min_us"] = time_fn(lambda s: cfn(*s), sets, warmup,
                                                           runs, SPIN_US)
        except Exception as exc:
            e["compile_error"] = short_error(exc)
            e["compile_us"] = None
    del sets
    free_cuda()


def fake_peers(e):
    e["eager_us"] = round(e["us"] * 1.6, 3)
    e["compile_us"] = round(e["us"] * 1.2, 3) if e["op"] != "layernorm" else None
    if e["compile_us"] is None:
        e["compile_error"] = "dry run: pretend torch.compile failed"


def gbs(bytes_, us):
    return None if us is None or not us else bytes_ / (us * 1e-6) / 1e9


# ---------------------------------------------------------------- main


def main(argv=None):
    global torch, F
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--talon", help="talon-bench JSON (talon-bench --json FILE)")
    ap.add_argument("--out", default="bench/results", help="directory of the combined JSON")
    ap.add_argument("--targets", nargs="?", const=True, default=None, metavar="FILE",
                    help="targets are always checked; with FILE, only re-check that combined JSON")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--filter", default=None, help="only ops whose name contains this")
    ap.add_argument("--dry-run", action="store_true", help="no torch; fake peer timings")
    args = ap.parse_args(argv)

    if isinstance(args.targets, str):
        with open(args.targets) as f:
            doc = json.load(f)
        print_table(doc)
        print_targets(check_targets(doc["results"]))
        return 0
    if not args.talon:
        ap.error("--talon FILE is required (or --targets FILE)")

    with open(args.talon) as f:
        talon = json.load(f)
    results = [dict(e) for e in talon["results"]]
    if args.filter:
        results = [e for e in results if args.filter in e["op"]]
    for e in results:
        if e["op"] not in PEERS:
            raise SystemExit(f"peers.py: unknown op {e['op']!r} in {args.talon}")

    t_start = time.perf_counter()
    meta = {k: v for k, v in talon.items() if k != "results"}
    doc = {
        "gpu": talon["gpu"],
        "date": talon.get("date") or datetime.date.today().isoformat(),
        "copy_gbs": talon["copy_gbs"],
        "talon": meta,
        "method": "random inputs rotating over sets > 4x L2 (>= 2 sets), warm-up, median of "
                  "per-run CUDA event pairs; ratios are peer_us / talon_us (> 1: talon faster)",
    }

    if args.dry_run:
        doc["dry_run"] = True
        doc["torch"] = None
        for e in results:
            fake_peers(e)
    else:
        import torch as _torch
        import torch.nn.functional as _F
        torch, F = _torch, _F
        if not torch.cuda.is_available():
            raise SystemExit("peers.py: torch sees no CUDA device")
        torch.set_grad_enabled(False)
        dev_name = torch.cuda.get_device_name(0)
        if dev_name != talon["gpu"]:
            print(f"peers.py: warning: torch device {dev_name!r} != talon JSON gpu "
                  f"{talon['gpu']!r}", file=sys.stderr)
        doc["torch"] = torch.__version__
        doc["torch_cuda"] = torch.version.cuda
        doc["torch_device"] = dev_name
        use_compile = not args.no_compile
        if use_compile:
            import torch._dynamo  # noqa: F401
            raise_compile_limits()
        for i, e in enumerate(results):
            t0 = time.perf_counter()
            try:
                time_peers(e, use_compile, talon.get("warmup", 10))
            except Exception as exc:  # e.g. out of memory making the input sets
                e["peer_error"] = short_error(exc)
                e.setdefault("eager_us", None)
                e.setdefault("compile_us", None)
                free_cuda()
            print(f"[{i + 1}/{len(results)}] {e['op']} {e['dtype']} {shape_str(e)}: talon "
                  f"{e['us']:.2f} us, eager {fmt(e['eager_us'], '.2f', 0)} us, compile "
                  f"{fmt(e['compile_us'], '.2f', 0)} us ({time.perf_counter() - t0:.1f} s)",
                  flush=True)

    for e in results:
        e["eager_gbs"] = gbs(e["bytes"], e.get("eager_us"))
        e["compile_gbs"] = gbs(e["bytes"], e.get("compile_us"))
        e["eager_over_talon"] = ratio(e.get("eager_us"), e["us"])
        e["compile_over_talon"] = ratio(e.get("compile_us"), e["us"])
    doc["results"] = results
    doc["targets"] = check_targets(results)
    doc["peers_runtime_s"] = round(time.perf_counter() - t_start, 1)

    print_table(doc)
    print_targets(doc["targets"])

    path = write_json(args.out, f"{doc['date']}-{slug(doc['gpu'])}.json", doc)
    print(f"\nwrote {path} ({doc['peers_runtime_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
