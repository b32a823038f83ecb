/* talon/impl/decode_plan.h - decode attention's plan: query heads per CTA and the split-KV
   count, from host values and the SM count alone. Pure host functions the tests call
   directly. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_DECODE_PLAN_H
#define TALON_IMPL_DECODE_PLAN_H

#define TALON__DECODE_MIN_CHUNK 1024  /* keys per split at least: 32 splits of 1024 keys were
                                         the fastest at B=1, L=32768 (docs/notes/decode.md) */
/* Query heads per CTA at most: 8 at head_dim <= 128 (the tensor-core kernel's second column
   tile of P V), 4 at 256 (the per-lane kernel's key groups; fp8's q and o^T fragments). */
static int talon__decode_heads_max(int64_t head_dim) { return head_dim <= 128 ? 8 : 4; }

typedef struct talon__decode_plan {
    int heads_per_cta, head_chunks, gmax, splits;
    int64_t pt_stride, ws_bytes, part_o_bytes;
} talon__decode_plan;

/* The split count. More than 1.5 CTAs per SM, up to one wave, already keep the memory busy:
   no split, which would only add the merge (at 1.5 CTAs per SM and below, 2 splits still
   win). Otherwise, with `slots` CTAs resident on the GPU, s splits take ceil(ctas * s /
   slots) waves of CTAs that each do 1/s of the work; the smallest s with the best such
   estimate wins, with splits of at least TALON__DECODE_MIN_CHUNK keys. No slack towards fewer
   splits (the merge is cheap); past one wave the tail matters. When that still leaves at most
   1.5 CTAs per SM, each CTA walks its keys at its own latency-bound pace, so the chunks shrink
   (to TALON__DECODE_FILL_CHUNK keys at least) until there are 2 CTAs per SM; more than 2 per
   SM lost at head_dim 256. Measurements behind each step: docs/notes/decode.md. */
#define TALON__DECODE_FILL_CHUNK 128
static int talon__decode_splits(int64_t ctas, int64_t max_kv_len, int sms) {
    /* TALON__DECODE_CTAS_PER_SM resident CTAs per SM: the rows' min_blocks and the 32/48 KB
       K/V rings allow 4 (d64 rows, of fewer registers, 5; fp8 d256 rows 3) */
    const int64_t slots = (int64_t)sms * TALON__DECODE_CTAS_PER_SM;
    int64_t most, s, bs = 1, bw; /* best: bw waves over bs splits */
    if (2 * ctas > 3 * sms && ctas <= slots) return 1;
    most = (max_kv_len + TALON__DECODE_MIN_CHUNK - 1) / TALON__DECODE_MIN_CHUNK;
    bw = (ctas + slots - 1) / slots;
    if (most > 256) most = 256;
    for (s = 2; s <= most; s++) { /* integer comparisons of waves / splits: no float ties */
        int64_t w = (ctas * s + slots - 1) / slots;
        if (w * bs < bw * s) { bw = w; bs = s; }
    }
    if (2 * ctas * bs <= 3 * sms) {
        s = (2 * sms + ctas - 1) / ctas;
        most = (max_kv_len + TALON__DECODE_FILL_CHUNK - 1) / TALON__DECODE_FILL_CHUNK;
        if (s > most) s = most;
        if (s > 256) s = 256;
        if (s > bs) bs = s;
    }
    return (int)bs;
}

#endif
