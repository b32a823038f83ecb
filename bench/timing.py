"""bench/ops.py's timing method (PERF.md "How to measure"): CUDA events around every call,
calls queued behind a GPU spin, medians. torch is imported when a function first needs it, so
ops.py --table works without it."""
import json
import os
import re
import statistics

CLOCK_HZ = 1.98e9  # H100/H200 boost clock: torch.cuda._sleep counts cycles


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def write_json(out_dir, name, doc):
    """Writes doc to out_dir/name (indented, one trailing newline); returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path


def short_error(exc):
    s = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return s[0][:300] if s else type(exc).__name__


def time_fn(fn, sets, warmup, runs, spin_us):
    """fn(set) over the sets in turn: warm-up, then `runs` calls each between its own CUDA
    events; (median, min) in us. The timed calls queue behind a GPU spin of spin_us per call,
    so the events time the GPU work, not the host's launch gaps; spin_us must exceed the host
    time of one call."""
    import torch
    n, k = len(sets), 0
    for _ in range(warmup):
        fn(sets[k % n])
        k += 1
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    torch.cuda._sleep(int(runs * spin_us * 1e-6 * CLOCK_HZ))
    for i in range(runs):
        starts[i].record()
        fn(sets[k % n])
        ends[i].record()
        k += 1
    torch.cuda.synchronize()
    us = sorted(a.elapsed_time(b) * 1000.0 for a, b in zip(starts, ends))
    return statistics.median(us), us[0]


def time_b2b(fn, sets, spin_us, reps=20, trials=10):
    """Back-to-back: `reps` consecutive calls between one pair of events, median over trials,
    per call (us). No per-call event overhead: what a captured graph of these calls costs."""
    import torch
    n, k = len(sets), 0
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    torch.cuda.synchronize()
    torch.cuda._sleep(int(trials * reps * spin_us * 1e-6 * CLOCK_HZ))
    for i in range(trials):
        starts[i].record()
        for _ in range(reps):
            fn(sets[k % n])
            k += 1
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1000.0 / reps for a, b in zip(starts, ends))
