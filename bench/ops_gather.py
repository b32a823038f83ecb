"""talon_gather_rows (bench/ops.py runs it): the token-embedding lookup.

out[t, :] = table[ids[t], :], table [128256, 4096] bf16 (Llama-3-8B's embedding), ids int32
uniform over the vocabulary: a decode batch (64 tokens) and a prefill (8192 tokens).
Peers: "eager" F.embedding(ids, table) (torch's index_select kernel), "compile" the same under
torch.compile. Bytes: each output row read once and written once (2 x tokens x 4096 x 2).
Check: bit for bit against F.embedding on the last timed set.
"""
from ops import Case, ptr
import ops_norm
from ops_norm import compiled

VOCAB, HIDDEN = 128256, 4096


def gather_case(h, tokens):
    torch, F = ops_norm.torch, ops_norm.F
    A = h.struct("talon_gather_rows_args")
    shared = {}

    def make():  # one table for every set (1 GiB); fresh ids and output per set
        if "table" not in shared:
            shared["table"] = torch.empty(VOCAB, HIDDEN, device="cuda",
                                          dtype=torch.bfloat16).normal_()
        table = shared["table"]
        ids = torch.randint(0, VOCAB, (tokens,), device="cuda", dtype=torch.int32)
        out = torch.empty(tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
        args = A(out=ptr(out), **{"in": ptr(table)}, indices=ptr(ids), rows=tokens, cols=HIDDEN,
                 in_rows=VOCAB)
        return {"table": table, "ids": ids, "out": out, "args": args}

    def talon(s, stream):
        h.call("talon_gather_rows", s["args"], stream)

    def eager(s):
        return F.embedding(s["ids"], s["table"])

    comp = compiled(lambda ids, table: F.embedding(ids, table))

    def check(s):
        torch.cuda.synchronize()
        if not torch.equal(s["out"].view(torch.int16), eager(s).view(torch.int16)):
            raise AssertionError("talon_gather_rows differs from F.embedding")

    return Case("gather_rows", f"embedding bf16 {tokens}x{HIDDEN} of {VOCAB}", make, talon,
                {"eager": eager, "compile": lambda s: comp(s["ids"], s["table"])},
                bytes=2 * tokens * HIDDEN * 2, check=check, runs=50,
                meta={"api": "talon_gather_rows", "dtype": "bf16", "rows": tokens,
                      "cols": HIDDEN})


def cases(h):
    ops_norm.setup()
    return [gather_case(h, 64), gather_case(h, 8192)]
