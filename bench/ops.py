#!/usr/bin/env python3
"""Benchmarks of talon's ops called from Python, side by side with their PyTorch peers.

    python3 bench/ops.py --lib build/lib/libtalon_bench.so --out bench/results [--filter S]

talon is called through ctypes on build/lib/libtalon_bench.so (the dispatcher built as a
shared library, bench/shim.c) on torch's current stream and context, so talon and the peers run
in one process on the same tensors, timed by the same function. Each family lives in
bench/ops_<family>.py and provides `cases(h)`, a list of Case objects (below); it gets talon's
argument structs as h.struct(name), ctypes mirrors built from the library's own description of
them (bench/shim.c lists the fields once; bench/mirror.py builds and checks the mirrors).

Method (PERF.md "How to measure"): random inputs, rotating over
input sets totalling more than 4x the 50 MiB L2 (at least 2 sets), warm-up, then each run
between its own pair of CUDA events, queued behind a GPU spin so the events time the GPU work
and not Python's launch gaps; the median is reported ("us", what the targets use). "b2b_us"
is also reported: 20 calls back to back between one pair of events, per call, which leaves
out the few microseconds an event pair adds to every timed call. The copy ceiling is a 1 GiB
device-to-device copy (bytes read + written) timed the same way. Ratios are peer_us / talon_us
(> 1: talon faster). Writes <out>/<date>-<gpu>-ops.json (with talon's version, the commit and
nvcc of the measured build: tools/release-notes reads them); exit status 0 whether targets pass.
"""
import argparse
import ctypes
import datetime
import gc
import importlib
import json
import math
import os
import re
import sys
import time

import mirror
from timing import short_error, slug, time_b2b, time_fn, write_json

L2_BYTES = 50 * 2**20
ROTATE_BYTES = 4 * L2_BYTES
MAX_SETS = 64
WARMUP = 10
RUNS = 100
# GPU spin queued per timed call: it must outlast the host time of one ctypes call or one of
# torch's multi-kernel peers.
SPIN_US = 100
FAMILIES = []  # bench/ops_*.py, found at start-up

torch = None


class Case:
    """One benchmarked shape of one op.

    op, label: names for the table ("moe_router_topk", "T=4096 E=128 k=8 fp32").
    make(): one input set (a dict of tensors and whatever the callers need); called once per
        rotated set, so it must draw fresh random data.
    talon(s, stream): launches talon on set s (raise on failure: h.call does).
    peers: {name: fn(s)} PyTorch peers on the same set.
    check(s): optional; after timing, asserts on the last set that talon's output is right
        (compared with a peer), so a benchmark never reports the speed of a wrong kernel.
    bytes: minimum traffic (for GB/s and % of the copy ceiling), or None.
    flops: floating-point operations of one call (for TFLOP/s), or None.
    targets: [(field, cmp, threshold, text)] with field "us", "gbs", "pct_copy", "tflops" or
        "<peer>_over_talon", cmp "<=" or ">=".
    meta: optional {field: value} copied into the case's JSON row (e.g. the norms' and
        activations' dtype, rows, cols, by which tools/release-notes also matches them in
        results of the earlier C harness; "skipped_peers": {peer: why} for a peer that could
        not be imported).
    """

    def __init__(self, op, label, make, talon, peers, bytes=None, check=None, targets=(),
                 runs=RUNS, meta=None, flops=None):
        self.op, self.label, self.make, self.talon, self.peers = op, label, make, talon, peers
        self.flops = flops
        self.bytes, self.check, self.targets, self.runs = bytes, check, list(targets), runs
        self.meta = dict(meta or {})


