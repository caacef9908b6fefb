"""The papers' training recipes by name, each in sizes: ``searchgym train --recipe kg-wcr --size cpu``.

A :class:`Recipe` is one set of :class:`~searchgym.training.selfplay_config.TrainConfig` values — the Proposer's
mode, the reward stack, both roles' advantage estimators and loss aggregation, the replay strategy,
clip and KL — each with the line of its paper it comes from (:attr:`Recipe.sources`). A size scales a
recipe to a machine without changing its method: ``paper`` keeps the paper's own scale (batch 256,
10 turns, lr 1e-6, ...), ``gpu`` fits a small model's run on one GPU, ``cpu`` finishes a step of the
bundled SmolLM2-135M in minutes on 2 cores (starting from the shipped cold start).

Precedence, lowest first: the dataclass defaults, the recipe, the size, what the recipe changes at that size
(:attr:`Recipe.at_size`), a ``--config`` file's keys, the CLI's flags and ``--set``. Every field stays
overridable; :func:`recipe_config` builds one, and :func:`recipes_table` prints them side by side (``searchgym
train --list-recipes``, docs/trainer.md).

The default recipe is ``kg-wcr``: it is the method this package exists for (KG-grounded Proposer +
waypoint coverage, SPEC "the core of this project"), and WCR is the reward that leaves the fewest
Solver groups without signal on the CPU runs measured so far (32 % vs 58 % with the binary reward).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..errors import InvalidArgumentError

__all__ = [
    "Recipe",
    "RECIPES",
    "SIZES",
    "DEFAULT_RECIPE",
    "AUTO_SIZE",
    "SHIPPED_INIT",
    "register_recipe",
    "get_recipe",
    "resolve_size",
    "recipe_values",
    "recipe_config",
    "recipes_table",
]

DEFAULT_RECIPE = "kg-wcr"
AUTO_SIZE = "auto"
#: ``init`` value that names the cold-start adapter shipped in ``searchgym/assets/``
SHIPPED_INIT = "shipped-cold-start"


@dataclass(frozen=True)
class Recipe:
    """One paper's training method as config values, with where each comes from.

    ``settings``: :class:`TrainConfig` fields; ``env_kwargs``: settings of the env (merged into
    ``TrainConfig.env_kwargs``); ``sources``: field -> the paper line behind its value;
    ``notes``: where the recipe has to decide what its paper leaves open (docs/fidelity.md lists them).
    """

    name: str
    paper: str
    summary: str
    settings: Mapping[str, Any]
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: size -> settings this recipe changes at that size (applied over the size): where a method its paper runs
    #: at scale degenerates at a small one; each is one of ``notes`` and a row of docs/fidelity.md
    at_size: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


# The optimisation both self-play papers share (SSP Table 4; kg-paths-wcr §4 "matches standard SSP in ...
# rollout budget and optimization recipe").
_SSP_SCALE: dict[str, Any] = dict(
    batch_size=256,
    mini_batch_size=128,
    group_size=5,
    max_turns=10,
    max_prompt_tokens=4096,
    max_response_tokens=8192,
    lr=1e-6,
    warmup_steps=5,
    kl_coef=0.01,
    clip_low=0.2,
    clip_high=0.28,
    temperature=1.0,
    val_temperature=0.0,
    epochs=1,
    replay_reset_steps=10,
)
_SSP_SOURCES = {
    "batch_size": "SSP Table 4: global batch size 256",
    "mini_batch_size": "SSP Table 4: mini-batch size 128",
    "group_size": "SSP Table 4: solver samples n = 5",
    "max_turns": "SSP §4.1 / kg-paths-wcr: at most 10 interaction rounds",
    "lr": "SSP Table 4: learning rate 1e-6",
    "warmup_steps": "SSP Table 4: 5 warm-up steps",
    "kl_coef": "SSP Table 4: KL loss coefficient 0.01",
    "clip_high": "verl's DAPO-style clip-higher (SSP's script: 0.285)",
    "replay_reset_steps": "SSP Table 4: replay buffer, periodic reset (every 10 steps, §4.4)",
    "temperature": "SSP Table 4: rollout temperature 1.0, validation 0.0",
}
_KG_PROPOSER = dict(proposer_baseline="verified", proposer_loss_aggregation="token_sum")
_KG_PROPOSER_SOURCES = {
    "proposer_baseline": "kg-paths-wcr Eq. 9: REINFORCE on (R_p - b), b unspecified: the verified questions' mean",
    "proposer_loss_aggregation": "kg-paths-wcr Eq. 9: (R_p - b) * sum_t log pi",
    "env_kwargs.proposer_mode": "kg-paths-wcr Eq. 4: the Proposer sees the subgraph (target path + distractors)",
    "env_kwargs.order": "kg-paths-wcr §4: subgraphs ordered by descending node count",
}
#: at the ``cpu`` size a step has a few Proposer questions (2 games; 8 in bench_selfplay.py's runs), 0-3 of them
#: verified, so the verified questions' mean leaves a verified question advantage 0 in most steps (measured at 4 a
#: step: 0 of 16 steps updated the Proposer in either KG arm of benchmarks/bench_selfplay.py). b = 0 there, SSP's
#: Eq. 5 (whose optimisation kg-paths-wcr says it matches): a verified question pushes by R_p = 1 - acc, an invalid
#: one not at all. The mean over every question (``all``), tried next, gives each invalid question -mean(R_p), an
#: implicit penalty like the -0.1 that SSP §4.4 reports collapsing training. Measured (same start and pool): held-out
#: KG Proposer valid rate 0.48 -> 0.39 / 0.45 (arms b / c, one seed) with ``all``, 0.45 / 0.45 (two seeds each)
#: with b = 0 -- no difference at this scale, so the paper's estimator (selfplay_runs.md)
_KG_CPU = {"cpu": {"proposer_baseline": "none"}}
_KG_CPU_NOTE = (
    "size cpu: proposer_baseline none (Eq. 9 with b = 0, SSP's Eq. 5): with a few questions a step and 0-3 verified "
    "the verified-only mean left most steps without a Proposer update, and the mean over every question "
    "penalised invalid ones"
)
#: the KG-grounded game of kg-paths-wcr: the Proposer sees the subgraph; the pool in curriculum order
_KG_ENV = {"proposer_mode": "kg", "order": "curriculum"}

RECIPES: dict[str, Recipe] = {}


def register_recipe(recipe: Recipe, *, overwrite: bool = False) -> Recipe:
    """Add ``recipe`` under its name (refused if taken, unless ``overwrite``); fields are checked when
    a config is built from it."""
    if recipe.name in RECIPES and not overwrite:
        raise InvalidArgumentError(f"recipe {recipe.name!r} is already registered; pass overwrite=True to replace it")
    RECIPES[recipe.name] = recipe
    return recipe


register_recipe(
    Recipe(
        "ssp",
        "search-self-play (Lu et al., 2025)",
        "vanilla SSP: answer-only Proposer, binary reward, Solver r - mean (Eq. 4), Proposer plain REINFORCE (Eq. 5)",
        {
            **_SSP_SCALE,
            "reward": "binary",
            "solver_advantage": "grpo_centred",
            "solver_loss_aggregation": "token_mean",
            "proposer_baseline": "none",
            "proposer_loss_aggregation": "token_sum",
        },
        env_kwargs={"proposer_mode": "vanilla"},
        sources={
            **_SSP_SOURCES,
            "solver_advantage": "SSP Eq. 4: A = r - (1/n) sum_k r_k (no division by the std)",
            "solver_loss_aggregation": "SSP Eq. 4: (1/|rho|) sum_t per rollout",
            "proposer_baseline": "SSP Eq. 5: R(tau) * sum_t grad log pi, no baseline; R = 1 - acc, invalid -> 0",
            "proposer_loss_aggregation": "SSP Eq. 5: log-probs summed over the trajectory",
            "reward": "SSP App. A.2 Eq. 6: r_solve = 1(a = a*), binary",
            "env_kwargs.proposer_mode": "SSP §3.1: the Proposer is given the answer only",
        },
    )
)
register_recipe(
    Recipe(
        "kg-ssp",
        "kg-paths-wcr §4.5 ablation (KG context, binary reward)",
        "KG-grounded Proposer with SSP's binary Solver reward: the paper's 'KG context without WCR' arm",
        {**_SSP_SCALE, "reward": "binary", "solver_advantage": "grpo", **_KG_PROPOSER},
        env_kwargs=_KG_ENV,
        at_size=_KG_CPU,
        notes=(_KG_CPU_NOTE,),
        sources={
            **_SSP_SOURCES,
            **_KG_PROPOSER_SOURCES,
            "solver_advantage": "kg-paths-wcr Eq. 3: A_i = (r_i - mean) / (sigma_r + eps)",
        },
    )
)
register_recipe(
    Recipe(
        "kg-wcr",
        "kg-paths-wcr (KG paths as intermediate supervision)",
        "KG-grounded Proposer + waypoint coverage reward (alpha 0.3), normalised GRPO, REINFORCE with baseline",
        {**_SSP_SCALE, "reward": "wcr", "solver_advantage": "grpo", **_KG_PROPOSER},
        env_kwargs=_KG_ENV,
        at_size=_KG_CPU,
        notes=(_KG_CPU_NOTE,),
        sources={
            **_SSP_SOURCES,
            **_KG_PROPOSER_SOURCES,
            "reward": "kg-paths-wcr Eq. 6: R = c + alpha (1 - c) z g~, alpha = 0.3",
            "solver_advantage": "kg-paths-wcr Eq. 10: (R_i - mu_R) / (sigma_R + eps)",
        },
    )
)
register_recipe(
    Recipe(
        "gdcr-sapo",
        "gdcr-sapo (graph-distance contribution reward + step advantages)",
        "GDCR step rewards with SAPO advantages (lambda 0.5) for the Solver; the KG-grounded Proposer of kg-wcr",
        {
            **_SSP_SCALE,
            "reward": "gdcr",
            "solver_advantage": "grpo",
            "batch_size": 32,
            "mini_batch_size": 32,
            "group_size": 8,
            "lr": 2e-6,
            "max_turns": 20,
            **_KG_PROPOSER,
        },
        env_kwargs=_KG_ENV,
        sources={
            **_SSP_SOURCES,
            **_KG_PROPOSER_SOURCES,
            "reward": "gdcr-sapo Eq. 13-14: A_t = A_o + lambda |A_o| A_t,g, lambda = 0.5",
            "solver_advantage": "gdcr-sapo §3.4: the outcome advantage A_o is GRPO's (group-normalised)",
            "batch_size": "gdcr-sapo App. (Qwen3-8B RL): training batch 32, PPO batch 32",
            "group_size": "gdcr-sapo App.: group size 8",
            "lr": "gdcr-sapo App.: learning rate 2e-6",
            "max_turns": "gdcr-sapo App.: tool-call budget 20",
        },
        notes=("gdcr-sapo trains a Solver on fixed data: the Proposer side is kg-wcr's",),
    )
)
register_recipe(
    Recipe(
        "eve",
        "eve-agent (evidence-verified self-evolution)",
        "Proposer emits (question, answer, evidence); EVE rewards; HRPO (hop-grouped) Proposer, GRPO Solver",
        {
            **_SSP_SCALE,
            "reward": "eve",
            "solver_advantage": "grpo",
            "proposer_baseline": "hop_group",
            "proposer_loss_aggregation": "token_sum",
            "kl_coef": 0.0,
            "max_grad_norm": 0.1,
            "warmup_steps": 2,
        },
        env_kwargs={**_KG_ENV, "proposer_evidence": True},
        sources={
            **_SSP_SOURCES,
            "reward": "eve Eq. 16 / 19-21: Proposer 1/2 F_fmt + R_DZ + 0.5 V + 0.1 B, Solver EM + 0.3 F1(e)",
            "proposer_baseline": "eve Eq. 5 (HRPO): standardised within the questions of one hop count",
            "proposer_loss_aggregation": "eve Eq. 6: log pi(q, a | d) of the whole output",
            "kl_coef": "eve App.: the KL regularizer disabled",
            "max_grad_norm": "eve App.: gradient clipping at 0.1",
            "warmup_steps": "eve App.: warm-up ratio 0.03 of 50 steps",
            "env_kwargs.proposer_evidence": "eve §3: the Proposer copies an evidence span verbatim",
            "env_kwargs.proposer_mode": "eve grounds the Proposer in source documents: here the KG subgraph's",
            "solver_advantage": "eve Eq. 7: A_j = (r_j - mean) / (std + delta_0)",
        },
        notes=(
            "EVE trains the Proposer (Phase A) and the Solver (Phase B) one after the other; the recipe plays "
            "both in one game: set train_solver=false for Phase A, train_proposer=false for Phase B",
        ),
    )
)
register_recipe(
    Recipe(
        "dynasearcher",
        "dynasearcher (KG-augmented multi-reward search agent)",
        "JSON searches over documents + KG tool, multi-reward (accuracy + retrieval gain); kg-wcr's Proposer",
        {
            **_SSP_SCALE,
            "reward": "dynasearcher",
            "solver_advantage": "grpo",
            "batch_size": 16,
            "mini_batch_size": 16,
            "group_size": 8,
            "kl_coef": 1e-3,
            **_KG_PROPOSER,
        },
        env_kwargs={**_KG_ENV, "kg_tool": True},
        sources={
            **_SSP_SOURCES,
            **_KG_PROPOSER_SOURCES,
            "reward": "dynasearcher Eq. 1-6: r = r_acc + 0.5 (r_recall - r_penalty)",
            "solver_advantage": "dynasearcher Eq. 7: GRPO",
            "batch_size": "dynasearcher §4.1: train batch size 16",
            "group_size": "dynasearcher §4.1: 8 rollouts per sample",
            "kl_coef": "dynasearcher §4.1: KL coefficient 1e-3",
            "env_kwargs.kg_tool": "dynasearcher §3: <search> JSON with entity/relation over the KG",
        },
        notes=("dynasearcher trains a Solver on fixed data: the Proposer side is kg-wcr's",),
    )
)

#: the env settings the shipped cold start was trained with (agents.demonstrations.cold_start_env_kwargs):
#: 2-sentence passages indexed with BM25, top 3 per search
_COLD_START_ENV = {"retriever": "bm25:passages=2", "top_k": 3}

#: machine scales: fields a size sets on top of any recipe (``paper`` sets none). No KL term on CPU: the
#: reference forward would add about a third to a step (DAPO drops it too); set kl_coef to restore it.
SIZES: dict[str, dict[str, Any]] = {
    "paper": {},
    "gpu": dict(
        batch_size=16,
        mini_batch_size=80,
        group_size=5,
        max_turns=5,
        max_new_tokens=256,
        max_prompt_tokens=2048,
        max_response_tokens=2048,
        max_batch_generate=160,
        lr=5e-6,
        warmup_steps=2,
        micro_batch_size=16,
        total_steps=40,
        dtype="bfloat16",
        init=SHIPPED_INIT,
        val_every=0,
        env_kwargs={**_COLD_START_ENV, "pool_hops": [2, 3]},
    ),
    "cpu": dict(
        batch_size=2,
        mini_batch_size=8,
        group_size=4,
        max_turns=4,
        max_new_tokens=96,
        max_prompt_tokens=2048,
        max_response_tokens=1024,
        max_batch_generate=16,
        # 2 sequences a forward/backward: the update's activations are ~1.4 MB per token (30 layers, fp32), and at 4
        # a micro-batch of 3-hop games (~2,000 tokens each) peaked at 13.5 GB and was OOM-killed with two runs on a
        # 23.5 GB machine (2026-11-27); the same maths (gradient accumulation)
        micro_batch_size=2,
        lr=1e-4,
        warmup_steps=0,
        lora=True,
        lora_r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        kl_coef=0.0,
        skip_zero_advantage=True,
        threads=1,
        total_steps=10,
        save_every=5,
        val_every=0,
        tensorboard=False,
        init=SHIPPED_INIT,
        env_kwargs={**_COLD_START_ENV, "pool_hops": [2, 3]},
    ),
}
#: what each size is for, printed by ``--list-recipes``
SIZE_NOTES = {
    "paper": "the paper's own scale (batch 256, 10 turns, 8k responses): GPU clusters",
    "gpu": "one GPU, a small model: 16 games x G, 5 turns, bf16, from the shipped cold start",
    "cpu": "2 CPU cores: 2 games x 4 Solvers, 4 turns, 96 tokens a turn, LoRA, 1 thread; minutes a step",
}


def get_recipe(name: str) -> Recipe:
    """The registered recipe ``name`` (an error lists the names)."""
    if name not in RECIPES:
        raise InvalidArgumentError(f"unknown recipe {name!r}; choose one of {', '.join(sorted(RECIPES))}")
    return RECIPES[name]


def resolve_size(size: Optional[str]) -> str:
    """``auto`` (or None) → ``cpu`` without CUDA, ``paper`` with it; other names checked."""
    if size in (None, AUTO_SIZE):
        try:
            import torch

            return "paper" if torch.cuda.is_available() else "cpu"
        except ImportError:
            return "cpu"
    if size not in SIZES:
        raise InvalidArgumentError(f"unknown size {size!r}; choose one of {AUTO_SIZE}, {', '.join(SIZES)}")
    return size


def recipe_values(name: str, size: str = "paper") -> dict[str, Any]:
    """The config values of recipe ``name`` at ``size`` (a plain dict; the size's ``env_kwargs`` merged
    over the recipe's; ``recipe`` and ``recipe_size`` recorded)."""
    recipe = get_recipe(name)
    size = resolve_size(size)
    scale = dict(SIZES[size])
    values: dict[str, Any] = {**recipe.settings, **scale, **dict(recipe.at_size.get(size) or {})}
    values["env_kwargs"] = {**recipe.env_kwargs, **dict(scale.get("env_kwargs") or {})}
    values["recipe"] = name
    values["recipe_size"] = size
    values["output_dir"] = f"runs/{name}"
    return values


def recipe_config(name: str = DEFAULT_RECIPE, size: str = "paper", **overrides: Any):
    """A :class:`~searchgym.training.selfplay_config.TrainConfig` of recipe ``name`` at ``size``, then ``overrides``
    (``env_kwargs`` given here are merged over the recipe's)."""
    from .selfplay_config import TrainConfig

    values = recipe_values(name, size)
    env = {**values["env_kwargs"], **dict(overrides.pop("env_kwargs", None) or {})}
    return TrainConfig(**{**values, **overrides, "env_kwargs": env})


def recipes_table() -> str:
    """Every recipe side by side (method fields and the paper line of each), then the sizes."""
    keys = (
        "reward",
        "env_kwargs.proposer_mode",
        "solver_advantage",
        "proposer_baseline",
        "proposer_loss_aggregation",
        "kl_coef",
        "group_size",
        "batch_size",
        "lr",
    )
    lines = []
    for recipe in RECIPES.values():
        mark = " (default)" if recipe.name == DEFAULT_RECIPE else ""
        lines.append(f"{recipe.name}{mark}: {recipe.summary}  [{recipe.paper}]")
        for key in keys:
            if key.startswith("env_kwargs."):
                value = recipe.env_kwargs.get(key.split(".", 1)[1])
            else:
                value = recipe.settings.get(key)
            if value is None:
                continue
            source = recipe.sources.get(key, "")
            lines.append(f"    {key:<28} {value!s:<14} {source}")
        for note in recipe.notes:
            lines.append(f"    note: {note}")
    lines.append("sizes (--size; auto = cpu without CUDA, paper with it):")
    lines += [f"    {name:<6} {SIZE_NOTES[name]}" for name in SIZES]
    return "\n".join(lines)
