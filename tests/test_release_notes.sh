#!/bin/sh
# tools/release-notes against the fixtures in tests/release-notes/: the notes must match the
# expected markdown byte for byte, be the same on every run, and bad input must fail with a
# non-zero status and a message that names the problem. The bench fixtures are bench/ops.py
# JSON (old-bench.json, new-bench.json: rows with a label only, rows that also carry dtype,
# rows and cols, rows with an error); old-bench-legacy.json is the earlier C harness's format.
#   sh tests/test_release_notes.sh            (from the repository root; no GPU, no CUDA)
#   UPDATE=1 sh tests/test_release_notes.sh   rewrites the expected files after a deliberate change
set -eu
cd "$(dirname "$0")/.."
tool=tools/release-notes
fx=tests/release-notes
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
fails=0
pass() { printf '  ok    %s\n' "$1"; }
fail() { printf '  FAIL  %s\n' "$1" >&2; fails=$((fails + 1)); }

full() { # the full comparison, with extra arguments appended
    python3 "$tool" --old-bench "$fx/old-bench.json" --new-bench "$fx/new-bench.json" \
        --old-manifest "$fx/old-manifest.json" --new-manifest "$fx/new-manifest.json" \
        --old-size 123456 --new-size 130000 --changelog "$fx/CHANGELOG.md" "$@"
}

# check NAME EXPECTED-FILE COMMAND...: COMMAND succeeds and prints exactly EXPECTED-FILE
check() {
    name=$1 want=$2
    shift 2
    rc=0
    "$@" >"$tmp/out.md" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name: exit status $rc ($(cat "$tmp/err"))"
        return
    fi
    if [ "${UPDATE:-}" = 1 ]; then
        cp "$tmp/out.md" "$want"
        pass "$name (updated $want)"
    elif diff -u "$want" "$tmp/out.md" >"$tmp/diff"; then
        pass "$name"
    else
        cat "$tmp/diff" >&2
        fail "$name: output differs from $want"
    fi
}

# refuse NAME STATUS PATTERN COMMAND...: COMMAND exits with STATUS (any non-zero if STATUS is
# "nz") and its stderr matches the extended regular expression PATTERN
refuse() {
    name=$1 want=$2 pattern=$3
    shift 3
    set +e
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        fail "$name: succeeded on bad input"
    elif [ "$want" != nz ] && [ "$rc" -ne "$want" ]; then
        fail "$name: exit status $rc, expected $want ($(cat "$tmp/err"))"
    elif ! grep -Eq -- "$pattern" "$tmp/err"; then
        fail "$name: message does not match /$pattern/: $(cat "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        fail "$name: wrote to standard output on failure"
    else
        pass "$name ($(tail -n1 "$tmp/err"))"
    fi
}

echo "test_release_notes:"
check "full notes match $fx/expected.md" "$fx/expected.md" full
check "changelog only" "$fx/expected-changelog.md" \
    python3 "$tool" --changelog "$fx/CHANGELOG.md" --version 0.2.0
check "bench only" "$fx/expected-bench.md" \
    python3 "$tool" --old-bench "$fx/old-bench.json" --new-bench "$fx/new-bench.json"

# --out writes the same bytes and nothing to standard output; two runs agree.
if full --out "$tmp/notes.md" >"$tmp/stdout" && [ ! -s "$tmp/stdout" ] &&
    cmp -s "$tmp/notes.md" "$fx/expected.md"; then
    pass "--out FILE"
else
    fail "--out FILE: file differs from $fx/expected.md or output went to stdout"
fi
PYTHONHASHSEED=1 full >"$tmp/a.md" && PYTHONHASHSEED=2 full >"$tmp/b.md"
if cmp -s "$tmp/a.md" "$tmp/b.md"; then pass "deterministic"; else fail "deterministic"; fi

