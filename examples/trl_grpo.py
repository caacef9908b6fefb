"""GRPO on searchgym with TRL's ``GRPOTrainer`` — either of TRL's multi-turn entry points.

Runs as is on a CPU (the bundled SmolLM2-135M with its shipped cold-start adapter, which follows the
tag protocol: two small steps through the ``rollout_func`` entry point — one question × 2 generations,
256 tokens per rollout, at most 128 per turn, one torch thread (``--threads``) — a few minutes on 2 cores):

    .venv/bin/python examples/trl_grpo.py
    .venv/bin/python examples/trl_grpo.py --model tiny --steps 1           # random tiny Llama, seconds of CPU
    .venv/bin/python examples/trl_grpo.py --selfplay                        # Proposer + Solvers in one step
    .venv/bin/python examples/trl_grpo.py --entry environment_factory --model tiny-qwen   # function calling

On a GPU with a function-calling model (any local folder or cached hub id whose chat template TRL
recognises: Qwen2.5 / Qwen3, Llama 3.1+ ...), with vLLM generating:

    .venv/bin/python examples/trl_grpo.py --entry environment_factory --model Qwen/Qwen3-0.6B \\
        --bf16 --use-vllm --vllm-mode colocate --steps 500 --batch 8 --group 8 --max-completion-length 2048
    accelerate launch --num_processes 4 examples/trl_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct \\
        --bf16 --use-vllm --vllm-mode colocate --rewards wcr --steps 1000     # several GPUs

``--rewards`` takes the reward registry's names (``binary``, ``wcr``, ``gdcr``, ``dynasearcher``, stacks
such as ``dynasearcher,wcr``); ``--pool`` a subgraph pool JSONL, ``--flashrag`` a FlashRAG JSONL (default:
the built-in tasks). The SmolLM2 template cannot do function calling (``--entry environment_factory``
with it stops with an error naming the fix); the tag protocol works with any model. docs/trl.md has
the details.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def load(name: str):
    """``(model, tokenizer)``: cold-start (bundled SmolLM2 + shipped adapter), smollm2, tiny, tiny-qwen, a path
    or a cached hub id."""
    if name in ("tiny", "tiny-qwen"):  # random tiny Llamas built in a second (searchgym.llm.tiny_models)
        from searchgym.llm.tiny_models import tiny_policy

        return tiny_policy(name)
    if name == "cold-start":
        from searchgym.training.cold_start import load_cold_start

        return load_cold_start()
    from searchgym.llm.bundled_model import load_policy, resolve_model_path

    return load_policy(resolve_model_path(name))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", choices=("rollout_func", "environment_factory"), default="rollout_func")
    ap.add_argument("--model", default="cold-start", help="cold-start | smollm2 | tiny | tiny-qwen | path | hub id")
    ap.add_argument("--protocol", choices=("tags", "function_calling"), default=None, help="rollout_func only")
    ap.add_argument("--selfplay", action="store_true", help="self-play rows (rollout_func): Proposer and Solvers")
    ap.add_argument("--rewards", default="wcr")
    ap.add_argument("--kg-tool", action="store_true", help="offer the KG look-up (kg_lookup / JSON searches)")
    ap.add_argument("--pool", default=None, help="a subgraph pool JSONL (default: the built-in tasks)")
    ap.add_argument("--flashrag", default=None, help="a FlashRAG JSONL of questions (Solver rows)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="questions per step")
    ap.add_argument("--group", type=int, default=2, help="generations per question (G)")
    ap.add_argument("--max-completion-length", type=int, default=256, help="tokens per rollout (all turns)")
    ap.add_argument(
        "--max-turn-tokens", type=int, default=128, help="rollout_func: the most tokens one turn may sample"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: share a busy machine)")
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--doc-max-chars", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--bf16", action="store_true", help="GPU: bfloat16 training")
    ap.add_argument("--use-vllm", action="store_true", help="GPU: generate with vLLM")
    ap.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate")
    ap.add_argument("--output-dir", default=None)
    args = ap.parse_args()
    if args.threads < 1:
        ap.error(f"--threads must be >= 1, got {args.threads}")

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    from searchgym.errors import SearchGymError
    from searchgym.integrations.trl import STATS, grpo_trainer, local_config, train_dataset

    gpu = torch.cuda.is_available()
    protocol = "function_calling" if args.entry == "environment_factory" else (args.protocol or "tags")
    env_kwargs = {"max_turns": args.max_turns, "doc_max_chars": args.doc_max_chars}
    try:
        dataset = train_dataset(
            n=args.batch * args.steps,
            mode="selfplay" if args.selfplay else "solver",
            protocol=protocol,
            kg_tool=args.kg_tool,
            pool=args.pool,
            flashrag=args.flashrag,
            env_kwargs=env_kwargs,
        )
        model, tokenizer = load(args.model)
        config = local_config(
            args.output_dir,
            per_device_train_batch_size=args.batch * args.group,
            num_generations=args.group,
            max_completion_length=args.max_completion_length,
            max_steps=args.steps,
            learning_rate=args.lr,
            bf16=args.bf16,
            use_vllm=args.use_vllm,
            vllm_mode=args.vllm_mode,
            gradient_checkpointing=gpu,
            disable_tqdm=False,
        )
        trainer = grpo_trainer(
            model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            entry=args.entry,
            rewards=args.rewards,
            protocol=protocol if args.entry == "rollout_func" else None,
            kg_tool=args.kg_tool,
            env_kwargs=env_kwargs,
            max_turn_tokens=args.max_turn_tokens if args.entry == "rollout_func" else None,
        )
    except SearchGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            length = entry["completions/mean_length"]
            print(f"step {entry['step']}: reward {entry['reward']:.3f}, completion length {length:.0f}")
    print(f"searchgym counters: {STATS.snapshot()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
