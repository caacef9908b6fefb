"""searchgym inside TRL's ``GRPOTrainer`` (the ``trl`` extra; written and tested against TRL 1.16): both of
TRL's entry points for multi-turn environments, over the same envs and reward registry as the rest of
searchgym. docs/trl.md has the guide.

* ``environment_factory`` (:mod:`.environment`): function calling — the env's tools (``search``,
  ``kg_lookup``, ``answer``) as methods TRL exposes to the model, ``reset(**row)``, ``get_reward()``.
* ``rollout_func`` (:mod:`.rollout`): searchgym plays whole episodes — the tag protocol (Search-R1
  style), the function-calling protocol with any tool-capable template, Solver groups, and self-play
  (the Solvers' question comes from the Proposer in the same step).
* :func:`train_dataset` (:mod:`.data`): rows from a subgraph pool, the built-in tasks or a FlashRAG JSONL.
* :func:`grpo_trainer`: a ``GRPOTrainer`` wired for either entry point, the tokenizer checked first;
  :func:`local_config`: a ``GRPOConfig`` for short local runs.

Importing this package imports neither TRL nor torch.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from searchgym.core.chat_template import ChatTemplateError, require_tool_template

from ...errors import InvalidArgumentError
from .data import dataset_rows, train_dataset
from .environment import SearchGymKGToolEnv, SearchGymToolEnv, attach_transcripts, environment_factory
from .generation import TRL_VERSION_READ
from .rollout import PromptIndex, SearchGymRollout, env_reward, rollout_func
from .rows import DatasetRowError, task_of_row
from .stats import STATS

__all__ = [
    "ENTRY_POINTS",
    "STATS",
    "TRL_VERSION_READ",
    "ChatTemplateError",
    "DatasetRowError",
    "PromptIndex",
    "SearchGymKGToolEnv",
    "SearchGymRollout",
    "SearchGymToolEnv",
    "attach_transcripts",
    "check_tokenizer",
    "dataset_rows",
    "env_reward",
    "environment_factory",
    "grpo_trainer",
    "local_config",
    "rollout_func",
    "task_of_row",
    "train_dataset",
]

ENTRY_POINTS = ("environment_factory", "rollout_func")

_TRL_TEMPLATES = (
    "TRL {version} parses tool calls only for chat templates it recognises (Qwen2.5 / Qwen3, Llama 3.1 / 3.2, "
    "gpt-oss, GLM-4-MoE, ...), and the template of {name} is not one of them (TRL: 'Unrecognized chat "
    "template'). Fix: use the rollout_func entry point (searchgym parses tool calls itself: any tool-capable "
    "template, or protocol='tags' with any template), a model with a recognised template, or set "
    "tokenizer.response_template yourself (Transformers' response-parsing docs)"
)


def local_config(output_dir: Optional[str] = None, **overrides: Any):
    """A ``trl.GRPOConfig`` for a short local run: the GPU when there is one (else the CPU), no reporting,
    no checkpoints saved, gradient checkpointing off, fp32, dataset order kept, seed 0, every step
    logged; ``overrides`` set any other ``GRPOConfig`` field (``num_generations``, ``max_steps`` ...)."""
    import tempfile

    import torch
    from trl import GRPOConfig

    base = dict(
        use_cpu=not torch.cuda.is_available(),
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        fp16=False,
        disable_tqdm=True,
        seed=0,
        gradient_checkpointing=False,
        shuffle_dataset=False,
    )
    return GRPOConfig(output_dir=output_dir or tempfile.mkdtemp(prefix="searchgym-trl-"), **{**base, **overrides})


def check_tokenizer(tokenizer, entry: str = "environment_factory", protocol: str = "function_calling") -> None:
    """Raise :class:`ChatTemplateError` naming the fix when ``tokenizer`` cannot serve ``entry``.

    ``environment_factory`` needs a template that renders tools *and* that TRL can parse tool calls
    for (SmolLM2's plain ChatML template fails both); ``rollout_func`` with ``protocol="function_calling"``
    needs a template that renders tools; the tag protocol works with any tokenizer."""
    if entry not in ENTRY_POINTS:
        raise InvalidArgumentError(f"entry {entry!r} unknown; use one of {', '.join(ENTRY_POINTS)}")
    if entry == "rollout_func" and protocol == "tags":
        return
    require_tool_template(tokenizer)
    if entry == "rollout_func":
        return
    import trl
    from trl.chat_template_utils import add_response_schema

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(tokenizer)  # what GRPOTrainer does itself; sets the parser TRL will use
        except ValueError:
            name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
            raise ChatTemplateError(_TRL_TEMPLATES.format(version=trl.__version__, name=name)) from None


def grpo_trainer(
    model: Any,
    *,
    processing_class,
    args,
    train_dataset,
    entry: str = "environment_factory",
    rewards: Any = "binary",
    reward_options: Optional[dict] = None,
    protocol: Optional[str] = None,
    kg_tool: bool = False,
    wrappers: Sequence = (),
    env_kwargs: Optional[dict] = None,
    transcripts: bool = True,
    reward_funcs: Sequence = (),
    max_turn_tokens: Optional[int] = None,
    **trainer_kwargs: Any,
):
    """A ``trl.GRPOTrainer`` playing searchgym through ``entry``, after :func:`check_tokenizer`.

    ``environment_factory``: :func:`environment_factory` (+ :func:`attach_transcripts` when
    ``transcripts``, so the env scores the model's reasoning too); ``rollout_func``:
    :func:`rollout_func` over ``train_dataset`` + :func:`env_reward` (``protocol`` defaults to
    ``"tags"``; ``max_turn_tokens``: its per-turn cap, default 512). ``rewards`` and ``reward_options`` (their
    wrappers' keyword arguments by reward name) go to either entry point. ``reward_funcs`` are added to
    searchgym's; everything else goes to ``GRPOTrainer``."""
    from trl import GRPOTrainer

    if entry not in ENTRY_POINTS:
        raise InvalidArgumentError(f"entry {entry!r} unknown; use one of {', '.join(ENTRY_POINTS)}")
    env_kwargs = dict(env_kwargs or {})
    if entry == "environment_factory":
        if max_turn_tokens is not None:
            raise InvalidArgumentError(
                "max_turn_tokens caps the rollout_func entry point's turns; TRL's own tool loop "
                "(environment_factory) has no per-turn cap: drop max_turn_tokens or use entry='rollout_func'"
            )
        if protocol not in (None, "function_calling"):
            raise InvalidArgumentError("the environment_factory entry point speaks function calling; drop protocol=")
        check_tokenizer(processing_class, entry)
        factory = environment_factory(
            rewards, reward_options=reward_options, kg_tool=kg_tool, wrappers=wrappers, **env_kwargs
        )
        funcs = ([attach_transcripts] if transcripts else []) + list(reward_funcs)
        return GRPOTrainer(
            model,
            reward_funcs=funcs or None,
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            environment_factory=factory,
            **trainer_kwargs,
        )
    protocol = protocol or "tags"
    check_tokenizer(processing_class, entry, protocol)
    turn_cap = {} if max_turn_tokens is None else {"max_turn_tokens": max_turn_tokens}
    func = rollout_func(
        train_dataset,
        rewards=rewards,
        reward_options=reward_options,
        protocol=protocol,
        kg_tool=kg_tool,
        wrappers=wrappers,
        env_kwargs=env_kwargs,
        **turn_cap,
    )
    funcs = [env_reward, *reward_funcs]
    return GRPOTrainer(
        model,
        reward_funcs=funcs,
        args=args,
        train_dataset=train_dataset,
        processing_class=processing_class,
        rollout_func=func,
        **trainer_kwargs,
    )