# MANIFEST.json "files" as a list of {path, sha256} reads the same as the {path: ...} object.
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["files"] = [dict(v, path=p) for p, v in sorted(m["files"].items())]
json.dump(m, open(sys.argv[2], "w"), indent=1)
' "$fx/new-manifest.json" "$tmp/list-manifest.json"
if python3 "$tool" --old-manifest "$fx/old-manifest.json" --new-manifest "$tmp/list-manifest.json" \
    >"$tmp/list.md" && python3 "$tool" --old-manifest "$fx/old-manifest.json" \
    --new-manifest "$fx/new-manifest.json" >"$tmp/dict.md" && cmp -s "$tmp/list.md" "$tmp/dict.md"; then
    pass "files as a list"
else
    fail "files as a list: notes differ from files as an object"
fi

# A bench/results JSON of the earlier C harness (no labels; talon's version under "talon") still
# reads: its norm and activation rows meet the same rows of an ops.py JSON, by dtype, rows, cols.
norm_act='^\| (rmsnorm|fused_add_rmsnorm|layernorm|silu_and_mul|gelu_(erf|tanh)_and_mul) \|'
if python3 "$tool" --old-bench "$fx/old-bench-legacy.json" --new-bench "$fx/new-bench.json" \
    >"$tmp/legacy.md" && python3 "$tool" --old-bench "$fx/old-bench.json" \
    --new-bench "$fx/new-bench.json" >"$tmp/ops.md" &&
    grep -E -- "$norm_act" "$tmp/legacy.md" >"$tmp/legacy-rows" &&
    grep -E -- "$norm_act" "$tmp/ops.md" >"$tmp/ops-rows" &&
    [ "$(wc -l <"$tmp/ops-rows")" -eq 6 ] && cmp -s "$tmp/legacy-rows" "$tmp/ops-rows" &&
    grep -q ', old: talon 0\.1\.0, NVIDIA H100 80GB HBM3, 2026-11-22 (.old-bench-legacy\.json.); new: ' \
        "$tmp/legacy.md"; then
    pass "legacy bench JSON compares with an ops.py one"
else
    fail "legacy bench JSON compares with an ops.py one: norm/activation rows or metadata differ"
fi

