"""Generated tokens/s of the transformers backend: today's loop vs the dynamic / static / compiled caches.

SmolLM2-135M (bundled) completes chat prompts for template questions of the default world at
batch 8 and 40 (``--batches``), ``--new-tokens`` new tokens at temperature 1 (as in training), the
same seed for every side, so every side samples the same tokens (checked: the texts must match).
Prompts are the bare questions by default (``--prompt solver`` for the ~350-token Solver prompt,
where prefill dominates on CPU). Sides, all on ``--device``:

* ``baseline``: the decoding loop as of commit 2d54fce (DynamicCache, host sync and per-row Python
  work every token), kept here verbatim as the reference;
* ``dynamic``: the current loop with the dynamic cache (the CPU default);
* ``static``: the static cache, uncompiled;
* ``static+compiled``: the static cache with the one-token step under ``torch.compile``
  (``reduce-overhead`` = CUDA graphs on CUDA; the CUDA default). Its compile time is reported apart
  and excluded from the tokens/s (every side gets one warm-up call per batch size); skipped on CPU unless
  ``--compile-on-cpu`` (compiling takes about a minute there and CUDA graphs do not exist).

    .venv/bin/python benchmarks/bench_generate.py [--device cuda] [--batches 8 40 160]

On CPU, tokens/s and ratios use this process's CPU time (one torch thread), which other jobs on a
shared machine distort far less than wall time (both are recorded); on CUDA, wall time.

Prints a markdown table and writes benchmarks/results/generate_<device>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import add_device_argument, device_info, write_result  # noqa: E402


def baseline_generate(gen, prompts, cfg) -> list[str]:
    """The decoding loop of ``TransformersGenerator._generate_ids`` as of commit 2d54fce (one batch)."""
    import torch
    from transformers import DynamicCache

    from searchgym.core.llm import truncate_at_stop
    from searchgym.llm.cache_keyword import cache_kwargs
    from searchgym.llm.transformers_backend import _sample

    batch = [gen.encode(gen.render(p)) for p in prompts]
    pad = gen.tokenizer.pad_token_id
    width = max(len(r) for r in batch)
    dev = gen.device
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in batch], device=dev)
    attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in batch], device=dev)
    g = torch.Generator(device=dev).manual_seed(cfg.seed % (2**63))
    eos = torch.tensor(gen.eos_ids or [-1], device=dev)
    n = len(batch)
    finished = torch.zeros(n, dtype=torch.bool, device=dev)
    out_tokens: list[list[int]] = [[] for _ in range(n)]
    gen.model.eval()
    with torch.inference_mode():
        cache = DynamicCache()
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        out = gen.model(
            input_ids=input_ids,
            attention_mask=attn,
            position_ids=pos,
            **cache_kwargs(gen.model, cache),
            use_cache=True,
            logits_to_keep=1,
        )
        pos = pos[:, -1:]
        for _ in range(cfg.max_new_tokens):
            logits = out.logits[:, -1, :].float()
            nxt = _sample(logits, cfg.temperature, cfg.top_p, g)
            nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
            hit_eos = torch.isin(nxt, eos) & ~finished
            for i in torch.nonzero(~finished).flatten().tolist():
                tok = int(nxt[i])
                if hit_eos[i]:
                    finished[i] = True
                    continue
                out_tokens[i].append(tok)
                if cfg.stop and gen._hit_stop(out_tokens[i], cfg.stop):
                    finished[i] = True
            if bool(finished.all()):
                break
            attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=dev)], dim=1)
            pos = pos + 1
            out = gen.model(
                input_ids=nxt[:, None],
                attention_mask=attn,
                position_ids=pos,
                use_cache=True,
                **cache_kwargs(gen.model, cache),
            )
    return [truncate_at_stop(gen.tokenizer.decode(t, skip_special_tokens=True), cfg.stop) for t in out_tokens]


def make_prompts(n: int, kind: str) -> list:
    """``n`` chat prompts for template questions of the default world's pool: the bare question
    (``short``, ~40 tokens) or the full Solver prompt (``solver``, ~350 tokens)."""
    from searchgym.construction.pool import build_pool
    from searchgym.construction.question_templates import path_question
    from searchgym.core.prompts import render_solver
    from searchgym.world.synthetic import default_world

    pool = build_pool(default_world(), n, seed=0, progress=False).subgraphs
    text = render_solver if kind == "solver" else str
    return [[{"role": "user", "content": text(path_question(sg))}] for sg in pool]


def timed(fn) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of one call (CPU time is what a busy shared CPU
    distorts least; on CUDA the wall time after a synchronise is the figure)."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    if _cuda_sync is not None:
        _cuda_sync()
    return time.perf_counter() - t0, time.process_time() - c0


_cuda_sync = None


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    global _cuda_sync
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(ap)
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 40])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument(
        "--prompt",
        choices=("short", "solver"),
        default="short",
        help="bare question (decode-bound) or the full Solver prompt (prefill-heavy)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per side and batch, round-robin (median)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--dtype", default=None, help="model dtype (default float32 on CPU, bfloat16 on CUDA)")
    ap.add_argument("--compile-on-cpu", action="store_true", help="also time the compiled static cache on CPU")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    from searchgym.core.llm import GenerationConfig
    from searchgym.llm.bundled_model import load_policy
    from searchgym.llm.decoding import DecodingConfig
    from searchgym.llm.transformers_backend import TransformersGenerator

    info = device_info(args.device)
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        _cuda_sync = torch.cuda.synchronize
    dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    model, tok = load_policy("smollm2", dtype=dtype, device=args.device)
    prompts_all = make_prompts(max(args.batches), args.prompt)
    cfg = GenerationConfig(max_new_tokens=args.new_tokens, temperature=1.0, seed=7)
    sides = {
        "dynamic": DecodingConfig(cache="dynamic"),
        "static": DecodingConfig(cache="static", compile=False),
    }
    if args.device == "cuda" or args.compile_on_cpu:
        mode = "reduce-overhead" if args.device == "cuda" else "default"
        sides["static+compiled"] = DecodingConfig(cache="static", compile=True, compile_mode=mode)
    gens = {
        name: TransformersGenerator(model, tok, device=args.device, decoding=d, max_batch_size=max(args.batches))
        for name, d in sides.items()
    }
    base_gen = gens["dynamic"]
    rows = []
    print(f"Device: {info}; SmolLM2-135M {dtype}, {args.prompt} prompts, {args.new_tokens} new tokens, temperature 1\n")
    timing = "wall" if args.device == "cuda" else "process CPU"
    print(f"| batch | side | tokens/s ({timing}) | {timing} s per call | vs baseline | same texts | compile s |")
    print("|---:|---|---:|---:|---:|---|---:|")
    for b in args.batches:
        prompts = prompts_all[:b]
        calls = {"baseline": lambda: baseline_generate(base_gen, prompts, cfg)}
        calls.update({name: (lambda g=gen: g.generate(prompts, cfg)) for name, gen in gens.items()})
        tokens = base_gen.generate_with_stats(prompts, cfg).new_tokens
        texts, warm, wall, cpu = {}, {}, {name: [] for name in calls}, {name: [] for name in calls}
        for name, call in calls.items():  # warm-up (compiles the compiled side)
            t0 = time.perf_counter()
            texts[name] = call()
            warm[name] = time.perf_counter() - t0
        for _ in range(args.repeats):  # round-robin, so load drift on a shared machine hits every side alike
            for name, call in calls.items():
                w, c = timed(call)
                wall[name].append(w)
                cpu[name].append(c)
        # the ratio uses the timing that reflects the device's work: wall on CUDA, process CPU time on CPU
        basis = wall if args.device == "cuda" else cpu
        base_s = statistics.median(basis["baseline"])
        for name in calls:
            sec = statistics.median(basis[name])
            same = texts[name] == texts["baseline"]
            comp = warm[name] if "compiled" in name else 0.0
            row = {
                "batch": b,
                "side": name,
                "tokens": tokens,
                "seconds": round(sec, 4),
                "timing": "wall" if basis is wall else "process CPU time",
                "wall_each": [round(t, 3) for t in wall[name]],
                "cpu_each": [round(t, 3) for t in cpu[name]],
                "tokens_per_s": round(tokens / sec, 1),
                "vs_baseline": round(base_s / sec, 2),
                "same_texts_as_baseline": same,
                "compile_s": round(comp, 1),
            }
            rows.append(row)
            print(
                f"| {b} | {name} | {row['tokens_per_s']:,.0f} | {sec:.3f} | {row['vs_baseline']:.2f}x | "
                f"{'yes' if same else 'NO'} | {comp:.0f} |",
                flush=True,
            )
    result = {
        "benchmark": "bench_generate",
        "device": info,
        "dtype": dtype,
        "prompt": args.prompt,
        "new_tokens": args.new_tokens,
        "threads": args.threads,
        "repeats": args.repeats,
        "rows": rows,
        "note": "every side on the same device, same seed; median of round-robin repeats; compile excluded; "
        "on CPU the figure is process CPU time (torch 1 thread), as the shared machine's wall "
        "times varied 3x between identical calls",
    }
    write_result(result, args.out, f"generate_{args.device}.json")
    return result


if __name__ == "__main__":
    main()
