"""examples/verl as shipped: the launch script's overrides pass verl's own config validation, its batches
fit the GPUs, it trains more than one step on the rows make_data.py writes, which verl's own dataset
reads; make_data.py's sources (--pool, --flashrag, --parquet, --n, --seed) and its bad-input errors.

The script runs for real (bash) with ``PYTHON`` pointing at a recorder that saves the arguments it would
have handed to ``python -m verl.trainer.main_ppo``; they are composed with verl's Hydra config
(``verl/trainer/config/ppo_trainer.yaml``) and validated by ``verl.utils.config.validate_config``, as
``main_ppo.main`` does before it starts Ray. Skipped without the ``verl`` extra."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl.utils.config", reason="needs the verl extra (pip install -e '.[verl]')")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import verl  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import validate_config  # noqa: E402

from searchgym.integrations.verl.data import row_options  # noqa: E402
from searchgym.tasks.tasksets import search_r1_prompt  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Disabled critic")  # verl's note that GRPO needs no critic

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples/verl/run_grpo_wcr.sh"
MAKE_DATA = REPO / "examples/verl/make_data.py"
VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"
MICRO_BATCH_KEYS = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
)


def script_overrides(tmp_path: Path, *extra: str, data: str = "data/searchgym") -> list[str]:
    """The Hydra overrides run_grpo_wcr.sh hands to ``python -m verl.trainer.main_ppo``."""
    recorder, out = tmp_path / "record-argv", tmp_path / "argv.json"
    recorder.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(out)!r}, 'w'))\n", encoding="utf-8"
    )
    recorder.chmod(0o755)
    env = {**os.environ, "PYTHON": str(recorder), "DATA": data}
    subprocess.run(["bash", str(SCRIPT), *extra], cwd=REPO, env=env, check=True, timeout=60)
    argv = json.loads(out.read_text(encoding="utf-8"))
    assert argv[:2] == ["-m", "verl.trainer.main_ppo"]
    return argv[2:]


def verl_config(overrides: list[str]):
    """verl's own trainer config with ``overrides``, composed as its ``@hydra.main`` entry point does."""
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def validate(cfg) -> None:
    """verl's check before training (``main_ppo.main``)."""
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def make_data(*args: str) -> subprocess.CompletedProcess:
    """examples/verl/make_data.py run as a user runs it."""
    return subprocess.run(
        [sys.executable, str(MAKE_DATA), *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def make_data_main():
    """make_data.py's ``main``, run in this process (a Python start-up per call would dominate the test)."""
    spec = importlib.util.spec_from_file_location("verl_make_data", MAKE_DATA)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def rows_of(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_script_passes_verl_validation_logs_to_console_and_trains_several_steps(tmp_path):
    data = tmp_path / "data"
    done = make_data("--out", str(data))
    assert done.returncode == 0, done.stderr
    cfg = verl_config(script_overrides(tmp_path, data=str(data)))
    validate(cfg)  # raises on what verl would refuse
    assert list(cfg.trainer.logger) == ["console"]
    assert need_reference_policy(cfg) and not need_critic(cfg)  # GRPO with a KL loss: ref, no critic

    # the per-GPU shares verl's micro-batching (workers/engine/utils.prepare_micro_batches) must divide
    rollout, actor, n = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout.n
    gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    batch = cfg.data.train_batch_size
    assert (batch * n) % gpus == 0 and (actor.ppo_mini_batch_size * n) % gpus == 0
    assert batch % actor.ppo_mini_batch_size == 0
    assert (batch * n // gpus) % rollout.log_prob_micro_batch_size_per_gpu == 0
    assert (batch * n // gpus) % cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 0
    assert (actor.ppo_mini_batch_size * n // gpus) % actor.ppo_micro_batch_size_per_gpu == 0
    assert batch % rollout.agent.num_workers == 0  # self-play groups stay inside one agent-loop worker

    # verl's own dataset reads the rows make_data wrote, drops none, and every row names a loop of the YAML
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from tests.support.tiny_lm import build_tokenizer

    train = RLHFDataset(cfg.data.train_files, build_tokenizer(), cfg.data)
    written = rows_of(data / "train.parquet")
    assert len(train) == len(written) == 112
    loops = {e.name for e in OmegaConf.load(REPO / rollout.agent.agent_loop_config_path)}
    assert {r["agent_name"] for r in written} <= loops
    steps = len(train) // batch * cfg.trainer.total_epochs  # verl's steps_per_epoch (drop_last) x epochs
    assert steps > 1, f"{len(train)} rows in batches of {batch} for {cfg.trainer.total_epochs} epochs"
    sample = train[0]
    assert row_options(sample)[1]["task"].question  # what an agent loop gets from the row: a task

    wandb = verl_config(script_overrides(tmp_path, "trainer.logger=[console,wandb]", data=str(data)))
    assert list(wandb.trainer.logger) == ["console", "wandb"]  # extra overrides still win


def test_without_the_micro_batch_overrides_verl_refuses_the_config(tmp_path):
    overrides = [o for o in script_overrides(tmp_path) if not o.startswith(MICRO_BATCH_KEYS)]
    with pytest.raises(Exception, match="micro_batch_size"):
        validate(verl_config(overrides))


def test_make_data_sources_sample_and_split_with_the_seed(tmp_path, default_world, make_data_main):
    def run(name, *args):
        assert make_data_main(["--out", str(tmp_path / name), *args]) == 0
        return rows_of(tmp_path / name / "train.parquet"), rows_of(tmp_path / name / "val.parquet")

    def ids(rows):
        return [json.loads(r["extra_info"]["searchgym"]["task"])["id"] for r in rows]

    qa = "tests/fixtures/eval/tiny_qa.jsonl"
    train, val = run("qa", "--flashrag", qa, "--n", "5", "--val", "2", "--seed", "3")
    assert (len(train), len(val)) == (3, 2) and {r["agent_name"] for r in train + val} == {"searchgym_qa"}
    assert all(r["extra_info"]["searchgym"]["rewards"] == "binary" for r in train)
    same, other = (
        run("qa2", "--flashrag", qa, "--n", "5", "--val", "2", "--seed", "3"),
        run("qa3", "--flashrag", qa, "--n", "5", "--val", "2", "--seed", "4"),
    )
    assert (ids(same[0]), ids(same[1])) == (ids(train), ids(val))  # same seed, same sample and split
    assert (ids(other[0]), ids(other[1])) != (ids(train), ids(val))  # another seed, another draw

    sr1 = tmp_path / "sr1.parquet"
    questions = ["who wrote the zürich manifesto", "what is the capital of merovia"]
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "data_source": "nq",
                    "prompt": [{"role": "user", "content": search_r1_prompt(q)}],
                    "ability": "fact-reasoning",
                    "reward_model": {"style": "rule", "ground_truth": {"target": [a]}},
                    "extra_info": {"split": "train", "index": i},
                }
                for i, (q, a) in enumerate(zip(questions * 2, ["Ada Rüegg", "Ostrel"] * 2))
            ]
        ),
        sr1,
    )
    train, val = run("sr1", "--parquet", str(sr1), "--val", "1")
    assert len(train) + len(val) == 4
    task = json.loads(train[0]["extra_info"]["searchgym"]["task"])
    assert task["question"].rstrip("?") in questions and task["metadata"]["solver_prompt"].startswith(
        "Answer the given"
    )
    assert train[0]["prompt"][0]["content"] == task["metadata"]["solver_prompt"]  # Search-R1's prompt, kept

    from searchgym.envs.resources import default_pool

    pool = tmp_path / "pool.jsonl"
    subgraphs = default_pool(default_world)[:6]
    pool.write_text("".join(json.dumps(sg.to_dict()) + "\n" for sg in subgraphs), encoding="utf-8")
    train, val = run("pool", "--pool", str(pool), "--val", "2")
    tasks = [json.loads(r["extra_info"]["searchgym"]["task"]) for r in train + val]
    assert sorted(t["subgraph"]["id"] for t in tasks) == sorted(sg.id for sg in subgraphs)
    assert all(t["waypoints"] for t in tasks) and {r["agent_name"] for r in train} == {"searchgym_solver"}
    assert all("reward_options" not in r["extra_info"]["searchgym"] for r in train)
    train, _ = run("options", "--pool", str(pool), "--val", "2", "--reward-option", "wcr.waypoint_answer_credit=no")
    assert {r["extra_info"]["searchgym"]["reward_options"] for r in train} == {
        json.dumps({"wcr": {"waypoint_answer_credit": False}})
    }  # what compute_score rebuilds the WCR wrapper with
    train, val = run("selfplay", "--pool", str(pool), "--n", "3", "--val", "1", "--selfplay")
    assert [r["agent_name"] for r in train + val] == ["searchgym_proposer", "searchgym_selfplay"] * 3


def test_make_data_bad_input_is_one_line_and_exit_2(tmp_path, make_data_main, capsys):
    missing = make_data("--out", str(tmp_path), "--flashrag", str(tmp_path / "nope.jsonl"))  # as a user runs it
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    for args, message in [
        (["--flashrag", "a.jsonl", "--parquet", "b.parquet"], "not allowed with argument"),
        (["--selfplay", "--flashrag", "tests/fixtures/eval/tiny_qa.jsonl"], "--selfplay needs KG subgraphs"),
        (["--n", "4", "--val", "4"], "give --n > --val"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            make_data_main(["--out", str(tmp_path), *args])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    for args, message in [
        (["--reward-option", "wcr.credit=false"], "reward 'wcr' has no option credit; its options:"),
        (["--reward-option", "wcr=false"], "--reward-option 'wcr=false' must look like NAME.KEY=VALUE"),
    ]:
        assert make_data_main(["--out", str(tmp_path / "bad"), *args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
