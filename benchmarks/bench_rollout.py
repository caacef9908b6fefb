"""Rollouts against the hardware floor: today's transformers loop vs the static rollout engine.

One run on the machine at hand prints and records:

1. **Floors**, measured in this process: an fp32 and a bf16 GEMM (GFLOP/s), a memory-bandwidth probe (a
   streaming read, GB/s) and a decode-shaped GEMV over the LM head (GB/s); then the model's bytes per
   decode step (every projection's weights, read once per step whatever the batch), FLOPs per token and
   KV bytes per token of context. The floor of a decode step at batch ``b`` and context ``c`` is
   ``max((weights + b * c * kv) / bandwidth, b * flops(c) / gemm)``.
2. **Batches** of the learning benchmark's first-turn Solver prompts (the shipped cold start, its env
   settings) at batch 1/16/40 (``--size full``), temperature 0, the agent's stop strings and the learning
   benchmark's 128 new tokens, for each side: tokens/s, ms per decode step, prefill share (a 1-token call's
   time over the full call's), the fraction of the floor a decode step reaches, rows fed per step, and
   whether each row's text equals today's loop's. The prefix store is cleared before every timed call,
   so no side is timed on prompts it has already seen.
3. **Episodes**: the learning benchmark's RL rollout batch (4 questions x 4 rollouts of ``KGSolverGroup-v0``,
   cold-start env settings, up to 128 tokens a turn) played end to end by ``LLMAgent`` on each side, at
   temperature 0 (trajectories compared with today's) and 1 (as in training): seconds, generate seconds,
   new and prefilled tokens.

Sides on a CPU: ``hf`` (the transformers loop, the reference: ``TransformersGenerator(engine="hf")``),
``static-plain`` (the engine in fp32 on the model's own weights through ``F.linear``, transformers' kernels),
``static`` (the engine's defaults: fp32, fused and oneDNN-prepacked weight copies), ``static-bf16`` (bf16
weights and cache, prepacked: ``rollout_dtype="bfloat16"``). Times are this process's CPU time (one torch
thread by default): on a shared machine it is what other jobs distort least; wall times are recorded too.

On a GPU (``--device cuda``, the ``gpu`` size: batch 1/40/160) the model runs in bf16 and the sides are
``hf`` (transformers' loop with its static cache and CUDA-graph step), ``static-exact`` (the engine's exact
steps, launched from Python), ``static`` (the engine's default there: fixed-shape steps replayed as CUDA
graphs, :mod:`searchgym.llm.decode_graphs`) and ``static-compiled`` (those steps traced by inductor before
capture: ``EngineConfig(compile_steps="inductor")``); times are wall seconds with the device synchronised (keys
``gpu_s`` ... where the CPU run writes ``cpu_s`` ...), the probes run on the GPU. There each side's first call
at a batch size (transformers' compile, the engine's graph captures) is a warm-up recorded apart
(``first_call_gpu_s``), so the timed calls are the steady state; the episodes keep every call's compiling and
capturing, as training meets them.

    nice -n 19 .venv/bin/python benchmarks/bench_rollout.py --size smoke     # about a minute
    .venv/bin/python benchmarks/bench_rollout.py --size full                 # the figures (tens of minutes)
    python3 benchmarks/bench_rollout.py --size gpu --device cuda             # on a GPU node (a few minutes)

Writes ``benchmarks/results/rollout_cpu.json`` (``rollout_cpu_smoke.json`` at the smoke size,
``rollout_gpu.json`` with ``--device cuda``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import device_info, machine_info, write_result  # noqa: E402

SIZES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        batches=(1, 4),
        new_tokens=8,
        repeats=1,
        probe_mb=128,
        probe_s=0.3,
        episodes=dict(questions=1, group=2, max_turns=2, new_tokens=12, temperatures=(0.0,)),
    ),
    "full": dict(
        batches=(1, 16, 40),
        new_tokens=128,
        repeats=2,
        probe_mb=512,
        probe_s=2.0,
        episodes=dict(questions=4, group=4, max_turns=None, new_tokens=128, temperatures=(0.0, 1.0)),
    ),
}
SIZES["gpu"] = dict(SIZES["full"], batches=(1, 40, 160), probe_mb=2048, probe_s=1.0)
SIDES = ("hf", "static-plain", "static", "static-bf16")
CUDA_SIDES = ("hf", "static-exact", "static", "static-compiled")


class Clock:
    """What the benchmark times: this process's CPU seconds on a CPU; on a GPU, wall seconds with the device
    synchronised before each reading (the kernels a call queued are counted in it). ``key`` names the fields."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.key = "gpu" if device == "cuda" else "cpu"

    def __call__(self) -> float:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            return time.perf_counter()
        return time.process_time()


