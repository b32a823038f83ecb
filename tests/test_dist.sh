#!/bin/sh
# Release tarballs (tools/dist.mk, tools/verify-dist): the naming convention; reproducibility
# (the tree built here and a copy built in another directory give the same bytes);
# verify-dist passes on the real tarball and names the problem in tampered copies; install and
# uninstall into a DESTDIR leave nothing behind; a tree without git (git archive, or copied
# into another repository) builds and installs, recording the right commit or "unknown";
# a change of CC or CFLAGS rebuilds the archive and is recorded; with the Debian aarch64
# cross toolchain and qemu-user installed, an aarch64 tarball is built and verified.
# Run by make test, from the repository root. The copies reuse the cubins built here (their
# build is most of make's time); TALON_DIST_FULL=1 rebuilds them in the copy as well, which
# also checks that nvcc's output does not depend on the directory.
set -u
MAKE=${MAKE:-make}
# git-dependent checks run only in talon's own git checkout
in_git=0
[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ] && in_git=1
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

# ---- reproducibility: this tree, and a copy of it (the source files, as git would commit
# them, and the cubins unless TALON_DIST_FULL=1) built in another directory against the same
# commit (in parallel: the bytes must not depend on it)
mk 0 dist DIST_DIR="$tmp/a" || exit 1
set -- "$tmp"/a/talon-*.tar.gz
tgz=$1 name=${1##*/} stem=${name%.tar.gz}
case $name in
    talon-"$(cat VERSION)"-linux-"$(${CC:-cc} -dumpmachine | cut -d- -f1)"-cuda*-sm90a.tar.gz) ok ;;
    *) fail "release tarball name $name" ;;
esac
# source_files: the tree's files without build outputs (git's list where there is one)
source_files() {
    if [ $in_git = 1 ]; then
        git ls-files -co --exclude-standard | while read -r f; do [ ! -e "$f" ] || echo "$f"; done
    else
        find . -path ./build -prune -o -path ./cubins -prune -o -path ./dist -prune -o -type f -print | sed 's|^\./||'
    fi
}
# copy_tree DIR [with-cubins]: the source files into DIR (mtimes kept), and the built cubins
copy_tree() {
    mkdir -p "$1" && source_files | tar -cf - -T - | tar -xf - -C "$1" &&
        if [ "${2:-}" = with-cubins ]; then tar -cf - cubins | tar -xf - -C "$1"; fi
}
if [ "${TALON_DIST_FULL:-0}" = 1 ]; then copy_tree "$tmp/copy"; else copy_tree "$tmp/copy" with-cubins; fi
if [ $in_git = 1 ]; then GIT_DIR=$(git rev-parse --absolute-git-dir); export GIT_DIR GIT_WORK_TREE="$tmp/copy"; fi
if $MAKE -s --no-print-directory -j"$(nproc)" -C "$tmp/copy" dist DIST_DIR="$tmp/b" > "$tmp/make.log" 2>&1
then ok; else cat "$tmp/make.log" >&2; fail "make dist in a copy of the tree"; fi
unset GIT_DIR GIT_WORK_TREE
if cmp "$tgz" "$tmp/b/$name"; then ok; else fail "dist builds here and in a copy differ"; fi

