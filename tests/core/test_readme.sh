#!/bin/sh
# README's "Use from C" example, built both ways with README's own commands (plus -Werror and
# a main), so the documented recipe cannot rot: header-only, and against the archive with the
# first line (#define TALON_IMPLEMENTATION) removed. usage: test_readme.sh CC CUDA_INCLUDE_DIR
# (from the repository root, after make). Run by make test.
set -eu
cc=$1 cuda_inc=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/talon-test-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the first ```c block of README's "Use from C" section
awk '/^## Use from C/ { sec = 1 } sec && /^```c$/ { on = 1; next } on && /^```$/ { exit } on' \
    README.md > "$tmp/app.c"
grep -q '^#define TALON_IMPLEMENTATION$' "$tmp/app.c" || { echo "test_readme: no example found in README.md" >&2; exit 1; }
printf 'int main(void) { return init() == TALON_SUCCESS ? 0 : 1; }\n' >> "$tmp/app.c"
sed 1d "$tmp/app.c" > "$tmp/app_archive.c"
# the commands as README writes them (with $CUDA_HOME/include given), then -Werror -o
cmd=$(sed -n 's/^cc \(.*-ldl -lpthread\)$/\1/p' README.md)
[ "$(printf '%s\n' "$cmd" | wc -l)" -eq 2 ] || { echo "test_readme: expected README's two cc commands, found: $cmd" >&2; exit 1; }
header_only=$(printf '%s\n' "$cmd" | sed -n 1p) archive=$(printf '%s\n' "$cmd" | sed -n 2p)
run() { # run ARGS...: README's command line with app.c replaced
    eval "set -- $1"; "$cc" "$@" -Wall -Werror -o "$tmp/app" || { echo "test_readme: FAIL: $cc $*" >&2; exit 1; }
}
run "$(printf '%s' "$header_only" | sed "s|\\\$CUDA_HOME/include|$cuda_inc|; s|app.c|$tmp/app.c|")"
run "$(printf '%s' "$archive" | sed "s|\\\$CUDA_HOME/include|$cuda_inc|; s|app.c|$tmp/app_archive.c|")"
echo "test_readme: README's example builds header-only and against the archive"
