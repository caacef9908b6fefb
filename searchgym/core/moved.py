"""Where moved modules and names live now: an old import path raises an error that names the new home.

The package was regrouped by job (docs/architecture.md). Nothing is re-exported from an old path: importing a
moved module raises :class:`ModuleNotFoundError`, and reading a moved name from a package raises
:class:`AttributeError` (Gymnasium's way for renamed attributes), each naming where the thing lives now.
``from searchgym.agents import TrainConfig`` raises the same message: the import system asks the package for the
name, then tries it as a submodule, which :class:`MovedFinder` answers.
"""

from __future__ import annotations

import importlib.abc
import sys
from importlib import import_module
from typing import Callable, Mapping

__all__ = [
    "MOVED_MODULES",
    "MOVED_NAMES",
    "RENAMED",
    "MovedFinder",
    "install",
    "lazy_getattr",
    "moved_getattr",
    "new_home",
]

#: old module path -> the module that holds its contents now (a deleted re-export module -> the original home)
MOVED_MODULES: dict[str, str] = {
    "searchgym.agents.base": "searchgym.core.llm",
    "searchgym.agents.checkpoint": "searchgym.training.checkpoints",
    "searchgym.agents.cold_start": "searchgym.training.cold_start",
    "searchgym.agents.config": "searchgym.training.selfplay_config",
    "searchgym.agents.config_io": "searchgym.core.config_io",
    "searchgym.agents.decoding": "searchgym.llm.decoding",
    "searchgym.agents.demonstrations": "searchgym.training.demonstrations",
    "searchgym.agents.kv_reuse": "searchgym.llm.kv_reuse",
    "searchgym.agents.learning": "searchgym.training.learning_checks",
    "searchgym.agents.lm_head": "searchgym.llm.lm_head",
    "searchgym.agents.lora_extract": "searchgym.training.lora_extract",
    "searchgym.agents.losses": "searchgym.training.losses",
    "searchgym.agents.metrics": "searchgym.training.metrics",
    "searchgym.agents.openai_compat": "searchgym.llm.openai_client",
    "searchgym.agents.openai_server": "searchgym.llm.openai_server",
    "searchgym.agents.play": "searchgym.evaluation.games",
    "searchgym.agents.prefix": "searchgym.llm.shared_prefix",
    "searchgym.agents.pretrained": "searchgym.llm.pretrained",
    "searchgym.agents.prompts": "searchgym.core.prompts",
    "searchgym.agents.recipes": "searchgym.training.recipes",
    "searchgym.agents.rollout_engine": "searchgym.llm.rollout_engine",
    "searchgym.agents.sequences": "searchgym.llm.sequences",
    "searchgym.agents.sft": "searchgym.training.sft_trainer",
    "searchgym.agents.sft_config": "searchgym.training.sft_config",
    "searchgym.agents.sft_data": "searchgym.training.sft_data",
    "searchgym.agents.sft_self": "searchgym.training.rejection_sampling",
    "searchgym.agents.smollm": "searchgym.llm.bundled_model",
    "searchgym.agents.tiny": "searchgym.llm.tiny_models",
    "searchgym.agents.trainer": "searchgym.training.selfplay_trainer",
    "searchgym.agents.transformers_backend": "searchgym.llm.transformers_backend",
    "searchgym.agents.vllm_backend": "searchgym.llm.vllm_backend",
    "searchgym.agents.vllm_server": "searchgym.llm.vllm_server",
    "searchgym.agents.weights_check": "searchgym.llm.weights_check",
    "searchgym.commands.demos": "searchgym.commands.demonstrations",
    "searchgym.construction.record": "searchgym.core.subgraph",
    "searchgym.core.folders": "searchgym.core.atomic_writes",
    "searchgym.demo": "searchgym.commands.demo",
    "searchgym.envs.extractive": "searchgym.scoring.extractive_reader",
    "searchgym.envs.filters": "searchgym.scoring.question_filters",
    "searchgym.envs.heldout": "searchgym.tasks.heldout",
    "searchgym.envs.info": "searchgym.core.info",
    "searchgym.envs.judge": "searchgym.scoring.judge",
    "searchgym.envs.rewording": "searchgym.tasks.rewording",
    "searchgym.envs.rollout": "searchgym.envs.episode",
    "searchgym.envs.scoring": "searchgym.scoring.outcomes",
    "searchgym.envs.tasks": "searchgym.tasks.sources",
    "searchgym.envs.templates": "searchgym.construction.question_templates",
    "searchgym.envs.types": "searchgym.core.types",
    "searchgym.envs.verifier": "searchgym.scoring.rag_verifier",
    "searchgym.evaluation.tasksets": "searchgym.tasks.tasksets",
    "searchgym.http_deadline": "searchgym.core.http_deadline",
    "searchgym.integrations.verl.environments": "searchgym.integrations.environments",
    "searchgym.integrations.verl.episode": "searchgym.integrations.episode",
    "searchgym.ray_support": "searchgym.core.ray_support",
    "searchgym.rng_state": "searchgym.core.rng_state",
    "searchgym.wrappers.eve": "searchgym.wrappers.evidence_verifier_reward",
    "searchgym.wrappers.explain": "searchgym.evaluation.game_text",
    "searchgym.wrappers.gdcr": "searchgym.wrappers.graph_distance_reward",
    "searchgym.wrappers.dynasearcher": "searchgym.wrappers.dynasearcher_reward",
    "searchgym.wrappers.sapo": "searchgym.core.advantages",
    "searchgym.wrappers.stacking": "searchgym.wrappers.registry",
    "searchgym.wrappers.wcr": "searchgym.wrappers.waypoint_coverage_reward",
    "searchgym.world.synthetic_names": "searchgym.world.synthetic_name_forge",
    "searchgym.world.synthetic_naming": "searchgym.world.synthetic_titles",
}