# What the fixtures are there to show, so that an UPDATE=1 cannot bless a wrong verdict.
# has NAME PATTERN: a line of the full notes matches the extended regular expression PATTERN;
# hasnt NAME PATTERN: no line does; before NAME A B: the first line matching A comes before
# the first matching B
has() {
    if grep -Eq -- "$2" "$tmp/a.md"; then pass "$1"; else fail "$1: no line matches /$2/"; fi
}
hasnt() {
    if grep -Eq -- "$2" "$tmp/a.md"; then fail "$1: a line matches /$2/"; else pass "$1"; fi
}
before() {
    a=$(grep -nE -m1 -- "$2" "$tmp/a.md" | cut -d: -f1)
    b=$(grep -nE -m1 -- "$3" "$tmp/a.md" | cut -d: -f1)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then pass "$1"
    else fail "$1: /$2/ (line ${a:-none}) not before /$3/ (line ${b:-none})"; fi
}
# shellcheck disable=SC2016 # backquotes are markdown here, not command substitution
{
# rows with dtype, rows and cols (norms, gated activations): keyed by that shape, shown by label
has "5% regression flagged" '^\| rmsnorm \| bf16 64x8192 \| 6\.00 \| 6\.30 \| \+5\.0% \| \*\*regression\*\* \|$'
has "2% slowdown not flagged" '^\| rmsnorm \| bf16 4096x4096 \| 30\.00 \| 30\.60 \| \+2\.0% \|  \|$'
has "exactly 3% not flagged" '^\| gelu_tanh_and_mul \| bf16 64x\(2x14336\) \| .* \| \+3\.0% \|  \|$'
has "improvement shown" '^\| silu_and_mul \| bf16 16384x\(2x14336\) \| .* \| -7\.4% \| improvement \|$'
has "shape only in new listed" '^- rmsnorm f16 16384x8192: 181\.97 us$'
has "shape only in old listed" '^- fused_add_rmsnorm bf16 1x4096: 5\.15 us$'
# rows with a label only (the other families): keyed by op + label
has "5.5% regression of a labelled case flagged" '^\| topk \| B=1 V=128256 k=50 fp32 sorted \| 13\.84 \| 14\.60 \| \+5\.5% \| \*\*regression\*\* \|$'
has "labelled regression listed" '^- \*\*topk B=1 V=128256 k=50 fp32 sorted: \+5\.5%\*\* \(13\.84 -> 14\.60 us\)$'
has "labelled 2% slowdown not flagged" '^\| moe_align_block_size \| T=16 E=256 k=8 block=64 \| 5\.98 \| 6\.10 \| \+2\.0% \|  \|$'
has "labelled improvement shown" '^\| decode_attention \| B=64 L=4096 bf16 page 16 \| 358\.64 \| 340\.00 \| -5\.2% \| improvement \|$'
has "labelled case only in new listed" '^- rope T=4096 Hq32 Hk8 D128 NeoX cache: 33\.79 us$'
has "labelled case only in old listed" '^- moe_sum T=4096 k=8 H=4096 bf16: 102\.24 us$'
before "numbers in a case sort as numbers (B=1)" '^\| topk \| B=1 ' '^\| topk \| B=64 '
before "numbers in a case sort as numbers (B=64)" '^\| topk \| B=64 ' '^\| topk \| B=256 '
before "numbers in a case sort as numbers (64 rows)" '^\| rmsnorm \| bf16 64x8192 ' '^\| rmsnorm \| bf16 4096x4096 '
has "cases counted" '^11 cases in both runs: 2 regressions, 3 improvements, 6 within 3%\. 1 case failed in the new run\.$'
# rows with an error and no us: listed as failed, with the other run's timing, and nowhere else
has "case failed in the new run listed" '^- \*\*kv_append T=4096 Hk8 D128 page16 bf16\*\*: RuntimeError: talon_kv_append: launch failed: .* \(old: 16\.74 us\)$'
hasnt "case failed in the new run not listed as only in the old" '^- kv_append .*: 16\.74 us$'
has "case failed in the old run listed" '^- moe_router_topk T=4096 E=256 k=8 fp32: RuntimeError: .* \(new: 7\.94 us\)$'
hasnt "case failed in the old run not listed as only in the new" '^- moe_router_topk .*: 7\.94 us$'
has "added kernel" '^- `talon_decode_attention_bf16` '
has "removed kernel" '^- `talon_rope_bf16` '
has "changed kernel" '^- `talon_rmsnorm_bf16`: image `cubins/norm\.cubin`, 30,000 -> 31,000 B'
has "unchanged kernels not listed as changed" '2 changed, 2 unchanged\.$'
has "bundle size change" '\| 60,000 B \| 66,000 B \| \+6,000 B \(\+10\.0%\) \|$'
}

# Bad input.
printf '{"results": [ {"op": "rmsnorm",' >"$tmp/truncated.json"
printf '{"gpu": "x", "date": "y"}\n' >"$tmp/no-results.json"
printf '{"results": [{"op": "rmsnorm", "dtype": "bf16", "rows": 1, "cols": 8}]}\n' \
    >"$tmp/no-us.json"
printf '{"results": [{"op": "a", "dtype": "bf16", "rows": 1, "cols": 8, "us": 1},
 {"op": "a", "dtype": "bf16", "rows": 1, "cols": 8, "us": 2}]}\n' >"$tmp/dup.json"
printf '{"results": [{"label": "B=1 V=8 k=1", "us": 1}]}\n' >"$tmp/no-op.json"
printf '{"results": [{"op": "topk", "us": 1}]}\n' >"$tmp/no-case.json"
printf '{"results": [{"op": "topk", "label": "B=1 V=8 k=1"}]}\n' >"$tmp/label-no-us.json"
printf '{"results": [{"op": "rmsnorm", "label": "bf16 1x8", "dtype": "bf16", "rows": 1, "us": 1}]}\n' \
    >"$tmp/half-shape.json"
