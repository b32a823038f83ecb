#!/usr/bin/env bash
# Everything a GPU machine is needed for, on binaries built elsewhere by `make all gpu-build`.
#   tools/gpu-session.sh [tests|bench|all]   (default all)
# tests: talon-info, every GPU test program, each also under compute-sanitizer memcheck;
# bench: bench/ops.py, every op beside its PyTorch peers (writes $LOGS/<date>-<gpu>-ops.json).
# Logs and JSON go to $LOGS (default build/gpu-out), each step's as it ends. Exits non-zero if
# any step failed. PACK=file.tgz re-packs $LOGS into that one file after every step, so a run
# cut by a time limit still leaves the steps that ended (a lent device that returns only a few
# files: PACK=$OUT/gpu-session.tgz).
set -u
what=${1:-all}
out=${LOGS:-build/gpu-out}
mkdir -p "$out"
pack() { [ -z "${PACK:-}" ] || tar czf "$PACK" -C "$out" .; }
export PYTHONUNBUFFERED=1
rc=0
step() { # step NAME COMMAND...: runs COMMAND, logs to $out/NAME.log, records its status
    local name=$1; shift
    local t0=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local s=$?
    printf '%-24s rc=%d %4ds\n' "$name" "$s" $((SECONDS - t0)) | tee -a "$out/summary.txt"
    [ "$s" -eq 0 ] || rc=1
    pack
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >>"$out/summary.txt" 2>&1
if [ "$what" != bench ]; then
    step info build/bin/talon-info
    for t in build/tests/test_gpu*; do
        [ -x "$t" ] || continue
        n=$(basename "$t")
        step "$n" "$t"
        # the same command as make sanitize (make itself is not run here: it would rebuild)
        step "sanitize-$n" env TALON_TEST_QUICK=1 compute-sanitizer --tool memcheck \
            --error-exitcode 1 --leak-check full "$t"
    done
    for f in "$out"/info.log "$out"/test_gpu*.log "$out"/sanitize-*.log; do
        echo "== $(basename "$f")"; tail -n 4 "$f"
    done
fi
if [ "$what" != tests ]; then
    step ops python3 bench/ops.py --lib build/lib/libtalon_bench.so --out "$out"
    echo "== ops"; tail -n 60 "$out/ops.log"
fi
exit $rc
