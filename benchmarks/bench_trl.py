"""searchgym's share of a TRL ``GRPOTrainer`` step, for both TRL entry points (target < 2 %).

The same measure as our own trainer's ``perf/env_frac`` (benchmarks/bench_trainer.py, docs/trainer.md):
the wall time spent in searchgym during a step — env resets and steps (parsing, retrieval, KG look-ups,
corrections), judging, reward wrappers, and the adapter's token bookkeeping (prompt rendering, chat
template tool-message tokens, stop-string cuts) — over the step's wall time. searchgym's time is what
``searchgym.integrations.trl.STATS`` accumulates; the step time comes from TRL callbacks. Median and
min-max over the timed steps after ``--warmup`` untimed ones.

    .venv/bin/python benchmarks/bench_trl.py                                   # rollout_func, cold-start SmolLM2, tags
    .venv/bin/python benchmarks/bench_trl.py --entry environment_factory --model tiny-qwen --policy scripted
    .venv/bin/python benchmarks/bench_trl.py --model tiny --steps 5            # seconds, random 4-layer Llama

Models: ``cold-start`` (bundled SmolLM2-135M with the shipped cold-start adapter merged: it follows the
tag protocol, so the env does real searches; the default), ``smollm2`` (bundled, no adapter), ``tiny``
(random 4-layer Llama, ChatML template), ``tiny-qwen`` (the same with Qwen2.5's chat template, for the
function-calling entry point), or a local HF folder. ``--policy scripted`` (tiny models only) replaces
sampling by scripted turns that search and answer: generation then costs almost nothing, so the share
is an upper bound. Writes benchmarks/results/trl_<entry>_<model>[_scripted].json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

from machine import machine_line, write_result


def load(model: str):
    """``(model, tokenizer)`` for a ``--model`` name."""
    if model in ("tiny", "tiny-qwen"):
        from searchgym.llm.tiny_models import tiny_policy

        return tiny_policy(model)
    if model == "cold-start":
        from searchgym.training.cold_start import load_cold_start

        return load_cold_start()
    from searchgym.llm.bundled_model import load_policy, resolve_model_path

    return load_policy(resolve_model_path(model))


def scripted(tok, rows, protocol: str):
    """A tiny model whose turns search the task's first path entity, then answer (searchgym.llm.tiny_models)."""
    from searchgym.integrations.trl import task_of_row
    from searchgym.llm.tiny_models import question_of, scripted_model

    tasks = {task_of_row(r).task.question: task_of_row(r).task for r in rows}
    counter = itertools.count()

    def script(context: str) -> str:
        task = tasks[question_of(context)]
        sg = task.subgraph
        first = f"{sg.nodes[sg.path[0]].title} {sg.relations[0]}"
        answer = task.answer if next(counter) % 2 == 0 else "nobody"
        if protocol == "tags":
            done = context.rsplit("<|im_start|>assistant\n", 1)[-1].count("<information>")
            return f"<think>{first}</think><search>{first}</search>" if not done else f"<answer>{answer}</answer>"
        n = context.count("<tool_response>")
        if n == 0:
            call = {"name": "search", "arguments": {"query": first}}
        elif n == 1:
            call = {"name": "answer", "arguments": {"answer": answer}}
        else:
            return "Done."
        return f"<think>{first}</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return scripted_model(tok, script, eos=protocol != "tags")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", choices=("rollout_func", "environment_factory"), default="rollout_func")
    ap.add_argument("--model", default="cold-start", help="cold-start | smollm2 | tiny | tiny-qwen | a local HF dir")
    ap.add_argument("--policy", choices=("model", "scripted"), default="model")
    ap.add_argument("--protocol", choices=("tags", "function_calling"), default=None)
    ap.add_argument("--rewards", default="wcr")
    ap.add_argument("--steps", type=int, default=3, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=2, help="questions per step")
    ap.add_argument("--group", type=int, default=4, help="generations per question (G)")
    ap.add_argument("--max-completion-length", type=int, default=256)
    ap.add_argument("--max-turn-tokens", type=int, default=128, help="rollout_func: the most tokens one turn samples")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--doc-max-chars", type=int, default=300, help="each retrieved document is cut to this (env)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    protocol = args.protocol or ("function_calling" if args.entry == "environment_factory" else "tags")
    if args.policy == "scripted" and args.model not in ("tiny", "tiny-qwen"):
        ap.error("--policy scripted works with the tiny models only")

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import logging

    import torch
    from transformers import TrainerCallback

    from searchgym.integrations.trl import STATS, grpo_trainer, local_config, train_dataset

    logging.disable(logging.WARNING)
    torch.set_num_threads(args.threads)
    env_kwargs = {"max_turns": args.max_turns, "doc_max_chars": args.doc_max_chars}
    n_rows = args.batch * (args.steps + args.warmup)
    ds = train_dataset(n=n_rows, protocol=protocol, env_kwargs=env_kwargs)
    model, tok = load(args.model)
    if args.policy == "scripted":
        model = scripted(tok, ds, protocol)
    marks: list[dict] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t0, self.s0 = time.perf_counter(), STATS.snapshot()["seconds"]

        def on_step_end(self, a, state, control, **kw):
            marks.append(
                {"step_s": time.perf_counter() - self.t0, "searchgym_s": STATS.snapshot()["seconds"] - self.s0}
            )

    cfg = local_config(
        per_device_train_batch_size=args.batch * args.group,
        num_generations=args.group,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps + args.warmup,
        learning_rate=1e-6,
        use_cpu=True,
    )
    STATS.reset()
    trainer = grpo_trainer(
        model,
        processing_class=tok,
        args=cfg,
        train_dataset=ds,
        entry=args.entry,
        rewards=args.rewards,
        protocol=protocol if args.entry == "rollout_func" else None,
        env_kwargs=env_kwargs,
        max_turn_tokens=args.max_turn_tokens if args.entry == "rollout_func" else None,
        callbacks=[Timer()],
    )
    load_1m = os.getloadavg()[0]
    trainer.train()
    load_after = os.getloadavg()[0]
    timed = marks[args.warmup :]
    shares = [m["searchgym_s"] / m["step_s"] for m in timed]
    summary = lambda xs: {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}  # noqa: E731
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    result = {
        "machine": machine_line(),
        "load_average_1m": [load_1m, load_after],
        "entry": args.entry,
        "model": args.model,
        "policy": args.policy,
        "protocol": protocol,
        "rewards": args.rewards,
        "batch": args.batch,
        "group": args.group,
        "max_completion_length": args.max_completion_length,
        "max_turn_tokens": args.max_turn_tokens if args.entry == "rollout_func" else None,
        "max_turns": args.max_turns,
        "doc_max_chars": args.doc_max_chars,
        "threads": args.threads,
        "step_s": summary([m["step_s"] for m in timed]),
        "searchgym_s": summary([m["searchgym_s"] for m in timed]),
        "share": summary(shares),
        "completion_mean_length": lengths[args.warmup :],
        "counts": {k: v for k, v in STATS.snapshot().items() if k != "seconds"},
    }
    suffix = "_scripted" if args.policy == "scripted" else ""
    path = write_result(result, args.out, f"trl_{args.entry}_{Path(args.model).name}{suffix}.json")
    fmt = lambda d, p=3: f"{d['median']:.{p}f} ({d['min']:.{p}f}-{d['max']:.{p}f})"  # noqa: E731
    print(
        f"{args.entry}, {args.model} ({args.policy}), {protocol}, rewards {args.rewards}; "
        f"B={args.batch} G={args.group} max_completion_length={args.max_completion_length}; "
        f"{machine_line()}, load {load_1m:.1f}->{load_after:.1f}"
    )
    print("| step (s) | searchgym (s) | share | counts |")
    print("|---|---|---|---|")
    print(
        f"| {fmt(result['step_s'], 2)} | {fmt(result['searchgym_s'], 4)} | "
        f"{100 * result['share']['median']:.2f} % ({100 * min(shares):.2f}-{100 * max(shares):.2f}) | "
        f"{result['counts']} |"
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