#: names a package used to offer -> the package or module to import them from now
MOVED_NAMES: dict[str, str] = {
    **{f"searchgym.agents.{n}": "searchgym.core.llm" for n in ("GenerationConfig", "GenerationError", "TextGenerator")},
    "searchgym.agents.TrainConfig": "searchgym.training",
    "searchgym.agents.play_games": "searchgym.evaluation",
    **{
        f"searchgym.evaluation.{n}": "searchgym.tasks"
        for n in ("DatasetFormatError", "TaskSet", "load_flashrag_jsonl", "load_searchr1_parquet", "load_tasksets")
    },
    **{
        f"searchgym.evaluation.{n}": "searchgym.agents"
        for n in ("AgentSpec", "EvalAgent", "LLMEvalAgent", "ScriptedEvalAgent", "make_agent")
    },
    **{
        f"searchgym.envs.{n}": "searchgym.tasks"
        for n in ("TaskSource", "SubgraphTaskSource", "JsonlTaskSource", "ListTaskSource", "task_from_subgraph")
    },
    "searchgym.envs.path_question": "searchgym.construction.question_templates",
    **{
        f"searchgym.envs.{n}": "searchgym.scoring"
        for n in ("ExactMatchJudge", "LLMJudge", "FilterConfig", "check_question", "RAGVerifier", "ExtractiveReader")
    },
    "searchgym.envs.LLMReader": "searchgym.scoring",
    "searchgym.agents.eval_agents.resolve_checkpoint": "searchgym.llm.pretrained",
    # module-level names moved to break import cycles (the old module's ``__getattr__`` names the new home)
    "searchgym.world.storage.load_world": "searchgym.world",
    "searchgym.world.storage.save_world": "searchgym.world",
    "searchgym.retrieval.passages.passage_retriever": "searchgym.retrieval",
    "searchgym.construction.pool.make_walker": "searchgym.construction.pool_extraction",
    "searchgym.construction.pool.make_outcome": "searchgym.construction.pool_extraction",
    **{
        f"searchgym.wrappers.{n}": "searchgym.core.advantages"
        for n in ("grpo_advantages", "sapo_group_advantages", "sapo_step_advantages", "step_advantages")
    },
    "searchgym.training.sft_trainer.run_sft": "searchgym.training.sft",
    "searchgym.training.sft_trainer.round_config": "searchgym.training.rejection_sampling",
    **{
        f"searchgym.training.selfplay_trainer.{n}": "searchgym.training.model_loading"
        for n in ("apply_lora", "resolve_init")
    },
    "searchgym.training.selfplay_trainer.question_record": "searchgym.training.selfplay_samples",
}