# ---------------------------------------------------------------- talon through ctypes
class Talon:
    """The loaded library and a talon_ctx on torch's current context (preloaded).
    described_by: another Talon whose library describes the structs, for an older build of
    libtalon_bench.so that only exports their sizes (--base)."""

    def __init__(self, path, described_by=None):
        self.lib = ctypes.CDLL(path)
        self.lib.talon_last_error.restype = ctypes.c_char_p
        self.lib.talon_status_string.restype = ctypes.c_char_p
        self.described_by = described_by.lib if described_by else None
        self.structs = {}
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # makes torch's (primary) context current
        ctx = ctypes.c_void_p()
        Options = self.struct("talon_ctx_options")
        opts = Options(context=None, flags=1)  # the current context, TALON_CTX_PRELOAD
        self._check("talon_ctx_create", self.lib.talon_ctx_create(ctypes.byref(ctx), ctypes.byref(opts)))
        self.ctx = ctx

    def _check(self, fn, status):
        if status != 0:
            raise RuntimeError(f"{fn}: {self.lib.talon_status_string(status).decode()}: "
                               f"{self.lib.talon_last_error().decode()}")

    def struct(self, name):
        """The ctypes mirror of talon's struct `name`, built from the library's description
        (bench/shim.c's BENCH_STRUCTS, through bench/mirror.py): fields in talon.h's order,
        each field's offset and the total size checked against C (MirrorError naming the
        field otherwise)."""
        if name not in self.structs:
            self.structs[name] = mirror.build(self.lib, name, self.described_by)
        return self.structs[name]

    def call(self, fn, args, stream):
        """talon_<op>(ctx, stream, &args); raises with talon_last_error on failure."""
        self._check(fn, getattr(self.lib, fn)(self.ctx, ctypes.c_void_p(stream),
                                               ctypes.byref(args)))


def build_info(lib):
    """{talon_version, git_commit, nvcc_version} of the loaded build, from
    talon_bundle_info_get() (no GPU needed): the first three members of talon_bundle_info,
    each a const char * (version, git_commit, nvcc_version in talon.h's order); the version
    is checked against talon_version()."""
    fn = lib.talon_bundle_info_get
    fn.restype = ctypes.POINTER(ctypes.c_char_p)
    p = fn()
    info = {k: (p[i] or b"").decode() for i, k in
            enumerate(("talon_version", "git_commit", "nvcc_version"))}
    v = lib.talon_version()
    if info["talon_version"] != f"{v // 10000}.{v // 100 % 100}.{v % 100}":
        raise RuntimeError(f"talon_bundle_info_get().version {info['talon_version']!r} is not "
                           f"talon_version() {v}: talon_bundle_info's members moved?")
    return info


# ctypes spellings of talon's C types (the mirrors' kinds), for restype/argtypes
PTR = mirror.KINDS["PTR"]     # CUdeviceptr
I64 = mirror.KINDS["I64"]
I32 = mirror.KINDS["I32"]
ENUM = mirror.KINDS["ENUM"]
F32 = mirror.KINDS["F32"]


def ptr(t):
    """Device address of a tensor (0 for None)."""
    return 0 if t is None else t.data_ptr()


