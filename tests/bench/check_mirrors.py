#!/usr/bin/env python3
"""CPU check of the benchmarks' ctypes mirrors of talon's argument structs (make test).

    python3 tests/bench/check_mirrors.py build/lib/libtalon_bench.so [include/talon.h]

No GPU, no driver, no torch: plain python3 + ctypes. Loads libtalon_bench.so and builds every
struct that bench/shim.c lists (BENCH_STRUCTS) through bench/mirror.py, the code bench/ops.py
uses (Talon.struct): each ctypes field's offset and size must equal C's offsetof and sizeof,
and the ctypes size C's sizeof. Fails (exit 1) when a struct of the list cannot be built or
disagrees, when talon.h declares an argument struct that the list lacks, and when the
checker itself accepts a mirror that was made wrong on purpose (a field's kind changed, a
field dropped in the middle, the last two dropped). What the C compiler already checks in
bench/shim.c (members missing from the list, even in padding) is described there.
"""
import ctypes
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import mirror  # noqa: E402  (bench/mirror.py; imports no torch)

# Structs of talon.h with a body that the benchmarks never pass to talon.
NOT_MIRRORED = {"talon_bundle_info"}  # an output (talon_bundle_info_get), read in C only


def self_test(lib, name):
    """The checker must reject wrong mirrors of `name`; returns the failures."""
    fields, size = mirror.describe(lib, name)
    bad = []
    # a 4-byte field's kind made an 8-byte one (its size, and every offset after it, move)
    i = next(j for j, f in enumerate(fields) if f[1] not in ("I64", "PTR"))
    kind = list(fields)
    kind[i] = (fields[i][0], "I64") + fields[i][2:]
    # a field in the middle missing: the offsets after it disagree
    middle = fields[:1] + fields[2:]
    # the last two fields missing: the ctypes size no longer covers the struct (one 4-byte
    # field may vanish into the tail padding: only bench/shim.c's C checks see that)
    tail = fields[:-2]
    for label, desc in ((f"{fields[i][0]} as I64", kind), (f"{fields[1][0]} dropped", middle),
                        ("last two fields dropped", tail)):
        try:
            mirror.from_description(name, desc, size)
        except mirror.MirrorError as e:
            print(f"  self-test ({name}, {label}): rejected as it must be: {e}")
        else:
            bad.append(f"self-test: a wrong mirror of {name} ({label}) was accepted")
    return bad


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    header = argv[2] if len(argv) > 2 else os.path.join(ROOT, "include", "talon.h")
    lib = ctypes.CDLL(os.path.abspath(argv[1]))
    failures = []
    if not mirror.has_description(lib):
        print(f"check_mirrors: FAIL: {argv[1]} has no talon_bench_struct (an old build?)")
        return 1
    names = mirror.names(lib)
    if not names:
        failures.append("bench/shim.c lists no struct")
    for name in names:
        try:
            cls = mirror.build(lib, name)
        except Exception as e:  # anything at all: the struct of the list cannot be built
            failures.append(f"{name}: {type(e).__name__}: {e}")
            continue
        fields = [f for f, _ in cls._fields_]
        print(f"  {name}: {len(fields)} fields, {ctypes.sizeof(cls)} bytes, offsets match")
    with open(header) as f:
        declared = set(re.findall(r"typedef\s+struct\s+(talon_\w+)\s*\{", f.read()))
    for name in sorted(declared - set(names) - NOT_MIRRORED):
        failures.append(f"{name}: declared in {os.path.relpath(header, ROOT)} but not listed in "
                        "bench/shim.c's BENCH_STRUCTS")
    for name in sorted(set(names) - declared):
        failures.append(f"{name}: listed in bench/shim.c but not declared with a body in "
                        f"{os.path.relpath(header, ROOT)}")
    if "talon_rope_args" in names:
        failures += self_test(lib, "talon_rope_args")
    else:
        failures.append("self-test: talon_rope_args is not in the list")
    for msg in failures:
        print(f"check_mirrors: FAIL: {msg}")
    if failures:
        return 1
    print(f"check_mirrors: {len(names)} structs of bench/shim.c match their ctypes mirrors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