printf '{"results": [{"op": "topk", "label": "B=1 V=8 k=1", "error": "RuntimeError: x"},
 {"op": "topk", "label": "B=1 V=8 k=1", "us": 2}]}\n' >"$tmp/dup-label.json"
printf '{"version": "0.2.0", "kernels": [{"symbol": "talon_x_bf16", "image": "x", "size": 1}]}\n' \
    >"$tmp/no-sha.json"
printf '{"version": "0.2.0"}\n' >"$tmp/no-kernels.json"
printf '[1, 2, 3]\n' >"$tmp/array.json"
: >"$tmp/empty.json"

# bad_bench NAME PATTERN FILE: --old-bench $tmp/FILE fails, status 1, a message matching PATTERN
bad_bench() {
    refuse "$1" 1 "$2" python3 "$tool" --old-bench "$tmp/$3" --new-bench "$fx/new-bench.json"
}
om="--old-manifest $fx/old-manifest.json"
nm="--new-manifest $fx/new-manifest.json"
# shellcheck disable=SC2086 # $om, $nm are option pairs, split on purpose
{
    bad_bench "missing old bench" \
        "cannot read --old-bench $tmp/missing.json: No such file" missing.json
    refuse "missing new manifest" 1 "cannot read --new-manifest $tmp/missing.json" \
        python3 "$tool" $om --new-manifest "$tmp/missing.json"
    refuse "directory as input" 1 "cannot read --old-manifest $tmp" \
        python3 "$tool" --old-manifest "$tmp" $nm
    bad_bench "truncated JSON" "--old-bench $tmp/truncated.json is not valid JSON" truncated.json
    bad_bench "empty file" "--old-bench $tmp/empty.json is not valid JSON" empty.json
    bad_bench "bench without results" "expected an object with a \"results\" list" no-results.json
    bad_bench "bench entry without us" "results\[0\] has no positive number \"us\"" no-us.json
    bad_bench "bench with a repeated shape" "results\[1\] repeats a bf16 1x8" dup.json
    bad_bench "bench entry without op" "results\[0\] has no string \"op\"" no-op.json
    bad_bench "bench entry without label or shape" \
        "results\[0\] has neither a string \"label\" nor \"dtype\", \"rows\" and \"cols\"" no-case.json
    bad_bench "labelled entry without us or error" \
        "results\[0\] has no positive number \"us\"" label-no-us.json
    bad_bench "bench entry with part of a shape" \
        "results\[0\] has no integer \"cols\"" half-shape.json
    bad_bench "bench with a repeated labelled case" \
        "results\[1\] repeats topk B=1 V=8 k=1" dup-label.json
    refuse "manifest kernel without sha256" 1 "kernels\[0\] \(talon_x_bf16\) has no string \"sha256\"" \
        python3 "$tool" $om --new-manifest "$tmp/no-sha.json"
    refuse "manifest without kernels" 1 "no \"kernels\" list" \
        python3 "$tool" $om --new-manifest "$tmp/no-kernels.json"
    refuse "manifest that is an array" 1 "expected a JSON object" \
        python3 "$tool" --old-manifest "$tmp/array.json" $nm
    refuse "bench pair incomplete" 2 "--old-bench needs --new-bench" \
        python3 "$tool" --old-bench "$fx/old-bench.json"
    refuse "nothing to compare" 2 "nothing to compare" python3 "$tool"
    refuse "bad tarball size" 1 "--new-size nope: neither a byte count nor a readable file" \
        python3 "$tool" $om $nm --old-size 1 --new-size nope
    refuse "changelog without the version" 1 "has no \"## 9.9.9\" section" \
        python3 "$tool" --changelog "$fx/CHANGELOG.md" --version 9.9.9
    refuse "unwritable --out" 1 "cannot write --out $tmp/no/such/dir/notes.md" \
        python3 "$tool" --changelog "$fx/CHANGELOG.md" --version 0.2.0 \
        --out "$tmp/no/such/dir/notes.md"
}

if [ "$fails" -ne 0 ]; then
    echo "test_release_notes: $fails check(s) failed" >&2
    exit 1
fi
echo "test_release_notes: all checks passed"