CLOCK = Clock("cpu")


# ====================================================================== floors
def _timed(fn: Callable[[], Any], seconds: float) -> tuple[float, int]:
    """Seconds (:data:`CLOCK`) per call of ``fn``, repeated for at least ``seconds`` (after one warm-up)."""
    fn()
    n, c0 = 0, CLOCK()
    while True:
        fn()
        n += 1
        spent = CLOCK() - c0
        if spent >= seconds:
            return spent / n, n


def gemm_probe(dtype: str, seconds: float, n: int = 1024) -> float:
    """GFLOP/s of an ``n x n x n`` matmul in ``dtype``."""
    import torch

    dev = CLOCK.device
    a = torch.randn(n, n).to(dev, getattr(torch, dtype))
    b = torch.randn(n, n).to(dev, getattr(torch, dtype))
    per, _ = _timed(lambda: torch.mm(a, b), seconds)
    return 2 * n**3 / per / 1e9


def bandwidth_probe(mb: int, seconds: float) -> float:
    """GB/s of a streaming read (a sum over ``mb`` MB of float32, far past the caches)."""
    import torch

    x = torch.ones(mb * 2**20 // 4, device=CLOCK.device)
    per, _ = _timed(lambda: x.sum(), seconds)
    return x.numel() * 4 / per / 1e9


def gemv_probe(rows: int, cols: int, dtype: str, seconds: float) -> float:
    """GB/s of a decode-shaped GEMV (one token through a ``rows x cols`` weight, as ``F.linear`` runs it)."""
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    w = torch.randn(rows, cols).to(CLOCK.device, dt)
    x = torch.randn(1, cols).to(CLOCK.device, dt)
    per, _ = _timed(lambda: F.linear(x, w), seconds)
    return w.numel() * w.element_size() / per / 1e9


def model_figures(model) -> dict:
    """Bytes a decode step streams (every linear weight once; a tied embedding is the head), FLOPs per token
    before attention, and KV bytes per token of context, in float32 and bfloat16."""
    import torch

    cfg = model.config
    seen, linear = set(), 0
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and id(m.weight) not in seen:
            seen.add(id(m.weight))
            linear += m.weight.numel()
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    kv = 2 * cfg.num_hidden_layers * kv_heads * head_dim
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "linear_parameters": linear,
        "weight_bytes_per_step": {"float32": 4 * linear, "bfloat16": 2 * linear},
        "flops_per_token": 2 * linear,
        "attention_flops_per_token_per_context": 4 * cfg.num_hidden_layers * heads * head_dim,
        "kv_bytes_per_token": {"float32": 4 * kv, "bfloat16": 2 * kv},
    }


def step_floor_ms(fig: dict, floors: dict, dtype: str, batch: float, context: float) -> float:
    """The floor of one decode step: streaming the weights and the rows' KV, or the GEMM work, whichever is longer."""
    bytes_ = fig["weight_bytes_per_step"][dtype] + batch * context * fig["kv_bytes_per_token"][dtype]
    flops = batch * (fig["flops_per_token"] + context * fig["attention_flops_per_token_per_context"])
    t_mem = bytes_ / (floors["bandwidth_gb_s"] * 1e9)
    t_flop = flops / (floors[f"gemm_{dtype}_gflop_s"] * 1e9)
    return 1e3 * max(t_mem, t_flop)


# ====================================================================== model and prompts
def load_model(name: str):
    """``(model, tokenizer, label)``: the shipped cold start (merged) when asked for and present, else SmolLM2;
    on a GPU moved there in bf16."""
    import torch

    from searchgym.llm.bundled_model import load_policy
    from searchgym.training.cold_start import load_cold_start, shipped_adapter

    if name == "cold-start" and shipped_adapter() is not None:
        model, tok = load_cold_start()
        label = "SmolLM2-135M + shipped cold start (merged)"
    else:
        model, tok = load_policy("smollm2")
        label = "SmolLM2-135M"
    if CLOCK.device == "cuda":
        model.to("cuda", torch.bfloat16)
        label += ", bf16"
    return model, tok, label


