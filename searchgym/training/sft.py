"""``searchgym sft``'s entry point: fine-tune on demonstration files, or by rejection sampling of the model itself.

:func:`run_sft` picks the data source of the config: ``source="data"`` trains an
:class:`~searchgym.training.sft_trainer.SFTRun` on the config's files, ``source="self"`` runs
:func:`~searchgym.training.rejection_sampling.run_rejection_sampling` (rounds of sample, keep, fine-tune).
"""

from __future__ import annotations

from .rejection_sampling import run_rejection_sampling
from .sft_config import SFTConfig, SFTResult
from .sft_trainer import SFTRun, load_training_data

__all__ = ["run_sft"]


def run_sft(config: SFTConfig, *, model=None, tokenizer=None, resume: bool = True) -> SFTResult:
    """Fine-tune as ``config`` says (``source="data"``: its files; ``"self"``: rejection sampling rounds).

    ``model`` / ``tokenizer``: an in-memory model instead of loading ``config.model`` (data source only).
    ``resume``: continue from the newest checkpoint under ``output_dir`` when there is one.
    """
    if config.source == "self":
        return run_rejection_sampling(config, resume=resume)
    train, val, report = load_training_data(config)
    run = SFTRun(config, train, val, model=model, tokenizer=tokenizer, report=report)
    return run.run(resume=resume)
