#!/bin/sh
# talon-info's command line and its message when libcuda.so.1 is the toolkit's stub library.
# usage: test_talon_info.sh build/bin/talon-info CUDA_INCLUDE_DIR. Run by make test (no GPU).
set -u
info=$1 cuda_inc=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/talon-test-info.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0 checks=0
check() { # check NAME WANT_RC GOT_RC LOG PATTERN
    if [ "$3" -ne "$2" ]; then echo "test_talon_info: FAIL: $1: exit $3, expected $2" >&2; fails=$((fails + 1))
    elif ! grep -q -- "$5" "$4"; then echo "test_talon_info: FAIL: $1: no \"$5\" in:" >&2; cat "$4" >&2; fails=$((fails + 1))
    else checks=$((checks + 1)); fi
}
"$info" --help > "$tmp/out" 2>&1; check "--help" 0 $? "$tmp/out" "usage: talon-info"
"$info" --bogus > "$tmp/out" 2>&1; check "unknown flag" 2 $? "$tmp/out" "unknown argument '--bogus'"
stub=
for d in "$cuda_inc/../lib64/stubs" "$cuda_inc/../lib/stubs" "$cuda_inc/../targets/x86_64-linux/lib/stubs"; do
    [ -f "$d/libcuda.so" ] && stub=$d/libcuda.so && break
done
if [ -n "$stub" ]; then
    ln -s "$stub" "$tmp/libcuda.so.1"
    LD_LIBRARY_PATH=$tmp "$info" > "$tmp/out" 2>&1; check "stub libcuda" 1 $? "$tmp/out" "the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY"
else
    echo "test_talon_info: note: no stub libcuda.so under $cuda_inc/..; stub check skipped"
fi
if [ "$fails" -ne 0 ]; then echo "test_talon_info: $fails of $((checks + fails)) checks failed" >&2; exit 1; fi
echo "test_talon_info: $checks checks passed"
