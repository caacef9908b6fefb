"""Training, in config / trainer pairs as TRL arranges them: self-play RL (:class:`TrainConfig`,
:class:`SelfPlayTrainer`), supervised fine-tuning (:class:`SFTConfig`, :func:`run_sft`) and rejection sampling;
the model config they share, losses, sequences, checkpoints, metrics, paper recipes, demonstrations and the
cold start.

Importing is light (no torch); the names load on first access.
"""

from ..core.moved import lazy_getattr

_LAZY = {
    "ModelOptions": "model_config",
    "TrainConfig": "selfplay_config",
    "SelfPlayTrainer": "selfplay_trainer",
    "SFTConfig": "sft_config",
    "SFTResult": "sft_config",
    "run_sft": "sft",
    "load_demonstrations": "sft_trainer",
    "RECIPES": "recipes",
    "recipe_config": "recipes",
    "get_recipe": "recipes",
    "demonstrations_by_hops": "demonstrations",
    "extract_lora": "lora_extract",
    "load_cold_start": "cold_start",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = list(_LAZY)