if [ $in_git = 1 ]; then
    mk 0 dist NIGHTLY=1 DIST_DIR="$tmp/n"
    want=talon-$(cat VERSION).dev$(TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y%m%d)+g$(git rev-parse HEAD | cut -c1-7)-linux-
    set -- "$tmp"/n/talon-*.tar.gz
    case ${1##*/} in "$want"*) ok ;; *) fail "nightly name ${1##*/}, want $want..." ;; esac
    if vd --quick "$1"; then ok; else cat "$tmp/vd.log" >&2; fail "verify-dist on the nightly"; fi
else
    echo "test_dist: not talon's git checkout: the nightly and git archive checks are skipped" >&2
fi

# manifest_field TGZ FIELD: a field of the tarball's share/talon/MANIFEST.json
manifest_field() {
    tar -xzOf "$1" --wildcards '*/share/talon/MANIFEST.json' | python3 -c "import json, sys; print(json.load(sys.stdin)['$2'])"
}
if [ "$(manifest_field "$tgz" cflags)" = "${CFLAGS--O2 -g}" ] && [ -n "$(manifest_field "$tgz" cc_version)" ]; then ok
else fail "MANIFEST.json records cflags '$(manifest_field "$tgz" cflags)' and cc_version '$(manifest_field "$tgz" cc_version)'"; fi
# other flags rebuild the archive (in the copy: this tree's build stays as it is)
if $MAKE -s --no-print-directory -C "$tmp/copy" dist CFLAGS=-O1 DIST_DIR="$tmp/o1" > "$tmp/make.log" 2>&1 &&
    [ "$(manifest_field "$tmp"/o1/talon-*.tar.gz cflags)" = -O1 ] &&
    tar -xzOf "$tgz" --wildcards '*/lib/libtalon.a' > "$tmp/lib-default.a" &&
    ! tar -xzOf "$tmp"/o1/talon-*.tar.gz --wildcards '*/lib/libtalon.a' | cmp -s - "$tmp/lib-default.a"
then ok; else cat "$tmp/make.log" >&2; fail "make dist CFLAGS=-O1 after a default build: archive not rebuilt or flags not recorded"; fi

# ---- without git: a git archive of HEAD (its tools/commit filled in) builds and installs,
# recording HEAD; the same files copied into another repository record "unknown", never that
# repository's commit
if [ $in_git = 1 ]; then
    head=$(git rev-parse HEAD)
    mkdir "$tmp/archive" && git archive HEAD | tar -xf - -C "$tmp/archive" && tar -cf - cubins | tar -xf - -C "$tmp/archive"
    if $MAKE -s --no-print-directory -C "$tmp/archive" install DESTDIR="$tmp/ainst" PREFIX=/opt/talon > "$tmp/make.log" 2>&1
    then ok; else cat "$tmp/make.log" >&2; fail "make install in a git archive (no .git)"; fi
    if grep -q "TALON__BUNDLE_COMMIT \"$(echo "$head" | cut -c1-12)\"" "$tmp/ainst/opt/talon/include/talon_cubins.h" &&
        grep -q "\"git_commit\": \"$head\"" "$tmp/ainst/opt/talon/share/talon/MANIFEST.json"
    then ok; else fail "a git archive's install does not record commit $head"; fi
    mkdir -p "$tmp/host/third_party" && git -C "$tmp/host" init -q &&
        echo host > "$tmp/host/README" && git -C "$tmp/host" add README &&
        git -C "$tmp/host" -c user.name=t -c user.email=t@t commit -qm host &&
        copy_tree "$tmp/host/third_party/talon" with-cubins
    if $MAKE -s --no-print-directory -C "$tmp/host/third_party/talon" build/include/talon_cubins.h > "$tmp/make.log" 2>&1 &&
        grep -q 'TALON__BUNDLE_COMMIT "unknown"' "$tmp/host/third_party/talon/build/include/talon_cubins.h"
    then ok; else cat "$tmp/make.log" >&2; grep BUNDLE_COMMIT "$tmp/host/third_party/talon/build/include/talon_cubins.h" >&2; fail "talon vendored into another repository records a commit other than unknown"; fi
fi

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
# extracted tree, must fail with MESSAGE (gzip -1: 4x faster than the default level over the
# ~140 MB, and the copies' size does not matter)
tampered() {
    rm -rf "$tmp/x" && mkdir -p "$tmp/x" "$tmp/t/$1"
    if tar -xzf "$tgz" -C "$tmp/x" && (cd "$tmp/x/$stem" && eval "$3") &&
        tar --owner=0 --group=0 --mode=go-w -I 'gzip -1' -cf "$tmp/t/$1/$name" -C "$tmp/x" "$stem"; then
        expect_bad "$1" "$2" "$tmp/t/$1/$name"
    else
        fail "$1: could not build the tampered tarball"
    fi
}
ptx='printf "\n.version 9.0\n.target sm_90a\n.address_size 64\n"'
tampered cu "kernels/evil.cu: CUDA source file in the tarball" \
    'mkdir kernels && echo "__global__ void k() {}" > kernels/evil.cu'
tampered ptx-appended "share/talon/cubins/norm.cubin: contains PTX text" "$ptx >> share/talon/cubins/norm.cubin"
tampered ptx-file "share/doc/talon/norm.ptx: contains PTX text" "$ptx > share/doc/talon/norm.ptx"
# a cubin that carries a PTX section (its .debug_frame renamed to a same-length ptx name)
tampered ptx-section "share/talon/cubins/act.cubin: has a PTX section .nv_ptx_text" \
    'LC_ALL=C sed -i s/[.]debug_frame/.nv_ptx_text/g share/talon/cubins/act.cubin'
tampered extra-file "lib/extra.txt: in the tarball but not in MANIFEST.json" 'echo extra > lib/extra.txt'
tampered missing-file "share/doc/talon/CHANGELOG.md: listed in MANIFEST.json but missing" \
    'rm share/doc/talon/CHANGELOG.md'
tampered changed-file "share/doc/talon/README.md: sha256 differs from MANIFEST.json" \
    'echo changed >> share/doc/talon/README.md'
tampered no-compiler "MANIFEST.json does not record the compiler (cflags)" \
    "python3 -c \"import json; p = 'share/talon/MANIFEST.json'; m = json.load(open(p)); del m['cflags']; open(p, 'w').write(json.dumps(m))\""
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
other=$(echo "$name" | sed 's/-linux-x86_64-/-linux-aarch64-/; t; s/-linux-aarch64-/-linux-x86_64-/')
cp "$tgz" "$tmp/t/renamed/$other"
expect_bad wrong-cpu "name says $(echo "$other" | sed 's/.*-linux-\([^-]*\)-.*/\1/') but lib/libtalon.a holds objects" "$tmp/t/renamed/$other"

# ---- install and uninstall: the tarball's tree under DESTDIR/PREFIX (nothing at the prefix's
# top but include/, lib/ and share/), then nothing left but what was there before
d=$tmp/root
mkdir -p "$d/usr/local/lib" && echo other > "$d/usr/local/lib/other.so"
mk 0 install DESTDIR="$d" PREFIX=/usr/local
mkdir "$tmp/ref" && tar -xzf "$tgz" -C "$tmp/ref" && cp -p "$d/usr/local/lib/other.so" "$tmp/ref/$stem/lib/"
if diff -r "$tmp/ref/$stem" "$d/usr/local" > "$tmp/diff.log" 2>&1; then ok
else cat "$tmp/diff.log" >&2; fail "installed tree differs from the tarball"; fi
top=$(cd "$d/usr/local" && echo *)
if [ "$top" = "include lib share" ]; then ok; else fail "install puts at the prefix's top: $top"; fi
p=$(PKG_CONFIG_PATH=$d/usr/local/lib/pkgconfig pkg-config --variable=prefix talon)
if [ "$(realpath "$p")" = "$(realpath "$d/usr/local")" ]; then ok
else fail "installed talon.pc resolves prefix to $p"; fi
mk 0 uninstall DESTDIR="$d" PREFIX=/usr/local
left=$(cd "$d/usr/local" && find . -mindepth 1 | sort | tr '\n' ' ')
if [ "$left" = "./lib ./lib/other.so " ]; then ok; else fail "left after uninstall: $left (want only lib/other.so)"; fi
mk 1 uninstall DESTDIR="$d" PREFIX=/usr/local
if grep -q "no $d/usr/local/share/talon/MANIFEST.json: talon is not installed there" "$tmp/make.log"; then ok
else cat "$tmp/make.log" >&2; fail "uninstall of nothing: no clear message"; fi

# ---- aarch64 (GH200 hosts): with the Debian cross toolchain and qemu-user, a tarball built in
# the copy with CROSS_COMPILE is named for aarch64 and passes verify-dist, its programs run
# under qemu
if command -v aarch64-linux-gnu-gcc > /dev/null && command -v aarch64-linux-gnu-g++ > /dev/null &&
    command -v qemu-aarch64 > /dev/null && [ "$(uname -m)" = x86_64 ]; then
    if $MAKE -s --no-print-directory -C "$tmp/copy" dist CROSS_COMPILE=aarch64-linux-gnu- DIST_DIR="$tmp/arm" > "$tmp/make.log" 2>&1 &&
        $MAKE -s --no-print-directory -C "$tmp/copy" verify-dist CROSS_COMPILE=aarch64-linux-gnu- DIST_DIR="$tmp/arm" >> "$tmp/make.log" 2>&1 &&
        ls "$tmp"/arm/talon-*-linux-aarch64-cuda*.tar.gz > /dev/null 2>&1
    then ok; else cat "$tmp/make.log" >&2; fail "aarch64 tarball (CROSS_COMPILE=aarch64-linux-gnu-)"; fi
else
    echo "test_dist: no aarch64 cross toolchain and qemu-aarch64 here: the aarch64 tarball check is skipped" >&2
fi

if [ $fails -ne 0 ]; then
    echo "test_dist: $fails of $((checks + fails)) checks failed" >&2
    exit 1
fi
echo "test_dist: $checks checks passed (names, reproducible dist, verify-dist, install/uninstall)"
