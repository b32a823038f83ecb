#!/bin/sh
# VERSION is the single source of truth: the header's version macros must agree with it.
set -eu
v=$(cat VERSION)
h=$(sed -n 's/^#define TALON_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/talon.h | paste -sd. -)
s=$(sed -n 's/^#define TALON_VERSION_STRING "\(.*\)"$/\1/p' include/talon.h)
if [ "$v" != "$h" ] || [ "$v" != "$s" ]; then
    echo "check_version: VERSION is $v but include/talon.h says $h / \"$s\"" >&2
    exit 1
fi
echo "check_version: VERSION $v matches include/talon.h"
