"""Issue 17: checkpoints load without unpickling anything; env and RNG state travel as plain JSON."""

from __future__ import annotations

import json
import random

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import searchgym  # noqa: E402,F401
from searchgym.core.rng_state import random_state_from_data  # noqa: E402
from searchgym.training.checkpoints import CheckpointFormatError, CheckpointManager  # noqa: E402
from searchgym.training.selfplay_envs import env_state, load_env_state  # noqa: E402
from tests.test_trainer_mechanics import _selfplay_envs, _trainer, tok  # noqa: E402,F401


def test_checkpoint_is_tensors_plus_json_and_loads_with_weights_only(tmp_path, tok):  # noqa: F811
    tr = _trainer(tmp_path, tok, envs=_selfplay_envs())
    tr.rng.random()
    path = tr.save_checkpoint()
    plain = json.loads((path / "trainer_state.json").read_text())
    assert {"step", "rng", "agent_rng", "generator_rng", "games_played", "envs"} <= set(plain)
    assert "optimizer" not in plain and "scheduler" not in plain
    tensors = torch.load(path / "trainer_state.pt", weights_only=True)
    assert set(tensors) == {"optimizer", "scheduler"}
    fresh = _trainer(tmp_path, tok, envs=_selfplay_envs())
    fresh.load_checkpoint(path)
    assert fresh.rng.getstate() == tr.rng.getstate()
    as_json = lambda env: json.loads(json.dumps(env.unwrapped.state_dict()))  # noqa: E731
    assert as_json(fresh.envs[0]) == as_json(tr.envs[0])


def _old_format(path, trainer_state: dict) -> None:
    """Rewrite a checkpoint as the pre-issue-17 layout: everything pickled into trainer_state.pt."""
    torch.save(trainer_state, path / "trainer_state.pt")
    (path / "trainer_state.json").unlink()
    meta = json.loads((path / "meta.json").read_text())
    del meta["format"]
    (path / "meta.json").write_text(json.dumps(meta))


def test_old_pickled_checkpoint_is_refused_with_a_clear_message(tmp_path, tok):  # noqa: F811
    tr = _trainer(tmp_path, tok)
    path = tr.save_checkpoint()
    _old_format(path, tr.state_dict())
    with pytest.raises(CheckpointFormatError, match="old pickled format.*refused.*fresh run"):
        _trainer(tmp_path, tok).load_checkpoint(path)


class _Payload:
    """Unpickling this runs code (writes a marker file): what a hostile run directory could carry."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_hostile_state_file_runs_no_code(tmp_path, tok):  # noqa: F811
    tr = _trainer(tmp_path, tok)
    path = tr.save_checkpoint()
    marker = tmp_path / "pwned"
    torch.save({"optimizer": _Payload(str(marker)), "scheduler": {}}, path / "trainer_state.pt")
    with pytest.raises(CheckpointFormatError, match="damaged or unsafe"):
        CheckpointManager.load_state(path)
    assert not marker.exists()


@pytest.mark.parametrize("env_id", ["KGSolver-v0", "KGProposer-v0", "KGSolverGroup-v0", "KGSelfPlay-v0"])
def test_env_state_round_trips_through_json(env_id):
    kwargs = {"group_size": 2} if env_id in ("KGSolverGroup-v0", "KGSelfPlay-v0") else {}
    env = gym.make(env_id, max_turns=1, **kwargs)
    env.reset(seed=3)
    state = json.loads(json.dumps(env_state(env)))  # raises if anything is not plain data
    twin = gym.make(env_id, max_turns=1, **kwargs)
    load_env_state(twin, state)
    assert json.loads(json.dumps(env_state(twin))) == state
    assert env.unwrapped._rng.random() == twin.unwrapped._rng.random()
    assert env.unwrapped.np_random.integers(1 << 30) == twin.unwrapped.np_random.integers(1 << 30)


def test_non_searchgym_env_state_is_its_bit_generator_state():
    env = gym.make("CartPole-v1")
    env.reset(seed=5)
    state = json.loads(json.dumps(env_state(env)))
    twin = gym.make("CartPole-v1")
    load_env_state(twin, state)
    assert env.unwrapped.np_random.random() == twin.unwrapped.np_random.random()


def test_random_state_from_data_validates():
    r = random.Random(4)
    r2 = random.Random()
    r2.setstate(random_state_from_data(json.loads(json.dumps(r.getstate()))))
    assert r.random() == r2.random()
    for bad in (None, [1, 2], [3, ["x"], None], [3, [1, 2, 3], None]):
        with pytest.raises(ValueError):
            random_state_from_data(bad)
