"""``searchgym train`` (self-play GRPO/REINFORCE training) and ``searchgym plot`` (training curves).

Examples::

    searchgym train --dump-config cfg.yaml                      # the paper's defaults, to edit
    searchgym train --config cfg.yaml --model smollm2 --set batch_size=4 --set max_new_tokens=128
    searchgym train --model smollm2 --init runs/sft/final ...   # RL from a cold start
    searchgym plot runs/ssp/metrics.jsonl --out curves.png
"""

from __future__ import annotations

import argparse
import json
import logging

logger = logging.getLogger(__name__)


def register(subparsers) -> None:
    """Add the ``train`` and ``plot`` sub-commands."""
    p = subparsers.add_parser(
        "train",
        help="train the policy by search self-play (GRPO solver + REINFORCE proposer)",
        description="Train one shared policy on KGSelfPlay-v0 (or another searchgym env). "
        "Config: --config YAML, then --model/--output-dir/--steps, then --set key=value.",
    )
    p.add_argument("--config", help="YAML config file (defaults: the paper's settings)")
    p.add_argument("--model", help="'smollm2' (bundled), a local HF model folder, or a cached hub id")
    p.add_argument(
        "--init", help="start RL from this `searchgym sft` output (or adapter/checkpoint) of --model's family"
    )
    p.add_argument("--output-dir", help="run directory (metrics, checkpoints)")
    p.add_argument("--steps", type=int, help="total training steps")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override any config key (repeatable)"
    )
    p.add_argument("--no-resume", action="store_true", help="ignore checkpoints already in the output dir")
    p.add_argument("--dump-config", metavar="PATH", help="write the resolved config as YAML and exit")
    p.set_defaults(func=_train)

    q = subparsers.add_parser("plot", help="draw training curves from a metrics.jsonl as PNG")
    q.add_argument("metrics", help="metrics JSONL written by `searchgym train`")
    q.add_argument("--out", default="curves.png", help="PNG path (default curves.png)")
    q.add_argument("--keys", help="comma-separated metric names (default: rewards, validity, KL, entropy, ...)")
    q.set_defaults(func=_plot)


def resolve_config(args: argparse.Namespace):
    """Config from --config, then the dedicated flags, then --set overrides."""
    from ..agents.config import TrainConfig

    cfg = TrainConfig.load(args.config) if args.config else TrainConfig()
    items = []
    if args.model:
        items.append(f"model={args.model}")
    if args.output_dir:
        items.append(f"output_dir={args.output_dir}")
    if getattr(args, "init", None):
        items.append(f"init={args.init}")
    if args.steps is not None:
        items.append(f"total_steps={args.steps}")
    return cfg.with_overrides(items + list(args.set))


def dump_config(cfg, path: str | None) -> bool:
    """Write ``cfg`` as YAML to ``path`` when ``--dump-config`` asked for it; True if it did."""
    if not path:
        return False
    cfg.save(path)
    print(f"wrote {path}")
    return True


def _train(args: argparse.Namespace) -> int:
    cfg = resolve_config(args)
    if dump_config(cfg, args.dump_config):
        return 0
    from ..agents.trainer import SelfPlayTrainer

    trainer = SelfPlayTrainer(cfg)
    history = trainer.train(resume=not args.no_resume)
    last = history[-1] if history else {}
    keys = ("solver/reward", "proposer/reward", "proposer/valid_rate", "val/accuracy", "perf/step_s")
    print(json.dumps({"step": trainer.step, **{k: last[k] for k in keys if k in last}}))
    print(f"metrics: {cfg.output_dir}/metrics.jsonl  checkpoints: {cfg.output_dir}/checkpoints")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from ..agents.metrics import plot_metrics, read_metrics

    keys = [k.strip() for k in args.keys.split(",") if k.strip()] if args.keys else None
    out = plot_metrics(read_metrics(args.metrics), args.out, keys=keys)
    print(f"wrote {out}")
    return 0
