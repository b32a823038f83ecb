/* libtalon_bench.so: talon's dispatcher as a shared library for bench/ops.py (ctypes), plus the
   size of every argument struct, which ops.py checks its ctypes mirrors against so a field
   added in talon.h but not in the mirror fails loudly instead of passing garbage. */
#define TALON_IMPLEMENTATION
#include "talon.h"

/* One line per argument struct mirrored in bench/ops_*.py. */
#define BENCH_STRUCTS(X) \
    X(talon_rmsnorm_args) \
    X(talon_topk_args) \
    X(talon_rope_args) \
    X(talon_kv_append_args) \
    X(talon_moe_align_block_size_args) \
    X(talon_moe_sum_args) \
    X(talon_moe_router_topk_args) \
    X(talon_decode_attention_args) \
    X(talon_merge_attention_states_args)

size_t talon_bench_sizeof(const char *name);
size_t talon_bench_sizeof(const char *name) {
#define BENCH_SIZE(T) if (!strcmp(name, #T)) return sizeof(T);
    BENCH_STRUCTS(BENCH_SIZE)
#undef BENCH_SIZE
    return 0;
}
