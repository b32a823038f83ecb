/* talon/impl/decode_plan.h - decode attention's plan: query heads per CTA and the split-KV
   count, from host values and the SM count alone. Pure host functions the tests call
   directly. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_DECODE_PLAN_H
#define TALON_IMPL_DECODE_PLAN_H

#define TALON__DECODE_MIN_CHUNK 1024  /* keys per split: at B=1, L=32768 (H100), 32 splits of
                                         1024 keys took 58.3 us; 30: 61.3, 33: 60.6, 48: 62.3,
                                         64: 60.4, 128: 65.6, 24: 67.7, 16: 70.6 */
#define TALON__DECODE_HEADS 4         /* query heads per CTA at most */

typedef struct talon__decode_plan {
    int heads_per_cta, head_chunks, gmax, splits;
    int64_t pt_stride, ws_bytes, part_o_bytes;
} talon__decode_plan;

/* The split count. More than 1.5 CTAs per SM, up to one wave, already keep the memory busy:
   no split, which would only add the merge (H200, L=4096, the automatic choice before this
   rule against one split: D=128 208 CTAs 119.6 -> 111.8 us, 256 CTAs 135.6 -> 130.4, 384
   CTAs 201.0 -> 189.7; D=256 224 CTAs 246.0 -> 224.0, 256 CTAs 258.7 -> 244.2; at 192 CTAs
   2 splits still win, 104.6 against 107.7). Otherwise, with `slots` CTAs resident on the
   GPU, s splits take ceil(ctas * s / slots) waves of CTAs that each do 1/s of the work; the
   smallest s with the best such estimate wins, with splits of at least
   TALON__DECODE_MIN_CHUNK keys. No slack towards fewer splits: at B=1, L=32768 a 10% slack
   picked 30 splits over 32, 5% slower (the merge is cheap). Past one wave the tail matters
   (600 CTAs: 4 splits 311.9 us, one 350.3). When that still leaves at most 1.5 CTAs per SM,
   each CTA walks its keys at its own latency-bound pace, so the chunks shrink (to
   TALON__DECODE_FILL_CHUNK keys at least) until there are 2 CTAs per SM. H200, Hq/Hk 32/8,
   D=128 bf16, without this step against with it: B=1 L=1024 24.4 -> 10.5 us, L=8192
   30.6 -> 19.8 (32 splits), L=16384 32.4 -> 28.8 (32; 64 took 26.8), B=2 L=8192 32.7 ->
   26.9 (16); fp8 B=1 L=2048 21.8 -> 10.8. More than 2 per SM lost at head_dim 256 (16/8,
   B=1 L=8192: 47.9 -> 27.7 at 32 splits, 28.0 at 64; B=2 L=8192: 48.4 -> 41.2 at 16, 44.5
   at 32). */
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