# ---------------------------------------------------------------- timing
def set_count(s):
    n = sum(v.numel() * v.element_size() for v in s.values() if torch.is_tensor(v))
    return max(2, min(MAX_SETS, ROTATE_BYTES // max(n, 1) + 1)), n


def copy_ceiling():
    n = 2**30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    med, _ = time_fn(lambda s: dst.copy_(src), [None], 5, 30, SPIN_US)
    return 2 * n / (med * 1e-6) / 1e9


def run_case(h, c, copy_gbs, base=None, with_peers=True):
    stream = torch.cuda.current_stream().cuda_stream
    first = c.make()
    nsets, set_bytes = set_count(first)
    sets = [first] + [c.make() for _ in range(nsets - 1)]
    torch.cuda.synchronize()
    e = {"op": c.op, "label": c.label, **c.meta, "sets": nsets, "set_bytes": set_bytes,
         "warmup": WARMUP, "runs": c.runs}
    e["us"], e["min_us"] = time_fn(lambda s: c.talon(s, stream), sets, WARMUP, c.runs,
                                   SPIN_US)
    e["b2b_us"] = time_b2b(lambda s: c.talon(s, stream), sets, SPIN_US)
    if c.check:
        c.check(sets[(WARMUP + c.runs - 1) % nsets])  # the set talon ran on last
        e["checked"] = True
    if c.bytes:
        e["bytes"] = c.bytes
        e["gbs"] = c.bytes / (e["us"] * 1e-6) / 1e9
        e["pct_copy"] = 100.0 * e["gbs"] / copy_gbs
    if c.flops:
        e["flops"] = c.flops
        e["tflops"] = c.flops / (e["us"] * 1e-6) / 1e12
    peers = dict(c.peers) if with_peers else {}
    if base is not None:  # the same case on another build of talon (--base)
        peers["base"] = lambda s: base.talon(s, stream)
    for name, fn in peers.items():
        try:
            e[name + "_us"], e[name + "_min_us"] = time_fn(fn, sets, WARMUP, c.runs, SPIN_US)
            e[name + "_over_talon"] = e[name + "_us"] / e["us"]
            if c.flops:
                e[name + "_tflops"] = c.flops / (e[name + "_us"] * 1e-6) / 1e12
            e[name + "_b2b_us"] = time_b2b(fn, sets, SPIN_US)
        except Exception as exc:
            e[name + "_error"] = short_error(exc)
    e["targets"] = []
    for field, cmp, thr, text in c.targets:
        v = e.get(field)
        ok = None if v is None else (v <= thr if cmp == "<=" else v >= thr)
        e["targets"].append({"text": text, "field": field, "value": v,
                             "status": "N/A" if ok is None else ("PASS" if ok else "FAIL")})
    del sets
    gc.collect()
    torch.cuda.empty_cache()
    return e


def fmt(v, spec="8.2f"):
    return f"{'-':>{len(format(0.0, spec))}}" if v is None else format(v, spec)


def markdown(doc):
    """The results of a JSON this script wrote, as a Markdown table (README, closing notes)."""
    rows = ["| op | case | talon us | b2b us | GB/s (% copy) | peers: us (peer/talon) | targets |",
            "|---|---|---:|---:|---:|---|---|"]
    for e in doc["results"]:
        if "error" in e:
            rows.append(f"| {e['op']} | {e['label']} | error: {e['error']} | | | | |")
            continue
        peers = "; ".join(f"{k[:-3]} {v:.1f} ({e[k[:-3] + '_over_talon']:.2f}x)"
                          for k, v in e.items()
                          if k.endswith("_us") and not k.endswith(("min_us", "b2b_us"))
                          and k != "us" and v is not None) or "-"
        bw = f"{e['gbs']:.0f} ({e['pct_copy']:.1f}%)" if "gbs" in e else "-"
        if "tflops" in e:
            bw = f"{e['tflops']:.0f} TFLOP/s" + ("" if bw == "-" else f", {bw}")
        targets = "; ".join(f"{t['status']}: {t['text']}" for t in e["targets"]) or "-"
        rows.append(f"| {e['op']} | {e['label']} | {e['us']:.2f} | {e['b2b_us']:.2f} | {bw} | "
                    f"{peers} | {targets} |")
    return "\n".join(rows)


def summary(docs):
    """One row per op of results JSONs (the README's table; an op in several files: the last
    one's): its largest case (most FLOPs, else most bytes) with its share of the ceiling, and
    over all its cases the geometric mean and the range of the ratio to each peer and how many
    targets passed. With several files a last column names the run (the file's name)."""
    ops, run = {}, {}
    for name, doc in docs:
        mine = {}
        for e in doc["results"]:
            mine.setdefault(e["op"], []).append(e)
        for op, cases in mine.items():
            ops[op], run[op] = cases, name
    many = len(docs) > 1
    rows = ["| op | cases | largest case | talon us | ceiling share | peer/talon: geomean [min, max] over cases | targets met |"
            + (" run |" if many else ""),
            "|---|---:|---|---:|---:|---|---:|" + ("---|" if many else "")]
    for op, cases in ops.items():
        ok = [e for e in cases if "error" not in e]
        if not ok:
            rows.append(f"| {op} | {len(cases)} | error: {cases[0]['error']} | | | | |" + (f" {run[op]} |" if many else ""))
            continue
        head = max(ok, key=lambda e: (e.get("flops") or 0, e.get("bytes") or e.get("gbs", 0) * e["us"]))
        share = (f"{head['tflops']:.0f} TFLOP/s" if "tflops" in head else
                 f"{head['pct_copy']:.0f}% of copy" if "pct_copy" in head else "-")
        ratios = {}
        for e in ok:
            for k, v in e.items():
                # base: talon itself (--base), not a peer
                if k.endswith("_over_talon") and k != "base_over_talon" and isinstance(v, (int, float)) and v > 0:
                    ratios.setdefault(k[:-len("_over_talon")], []).append(v)
        peers = "; ".join(
            f"{p} {math.exp(sum(map(math.log, r)) / len(r)):.2f}x [{min(r):.2f}, {max(r):.2f}]"
            + (f" ({len(r)})" if len(r) != len(ok) else "")
            for p, r in ratios.items()) or "-"
        targets = [t for e in ok for t in e.get("targets", [])]
        met = f"{sum(t['status'] == 'PASS' for t in targets)} of {len(targets)}" if targets else "-"
        rows.append(f"| {op} | {len(cases)} | {head['label']} | {head['us']:.1f} | {share} | {peers} | {met} |"
                    + (f" {run[op]} |" if many else ""))
    return "\n".join(rows)


def main(argv=None):
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build/lib/libtalon_bench.so")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--filter", default=None,
                    help="only cases whose 'op label' (as printed) contains this, or with "
                    "--filter-regex, matches this regular expression (re.search)")
    ap.add_argument("--filter-regex", action="store_true",
                    help="--filter is a regular expression")
    ap.add_argument("--table", metavar="JSON", help="print a results JSON as Markdown; no GPU")
    ap.add_argument("--summary", metavar="JSON", nargs="+", help="print one row per op of "
                    "results JSONs as Markdown (the README's table; an op in several: the last "
                    "file's); no GPU")
    ap.add_argument("--base", metavar="LIB", help="also time every case on this other build of "
                    "libtalon_bench.so (peer 'base': before/after a change in one run)")
    ap.add_argument("--no-peers", action="store_true", help="time talon (and --base) only")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(markdown(json.load(f)))
        return 0
    if args.summary:
        docs = []
        for path in args.summary:
            with open(path) as f:
                stem = os.path.basename(path)[:-len(".json")]  # <date>-<gpu>-ops[-<tag>]
                docs.append((stem[:10] + " " + stem.partition("-ops")[2].lstrip("-"), json.load(f)))
        print(summary(docs))
        return 0
    import torch as _torch
    torch = _torch
    torch.set_grad_enabled(False)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    h = Talon(args.lib)
    hb = Talon(args.base, h) if args.base else None
    copy_gbs = copy_ceiling()
    gpu = torch.cuda.get_device_name(0)
    date = datetime.date.today().isoformat()
    info = build_info(h.lib)
    print(f"bench/ops.py on {gpu}, {date}, talon {info['talon_version']} (git "
          f"{info['git_commit'] or '?'}, nvcc {info['nvcc_version'] or '?'}), torch "
          f"{torch.__version__}; copy ceiling {copy_gbs:.0f} GB/s; ratios = peer us / talon us "
          "(> 1: talon faster)", flush=True)
    results = []
    t0 = time.perf_counter()
    for fam in sorted(f[:-3] for f in os.listdir(here) if re.fullmatch(r"ops_\w+\.py", f)):
        mod = importlib.import_module(fam)
        base = {(c.op, c.label): c for c in mod.cases(hb)} if hb else {}
        for c in mod.cases(h):
            name = f"{c.op} {c.label}"
            if args.filter and not (re.search(args.filter, name) if args.filter_regex
                                    else args.filter in name):
                continue
            try:
                e = run_case(h, c, copy_gbs, base.get((c.op, c.label)), not args.no_peers)
            except Exception as exc:
                e = {"op": c.op, "label": c.label, **c.meta, "error": short_error(exc), "targets": [
                    {"text": t[3], "field": t[0], "value": None, "status": "FAIL"}
                    for t in c.targets]}
                gc.collect()
                torch.cuda.empty_cache()
            results.append(e)
            peers = "  ".join(f"{k[:-3]} {fmt(v, '.2f')} us ({fmt(e.get(k[:-3] + '_over_talon'), '.2f')}x)"
                              for k, v in e.items()
                              if k.endswith("_us") and not k.endswith(("min_us", "b2b_us")) and k != "us")
            bw = f"  {e['gbs']:.0f} GB/s {e['pct_copy']:.1f}%" if "gbs" in e else ""
            bw += f"  {e['tflops']:.0f} TFLOP/s" if "tflops" in e else ""
            status = " ".join(f"[{t['status']}: {t['text']}]" for t in e["targets"])
            if "error" in e:
                print(f"{e['op']:<24} {e['label']:<34} ERROR {e['error']} {status}", flush=True)
            else:
                print(f"{e['op']:<24} {e['label']:<34} talon {e['us']:8.2f} us "
                      f"(b2b {e['b2b_us']:.2f}){bw}  {peers}  "
                      f"{status}", flush=True)
    targets = [t for e in results for t in e["targets"]]
    npass = sum(t["status"] == "PASS" for t in targets)
    print(f"\ntargets: {npass}/{len(targets)} pass")
    doc = {"gpu": gpu, "date": date, **info, "torch": torch.__version__, "copy_gbs": copy_gbs,
           "method": "ctypes talon vs torch peers on the same tensors; sets > 4x L2; "
                     f"warm-up {WARMUP}; median of CUDA event pairs",
           "runtime_s": round(time.perf_counter() - t0, 1), "results": results}
    print(f"wrote {write_json(args.out, f'{date}-{slug(gpu)}-ops.json', doc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
