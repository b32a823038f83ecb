#!/bin/sh
# tools/release-notes against the fixtures in tests/release-notes/: the notes must match the
# expected markdown byte for byte, be the same on every run, and bad input must fail with a
# non-zero status and a message that names the problem.
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

# What the fixtures are there to show, so that an UPDATE=1 cannot bless a wrong verdict.
# has NAME PATTERN: a line of the full notes matches the extended regular expression PATTERN
has() {
    if grep -Eq -- "$2" "$tmp/a.md"; then pass "$1"; else fail "$1: no line matches /$2/"; fi
}
# shellcheck disable=SC2016 # backquotes are markdown here, not command substitution
{
has "5% regression flagged" '^\| rmsnorm \| bf16 \| 64x8192 \| 6\.00 \| 6\.30 \| \+5\.0% \| \*\*regression\*\* \|$'
has "2% slowdown not flagged" '^\| rmsnorm \| bf16 \| 4096x4096 \| 30\.00 \| 30\.60 \| \+2\.0% \|  \|$'
has "exactly 3% not flagged" '^\| gelu_tanh_and_mul \| bf16 \| 64x14336 \| .* \| \+3\.0% \|  \|$'
has "improvement shown" '^\| silu_and_mul \| bf16 \| 16384x14336 \| .* \| -7\.4% \| improvement \|$'
has "shape only in new listed" '^- rmsnorm f16 16384x8192: 181\.97 us$'
has "shape only in old listed" '^- fused_add_rmsnorm bf16 1x4096: 5\.15 us$'
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
printf '{"version": "0.2.0", "kernels": [{"symbol": "talon_x_bf16", "image": "x", "size": 1}]}\n' \
    >"$tmp/no-sha.json"
printf '{"version": "0.2.0"}\n' >"$tmp/no-kernels.json"
printf '[1, 2, 3]\n' >"$tmp/array.json"
: >"$tmp/empty.json"

nb="--new-bench $fx/new-bench.json"
om="--old-manifest $fx/old-manifest.json"
nm="--new-manifest $fx/new-manifest.json"
# shellcheck disable=SC2086 # $nb, $om, $nm are option pairs, split on purpose
{
    refuse "missing old bench" 1 "cannot read --old-bench $tmp/missing.json: No such file" \
        python3 "$tool" --old-bench "$tmp/missing.json" $nb
    refuse "missing new manifest" 1 "cannot read --new-manifest $tmp/missing.json" \
        python3 "$tool" $om --new-manifest "$tmp/missing.json"
    refuse "directory as input" 1 "cannot read --old-manifest $tmp" \
        python3 "$tool" --old-manifest "$tmp" $nm
    refuse "truncated JSON" 1 "--old-bench $tmp/truncated.json is not valid JSON" \
        python3 "$tool" --old-bench "$tmp/truncated.json" $nb
    refuse "empty file" 1 "--old-bench $tmp/empty.json is not valid JSON" \
        python3 "$tool" --old-bench "$tmp/empty.json" $nb
    refuse "bench without results" 1 "expected an object with a \"results\" list" \
        python3 "$tool" --old-bench "$tmp/no-results.json" $nb
    refuse "bench entry without us" 1 "results\[0\] has no positive number \"us\"" \
        python3 "$tool" --old-bench "$tmp/no-us.json" $nb
    refuse "bench with a repeated shape" 1 "results\[1\] repeats a bf16 1x8" \
        python3 "$tool" --old-bench "$tmp/dup.json" $nb
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
