"""The small self-play trainer config the trainer tests start from: a tiny batch, two turns, no logging."""

from __future__ import annotations

from searchgym.training.selfplay_config import TrainConfig


def small_train_config(tmp_path, **kw) -> TrainConfig:
    """A :class:`TrainConfig` on CPU with 2 games x 2 Solvers, 2 turns of 12 tokens, lr 1e-3, no warm-up, a checkpoint
    every step under ``tmp_path/run``; ``kw`` overrides any field."""
    base = dict(
        device="cpu",
        batch_size=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=12,
        lr=1e-3,
        warmup_steps=0,
        total_steps=3,
        output_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        save_every=1,
        mini_batch_size=8,
        micro_batch_size=4,
    )
    base.update(kw)
    return TrainConfig(**base)
