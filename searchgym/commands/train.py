"""``searchgym train`` (self-play GRPO/REINFORCE training) and ``searchgym plot`` (training curves).

Examples::

    searchgym train --list-recipes                              # the papers' recipes side by side
    searchgym train --steps 10                                  # kg-wcr at the size of this machine
    searchgym train --recipe ssp --size cpu --set batch_size=4  # vanilla SSP, CPU scale, one change
    searchgym train --recipe kg-wcr --size paper --dump-config cfg.yaml   # the paper's settings, to edit
    searchgym train --config cfg.yaml --model smollm2 --set max_new_tokens=128
    searchgym plot runs/ssp/metrics.jsonl --out curves.png

Settings are layered, lowest first: the recipe (``--recipe``, default kg-wcr), its size (``--size``,
default ``auto``: ``cpu`` without CUDA, ``paper`` with it), the ``--config`` file's keys, the dedicated
flags, then ``--set``.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap

from .config_args import add_config_arguments, dump_config
from .number_checks import refuse_bad_numbers

logger = logging.getLogger(__name__)


def register(subparsers) -> None:
    """Add the ``train`` and ``plot`` sub-commands."""
    from ..core.config_fields import fields_help_text
    from ..envs.registration import env_ids
    from ..llm.registry import backend_help
    from ..training.selfplay_config import TrainConfig

    p = subparsers.add_parser(
        "train",
        help="train the policy by search self-play (GRPO solver + REINFORCE proposer)",
        description=textwrap.fill(
            "Train one shared policy on KGSelfPlay-v0 (or another searchgym env). "
            "Settings, lowest first: --recipe at --size, the --config file, --model/--output-dir/--steps, "
            "then --set key=value.",
            width=100,
        ),
        epilog=textwrap.fill(
            f"envs (--set env_id=ID): {', '.join(env_ids(text=True))}. "
            f"Rollout backends (--set rollout_backend=NAME): {backend_help(trains=True)}.",
            width=100,
        )
        + "\n\n"
        + fields_help_text(
            TrainConfig,
            "config fields (--set KEY=VALUE, or keys of the --config file; the defaults shown are TrainConfig's, "
            "a --recipe changes many of them: --dump-config shows the resolved values)",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--recipe",
        help="a paper's recipe: ssp, kg-ssp, kg-wcr (default), gdcr-sapo, eve, dynasearcher, or 'none' for the "
        "plain config defaults (--list-recipes shows them side by side)",
    )
    p.add_argument(
        "--size",
        help="the recipe's scale: auto (default: cpu without CUDA, paper with it), cpu (minutes a step on 2 cores, "
        "from the shipped cold start), gpu (a small model on one GPU) or paper (the paper's own)",
    )
    p.add_argument("--list-recipes", action="store_true", help="print the recipes and sizes, then exit")
    p.add_argument("--config", help="YAML config file; its keys override the recipe's (its own `recipe:` names one)")
    p.add_argument("--model", help="'smollm2' (bundled), a local HF model folder, or a cached hub id")
    p.add_argument(
        "--init", help="start RL from this `searchgym sft` output (or adapter/checkpoint) of --model's family"
    )
    p.add_argument("--output-dir", help="run directory (metrics, checkpoints)")
    p.add_argument("--steps", type=int, help="total training steps")
    p.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (sets threads; default: the recipe's, 1 at size cpu, else torch's)",
    )
    add_config_arguments(p)
    p.set_defaults(func=_train, config_class=TrainConfig)  # config_class: --set names for a mistyped flag's hint

    q = subparsers.add_parser("plot", help="draw training curves from a metrics.jsonl as PNG")
    q.add_argument("metrics", help="metrics JSONL written by `searchgym train`")
    q.add_argument("--out", default="curves.png", help="PNG path (default curves.png)")
    q.add_argument("--keys", help="comma-separated metric names (default: rewards, validity, KL, entropy, ...)")
    q.set_defaults(func=_plot)


def resolve_config(args: argparse.Namespace):
    """The recipe at its size, then the --config file's keys, then the dedicated flags, then --set."""
    from ..training.recipes import DEFAULT_RECIPE, recipe_values
    from ..training.selfplay_config import TrainConfig

    file_values = TrainConfig.read_mapping(args.config) if args.config else {}
    recipe = getattr(args, "recipe", None) or file_values.get("recipe", DEFAULT_RECIPE)
    size = getattr(args, "size", None) or file_values.get("recipe_size") or "auto"
    values: dict = {}
    if recipe not in (None, "none"):
        values = recipe_values(recipe, size)
        file_env = file_values.get("env_kwargs")
        if isinstance(file_env, dict):  # a file's env settings add to the recipe's
            file_values = {**file_values, "env_kwargs": {**values["env_kwargs"], **file_env}}
    else:
        file_values = {**file_values, "recipe": None, "recipe_size": None}
    cfg = TrainConfig.from_dict({**values, **file_values})
    items = []
    if args.model:
        items.append(f"model={args.model}")
    if args.output_dir:
        items.append(f"output_dir={args.output_dir}")
    if getattr(args, "init", None):
        items.append(f"init={args.init}")
    if args.steps is not None:
        items.append(f"total_steps={args.steps}")
    threads = getattr(args, "threads", None)
    if threads is not None:
        refuse_bad_numbers(args, least={"threads": 1})
        items.append(f"threads={threads}")
    cfg = cfg.with_overrides(items + list(args.set))
    return _drop_foreign_shipped_init(cfg, explicit=bool(getattr(args, "init", None)) or "init" in file_values)


