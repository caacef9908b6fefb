"""``searchgym sft``: supervised fine-tuning (cold start) on demonstrations, trajectories or the model's own rollouts.

Examples::

    searchgym sft --model smollm2 --data demos.jsonl --output-dir runs/sft --lora --set lr=2e-4
    searchgym sft --data export.jsonl --min-reward 1.0 --roles solver --set patience=3
    searchgym sft --source self --model runs/sft/final --rounds 2 --set num_tasks=64
    searchgym sft --source self --env-id KGProposer-v0 --lora --lora-init shipped-cold-start --data demos.jsonl
    searchgym train --model smollm2 --init runs/sft/final ...      # then RL from the cold start
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import textwrap

from .config_args import add_config_arguments, dump_config
from .number_checks import refuse_bad_numbers

logger = logging.getLogger(__name__)

#: the least value of each numeric flag (``--min-reward`` takes any finite reward: it is checked for NaN/inf only)
_LEAST = {"rounds": 1, "epochs": 0, "max_steps": 1, "lr": 0, "batch_size": 1, "threads": 1, "min_reward": -math.inf}

# flag -> config key, for the flags that map one to one
_FLAGS = {
    "model": "model",
    "output_dir": "output_dir",
    "source": "source",
    "rounds": "rounds",
    "min_reward": "min_reward",
    "on_error": "on_error",
    "epochs": "epochs",
    "max_steps": "max_steps",
    "lr": "lr",
    "batch_size": "batch_size",
    "device": "device",
    "dtype": "dtype",
    "chat_template": "chat_template",
    "env_id": "env_id",
    "threads": "threads",
    "lora_init": "lora_init",
}


def register(subparsers) -> None:
    """Add the ``sft`` sub-command."""
    from ..core.config_fields import fields_help_text
    from ..training.sft_config import SFTConfig

    p = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on demonstrations / trajectory JSONL, or rejection sampling (--source self)",
        description=textwrap.fill(
            "Fine-tune a model on agent tokens only (env text masked as in RL). Config: --config YAML, "
            "then the flags, then --set key=value. Resumes from <output-dir>/checkpoints automatically.",
            width=100,
        ),
        epilog=fields_help_text(SFTConfig, "config fields (--set KEY=VALUE, or keys of the --config file)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML config file (see --dump-config)")
    p.add_argument("--model", help="'smollm2' (bundled), a model folder, an adapter folder or a checkpoint")
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="JSONL",
        help="demonstration / trajectory / env-export JSONL (repeatable)",
    )
    p.add_argument("--val-data", action="append", default=[], metavar="JSONL", help="held-out JSONL (default: a split)")
    p.add_argument("--output-dir", help="run directory (final/, metrics.jsonl, checkpoints/)")
    p.add_argument("--source", choices=("data", "self"), help="'self': sample the model, keep rollouts >= threshold")
    p.add_argument("--rounds", type=int, help="rejection-sampling rounds (--source self)")
    p.add_argument("--env-id", help="env to sample for --source self (default KGSolver-v0)")
    p.add_argument("--min-reward", type=float, help="keep only trajectories whose reward is >= this")
    p.add_argument("--roles", help="comma-separated roles to train on (default solver,proposer)")
    p.add_argument("--on-error", choices=("skip", "stop"), help="malformed lines: skip and count (default) or stop")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter (peft) instead of all weights")
    p.add_argument(
        "--save-adapter", action="store_true", help="with --lora: final/ holds the adapter, not a merged model"
    )
    p.add_argument(
        "--lora-init",
        metavar="ADAPTER",
        help="with --lora: continue this adapter folder (or shipped-cold-start) instead of a fresh one; "
        "--model is its base",
    )
    p.add_argument("--epochs", type=float, help="passes over the data (default 1)")
    p.add_argument("--max-steps", type=int, help="optimizer steps (overrides --epochs)")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--batch-size", type=int, help="sequences per optimizer step")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", help="float32, bfloat16 or float16")
    p.add_argument("--threads", type=int, help="torch CPU threads (config threads; 1 on a busy 2-core machine)")
    p.add_argument("--chat-template", help="for a model without one: 'chatml' or a Jinja template file")
    add_config_arguments(p)
    p.set_defaults(func=_sft, config_class=SFTConfig)  # config_class: --set names for a mistyped flag's hint


def resolve_sft_config(args: argparse.Namespace):
    """Config from --config, then the flags, then --set overrides."""
    from ..training.sft_trainer import SFTConfig

    cfg = SFTConfig.load(args.config) if args.config else SFTConfig()
    items = [
        f"{key}={json.dumps(getattr(args, flag))}" for flag, key in _FLAGS.items() if getattr(args, flag) is not None
    ]
    for flag in ("data", "val_data"):
        if getattr(args, flag):
            items.append(f"{flag}={json.dumps(getattr(args, flag))}")
    if args.roles:
        items.append(f"roles={json.dumps([r.strip() for r in args.roles.split(',') if r.strip()])}")
    if args.lora:
        items.append("lora=true")
    if args.save_adapter:
        items.append("save_adapter=true")
    return cfg.with_overrides(items + list(args.set))


def _sft(args: argparse.Namespace) -> int:
    refuse_bad_numbers(args, least=_LEAST)
    cfg = resolve_sft_config(args)
    cfg.refuse_unread_sampling_settings()
    if dump_config(cfg, args.dump_config, inputs=(args.config,)):
        return 0
    from ..core.artefacts import check_output
    from ..training.sft import run_sft

    check_output(cfg.output_dir, "training run")

    res = run_sft(cfg, resume=not args.no_resume)
    keys = (
        "steps",
        "best_step",
        "stopped_early",
        "train_loss",
        "val_loss_initial",
        "val_loss_best",
        "entropy_initial",
        "entropy_final",
        "train_examples",
        "val_examples",
        "truncated",
        "tokens_per_s",
    )
    print(json.dumps({k: getattr(res, k) for k in keys}))
    data = res.data or {}
    if data.get("malformed") or data.get("filtered"):
        print(
            f"data: {data.get('kept')} kept, {data.get('malformed')} malformed line(s) skipped, "
            f"filtered {data.get('filtered')}; first errors: {data.get('errors', [])[:3]}"
        )
    print(f"final model: {res.final_dir}  metrics: {res.output_dir}/metrics.jsonl")
    return 0