def solver_tasks(world, n: int, seed: int = 0) -> list:
    """``n`` of the learning benchmark's RL training tasks (1- and 2-hop, half each)."""
    from searchgym.training.demonstrations import rl_tasks

    return rl_tasks(world, {1: (n + 1) // 2, 2: n // 2}, seed=seed)[:n]


def first_turn_contexts(gen, world, n: int) -> list[list[int]]:
    """The token ids ``LLMAgent`` sends on the first turn of ``n`` Solver rollouts (cold-start env settings)."""
    import gymnasium as gym

    import searchgym  # noqa: F401  (registration)
    from searchgym.agents.llm_agent import LLMAgent
    from searchgym.tasks.sources import ListTaskSource
    from searchgym.training.demonstrations import cold_start_env_kwargs

    tasks = solver_tasks(world, n)
    env = gym.make("KGSolver-v0", tasks=ListTaskSource(tasks), **cold_start_env_kwargs(world))
    agent = LLMAgent(gen)
    out = []
    for i in range(n):
        _, info = env.reset(seed=i, options={"index": i})
        out.append(list(agent.context(info["trajectory"])))
    return out


# ====================================================================== sides
#: the engine's settings of the sides that set one (``EngineConfig`` fields besides ``max_batch``)
ENGINE_SETTINGS: dict[str, dict[str, Any]] = {
    "static-exact": dict(decode_steps="exact"),
    "static-compiled": dict(compile_steps="inductor"),
    "static-plain": dict(pack=False),
}


def make_side(name: str, model, tok, max_batch: int):
    """The generator of one side."""
    from searchgym.llm.rollout_engine import EngineConfig
    from searchgym.llm.transformers_backend import TransformersGenerator

    if name == "hf":
        return TransformersGenerator(model, tok, engine="hf", max_batch_size=max_batch)
    if name == "static":
        return TransformersGenerator(model, tok, engine="static", max_batch_size=max_batch)
    if name in ENGINE_SETTINGS:
        cfg = EngineConfig(max_batch=max_batch, **ENGINE_SETTINGS[name])
        return TransformersGenerator(model, tok, engine="static", engine_config=cfg, max_batch_size=max_batch)
    if name == "static-bf16":
        return TransformersGenerator(model, tok, engine="static", rollout_dtype="bfloat16", max_batch_size=max_batch)
    raise SystemExit(f"unknown side {name!r}; use {', '.join(SIDES)} (CPU) or {', '.join(CUDA_SIDES)} (CUDA)")


def timed_call(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``(result, seconds by the benchmark's clock, wall s)``."""
    c0, t0 = CLOCK(), time.perf_counter()
    out = fn()
    return out, CLOCK() - c0, time.perf_counter() - t0


def side_dtype(gen) -> str:
    """The dtype a side's decode steps stream: the engine's rollout dtype, else the model's."""
    engine = getattr(gen, "engine", None)
    dtype = engine.runner.dtype if engine is not None else next(gen.model.parameters()).dtype
    return str(dtype).replace("torch.", "")


def run_batches(
    gens: dict, contexts: list, size: dict, fig: dict, floors: dict, done: Callable[[list], None] = lambda rows: None
) -> list[dict]:
    """Every side at every batch size: two calls per repeat (1 token: the prefill; the full call), round-robin;
    ``done(rows so far)`` after each batch size (the caller writes them: a run cut off keeps what finished)."""
    from searchgym.agents.llm_agent import STOP_STRINGS
    from searchgym.core.llm import GenerationConfig

    rows = []
    cfg = GenerationConfig(max_new_tokens=size["new_tokens"], temperature=0.0, stop=STOP_STRINGS, seed=0)
    for b in size["batches"]:
        prompts = contexts[:b]
        first: dict[str, float] = {}
        for name, gen in gens.items():  # warm-up: weight conversion / packing, allocator
            gen.clear_prefix_cache()
            if CLOCK.device == "cuda":  # the whole call: transformers' compile and the engine's captures at its shapes
                _, first[name], _ = timed_call(lambda: gen.generate_with_stats(prompts, cfg))
            else:
                gen.generate_with_stats(prompts[:1], cfg.with_(max_new_tokens=2))
        runs: dict[str, dict[str, list]] = {n: {"pre": [], "full": [], "wall": []} for n in gens}
        results: dict[str, Any] = {}
        stats: dict[str, dict] = {}
        for _ in range(size["repeats"]):
            for name, gen in gens.items():
                gen.clear_prefix_cache()
                _, pre, _ = timed_call(lambda: gen.generate_with_stats(prompts, cfg.with_(max_new_tokens=1)))
                gen.clear_prefix_cache()
                before = dict(gen.engine_stats)
                res, cpu, wall = timed_call(lambda: gen.generate_with_stats(prompts, cfg))
                gen.clear_prefix_cache()  # its memory back before the next side runs
                after = gen.engine_stats
                stats[name] = {k: after[k] - before.get(k, 0) for k in after}
                runs[name]["pre"].append(pre)
                runs[name]["full"].append(cpu)
                runs[name]["wall"].append(wall)
                results[name] = res
        ref = results["hf"]
        prompt_mean = statistics.mean(len(p) for p in prompts)
        for name in gens:
            res = results[name]
            full = statistics.median(runs[name]["full"])
            pre = min(statistics.median(runs[name]["pre"]), full)
            lengths = [len(t) for t in res.token_ids]
            if name == "hf":  # lock-step: every row is fed until the longest stops
                steps, row_steps = max(lengths) - 1, b * (max(lengths) - 1)
            else:
                steps, row_steps = stats[name]["decode_steps"], stats[name]["row_steps"]
            decode_s = max(full - pre, 1e-9)
            ms_step = 1e3 * decode_s / steps if steps else 0.0
            dtype = side_dtype(gens[name])
            mean_rows = row_steps / steps if steps else 0.0
            context = prompt_mean + statistics.mean(lengths) / 2
            floor_ms = step_floor_ms(fig, floors, dtype, mean_rows or b, context)
            row = {
                "batch": b,
                "side": name,
                "new_tokens": res.new_tokens,
                "prompt_tokens_mean": round(prompt_mean, 1),
                f"{CLOCK.key}_s": round(full, 3),
                f"{CLOCK.key}_each": [round(x, 3) for x in runs[name]["full"]],
                "wall_each": [round(x, 3) for x in runs[name]["wall"]],
                f"prefill_{CLOCK.key}_s": round(pre, 3),
                "prefill_share": round(pre / full, 3),
                "tokens_per_s": round(res.new_tokens / full, 1),
                "decode_tokens_per_s": round((res.new_tokens - b) / decode_s, 1) if steps else None,
                "decode_steps": steps,
                "row_steps": row_steps,
                "ms_per_decode_step": round(ms_step, 2),
                "floor_ms_per_step": round(floor_ms, 2),
                "fraction_of_floor": round(floor_ms / ms_step, 3) if ms_step else None,
                "same_texts_as_hf": sum(a == r for a, r in zip(res.texts, ref.texts)),
                "rows": b,
                "vs_hf": round(statistics.median(runs["hf"]["full"]) / full, 2),
            }
            if name in first:  # on CUDA: the untimed warm-up call, compiling or capturing included
                row[f"first_call_{CLOCK.key}_s"] = round(first[name], 3)
            rows.append(row)
            print(
                f"| {b} | {name} | {row['tokens_per_s']:,.1f} | {row['ms_per_decode_step']:.1f} | "
                f"{row['prefill_share']:.0%} | {row['fraction_of_floor'] or 0:.0%} | {mean_rows:.1f} | "
                f"{row['vs_hf']:.2f}x | {row['same_texts_as_hf']}/{b} |",
                flush=True,
            )
        done(rows)
    return rows


def play(gen, world, ep: dict, temperature: float) -> dict:
    """The learning benchmark's RL rollout batch played end to end with ``gen``: times, tokens, completions."""
    import gymnasium as gym

    import searchgym  # noqa: F401  (registration)
    from searchgym.agents.llm_agent import AgentConfig, LLMAgent
    from searchgym.tasks.sources import ListTaskSource
    from searchgym.training.demonstrations import cold_start_env_kwargs

    kw = cold_start_env_kwargs(world)
    if ep["max_turns"]:
        kw["max_turns"] = ep["max_turns"]
    tasks = ListTaskSource(solver_tasks(world, ep["questions"]))
    envs = [gym.make("KGSolverGroup-v0", tasks=tasks, group_size=ep["group"], **kw) for _ in range(ep["questions"])]
    agent = LLMAgent(gen, config=AgentConfig(max_new_tokens=ep["new_tokens"], temperature=temperature, seed=0))
    gen.clear_prefix_cache()
    before = dict(gen.engine_stats)
    c0, t0 = CLOCK(), time.perf_counter()
    live = []
    for j, env in enumerate(envs):
        obs, info = env.reset(seed=j, options={"index": j})
        live.append({"env": env, "obs": obs, "info": info, "done": False})
    gen_cpu, calls = 0.0, 0
    while True:
        pend = [x for x in live if not x["done"]]
        if not pend:
            break
        g0 = CLOCK()
        actions = agent.act_batch([(x["obs"], x["info"]) for x in pend])
        gen_cpu += CLOCK() - g0
        calls += 1
        for x, action in zip(pend, actions):
            obs, _, term, trunc, info = x["env"].step(action)
            x.update(obs=obs, info=info, done=bool(term or trunc))
    cpu, wall = CLOCK() - c0, time.perf_counter() - t0
    gen.clear_prefix_cache()
    completions = [t.completion for x in live for t in x["info"].get("trajectories", [])]
    engine = {k: round(v - before.get(k, 0), 3) for k, v in gen.engine_stats.items()}
    return {
        f"{CLOCK.key}_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        f"generate_{CLOCK.key}_s": round(gen_cpu, 2),
        "generate_calls": calls,
        "new_tokens": agent.stats.new_tokens,
        "rollouts": len(completions),
        "engine": engine,
        "completions": completions,
    }


def run_episodes(gens: dict, world, ep: dict) -> list[dict]:
    """Every side plays the same games at each temperature."""
    rows = []
    for temperature in ep["temperatures"]:
        got = {name: play(gen, world, ep, temperature) for name, gen in gens.items()}
        texts = {name: r.pop("completions") for name, r in got.items()}
        ref = got["hf"]
        for name, r in got.items():
            same = sum(a == b for a, b in zip(texts[name], texts["hf"]))
            row = {
                "temperature": temperature,
                "side": name,
                **r,
                "vs_hf": round(ref[f"{CLOCK.key}_s"] / r[f"{CLOCK.key}_s"], 2) if r[f"{CLOCK.key}_s"] else None,
                "same_completions_as_hf": same if temperature == 0 else None,
            }
            rows.append(row)
            print(
                f"| {temperature:g} | {name} | {r[f'{CLOCK.key}_s']:.1f} | {r[f'generate_{CLOCK.key}_s']:.1f} | "
                f"{r['new_tokens']} | "
                f"{row['vs_hf']:.2f}x | {same if temperature == 0 else '-'}/{r['rollouts']} |",
                flush=True,
            )
    return rows


def result_clock(args) -> str:
    """How the run's seconds were taken, for the result's note."""
    if args.device == "cuda":
        return "wall time with the GPU synchronised (fields gpu_s ...)"
    return "process CPU time (one torch thread unless --threads)"


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the model runs (default cpu)")
    ap.add_argument(
        "--sides",
        default=None,
        help=f"comma list of {', '.join(SIDES)} on a CPU (the default: all), {', '.join(CUDA_SIDES)} on CUDA "
        "(hf always runs)",
    )
    ap.add_argument("--model", choices=("cold-start", "smollm2"), default="cold-start")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: a shared machine)")
    ap.add_argument("--batches", type=int, nargs="+", help="batch sizes (default: the size's)")
    ap.add_argument("--new-tokens", type=int, help="new tokens per row in the batches (default: the size's)")
    ap.add_argument("--repeats", type=int, help="timed calls per side and batch (default: the size's)")
    ap.add_argument("--no-episodes", action="store_true", help="skip the end-to-end episodes")
    ap.add_argument(
        "--out", default=None, help="result JSON (default benchmarks/results/rollout_{cpu,gpu}[_smoke].json)"
    )
    args = ap.parse_args(argv)
    if args.threads < 1:
        ap.error(f"--threads must be >= 1, got {args.threads}")

    global CLOCK
    import torch

    device = device_info(args.device)  # on cuda: a one-line exit when torch sees no GPU
    CLOCK = Clock(args.device)

    from searchgym.world.synthetic import default_world

    torch.set_num_threads(args.threads)
    size = dict(SIZES[args.size])
    for key in ("batches", "new_tokens", "repeats"):
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    known = CUDA_SIDES if args.device == "cuda" else SIDES
    asked = [x for x in (args.sides or ",".join(known)).split(",") if x and x != "hf"]
    wrong = [x for x in asked if x not in known]
    if wrong:
        ap.error(f"--sides {','.join(wrong)}: on {args.device} use {', '.join(known)}")
    sides = ["hf"] + asked
    where = device.get("name") if args.device == "cuda" else f"{args.threads} thread(s)"
    print(f"Machine: {machine_info()}; torch {torch.__version__}, {where}; size {args.size}\n")
    floors = {
        "gemm_float32_gflop_s": round(gemm_probe("float32", size["probe_s"]), 1),
        "gemm_bfloat16_gflop_s": round(gemm_probe("bfloat16", size["probe_s"]), 1),
        "bandwidth_gb_s": round(bandwidth_probe(size["probe_mb"], size["probe_s"]), 2),
    }
    model, tok, label = load_model(args.model)
    vocab, hidden = model.get_output_embeddings().weight.shape
    floors["lm_head_gemv_float32_gb_s"] = round(gemv_probe(vocab, hidden, "float32", size["probe_s"]), 2)
    floors["lm_head_gemv_bfloat16_gb_s"] = round(gemv_probe(vocab, hidden, "bfloat16", size["probe_s"]), 2)
    fig = model_figures(model)
    print("Floors:", floors)
    print(
        f"Model: {label}; {fig['weight_bytes_per_step']['float32'] / 1e6:.0f} MB of fp32 weights per decode step, "
        f"{fig['flops_per_token'] / 1e6:.0f} MFLOP per token + attention, "
        f"{fig['kv_bytes_per_token']['float32'] / 1e3:.1f} kB fp32 KV per token of context\n"
    )
    world = default_world()
    gens = {name: make_side(name, model, tok, max(size["batches"])) for name in sides}
    contexts = first_turn_contexts(gens["hf"], world, max(size["batches"]))
    print(
        f"Batches: first-turn Solver prompts, temperature 0, {size['new_tokens']} new tokens, agent stop strings "
        f"({'wall time, device synchronised' if args.device == 'cuda' else 'process CPU time'})\n"
    )
    print("| batch | side | tokens/s | ms/decode step | prefill share | of floor | rows/step | vs hf | same texts |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    result = {
        "benchmark": "bench_rollout",
        "size": args.size,
        "machine": machine_info(),
        "device": device,
        "clock": "wall seconds, device synchronised" if args.device == "cuda" else "process CPU seconds",
        "torch": torch.__version__,
        "threads": args.threads,
        "model": label,
        "floors": floors,
        "model_figures": fig,
        "settings": {k: v for k, v in size.items()},
        "batches": [],
        "episodes": [],
        "complete": False,
        "note": f"{result_clock(args)}; prefill = a 1-token call on the same prompts; "
        "ms/decode step = (full - prefill) / decode steps; floor = max(streamed bytes / bandwidth, FLOPs / GEMM "
        "rate) per step at the mean rows per step and mean context; prefix stores cleared before every timed call",
    }
    name = "rollout_cpu_smoke.json" if args.size == "smoke" else "rollout_cpu.json"
    if args.device == "cuda":
        name = "rollout_gpu_smoke.json" if args.size == "smoke" else "rollout_gpu.json"

    def save(**parts) -> str:  # after every stage: a run cut off by a deadline keeps what it measured
        result.update(parts)
        return write_result(result, args.out, name)

    batch_rows = run_batches(gens, contexts, size, fig, floors, lambda rows: save(batches=rows))
    episode_rows: list[dict] = []
    if not args.no_episodes:
        ep = size["episodes"]
        print(
            f"\nEpisodes: {ep['questions']} questions x {ep['group']} rollouts (KGSolverGroup-v0, cold-start env), "
            f"{ep['new_tokens']} tokens a turn\n"
        )
        unit = CLOCK.key.upper()
        print(f"| temperature | side | {unit} s | generate {unit} s | new tokens | vs hf | same completions |")
        print("|---:|---|---:|---:|---:|---:|---|")
        episode_rows = run_episodes(gens, world, ep)
    path = save(batches=batch_rows, episodes=episode_rows, complete=True)
    print(f"\nwrote {path}")
    return result


if __name__ == "__main__":
    main()
