"""One rank of a decode-context-parallel group, as its own process.

Run by test_dcp.py (gloo, on the CPU) and on a multi-GPU machine (NCCL,
one GPU a rank); every rank builds the same random batch from the seed,
keeps its share of the cache (token i on rank (i // interleave) % world),
runs `mla.dcp.step` over the process group (the prefills' context chunks
all-gathered inside the forward) and checks its heads of the merged decode
rows and every prefill row against the float64 reference and against a
layer without DCP over the whole cache on its own device (with --bench,
times the decode step against a layer holding the whole cache on rank 0's
device). Prints one line "rank R: PASS ..." or "rank R: FAIL ..." and
exits 0 or 1.

  python dcp_worker.py --rank R --world W --init tcp://127.0.0.1:PORT
      [--backend gloo|nccl] [--heads N] [--contexts 1500,700,...]
      [--query-len SQ] [--prefills CONTEXT:NEW,...] [--workspace ROWS]
      [--interleave I] [--dtype f32|bf16] [--seed S] [--graph]
      [--bench BATCHxCONTEXT --repeats N]
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402

import mla  # noqa: E402
import mla.dcp  # noqa: E402


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--contexts", default="300,41,0,1,190,77", help="decodes' cached tokens")
    p.add_argument("--query-len", type=int, default=1, help="new tokens of every decode")
    p.add_argument("--prefills", default="",
                   help="CONTEXT:NEW,... prefills after the decodes: cached tokens and new tokens")
    p.add_argument("--workspace", type=int, default=0,
                   help="context-gather workspace rows (0: the default); small makes several chunks")
    p.add_argument("--interleave", type=int, default=1)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--small", action="store_true", help="small MLA dims (fast on a CPU)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--graph", action="store_true",
                   help="also capture the whole DCP step (layer kernels, all-gathers, merge) into one "
                        "torch.cuda.graph and check its replay (GPU)")
    p.add_argument("--bench", default="",
                   help="BATCHxCONTEXT: time the step on random data of that shape instead of checking it (GPU)")
    p.add_argument("--repeats", type=int, default=20)
    return p.parse_args()


def pages_for(lengths, block_size, rng):
    """Block table rows for `lengths` tokens each, shuffled pages."""
    need = [math.ceil(n / block_size) for n in lengths]
    pool = rng.permutation(sum(need) + 2)
    width = max(max(need, default=0), 1)
    table = np.zeros((len(lengths), width), dtype=np.int32)
    start = 0
    for b, n in enumerate(need):
        table[b, :n] = pool[start : start + n]
        start += n
    return table, int(pool.size)


def main():
    args = parse()
    import torch
    import torch.distributed as dist

    on_gpu = args.backend == "nccl"
    if on_gpu:
        torch.cuda.set_device(args.rank)
    dist.init_process_group(args.backend, init_method=args.init, rank=args.rank, world_size=args.world)
    runtime = mla.Runtime(device="gpu" if on_gpu else "cpu", gpu_ordinal=args.rank if on_gpu else 0)
    device = f"cuda:{args.rank}" if on_gpu else "cpu"
    if args.bench:
        bench(args, runtime, device)
        dist.destroy_process_group()
        return
    dims = dict(kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64) if args.small else {}
    dtype = mla.DType.parse(args.dtype)
    base = mla.LayerConfig(
        num_heads=args.heads, block_size=args.block_size, activation_dtype=dtype, cache_dtype=dtype,
        needs_decode_lse=True, workspace_tokens=args.workspace, decode_threshold=args.query_len, **dims)
    config = mla.LayerConfig(**{**base.__dict__, "dcp_world_size": args.world, "dcp_rank": args.rank,
                                "dcp_interleave": args.interleave})
    n, lkv, r, v = base.num_heads, base.kv_lora_rank, base.qk_rope_head_dim, base.v_head_dim
    tdt = dtype.to_torch()

    # The same batch on every rank: contexts, their tokens, weights, inputs.
    rng = np.random.default_rng(args.seed)
    contexts = [int(c) for c in args.contexts.split(",") if c]
    decodes, sq = len(contexts), args.query_len
    query_lens = [sq] * decodes
    for prefill in filter(None, args.prefills.split(",")):
        context, new = (int(x) for x in prefill.split(":"))
        contexts.append(context)
        query_lens.append(new)
    seq_lens = [c + new for c, new in zip(contexts, query_lens)]
    starts = np.concatenate([[0], np.cumsum(query_lens)]).astype(int)
    rows = int(starts[-1])
    tokens = [rng.uniform(-1, 1, (c, lkv + r)) for c in contexts]
    kv_b_proj = rng.uniform(-1, 1, (lkv, n, base.qk_nope_head_dim + v)) / math.sqrt(lkv)
    q = rng.uniform(-1, 1, (rows, n, base.qk_head_dim))
    kv_c = rng.uniform(-1, 1, (rows, lkv))
    k_pe = rng.uniform(-1, 1, (rows, r))

    def rounded(values):
        return torch.from_numpy(values).to(tdt)

    def on_device(t):
        return t.to(device).contiguous()

    # Values as the library sees them (rounded to the dtype), in float64.
    tokens = [rounded(t).double().numpy() for t in tokens]
    kv_b_exact = rounded(kv_b_proj).double().numpy()
    q64, kvc64, kpe64 = (rounded(x).double().numpy() for x in (q, kv_c, k_pe))
    p = base.qk_nope_head_dim
    weights = {
        "kv_b_proj": on_device(torch.from_numpy(kv_b_exact).to(tdt)),
        "w_uk_t": on_device(torch.from_numpy(kv_b_exact[:, :, :p].transpose(1, 2, 0).copy()).to(tdt)),
        "w_uv": on_device(torch.from_numpy(kv_b_exact[:, :, p:].transpose(1, 0, 2).copy()).to(tdt)),
    }

    def cache_for(world, rank, interleave):
        """A cache holding `rank`'s share of every request, its block table."""
        def owns(i):
            return (i // interleave) % world == rank

        def local(i):
            return i // (interleave * world) * interleave + i % interleave

        shares = [sum(owns(i) for i in range(s)) for s in seq_lens]
        table, blocks = pages_for(shares, args.block_size, rng)
        cache = rng.uniform(-1, 1, (blocks, args.block_size, lkv + r))
        for b, rows in enumerate(tokens):
            for i in range(rows.shape[0]):
                if owns(i):
                    j = local(i)
                    cache[table[b, j // args.block_size], j % args.block_size] = rows[i]
        return table, cache

    table, cache = cache_for(args.world, args.rank, args.interleave)
    layer = mla.Layer(runtime, config, **weights)
    metadata = mla.BatchMetadata.from_lengths(
        query_lens, seq_lens, table, args.block_size, dcp=(args.world, args.rank, args.interleave))
    plan = layer.plan(metadata, cache.shape[0])
    kv_cache = on_device(rounded(cache))
    step = dict(q=on_device(rounded(q)), kv_c=on_device(rounded(kv_c)), k_pe=on_device(rounded(k_pe)),
                kv_cache=kv_cache, output=torch.full((rows, n, v), 7.0, dtype=tdt, device=device),
                decode_lse=torch.full((decodes, n, sq), 7.0, dtype=torch.float32, device=device))
    merged, lse = mla.dcp.step(layer, plan, group=None, merged_lse=True, **step)
    if on_gpu:
        torch.cuda.synchronize()

    # The float64 reference over the whole sequences.
    out_ref = np.zeros((rows, n, v))
    lse_ref = np.zeros((n, rows))
    scale = 1.0 / math.sqrt(base.qk_head_dim)
    for b, (start, stop) in enumerate(zip(starts[:-1], starts[1:])):
        new_rows = np.concatenate([kvc64[start:stop], kpe64[start:stop]], axis=1)
        latent = np.concatenate([tokens[b], new_rows])
        out_ref[start:stop], lse_ref[:, start:stop] = reference.attention(
            q64[start:stop], latent, kv_b_exact, r, scale)
    tolerance = {"f32": 1e-4, "f16": 4e-3, "bf16": 1.5e-2}[args.dtype]
    ok, line = True, f"rank {args.rank}:"
    if decodes:
        # The merged decode rows of this rank's heads.
        share = n // args.world if n % args.world == 0 else n
        first = args.rank * share if share != n else 0
        td = decodes * sq
        error = reference.relative_l2(merged.double().cpu().numpy(), out_ref[:td, first : first + share])
        # [decodes, heads, Sq] against the reference's [heads, tokens].
        lse_want = lse_ref[first : first + share, :td].reshape(share, decodes, sq).transpose(1, 0, 2)
        lse_error = float(np.max(np.abs(lse.double().cpu().numpy() - lse_want)))
        ok = error <= tolerance and lse_error <= 5e-2
        line += f" decodes rel L2 {error:.2e} max |dLSE| {lse_error:.2e}"
    if rows > decodes * sq:
        # Every prefill row, every head: exact on every rank.
        got = step["output"][decodes * sq :].double().cpu().numpy()
        error = reference.relative_l2(got, out_ref[decodes * sq :])
        ok = ok and error <= tolerance
        line += f" prefills rel L2 {error:.2e} ({plan.info.num_context_chunks} context chunks)"
    # The same step on this GPU by a layer without DCP over the whole cache.
    single_table, single_cache = cache_for(1, 0, 1)
    single = mla.Layer(runtime, base, **weights)
    single_plan = single.plan(
        mla.BatchMetadata.from_lengths(query_lens, seq_lens, single_table, args.block_size),
        single_cache.shape[0])
    single_out = torch.full((rows, n, v), 7.0, dtype=tdt, device=device)
    single_lse = torch.full((decodes, n, sq), 7.0, dtype=torch.float32, device=device)
    single.forward(single_plan, step["q"], step["kv_c"], step["k_pe"], on_device(rounded(single_cache)),
                   single_out, single_lse if decodes else None)
    single_out = single_out.double().cpu().numpy()
    versus = []
    if decodes:
        versus.append(reference.relative_l2(merged.double().cpu().numpy(),
                                            single_out[: decodes * sq, first : first + share]))
    if rows > decodes * sq:
        versus.append(reference.relative_l2(step["output"][decodes * sq :].double().cpu().numpy(),
                                            single_out[decodes * sq :]))
    ok = ok and all(e <= tolerance for e in versus)
    line += " vs the layer without DCP rel L2 " + " / ".join(f"{e:.2e}" for e in versus)
    line = line.replace(":", ": PASS" if ok else ": FAIL", 1)

    if args.graph and on_gpu and rows == decodes * sq:
        replayed_ok, text = graph_step(layer, metadata, step, merged, lse)
        ok = ok and replayed_ok
        line += " " + text
    print(line, flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


def graph_step(layer, metadata, step, merged, lse):
    """The whole DCP decode step captured into one torch.cuda.graph: the
    layer's kernels (DecodeGraph.enqueue, its metadata staged before each
    replay), the all-gathers over NCCL and the merge. Its replay must give
    the eager step's rows bit for bit."""
    import torch
    import torch.distributed as dist

    decodes, _, sq = step["decode_lse"].shape
    shape = mla.DecodeGraphShape(max_decodes=decodes, query_len=sq,
                                 max_blocks_per_request=metadata.max_blocks,
                                 num_cache_blocks=step["kv_cache"].shape[0])
    captured = layer.capture_decode_step(shape, **step)
    plan = layer.plan_decode_step(metadata, captured.shape)
    world = layer.config.dcp_world_size
    gathered_out = torch.empty((world,) + tuple(step["output"].shape), dtype=step["output"].dtype,
                               device=step["output"].device)
    gathered_lse = torch.empty((world,) + tuple(step["decode_lse"].shape), dtype=torch.float32,
                               device=step["output"].device)
    out = torch.full_like(merged, 7.0)
    out_lse = torch.full_like(lse, 7.0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # NCCL's first collective on a stream is not capturable: warm it.
        dist.all_gather_into_tensor(gathered_out, step["output"])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    captured.stage(plan)
    with torch.cuda.graph(graph):
        captured.enqueue()
        dist.all_gather_into_tensor(gathered_out, step["output"])
        dist.all_gather_into_tensor(gathered_lse, step["decode_lse"])
        layer.merge_dcp_partials(plan, gathered_out, gathered_lse, out, out_lse)
    for _ in range(3):
        captured.stage(plan)
        graph.replay()
    torch.cuda.synchronize()
    same = torch.equal(out, merged) and torch.equal(out_lse, lse)
    return same, f"graph replay {'equal' if same else 'DIFFERENT'}"


def bench(args, runtime, device):
    """Times a rank's decode step at BATCHxCONTEXT on random data: its
    forward over its share, the whole DCP step (forward, all-gathers,
    merge) and the merge alone; and on rank 0 the forward of a layer
    without DCP over the whole contexts. Medians of CUDA-event times, the
    ranks started together by a barrier (no L2 flush: the caches are GBs)."""
    import torch
    import torch.distributed as dist

    batch, context = (int(x) for x in args.bench.split("x"))
    dtype = mla.DType.parse(args.dtype)
    tdt = dtype.to_torch()
    base = mla.LayerConfig(num_heads=args.heads, block_size=args.block_size, activation_dtype=dtype,
                           cache_dtype=dtype, needs_decode_lse=True)
    n, v, entry = base.num_heads, base.v_head_dim, base.cache_entry_dim
    gen = torch.Generator(device=device).manual_seed(args.seed)

    def rand(*shape, scale=1.0):
        return (torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * 2 - 1).mul_(scale).to(tdt)

    weights = {"kv_b_proj": rand(base.kv_lora_rank, n, base.qk_nope_head_dim + v, scale=0.05),
               "w_uk_t": rand(n, base.qk_nope_head_dim, base.kv_lora_rank, scale=0.05),
               "w_uv": rand(n, base.kv_lora_rank, v, scale=0.05)}
    seq_lens = [context + 1] * batch
    step = dict(q=rand(batch, n, base.qk_head_dim), kv_c=rand(batch, base.kv_lora_rank),
                k_pe=rand(batch, base.qk_rope_head_dim))

    def layer_for(world, rank):
        config = mla.LayerConfig(**{**base.__dict__, "dcp_world_size": world, "dcp_rank": rank,
                                    "dcp_interleave": args.interleave})
        per_request = math.ceil(math.ceil((context + 1) / world) / args.block_size) + 1
        blocks = per_request * batch
        table = torch.randperm(blocks, generator=torch.Generator().manual_seed(args.seed + rank)).to(torch.int32)
        table = table.reshape(batch, per_request)
        layer = mla.Layer(runtime, config, **weights)
        metadata = mla.BatchMetadata.from_lengths(
            [1] * batch, seq_lens, table, args.block_size,
            dcp=(world, rank, args.interleave) if world > 1 else None)
        plan = layer.plan(metadata, blocks)
        tensors = dict(step, kv_cache=rand(blocks, args.block_size, entry),
                       output=torch.empty((batch, n, v), dtype=tdt, device=device),
                       decode_lse=torch.empty((batch, n, 1), dtype=torch.float32, device=device))
        return layer, plan, tensors

    def timed(fn, together=True):
        samples = []
        for i in range(args.repeats + 3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if together:
                dist.barrier()
            torch.cuda.synchronize()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            if i >= 3:
                samples.append(start.elapsed_time(end))
        return sorted(samples)[len(samples) // 2]

    world = args.world
    layer, plan, tensors = layer_for(world, args.rank)
    gathered_out = torch.empty((world, batch, n, v), dtype=tdt, device=device)
    gathered_lse = torch.empty((world, batch, n, 1), dtype=torch.float32, device=device)
    merged = torch.empty((batch, n // world, v), dtype=tdt, device=device)
    merged_lse = torch.empty((batch, n // world, 1), dtype=torch.float32, device=device)
    forward = timed(lambda: layer.forward(plan, **tensors))
    whole = timed(lambda: mla.dcp.step(layer, plan, group=None, **tensors))
    dist.all_gather_into_tensor(gathered_out, tensors["output"])
    dist.all_gather_into_tensor(gathered_lse, tensors["decode_lse"])
    merge = timed(lambda: layer.merge_dcp_partials(plan, gathered_out, gathered_lse, merged, merged_lse),
                  together=False)
    line = (f"rank {args.rank}: bench {batch}x{context}, {n} heads, {world} ranks: forward {forward:.3f} ms, "
            f"DCP step {whole:.3f} ms, merge {merge:.3f} ms")
    dist.barrier()
    if args.rank == 0:
        del layer, tensors
        torch.cuda.empty_cache()
        single, single_plan, single_tensors = layer_for(1, 0)
        alone = timed(lambda: single.forward(single_plan, **single_tensors), together=False)
        line += f"; without DCP (whole contexts, one GPU): forward {alone:.3f} ms"
    print(line, flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