#: names that were renamed as they moved -> the replacement, spelled as an import
RENAMED: dict[str, str] = {
    "searchgym.wrappers.stack_reward_wrappers": "from searchgym.wrappers import wrap_rewards (same arguments)",
    "searchgym.wrappers.STACKABLE_BY_NAME": "from searchgym.wrappers import available_rewards, get_reward "
    "(get_reward(name).factory)",
    # the env and LLM-backend registries replaced the tables that listed env ids and backends by hand
    **{
        old: "from searchgym.agents import agent_kinds (agent_kinds(): the scripted kinds, then the backends "
        "of searchgym.llm.registry that can evaluate)"
        for old in ("searchgym.agents.AGENTS", "searchgym.agents.eval_agents.AGENTS", "searchgym.evaluation.AGENTS")
    },
    "searchgym.training.selfplay_config.ROLLOUT_BACKENDS": "from searchgym.llm.registry import backend_names "
    "(backend_names(trains=True))",
    "searchgym.training.selfplay_trainer.GROUP_ENVS": "from searchgym.envs import env_ids, env_spec "
    "(env_ids(group=True), or env_spec(env_id).group)",
    "searchgym.integrations.environments.TEXT_ENV_IDS": "from searchgym.envs import env_ids (env_ids(text=True))",
    "searchgym.evaluation.runner.envs_for": "from searchgym.evaluation.task_rollouts import solver_envs "
    "(same arguments)",
    "searchgym.training.selfplay_trainer.share_batch_state": "searchgym.evaluation.batch_runner.BatchRunner(envs, "
    "share_batch_state=True) owns the batch's replay buffer and noise and passes them in each env's reset options",
}


def new_home(old: str) -> str | None:
    """The message for a moved dotted path (module or package attribute), or None when ``old`` did not move."""
    if old in RENAMED:
        return f"{old} was replaced: {RENAMED[old]}"
    if old in MOVED_MODULES:
        return f"{old} moved to {MOVED_MODULES[old]} (docs/architecture.md)"
    if old in MOVED_NAMES:
        name = old.rsplit(".", 1)[1]
        return f"{old} moved: from {MOVED_NAMES[old]} import {name} (docs/architecture.md)"
    return None


class MovedFinder(importlib.abc.MetaPathFinder):
    """A meta-path finder that only answers moved ``searchgym`` paths, by raising an error naming the new home."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 - importlib's protocol
        if fullname.startswith("searchgym."):
            message = new_home(fullname)
            if message is not None:
                raise ModuleNotFoundError(message)  # no ``name=``: the import system re-raises it as it is
        return None


def install() -> None:
    """Put one :class:`MovedFinder` first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


def moved_getattr(package: str) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that raises :class:`AttributeError` naming a moved name's home."""

    def __getattr__(name: str) -> object:
        message = new_home(f"{package}.{name}")
        raise AttributeError(message or f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_getattr(package: str, lazy: Mapping[str, str]) -> Callable[[str], object]:
    """A package ``__getattr__`` that loads each name of ``lazy`` (name -> submodule) from its submodule on first
    access, so importing the package stays light, and raises :class:`AttributeError` naming a moved name's home."""
    moved = moved_getattr(package)

    def __getattr__(name: str) -> object:
        if name in lazy:
            return getattr(import_module(f"{package}.{lazy[name]}"), name)
        return moved(name)

    return __getattr__