def _drop_foreign_shipped_init(cfg, *, explicit: bool):
    """A size starts the bundled model from its shipped cold start; another ``--model`` starts from its own
    weights instead (unless ``init`` was asked for by name, which the trainer then checks for family)."""
    from ..training.recipes import SHIPPED_INIT

    if cfg.init == SHIPPED_INIT and cfg.model != "smollm2" and not explicit:
        logger.info("model=%s is not the bundled smollm2: it starts from its own weights", cfg.model)
        return cfg.with_overrides(["init=null"])
    return cfg


def _train(args: argparse.Namespace) -> int:
    if getattr(args, "list_recipes", False):
        from ..training.recipes import recipes_table

        print(recipes_table())
        return 0
    cfg = resolve_config(args)
    if dump_config(cfg, args.dump_config, inputs=(args.config,)):
        return 0
    warn_paper_scale_on_cpu(cfg)
    from ..core.artefacts import check_output
    from ..training.selfplay_trainer import SelfPlayTrainer

    check_output(cfg.output_dir, "training run")

    trainer = SelfPlayTrainer(cfg)
    history = trainer.train(resume=not args.no_resume)
    last = history[-1] if history else {}
    keys = ("solver/reward", "proposer/reward", "proposer/valid_rate", "val/accuracy", "perf/step_s")
    print(json.dumps({"step": trainer.step, **{k: last[k] for k in keys if k in last}}))
    print(f"metrics: {cfg.output_dir}/metrics.jsonl  checkpoints: {cfg.output_dir}/checkpoints")
    return 0


def warn_paper_scale_on_cpu(cfg) -> None:
    """Say so when settings sized for a GPU cluster are about to run on a CPU: each step would take hours."""
    from ..training.model_loading import resolve_device

    if resolve_device(cfg.device).type != "cpu":
        return
    games = cfg.batch_size * (1 + cfg.group_size)
    if cfg.batch_size > 16 or cfg.max_new_tokens > 256 or cfg.max_turns > 6:
        logger.warning(
            "running %s settings on a CPU: %d games x (1 + %d) rollouts of up to %d turns x %d tokens a step "
            "(~%d rollouts) will take hours per step; use --size cpu (minutes a step) or lower batch_size, "
            "max_turns and max_new_tokens",
            f"recipe {cfg.recipe} at size {cfg.recipe_size}" if cfg.recipe else "these",
            cfg.batch_size,
            cfg.group_size,
            cfg.max_turns,
            cfg.max_new_tokens,
            games,
        )
    else:
        logger.info(
            "recipe %s, size %s: %d games x (1 + %d) rollouts a step on the CPU",
            cfg.recipe,
            cfg.recipe_size,
            cfg.batch_size,
            cfg.group_size,
        )


def _plot(args: argparse.Namespace) -> int:
    """``searchgym plot``: the curves of a metrics file as a PNG, never written over the metrics file itself or
    another kind of file (checked before reading)."""
    from ..core.artefacts import check_report_output
    from ..training.metrics import plot_metrics, read_metrics

    check_report_output(args.out, "PNG figure", inputs=(args.metrics,))
    keys = [k.strip() for k in args.keys.split(",") if k.strip()] if args.keys else None
    out = plot_metrics(read_metrics(args.metrics), args.out, keys=keys)
    print(f"wrote {out}")
    return 0
