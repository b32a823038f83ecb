#!/bin/sh
# Release tarballs (tools/dist.mk, tools/verify-dist): the naming convention; reproducibility
# (the tree built here and a copy built from scratch in another directory give the same bytes);
# verify-dist passes on the real tarball and names the problem in tampered copies; install and
# uninstall into a DESTDIR leave nothing behind. Run by make test, from the repository root.
set -u
MAKE=${MAKE:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/talon-test-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fails=0 checks=0
fail() { echo "test_dist: FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { checks=$((checks + 1)); }
# make quietly, showing the log only when it fails; $1 is what the call must do (0 or 1)
mk() {
    want=$1; shift
    $MAKE -s --no-print-directory "$@" > "$tmp/make.log" 2>&1; rc=$?
    # success must be wanted (0), failure must be wanted (1): one test, no && / || chain
    # (A && B || C && D groups as ((A && B) || C) && D and passed a failed make)
    if { [ $rc -eq 0 ] && [ "$want" = 1 ]; } || { [ $rc -ne 0 ] && [ "$want" = 0 ]; }; then
        cat "$tmp/make.log" >&2; fail "make $* exited $rc"; return 1
    fi
    ok
}
# mk itself must notice a failed make: a target that does not exist, wanted to succeed
before=$fails
mk 0 no-such-target-xyz 2>/dev/null
if [ $fails -eq $((before + 1)) ]; then fails=$before; ok; else fail "mk 0 passed a failed make"; fi
# goals that compile nothing need no nvcc (dry runs: nothing is removed); building does
for goal in clean uninstall verify-dist; do mk 0 -n NVCC=/no/such/nvcc "$goal"; done
mk 1 -n NVCC=/no/such/nvcc all
if grep -q "nvcc not found (tried '/no/such/nvcc')" "$tmp/make.log"; then ok; else fail "make all without nvcc: no clear message"; fi
vd() { tools/verify-dist "$@" > "$tmp/vd.log" 2>&1; }

# ---- names
for n in talon-0.1.0-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0.dev20261122+g52adf53-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-1.20.3-linux-x86_64-cuda12.4-sm90a-sm100a.tar.gz \
         talon-10.0.0-linux-aarch64-cuda13.1-sm90a-sm100a-sm120f.tar.gz; do
    if vd --check-name "$n"; then ok; else fail "good name rejected: $n"; fi
done
for n in talon-0.1.0-cuda13.0-linux-x86_64-sm90a.tar.gz \
         talon-0.1.0-linux-x86_64-sm90a.tar.gz \
         talon-0.1.0-linux-x86_64-cuda13.0.tar.gz \
         Talon-0.1.0-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0-linux-x86_64-cuda13.0-SM90A.tar.gz \
         talon-0.1.0-linux-x86_64-cuda13.0-sm_90a.tar.gz \
         talon-0.1-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-01.0.0-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0-rc1-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0.dev2026112+g52adf53-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0.dev20261122-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0.dev20261122+g52ADF53-linux-x86_64-cuda13.0-sm90a.tar.gz \
         talon-0.1.0-linux-x86_64-cuda13-sm90a.tar.gz \
         talon-0.1.0-linux-x86_64-cuda13.0-sm90a.tgz \
         talon-0.1.0-linux-x86_64-cuda13.0-sm90a.tar \
         talon-0.1.0-linux-x86_64-cuda13.0-sm90a-.tar.gz \
         talon-0.1.0-windows-x86_64-cuda13.0-sm90a.tar.gz; do
    if vd --check-name "$n"; then fail "bad name accepted: $n"; else ok; fi
done

# ---- reproducibility: this tree, and a copy of it (tracked and untracked files, as git would
# commit them) built from nothing in another directory against the same commit (in parallel:
# the bytes must not depend on it)
mk 0 dist DIST_DIR="$tmp/a" || exit 1
set -- "$tmp"/a/talon-*.tar.gz
tgz=$1 name=${1##*/} stem=${name%.tar.gz}
case $name in
    talon-"$(cat VERSION)"-linux-x86_64-cuda*-sm90a.tar.gz) ok ;;
    *) fail "release tarball name $name" ;;
esac
mkdir "$tmp/copy"
git ls-files -co --exclude-standard | while read -r f; do [ ! -e "$f" ] || echo "$f"; done |
    tar -cf - -T - | tar -xf - -C "$tmp/copy"
if GIT_DIR=$(git rev-parse --absolute-git-dir) GIT_WORK_TREE=$tmp/copy \
    $MAKE -s --no-print-directory -j"$(nproc)" -C "$tmp/copy" dist DIST_DIR="$tmp/b" > "$tmp/make.log" 2>&1
then ok; else cat "$tmp/make.log" >&2; fail "make dist in a copy of the tree"; fi
if cmp "$tgz" "$tmp/b/$name"; then ok; else fail "dist builds here and in a copy differ"; fi

mk 0 dist NIGHTLY=1 DIST_DIR="$tmp/n"
want=talon-$(cat VERSION).dev$(TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y%m%d)+g$(git rev-parse HEAD | cut -c1-7)-linux-
set -- "$tmp"/n/talon-*.tar.gz
case ${1##*/} in "$want"*) ok ;; *) fail "nightly name ${1##*/}, want $want..." ;; esac
if vd --quick "$1"; then ok; else cat "$tmp/vd.log" >&2; fail "verify-dist on the nightly"; fi

mk 1 dist ARCHS=sm_100a DIST_DIR="$tmp/x"
if grep -q "ARCHS='sm_100a' is not supported: the kernels build only for sm_90a" "$tmp/make.log"; then ok
else cat "$tmp/make.log" >&2; fail "ARCHS=sm_100a: no clear message"; fi

# ---- verify-dist: the real tarball (every check, builds included), then tampered copies
if vd "$tgz"; then ok; else cat "$tmp/vd.log" >&2; fail "verify-dist on $name"; fi
# expect_bad CASE MESSAGE TARBALL: verify-dist must fail and print MESSAGE
expect_bad() {
    if vd --quick "$3"; then fail "$1: verify-dist passed"
    elif grep -qF "verify-dist: $2" "$tmp/vd.log"; then ok
    else cat "$tmp/vd.log" >&2; fail "$1: no line 'verify-dist: $2'"; fi
}
# tampered CASE MESSAGE COMMAND: a copy of the tarball, repacked after COMMAND ran in the
# extracted tree, must fail with MESSAGE
tampered() {
    rm -rf "$tmp/x" && mkdir -p "$tmp/x" "$tmp/t/$1"
    if tar -xzf "$tgz" -C "$tmp/x" && (cd "$tmp/x/$stem" && eval "$3") &&
        tar --owner=0 --group=0 --mode=go-w -czf "$tmp/t/$1/$name" -C "$tmp/x" "$stem"; then
        expect_bad "$1" "$2" "$tmp/t/$1/$name"
    else
        fail "$1: could not build the tampered tarball"
    fi
}
ptx='printf "\n.version 9.0\n.target sm_90a\n.address_size 64\n"'
tampered cu "kernels/evil.cu: CUDA source file in the tarball" \
    'mkdir kernels && echo "__global__ void k() {}" > kernels/evil.cu'
tampered ptx-appended "cubins/norm.cubin: contains PTX text" "$ptx >> cubins/norm.cubin"
tampered ptx-file "share/doc/talon/norm.ptx: contains PTX text" "$ptx > share/doc/talon/norm.ptx"
# a cubin that carries a PTX section (its .debug_frame renamed to a same-length ptx name)
tampered ptx-section "cubins/act.cubin: has a PTX section .nv_ptx_text" \
    'LC_ALL=C sed -i s/[.]debug_frame/.nv_ptx_text/g cubins/act.cubin'
tampered extra-file "lib/extra.txt: in the tarball but not in MANIFEST.json" 'echo extra > lib/extra.txt'
tampered missing-file "share/doc/talon/CHANGELOG.md: listed in MANIFEST.json but missing" \
    'rm share/doc/talon/CHANGELOG.md'
tampered changed-file "share/doc/talon/README.md: sha256 differs from MANIFEST.json" \
    'echo changed >> share/doc/talon/README.md'
mkdir "$tmp/t/sums" && cp "$tgz" "$tmp/t/sums/"
awk '{ $1 = (substr($1, 1, 1) == "0" ? "1" : "0") substr($1, 2); print $1 "  " $2 }' \
    "$tmp/a/SHA256SUMS" > "$tmp/t/sums/SHA256SUMS"
expect_bad bad-checksum "SHA256SUMS: checksum mismatch for $name" "$tmp/t/sums/$name"
mkdir "$tmp/t/renamed" && cp "$tgz" "$tmp/t/renamed/talon-0.1.0-linux-x86_64-sm90a.tar.gz"
expect_bad bad-name "talon-0.1.0-linux-x86_64-sm90a.tar.gz: name does not match the convention" \
    "$tmp/t/renamed/talon-0.1.0-linux-x86_64-sm90a.tar.gz"
wrong=$(echo "$name" | sed 's/^talon-[0-9.]*-/talon-9.9.9-/')
cp "$tgz" "$tmp/t/renamed/$wrong"
expect_bad wrong-version "name says version 9.9.9 but VERSION says $(cat VERSION)" "$tmp/t/renamed/$wrong"

# ---- install and uninstall: the tarball's tree under DESTDIR/PREFIX, then nothing left
d=$tmp/root
mk 0 install DESTDIR="$d" PREFIX=/usr/local
mkdir "$tmp/ref" && tar -xzf "$tgz" -C "$tmp/ref"
if diff -r "$tmp/ref/$stem" "$d/usr/local" > "$tmp/diff.log" 2>&1; then ok
else cat "$tmp/diff.log" >&2; fail "installed tree differs from the tarball"; fi
p=$(PKG_CONFIG_PATH=$d/usr/local/lib/pkgconfig pkg-config --variable=prefix talon)
if [ "$(realpath "$p")" = "$(realpath "$d/usr/local")" ]; then ok
else fail "installed talon.pc resolves prefix to $p"; fi
mk 0 uninstall DESTDIR="$d" PREFIX=/usr/local
left=$(find "$d" ! -type d -o -type d \( -name talon -o -name cubins \))
if [ -z "$left" ]; then ok; else fail "left after uninstall: $left"; fi
mk 1 uninstall DESTDIR="$d" PREFIX=/usr/local

if [ $fails -ne 0 ]; then
    echo "test_dist: $fails of $((checks + fails)) checks failed" >&2
    exit 1
fi
echo "test_dist: $checks checks passed (names, reproducible dist, verify-dist, install/uninstall)"
