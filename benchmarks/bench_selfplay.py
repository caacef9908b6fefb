"""Does the game itself learn? ``KGSelfPlay-v0`` trained end to end, the model in both roles, three recipes.

From the cold start, one policy plays Proposer and Solvers of the self-play game and both roles are updated
(``SelfPlayTrainer``, ``train_solver`` and ``train_proposer`` true), in three arms with equal rollout budgets:

* (a) **vanilla SSP** -- ``recipe_config("ssp", size)``: answer-only Proposer, binary reward, SSP Eq. 4/5;
* (b) **KG-grounded Proposer, binary** -- ``recipe_config("kg-ssp", size)``;
* (c) **KG-grounded Proposer + WCR** -- ``recipe_config("kg-wcr", size)``.

Every arm plays the same self-play pool (``pool.jsonl`` in the workdir: training-side 2- and 3-hop subgraphs --
the hop counts the cold start can already reach -- interleaved in proportion), the same number of steps, games
per step, Solvers per game, turns and tokens per turn; what differs is what each recipe sets (Proposer prompt,
reward, advantage estimators). Per step, from the trainer's ``metrics.jsonl``: the Proposer's valid rate and
its rejection reasons, its reward, the Solvers' reward (all games, and on the questions the model wrote),
groups with signal, question hops and length, the update's entropy and the time split. Before and after:
held-out Solver exact match by hop with 95 % bootstrap intervals and paired gained/lost questions against the
cold start, and the Proposer's valid-question rate on a fixed set of held-out KG targets (the KG prompt for
every model; the answer-only prompt too for the cold start and arm (a), which trains with it).

**Held out.** The held-out Solver questions are the built-in benchmark's (``heldout_solver_tasks``), the
Proposer's targets its 2-/3-hop subgraphs (``heldout_proposer_tasks``): every answer title is on the held-out
side of ``searchgym.tasks.heldout``, and the self-play pool holds only training-side subgraphs, whose answer
names (title and aliases) are never held out. Everything the Solvers train on comes from the pool (a question
the Proposer wrote for a pool subgraph, a replayed one, or the subgraph's own template question), so
:func:`check_disjoint` -- run on every invocation, recorded in the JSON, and tested -- checks the pool against
both held-out sets: no shared answer name, answer entity or question text.

Stages write into ``--workdir/<size>`` and are skipped when their output exists, so a killed run resumes (a
killed training run from its last checkpoint). ``--arms``/``--seeds`` run a subset; two processes may share a
workdir (the pool and the cold start's evaluation are made once, the second process waits for them). Every
invocation ends by collecting **all** finished runs of the workdir into ``benchmarks/results/selfplay_<size>.json``
and ``.png``; ``--collect`` only collects; ``--cold-start-only`` only evaluates the cold start (a process of its
own beside a training run, so both cores work while the run trains); ``--ship`` also writes the compact form that
``searchgym demo`` shows (:func:`searchgym.evaluation.selfplay_results.compact_results`) to
``searchgym/assets/selfplay_<size>.json``.
Sizes: ``cpu`` (2 cores, one torch thread per process, one seed), ``gpu`` (3 seeds, ``--device cuda``), ``toy``
(the GPU size's code path at toy scale on CPU, for the tests; needs ``--model DIR``). docs/selfplay_benchmark.md
has the commands. ``--proposer-baseline`` is an ablation: one Proposer baseline in every arm instead of each
recipe's own (``hop_group``: EVE's HRPO), recorded in the JSON (``proposer_baseline_override``). ``--set
KEY=VALUE`` is the general form: any training config field in every arm (``--set kl_coef=0.01``: the KL term
the ``cpu`` size turns off; ``--set filter.searches_at_least_required=true``: a rule filter of the Proposer's
questions), named in each arm's label and recorded in the JSON (``overrides``); the fields the benchmark itself
sets (model, start, seed, steps, pool, output) are refused. ``--eval-at 16`` also scores every run at training
step 16 (the run keeps that checkpoint: ``keep_checkpoint_every``), in the JSON as each run's ``checkpoints``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from bench_learning import (
    HOPS,
    eval_dir,
    evaluate_model,
    heldout_records,
    paired_counts,
    paired_flips,
    rl_gain,
    stopped_short,
)
from machine import device_info, machine_info

from searchgym.core.advantages import PROPOSER_BASELINES
from searchgym.core.atomic_writes import write_file, write_folder, write_text

RESULTS = Path(__file__).parent / "results"
#: where ``--ship`` writes the compact results (in the repository's package tree: `searchgym demo` reads them)
ASSETS = Path(__file__).resolve().parent.parent / "searchgym" / "assets"
logger = logging.getLogger("bench_selfplay")

SHIPPED_INIT = "shipped-cold-start"  # searchgym.training.recipes.SHIPPED_INIT (imported lazily: keeps --help fast)
COLD = "cold_start"  # the cold start's evaluation stage
#: the config fields that make a run's rollout budget: equal in every run a results file compares
BUDGET = ("batch_size", "group_size", "max_turns", "max_new_tokens", "max_response_tokens", "total_steps")
DONE = "selfplay.json"  # written last into a run's final/ folder: the run is finished
SAMPLED = "proposer_sampled.json"  # a stage's sampled held-out Proposer result, in its eval folder
#: the sampled Proposer evaluation's temperature: every recipe's rollout temperature (SPEC §10, ``temperature``)
SAMPLED_TEMPERATURE = 1.0
SAMPLED_CELL = "kg_sampled"  # its name among a stage's ``proposer_cells`` (and ``vs_cold_start``: proposer_kg_sampled)


@dataclass(frozen=True)
class Arm:
    """One arm: the recipe it trains with and its label in results and plots."""

    key: str
    recipe: str
    label: str

    @property
    def proposer_mode(self) -> str:
        """The Proposer prompt the recipe trains (``kg`` or ``vanilla``)."""
        from searchgym.training.recipes import get_recipe

        return str(get_recipe(self.recipe).env_kwargs.get("proposer_mode", "kg"))


ARMS = {
    arm.key: arm
    for arm in (
        Arm("a", "ssp", "(a) vanilla SSP"),
        Arm("b", "kg-ssp", "(b) KG Proposer, binary"),
        Arm("c", "kg-wcr", "(c) KG Proposer + WCR"),
    )
}

#: what all three arms share at each size, on top of their recipe at ``recipe_size`` (equal budgets: the recipes
#: agree on batch, group, turns and tokens at a size, and ``train`` sets the rest for every arm alike).
#: ``pool``: self-play pool subgraphs by hop count, played interleaved (every step mixes them);
#: ``eval_hops`` / ``eval_proposer``: the held-out Solver questions per hop and Proposer targets;
#: ``proposer_samples``: rollouts a held-out Proposer target at the rollouts' temperature (the sampled valid rate);
#: ``max_new_tokens``: per turn when evaluating.
_GPU_TRAIN = dict(
    # 6 steps x 32 games; on an H200 (2026-11-28) one step took 185 s with transformers' loop (rollouts 94 %), the
    # engine (auto's choice on CUDA since) played the learning benchmark's rollouts 7.8x faster at temperature 1;
    # a seed's three arms run as three processes on the one GPU, a seed per lent node (benchmarks/gpu_checks.sh)
    batch_size=32,
    mini_batch_size=80,
    max_turns=4,
    max_new_tokens=128,
    total_steps=6,
    save_every=2,
    # a LoRA adapter on the merged cold start (a few MB to copy off the machine), at the CPU size's LoRA lr
    lora=True,
    lora_r=16,
    lora_alpha=32,
    lora_dropout=0.0,
    lr=1e-4,
)
SIZES: dict[str, dict[str, Any]] = {
    "cpu": dict(
        recipe_size="cpu",
        # the recipe's cpu size (4 turns, 96 tokens a turn, LoRA, one thread) at 8 games x 2 Solvers a step: the
        # same 16 Solver rows a batch as 4 x 4 (about as many Solver groups with signal: 8 x 2p(1-p) vs
        # 4 x (1-p^4-(1-p)^4) at p ~ 0.2) but twice the Proposer's questions -- at 4 a step the Proposer saw ~16
        # verified questions in a whole run and its held-out valid rate moved +6 / +2 points (KG arms, 2026-11-27).
        # 16 steps of ~2 min fill the issue's ~60 min per arm with 128 games, each on its own pool subgraph
        train=dict(batch_size=8, group_size=2, total_steps=16, save_every=4),
        pool={2: 80, 3: 48},
        eval_hops={1: 32, 2: 32, 3: 16},
        eval_proposer=64,
        proposer_samples=4,
        max_new_tokens=128,
        seeds=(0,),
        threads=1,
        init=SHIPPED_INIT,
        device="cpu",
    ),
    "gpu": dict(
        recipe_size="gpu",
        train=_GPU_TRAIN,
        pool={2: 96, 3: 96},
        eval_hops={1: 50, 2: 100, 3: 100},
        eval_proposer=64,
        proposer_samples=4,
        max_new_tokens=128,
        seeds=(0, 1, 2),
        threads=None,
        init=SHIPPED_INIT,
        device="cuda",
    ),
    "toy": dict(  # the gpu size's settings and code path, scaled to seconds on CPU (tests/test_bench_selfplay.py)
        recipe_size="gpu",
        train={
            **_GPU_TRAIN,
            "dtype": "float32",
            "batch_size": 1,
            "group_size": 2,
            "mini_batch_size": 2,
            "micro_batch_size": 2,
            "max_turns": 2,
            "max_new_tokens": 8,
            "max_batch_generate": 4,
            "total_steps": 2,
            "save_every": 1,
            "lora_r": 4,
            "lora_alpha": 8,
        },
        pool={2: 1, 3: 1},
        eval_hops={1: 2, 2: 2, 3: 1},
        eval_proposer=2,
        proposer_samples=2,
        max_new_tokens=8,
        seeds=(0, 1),
        threads=1,
        init=None,
        device="cpu",
    ),
}


class BenchError(Exception):
    """Bad input or an unusable workdir: printed as one line naming the fix (exit 2)."""


# ============================================================================ stages
def run_name(arm: str, seed: int) -> str:
    """A run's name: its folder under the workdir and its evaluation stage."""
    return f"{arm}_s{seed}"


@contextmanager
def wait_lock(path: Path, poll_s: float = 5.0) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (an ``OutputLock``), waiting while another process holds it: how two
    processes sharing a workdir make a shared stage once (the second then finds its output and skips it)."""
    from searchgym.core.output_lock import OutputLock, OutputLockedError

    lock = OutputLock(path, what="--workdir")
    said = False
    while True:
        try:
            lock.acquire()
            break
        except OutputLockedError as exc:
            if not said:
                logger.info("waiting: %s", exc)
                said = True
            time.sleep(poll_s)
    try:
        yield
    finally:
        lock.release()


def stage_pool(world, hops: dict, work: Path) -> Path:
    """The self-play pool: training-side subgraphs of each hop count in ``hops``, written to ``work/pool.jsonl``
    in play order (``searchgym.construction.interleave_by_hops``: every step mixes the hop counts; ids prefixed
    with the hop count, ``seed_index`` = position, so the pool loads in this order); made once per workdir."""
    from searchgym.construction import Subgraph, interleave_by_hops
    from searchgym.tasks.heldout import training_subgraphs

    path = work / "pool.jsonl"
    with wait_lock(work / "pool.stage"):
        if path.is_file():
            held = format_pool_hops(pool_hops(path))
            if held != format_pool_hops(hops):
                raise BenchError(
                    f"{path} holds {held} subgraphs, not {format_pool_hops(hops)}: a workdir plays "
                    "one pool, so give another --workdir for another --pool-hops"
                )
            return path
        groups: dict[int, Sequence] = {}
        for h, n in sorted(hops.items()):
            subgraphs = training_subgraphs(world, n, seed=0, hops=h)
            if len(subgraphs) < n:
                raise BenchError(f"the world yields only {len(subgraphs)} training-side {h}-hop subgraphs of {n}")
            groups[h] = subgraphs
        lines: list[str] = []
        for sg in interleave_by_hops(groups):
            d = sg.to_dict()
            d["metadata"] = {**d["metadata"], "source_seed_index": d["metadata"].get("seed_index")}
            d["metadata"]["seed_index"] = len(lines)
            d["id"] = f"h{sg.hops}-{d['id']}"
            lines.append(json.dumps(Subgraph.from_dict(d).to_dict(), ensure_ascii=False))
        write_text(path, "".join(line + "\n" for line in lines))
    return path


def pool_hops(path: Path) -> dict[int, int]:
    """How many subgraphs of each hop count the pool file at ``path`` holds."""
    from searchgym.construction import load_pool

    counts: dict[int, int] = {}
    for sg in load_pool(path):
        counts[sg.hops] = counts.get(sg.hops, 0) + 1
    return dict(sorted(counts.items()))


def format_pool_hops(hops: Mapping) -> str:
    """``{2: 80, 3: 48}`` (hop counts as ints or as the JSON's strings) as ``--pool-hops`` writes it:
    ``2=80,3=48``; two pools are the same pool when these agree."""
    return ",".join(f"{h}={n}" for h, n in sorted((int(h), n) for h, n in hops.items()))


def parse_pool_hops(text: str) -> dict[int, int]:
    """``--pool-hops 2=40,3=88`` as ``{2: 40, 3: 88}``; raises ValueError naming the bad item."""
    hops: dict[int, int] = {}
    for item in text.split(","):
        h, sep, n = item.partition("=")
        if not sep or not h.strip().isdigit() or not n.strip().isdigit() or int(h) < 1 or int(n) < 1:
            raise ValueError(item)
        hops[int(h)] = int(n)
    return dict(sorted(hops.items()))


def check_disjoint(pool: Sequence, heldout: dict) -> dict:
    """Check that no held-out set overlaps what self-play trains on, and say what was checked.

    ``pool``: the self-play pool's subgraphs (every Solver task of a game is built on one: the Proposer's
    question, a replayed one or the template question); ``heldout``: name -> held-out tasks. A held-out task
    clashes when its answer title (normalised) is a name (title or alias) of a pool answer, its answer entity is
    a pool answer, or its question is a pool subgraph's template question. Raises :class:`BenchError` naming the
    clashes; returns the counts, and (for information, not a clash) how many held-out answers appear inside pool
    subgraphs as intermediate or distractor nodes -- the world is shared, only answers are held out."""
    from searchgym.construction.question_templates import path_question
    from searchgym.tasks.heldout import is_heldout_name
    from searchgym.world.world import normalize_name

    names = {normalize_name(n) for sg in pool for n in sg.answer_node.names}
    answer_ids = {sg.answer_node.id for sg in pool}
    node_ids = {nid for sg in pool for nid in sg.nodes}
    questions = {normalize_name(path_question(sg)) for sg in pool}
    report: dict[str, Any] = {"pool_subgraphs": len(pool), "pool_answer_names": len(names), "sets": {}}
    clashes = []
    for set_name, tasks in heldout.items():
        by_name = [t.id for t in tasks if normalize_name(t.answer) in names]
        by_entity = [t.id for t in tasks if t.subgraph is not None and t.subgraph.answer_node.id in answer_ids]
        by_question = [t.id for t in tasks if normalize_name(t.question) in questions]
        report["sets"][set_name] = {
            "n": len(tasks),
            "answer_name_overlap": len(by_name),
            "answer_entity_overlap": len(by_entity),
            "question_overlap": len(by_question),
            "answers_on_heldout_side": sum(is_heldout_name(t.answer) for t in tasks),
            "answers_inside_pool_subgraphs": sum(
                t.subgraph is not None and t.subgraph.answer_node.id in node_ids for t in tasks
            ),
        }
        for what, ids in (("answer names", by_name), ("answer entities", by_entity), ("questions", by_question)):
            if ids:
                clashes.append(f"{set_name} shares {what} with the self-play pool ({', '.join(ids[:5])})")
    if clashes:
        raise BenchError("held-out sets leak into training: " + "; ".join(clashes))
    report["disjoint"] = True
    report["statement"] = (
        "no held-out Solver question or Proposer target shares an answer name, answer entity or question text "
        "with the self-play pool every training game is built on; all held-out answer titles are on the held-out "
        "side of searchgym.tasks.heldout, whose training side the cold start's demonstrations came from"
    )
    return report


def heldout_sets(world, size: dict) -> dict:
    """The held-out Solver questions (in the benchmark's wording and reworded) and Proposer targets of ``size``
    (fixed: the built-in benchmark's)."""
    from searchgym.training.learning_checks import heldout_proposer_tasks, heldout_solver_tasks

    return {
        "solver": heldout_solver_tasks(world, size["eval_hops"]),
        "solver_reworded": heldout_solver_tasks(world, size["eval_hops"], wording="heldout"),
        "proposer": heldout_proposer_tasks(world, size["eval_proposer"]),
    }


def train_config(arm: Arm, seed: int, size: dict, opts: dict, pool: Path, work: Path):
    """The arm's ``TrainConfig``: its recipe at the size, then what every arm shares (``size["train"]``, the pool
    in play order, model/init/device/seed), so the arms differ only in what their recipes set."""
    from searchgym.training.recipes import recipe_config

    fields = {
        **size["train"],
        "model": opts["model"],
        "init": opts["init"],
        "device": opts["device"],
        "seed": seed,
        "output_dir": str(work / run_name(arm.key, seed)),
        "train_solver": True,
        "train_proposer": True,
        "val_every": 0,
        "tensorboard": False,
        "progress": True,
    }
    if opts.get("steps"):
        fields["total_steps"] = opts["steps"]
    if opts.get("eval_at"):  # the steps --eval-at scores stay on disk
        fields["keep_checkpoint_every"] = math.gcd(*opts["eval_at"])
    config_items, filters = split_filter_overrides(opts.get("overrides") or [])
    env_kwargs = {"pool": str(pool), "order": "given", **({"filter_config": filters} if filters else {})}
    if opts.get("proposer_baseline"):  # an ablation over every arm, e.g. hop_group (EVE's HRPO); set with the --set
        # items, so one that needs another field (target: proposer_group_size) is checked against it
        config_items = [*config_items, f"proposer_baseline={opts['proposer_baseline']}"]
    cfg = recipe_config(arm.recipe, size["recipe_size"], env_kwargs=env_kwargs, **fields)
    return cfg.with_overrides(config_items)


#: ``--set filter.FIELD=VALUE`` sets a rule filter of the Proposer's questions (a ``FilterConfig`` field)
FILTER_PREFIX = "filter."


def split_filter_overrides(items: Sequence[str]) -> tuple[list[str], dict]:
    """``--set`` items split into training config items and the rule filters' settings (``filter.FIELD=VALUE``,
    values read as YAML), which go to every arm's env as ``filter_config``."""
    import yaml

    config_items, filters = [], {}
    for item in items:
        key, _, value = item.partition("=")
        if key.startswith(FILTER_PREFIX):
            try:
                filters[key[len(FILTER_PREFIX) :]] = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise BenchError(f"--set {item}: the value is not YAML ({str(exc).splitlines()[0]})") from None
        else:
            config_items.append(item)
    return config_items, filters


#: config fields the benchmark sets itself: ``--set`` may not change them (each has its own option or is fixed)
BENCH_FIELDS = {
    "model": "--model",
    "init": "--init",
    "device": "--device",
    "seed": "--seeds",
    "total_steps": "--steps",
    "output_dir": "--workdir",
    "env_kwargs": "the benchmark's pool",
    "train_solver": "the benchmark (both roles train)",
    "train_proposer": "the benchmark (both roles train)",
}


def filter_fields() -> list[str]:
    """The rule filters' settings ``--set filter.FIELD=VALUE`` may change (``FilterConfig``'s fields)."""
    from dataclasses import fields

    from searchgym.scoring.question_filters import FilterConfig

    return [f.name for f in fields(FilterConfig)]


def parse_overrides(items: Sequence[str]) -> list[str]:
    """``--set KEY=VALUE`` items, normalised (``key=value``, sorted) and checked: a key the benchmark sets
    itself is refused (one line naming its option), and so is a key given twice (which value holds would be a
    guess); unknown keys and bad values fail when the config is made."""
    out = []
    seen: dict[str, str] = {}
    filters = filter_fields()
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BenchError(f"--set {item!r} must look like KEY=VALUE (e.g. kl_coef=0.01)")
        if key in BENCH_FIELDS:
            raise BenchError(f"--set {key}: the benchmark sets it; use {BENCH_FIELDS[key]}")
        if key in seen:
            raise BenchError(f"--set {key} is given twice ({seen[key]!r} and {item!r}); keep one")
        seen[key] = item
        if key.startswith(FILTER_PREFIX) and key[len(FILTER_PREFIX) :] not in filters:
            valid = ", ".join(FILTER_PREFIX + f for f in filters)
            raise BenchError(f"--set {key}: no such rule filter; valid: {valid}")
        out.append(f"{key}={value.strip()}")
    check_filters(split_filter_overrides(out)[1])
    return sorted(out)


def check_filters(filters: Mapping[str, Any]) -> None:
    """Refuse ``--set filter.FIELD=VALUE`` values of the wrong type now, not when the first env is made."""
    from searchgym.core.config_io import dataclass_from_mapping
    from searchgym.scoring.question_filters import FilterConfig

    try:
        dataclass_from_mapping(FilterConfig, filters, what="rule filter")
    except ValueError as exc:
        raise BenchError(f"--set filter.*: {exc}") from None


def stage_train(
    arm: Arm,
    seed: int,
    cfg,
    start: str,
    work: Path,
    opts_overrides: Sequence[str] = (),
    stop_at: Optional[int] = None,
) -> Path:
    """Train one run (resuming from its last checkpoint) and save its ``final/`` policy: the LoRA adapter alone
    when the run trains one (merged over ``start`` to evaluate), else the whole model. Skipped when done (and
    refused when the finished run trained with other steps, baseline or ``--set`` overrides).

    ``stop_at`` (``--stop-at``) ends the run at that step of its ``total_steps`` schedule: trained on to it, or,
    when the run already went past it (a run killed later), its kept checkpoint there becomes the final policy;
    the record says ``stopped_at``."""
    from searchgym.training.selfplay_trainer import SelfPlayTrainer

    opts_overrides = list(opts_overrides)
    goal = cfg.total_steps if stop_at is None else stop_at

    final = work / run_name(arm.key, seed) / "final"
    if (final / DONE).is_file():
        record = json.loads((final / DONE).read_text())
        steps = record["steps"]
        if steps != goal or record.get("stopped_at") != stop_at:
            ended = f"stopped at step {steps} of {record.get('total_steps')}" if record.get("stopped_at") else None
            asked = f"stopped at step {stop_at}" if stop_at is not None else f"{goal} steps"
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} {ended or f'finished at {steps} steps'}, not {asked}: its "
                "results are cached, so give another --workdir for another --steps or --stop-at"
            )
        overrides = record.get("overrides", [])  # runs from before it was recorded had none
        if overrides != opts_overrides:
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} trained with --set {' '.join(overrides) or '(none)'}, not "
                f"{' '.join(opts_overrides) or '(none)'}: its results are cached, so give another --workdir"
            )
        baseline = record.get("proposer_baseline", cfg.proposer_baseline)  # runs from before it was recorded: as set
        if baseline != cfg.proposer_baseline:
            raise BenchError(
                f"run {run_name(arm.key, seed)} in {work} trained with proposer_baseline={baseline}, not "
                f"{cfg.proposer_baseline}: its results are cached, so give another --workdir for another "
                "--proposer-baseline"
            )
        return final
    past = stop_at is not None and trained_steps(work / run_name(arm.key, seed)) > stop_at
    if past:  # the run went on past the stop (killed later): its checkpoint there is the final policy
        kept = checkpoint_policy(work, run_name(arm.key, seed), stop_at)
        logger.info("arm %s seed %d: stopped at step %d, its checkpoint there (%s)", arm.key, seed, stop_at, kept)
        write_folder(final, lambda tmp: shutil.copytree(kept, tmp, dirs_exist_ok=True))
    else:
        logger.info("arm %s seed %d: training %d of %d steps (%s)", arm.key, seed, goal, cfg.total_steps, arm.recipe)
        trainer = SelfPlayTrainer(cfg, num_envs=cfg.batch_size)  # a step's games in one lock-step wave: batched turns
        trainer.train(resume=True, until=stop_at)
        final.mkdir(parents=True, exist_ok=True)
        trainer.policy.save_pretrained(final)
        if not cfg.lora:
            trainer.tokenizer.save_pretrained(final)
    done = {
        "arm": arm.key,
        "recipe": arm.recipe,
        "seed": seed,
        "start": start,
        "steps": goal,
        "total_steps": cfg.total_steps,
        "stopped_at": stop_at,
        "proposer_baseline": cfg.proposer_baseline,
        "overrides": opts_overrides,
    }
    write_text(final / DONE, json.dumps(done, indent=1))
    return final


def trained_steps(run: Path) -> int:
    """The step of run folder ``run``'s newest readable checkpoint (0 when it has none)."""
    from searchgym.training.checkpoints import CheckpointManager, read_meta

    latest = CheckpointManager.of_run(run).latest()
    return 0 if latest is None else int(read_meta(latest)["step"])


def stage_start(start: str, work: Path, *, record: bool = True) -> dict:
    """Record what the workdir's runs start from (``work/start.json``; not when ``record`` is false) and refuse
    another start: the cold start's evaluation and every arm must share it (a re-made cold-start adapter needs a
    fresh --workdir)."""
    from searchgym.training.cold_start import weights_fingerprint

    path = work / "start.json"
    with wait_lock(work / "start.stage"):
        mine = {"start": start, "fingerprint": weights_fingerprint(start)}
        if path.is_file():
            first = json.loads(path.read_text())
            if first["fingerprint"] != mine["fingerprint"]:
                raise BenchError(
                    f"{work} holds runs that start from {first['start']} (weights {first['fingerprint']}); this "
                    f"command starts from {start} (weights {mine['fingerprint']}): give another --workdir"
                )
            return first
        if record:
            write_text(path, json.dumps(mine, indent=1))
        return mine


def open_trained(start: str, final: Path):
    """``(model, tokenizer)`` of a finished run: ``start`` with the run's adapter merged in (its adapters, one per
    role, when it trained with ``proposer_adapter``), or its whole model."""
    from searchgym.llm.pretrained import open_model
    from searchgym.llm.role_adapters import attach_adapters

    if not (final / "adapter_config.json").is_file():
        return open_model(str(final))
    model, tok = open_model(start)
    return attach_adapters(model, final), tok


#: what joins a run's name and a training step in its ``--eval-at`` evaluation stages (``b_s0_step16``)
STEP_STAGE = "_step"


def checkpoint_stage(name: str, step: int) -> str:
    """The evaluation stage of run ``name`` at training step ``step`` (``--eval-at``)."""
    return f"{name}{STEP_STAGE}{step}"


def checkpoint_policy(work: Path, name: str, step: int) -> Path:
    """The policy (adapter) run ``name`` saved at ``step``; refused when the run did not keep that checkpoint."""
    from searchgym.training.checkpoints import CheckpointManager

    policy = CheckpointManager.of_run(work / name).policy_dir(step)
    if not policy.is_dir():
        raise BenchError(
            f"run {name} in {work} kept no checkpoint at step {step} (a run keeps its newest two and the steps "
            f"--eval-at names while it trains; it trained without --eval-at {step}): give another --workdir to score "
            "it there"
        )
    return policy


def stage_eval(name: str, load, modes: Sequence[str], world, size: dict, work: Path, device: str, label: str) -> dict:
    """Held-out Solver accuracy by hop and Proposer valid rate (in each of ``modes``) of one model (cached)."""
    return evaluate_model(
        name,
        load,
        world,
        work,
        device,
        hops=size["eval_hops"],
        proposer=size["eval_proposer"],
        max_new_tokens=size["max_new_tokens"],
        model_label=label,
        proposer_modes=modes,
    )


def stage_cold(start: str, world, size: dict, work: Path, device: str, samples: int) -> None:
    """The cold start's held-out evaluation (both Proposer prompts, then ``samples`` sampled rollouts a target),
    once per workdir: whichever process gets here first runs it, the others wait on its lock and find it cached."""
    from searchgym.llm.pretrained import open_model

    with wait_lock(work / f"{COLD}.stage"):
        stage_eval(COLD, lambda: open_model(start), ("kg", "vanilla"), world, size, work, device, start)
        if samples:
            stage_sampled(COLD, lambda: open_model(start), world, size, work, device, samples)


def stage_sampled(name: str, load, world, size: dict, work: Path, device: str, samples: int) -> dict:
    """The KG Proposer's valid rate on the held-out targets as the game plays it: ``samples`` rollouts a target at
    the rollouts' temperature (:data:`SAMPLED_TEMPERATURE`), seeded, records in the stage's eval folder (cached in
    :data:`SAMPLED`; a cached stage sampled another number of times is refused). The greedy rate scores the
    policy's mode, which the game never plays: self-play trains the distribution it samples questions from."""
    import torch

    from searchgym.training.learning_checks import heldout_proposer_tasks, llm_eval_agent, proposer_valid_rate

    meta = eval_dir(work, name) / SAMPLED
    if meta.is_file():
        done = json.loads(meta.read_text())
        if done.get("samples") != samples:
            raise BenchError(
                f"{meta} was sampled {done.get('samples')} times a target, this invocation asks {samples}: rerun "
                f"with --proposer-samples {done.get('samples')}, or give another --workdir"
            )
        return done
    model, tok = load()
    agent = llm_eval_agent(
        model,
        tok,
        name,
        max_new_tokens=size["max_new_tokens"],
        device=None if device == "cpu" else device,
        temperature=SAMPLED_TEMPERATURE,
        seed=0,
    )
    t0 = time.perf_counter()
    tasks = heldout_proposer_tasks(world, size["eval_proposer"])
    rate = proposer_valid_rate(
        agent, world, tasks, output_dir=eval_dir(work, name), mode="kg", progress=True, samples=samples, sampled=True
    )
    out = {
        **rate,
        "samples": samples,
        "temperature": SAMPLED_TEMPERATURE,
        "seconds": round(time.perf_counter() - t0, 1),
        "torch_threads": torch.get_num_threads(),
    }
    write_text(meta, json.dumps(out, indent=1) + "\n")
    return out


# ============================================================================ collect
#: curve name -> the trainer's metrics.jsonl key
CURVES = {
    "valid_rate": "proposer/valid_rate",
    "proposer_reward": "proposer/reward",
    "solver_reward": "solver/reward",
    "solver_correct": "solver/correct",
    "solver_on_proposed": "solver/on_proposed",
    "solver_proposed_reward": "solver/proposed_reward",
    "solver_proposed_correct": "solver/proposed_correct",
    "groups_with_signal": "solver/groups_with_signal",
    "question_hops": "proposer/hops",
    "question_words": "proposer/question_words",
    "proposer_searches": "proposer/searches",
    "proposer_searched_short": "proposer/searched_short",
    "solver_searches": "solver/searches",
    "solver_search_discounted": "solver/search_discounted",
    "solver_short_search_discounted": "solver/short_search_discounted",
    "solver_entropy": "solver/entropy",
    "proposer_entropy": "proposer/entropy",
    "solver_skipped_no_signal": "solver/skipped_no_signal",
    "proposer_skipped_no_signal": "proposer/skipped_no_signal",
    "games": "games",
    "rollout_s": "perf/rollout_s",
    "env_s": "perf/env_s",
    "update_s": "perf/update_s",
    "step_s": "perf/step_s",
}


def _finite(x: Any) -> Any:
    """``x`` with NaN/inf as None (JSON has no NaN)."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


def train_curve(
    run: Path, world: Any = None, pool: Optional[Mapping[str, Any]] = None, until: Optional[int] = None
) -> dict:
    """One run's per-step curves from its ``metrics.jsonl`` (the last record of a step wins; with ``until``, the
    steps up to it: a run stopped there that had trained on), rejection reasons as per-step shares, and the
    questions of its first and last step (all of them stay in metrics.jsonl). Given the ``world`` and the ``pool``
    (subgraph id -> subgraph), also why its invalid questions were invalid, per step and over the run
    (``invalid_kinds``: ``searchgym.evaluation.proposer_errors``; a question logged before records named their
    ``target`` counts as its rejection reason)."""
    from searchgym.training.metrics import read_metrics

    logged = read_metrics(run / "metrics.jsonl")
    rows = list({m["step"]: m for m in logged if "games" in m and (until is None or m["step"] <= until)}.values())
    rows.sort(key=lambda m: m["step"])
    curve: dict[str, Any] = {"step": [m["step"] for m in rows]}
    curve.update({name: [_finite(m.get(key)) for m in rows] for name, key in CURVES.items()})
    prefix = "proposer/rejected/"
    reasons = sorted({k[len(prefix) :] for m in rows for k in m if k.startswith(prefix)})
    curve["rejected"] = {r: [_finite(m.get(prefix + r, 0.0)) for m in rows] for r in reasons}
    curve["valid_by_hops"] = valid_by_hops(rows)
    if world is not None and pool is not None:
        from searchgym.evaluation.proposer_errors import count_invalid_kinds

        steps = [
            Counter(count_invalid_kinds(world, pool, m.get("proposer/questions") or [], key="target")) for m in rows
        ]
        curve["invalid_kinds"] = {
            "total": dict(sum(steps, Counter()).most_common()),
            "steps": [dict(c.most_common()) for c in steps],
        }
    curve["questions_first_step"] = rows[0].get("proposer/questions", []) if rows else []
    curve["questions_last_step"] = rows[-1].get("proposer/questions", []) if rows else []
    return curve


def tally_valid(cells: dict, hops: Any, valid: bool, searches: Optional[int] = None) -> None:
    """Count one question (or target) of ``hops`` hops in ``cells`` (hop count as a string -> ``{"valid", "n"}``);
    with the Proposer's ``searches`` for it, also their total (``searches_total``), how many questions it wrote
    after fewer searches than the path has hops (``short``: a question written one hop short of a 3-hop target
    asks for the intermediate entity, which the verifier then answers -- the way the KG Proposer forgot 3-hop
    questions in the ``cpu`` runs) or after more (``long``: a 3-hop habit on a 2-hop target), and how many of
    those written after exactly as many searches as hops were valid (``matched_valid`` of ``matched``): whether
    a Proposer's valid rate moved because it searched the path's length more often or wrote better questions once
    it did."""
    cell = cells.setdefault(str(hops), {"valid": 0, "n": 0})
    cell["valid"] += int(bool(valid))
    cell["n"] += 1
    if searches is not None and isinstance(hops, int):
        for key, count in (
            ("searches_total", searches),
            ("short", int(searches < hops)),
            ("long", int(searches > hops)),
            ("matched", int(searches == hops)),
            ("matched_valid", int(searches == hops and bool(valid))),
        ):
            cell[key] = cell.get(key, 0) + count


def valid_by_hops(rows: Sequence[Mapping]) -> dict:
    """The Proposer's questions while training, per hop count of their subgraphs: the valid count and the number
    written (``{"valid", "n"}``, as :func:`proposer_cells` counts the held-out targets), over the whole run
    (``total``) and per step (``steps``). Its training signal by hop count: SSP's REINFORCE pushes only on valid
    questions, so a hop count that is seldom valid while training is one the Proposer is not taught (and may forget)."""
    total: dict[str, dict] = {}
    steps = []
    for m in rows:
        step: dict[str, dict] = {}
        for q in m.get("proposer/questions") or []:
            for cells in (step, total):
                tally_valid(cells, q.get("hops", "?"), q.get("valid"), q.get("searches"))
        steps.append(dict(sorted(step.items())))
    return {"total": dict(sorted(total.items())), "steps": steps}


@dataclass(frozen=True)
class TargetFacts:
    """What the collection knows about the held-out Proposer targets: each one's hop count (``hops``: target id ->
    hops), the ids of those whose path has a single answer in the world (``single``, from
    ``searchgym.construction.path_answers``), and, to say why a question on one was invalid, each one's subgraph
    (``subgraphs``) and the world they are in."""

    hops: Mapping[str, int]
    single: frozenset
    subgraphs: Mapping[str, Any] = field(default_factory=dict)
    world: Any = None
    #: the held-out Solver questions' task id -> the names of the nodes each one's path passes through between
    #: its seed and its answer (``Subgraph.bridge_names``), to count answers that stopped short
    #: (``bench_learning.stopped_short``)
    intermediates: Mapping[str, Sequence[str]] = field(default_factory=dict)


def proposer_cells(work: Path, name: str, modes: Sequence[str], facts: TargetFacts) -> dict:
    """Per Proposer mode, the valid rate on the held-out targets with its 95 % bootstrap interval, and per hop
    count of the targets the valid count out of the targets, the searches made and the questions written short
    of the path (:func:`tally_valid`): a Proposer that learns 2-hop questions while forgetting 3-hop ones shows
    it here, not in the overall rate; the valid count on the single-answer targets (``single_answer``; the
    others admit no verifiable question); and, for the KG prompt, why the invalid questions were invalid
    (``invalid_kinds``: ``searchgym.evaluation.proposer_errors``, kind -> count)."""
    out = {}
    for m in modes:
        records = proposer_records(work, name, m)
        if records:  # an answer-only question is written on no path: no invalid kinds
            out[m] = records_cell(records, facts, kinds=m == "kg")
    return out


def records_cell(records: Mapping[str, Sequence[Mapping]], facts: TargetFacts, *, kinds: bool) -> dict:
    """One Proposer cell from a stage's held-out ``records`` (target id -> its rollouts: one greedy, or several
    sampled): the valid share of all rollouts with a 95 % bootstrap interval over targets (a target's rollouts
    resampled together), and counting rollouts ``by_hops`` (:func:`tally_valid`), ``single_answer`` and, with
    ``kinds`` and the world known, the invalid ones' ``invalid_kinds``."""
    from searchgym.evaluation.metrics import bootstrap_ci
    from searchgym.evaluation.proposer_errors import count_invalid_kinds

    by_hops: dict[str, dict] = {}
    for task, rs in sorted(records.items(), key=lambda kv: facts.hops.get(kv[0], 0)):
        for r in rs:
            searches = len(r["queries"]) if isinstance(r.get("queries"), list) else None
            tally_valid(by_hops, facts.hops.get(task, "?"), bool(r["valid"]), searches)
    cell: dict[str, Any] = {**bootstrap_ci(valid_shares(records).values()), "by_hops": by_hops}
    kept = [bool(r["valid"]) for task, rs in records.items() if task in facts.single for r in rs]
    cell["single_answer"] = {"valid": sum(kept), "n": len(kept)}
    if kinds and facts.world is not None:
        rows = [r for rs in records.values() for r in rs]
        cell["invalid_kinds"] = count_invalid_kinds(facts.world, facts.subgraphs, rows)
    return cell


def valid_shares(records: Mapping[str, Sequence[Mapping]]) -> dict:
    """target id -> the share of its rollouts in ``records`` (target id -> rollouts) that wrote a valid question."""
    return {task: sum(bool(r["valid"]) for r in rs) / len(rs) for task, rs in records.items()}


def sampled_cell(work: Path, name: str, facts: TargetFacts) -> Optional[dict]:
    """The stage's sampled held-out KG Proposer rate as :func:`records_cell` reports it, with ``samples`` a target
    (None if not scored)."""
    records = proposer_records(work, name, "kg", sampled=True)
    if not records:
        return None
    return {**records_cell(records, facts, kinds=True), "samples": max(len(rs) for rs in records.values())}


def proposer_records(work: Path, name: str, mode: str, *, sampled: bool = False) -> dict[str, list]:
    """target id -> the stage's held-out Proposer rollouts on it (prompt ``mode``: question, queries, valid, reason;
    one greedy, or with ``sampled`` those of :func:`stage_sampled`), {} if not scored."""
    from searchgym.training.learning_checks import proposer_records_name

    path = eval_dir(work, name) / proposer_records_name(mode, sampled=sampled)
    if not path.is_file():
        return {}
    out: dict[str, list] = {}
    for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        out.setdefault(r["task"], []).append(r)
    return out


def proposer_valid(work: Path, name: str, mode: str, *, sampled: bool = False) -> dict:
    """target id -> the share of the stage's Proposer rollouts on it (prompt ``mode``; greedy: one, so 1.0 or 0.0)
    that wrote a valid question ({} if not scored)."""
    return valid_shares(proposer_records(work, name, mode, sampled=sampled))


def finished_runs(work: Path) -> dict:
    """arm key -> sorted seeds whose training and evaluation are both finished in ``work``."""
    out: dict[str, list[int]] = {}
    for arm in ARMS:
        for done in sorted(work.glob(f"{arm}_s*/final/{DONE}")):
            seed = int(json.loads(done.read_text())["seed"])
            if (work / f"eval_{run_name(arm, seed)}.json").is_file():
                out.setdefault(arm, []).append(seed)
    return {a: sorted(s) for a, s in out.items()}


def seeds_note(runs_done: dict) -> str:
    """The seeds each arm finished (arms may differ: a CPU run may add a seed to some arms only), with the caveat
    that one run's difference inside its bootstrap interval is not evidence when an arm has a single seed."""
    per_arm = "; ".join(f"({k}) {', '.join(map(str, s))}" for k, s in sorted(runs_done.items()))
    note = f"seeds per arm: {per_arm}"
    if any(len(s) < 2 for s in runs_done.values()):
        note += "; one seed is allowed on CPU: a difference inside one run's bootstrap interval is not evidence"
    return note


def scored_stage(work: Path, name: str, modes: Sequence[str], facts: TargetFacts) -> dict:
    """A scored stage's held-out results with its Proposer cells and its paired flips against the cold start."""
    ev = with_stopped_short(json.loads((work / f"eval_{name}.json").read_text()), work, name, facts)
    ev["proposer_cells"] = with_sampled(proposer_cells(work, name, modes, facts), work, name, facts)
    ev["vs_cold_start"] = {
        "solver": paired_flips(work, COLD, name),
        "solver_reworded": paired_flips(work, COLD, name, reworded=True),
        **{f"proposer_{m}": paired_counts(proposer_valid(work, COLD, m), proposer_valid(work, name, m)) for m in modes},
    }
    before, after = proposer_valid(work, COLD, "kg", sampled=True), proposer_valid(work, name, "kg", sampled=True)
    if before and after:  # per target, the share of its sampled rollouts that were valid
        ev["vs_cold_start"][f"proposer_{SAMPLED_CELL}"] = paired_counts(before, after)
    return ev


def with_stopped_short(ev: dict, work: Path, name: str, facts: TargetFacts) -> dict:
    """``ev`` (a stage's held-out results) with, in each wording's Solver cell, the answers per hop count that
    stopped at a node short of the answer and the rollouts that searched fewer times than the hops
    (``stopped_short_by_hops``), where the questions' paths are known."""
    if not facts.intermediates:
        return ev
    for key, reworded in (("solver", False), ("solver_reworded", True)):
        if key in ev:
            ev[key]["stopped_short_by_hops"] = stopped_short(
                heldout_records(work, name, reworded=reworded), facts.intermediates
            )
    return ev


def with_sampled(cells: dict, work: Path, name: str, facts: TargetFacts) -> dict:
    """``cells`` with the stage's sampled KG Proposer rate as the :data:`SAMPLED_CELL` mode, where it was scored."""
    cell = sampled_cell(work, name, facts)
    return cells if cell is None else {**cells, SAMPLED_CELL: cell}


def scored_checkpoints(work: Path, name: str) -> list[int]:
    """The training steps at which run ``name`` was also scored (``--eval-at``), ascending."""
    prefix = f"eval_{name}{STEP_STAGE}"
    steps = (p.name[len(prefix) : -len(".json")] for p in work.glob(f"{prefix}*.json"))
    return sorted(int(x) for x in steps if x.isdigit())


def collect(work: Path, size_name: str, header: dict, facts: TargetFacts, pool: Sequence[Any] = ()) -> dict:
    """Every finished run of ``work`` against the cold start: curves, held-out results, paired flips, gains and
    the issue's targets (met or not, reported either way), with the seeds each arm finished; ``header``: what the
    invocation records about itself (size, machine, start, pool, held-out sets); ``facts``: the held-out
    Proposer targets' hop counts and single-answer ids; ``pool``: the workdir's pool subgraphs, to read the KG
    arms' training questions against the paths they were written on."""
    cold_path = work / f"eval_{COLD}.json"
    runs_done = finished_runs(work)
    if not cold_path.is_file() or not runs_done:
        raise BenchError(
            f"{work} has no finished run to collect (a trained and evaluated arm and the cold start's evaluation); "
            "run the benchmark without --collect first"
        )
    from searchgym.training.selfplay_config import TrainConfig

    cold = with_stopped_short(json.loads(cold_path.read_text()), work, COLD, facts)
    cold["proposer_cells"] = with_sampled(proposer_cells(work, COLD, ("kg", "vanilla"), facts), work, COLD, facts)
    configs = {
        (k, s): TrainConfig.load(work / run_name(k, s) / "config.yaml") for k, ss in runs_done.items() for s in ss
    }
    records = {ks: json.loads((work / run_name(*ks) / "final" / DONE).read_text()) for ks in configs}
    budgets = {  # a run stopped early (--stop-at) played that many steps of its schedule
        run_name(*ks): {**{f: getattr(c, f) for f in BUDGET}, "stopped_at": records[ks].get("stopped_at")}
        for ks, c in configs.items()
    }
    if len({json.dumps(b, sort_keys=True) for b in budgets.values()}) != 1:
        raise BenchError(
            f"the finished runs in {work} have different rollout budgets ({budgets}); an arm comparison needs equal "
            "ones: give each budget its own --workdir"
        )
    budget = next(iter(budgets.values()))
    results: dict[str, Any] = {
        **header,
        "seeds": sorted({s for seeds in runs_done.values() for s in seeds}),
        "seeds_note": seeds_note(runs_done),
        "budget": {**budget, "games_per_run": budget["batch_size"] * (budget["stopped_at"] or budget["total_steps"])},
        "budget_equal": True,
        "cold_start": cold,
        "arms": {},
    }
    stages: dict[str, list] = {"cold start": [cold]}
    pool_by_id = {sg.id: sg for sg in pool}
    for key, seeds in runs_done.items():
        arm = ARMS[key]
        modes = sorted({"kg", arm.proposer_mode})
        runs = []
        for seed in seeds:
            name = run_name(key, seed)
            # an answer-only question is written on no path: only the KG Proposer's are read against theirs
            stopped_at = records[(key, seed)].get("stopped_at")
            curve = train_curve(
                work / name, facts.world, pool_by_id if arm.proposer_mode == "kg" else None, until=stopped_at
            )
            runs.append(
                {
                    **scored_stage(work, name, modes, facts),
                    "seed": seed,
                    "stopped_at": stopped_at,
                    "train": curve,
                    "train_s": round(sum(x or 0.0 for x in curve["step_s"]), 1),
                    "games": sum(x or 0 for x in curve["games"]),
                    "adapter": str(work / name / "final"),
                    "checkpoints": [
                        {"step": step, **scored_stage(work, checkpoint_stage(name, step), modes, facts)}
                        for step in scored_checkpoints(work, name)
                    ],
                }
            )
        config = configs[(key, seeds[0])].to_dict()
        config.pop("seed")
        overrides = records[(key, seeds[0])].get("overrides", [])
        label = arm_label(
            arm, config["proposer_baseline"], size_name, overrides, header["pool"]["hops"], budget["stopped_at"]
        )
        results["arms"][key] = {
            "label": label,
            "recipe": arm.recipe,
            "proposer_mode": arm.proposer_mode,
            "config": config,
            "overrides": overrides,
            "runs": runs,
        }
        stages[label] = runs
    labels = [results["arms"][k]["label"] for k in runs_done]
    results["solver_gain"] = rl_gain(stages, labels)
    results["proposer_gain"] = proposer_gain(cold, results["arms"])
    results["targets"] = targets(size_name, results)
    return results


def arm_label(
    arm: Arm,
    proposer_baseline: str,
    size_name: str,
    overrides: Sequence[str] = (),
    pool: Optional[Mapping] = None,
    stopped_at: Optional[int] = None,
) -> str:
    """The arm's label, naming the Proposer baseline when its runs trained with another than the recipe's own
    (``--proposer-baseline``), every ``--set`` override, a ``pool`` (hop count: subgraphs) other than the
    size's (``--pool-hops``) and a stop before the schedule's end (``--stop-at``), so an ablation's table and
    figure never pass for the arm itself."""
    from searchgym.training.recipes import recipe_values

    own = recipe_values(arm.recipe, SIZES[size_name]["recipe_size"])["proposer_baseline"]
    label = arm.label if proposer_baseline == own else f"{arm.label}, {proposer_baseline} baseline"
    if pool is not None and format_pool_hops(pool) != format_pool_hops(SIZES[size_name]["pool"]):
        overrides = [*overrides, f"pool {format_pool_hops(pool)}"]
    if stopped_at is not None:
        overrides = [*overrides, f"stopped at step {stopped_at}"]
    return ", ".join([label, *overrides])


def proposer_gain(cold: dict, arms: dict) -> dict:
    """Per arm and Proposer mode: the seeds' mean held-out valid rate minus the cold start's, with the spread."""
    out: dict = {}
    for key, arm in arms.items():
        for mode, cell in cold["proposer_cells"].items():
            vals = [r["proposer_cells"][mode]["mean"] for r in arm["runs"] if mode in r["proposer_cells"]]
            if vals:
                out.setdefault(key, {})[mode] = {
                    "cold_start": cell["mean"],
                    "mean": sum(vals) / len(vals),
                    "gain": sum(vals) / len(vals) - cell["mean"],
                    "min": min(vals) - cell["mean"],
                    "max": max(vals) - cell["mean"],
                    "seeds": len(vals),
                }
    return out


def targets(size_name: str, results: dict) -> dict:
    """The issue's targets for ``size_name``, each with the measured values and whether it is met.

    cpu: in the KG arms the Proposer's held-out valid rate (KG prompt) rises >= 10 points, greedy and, where
    scored, sampled as the game samples (``<arm>_proposer_sampled_valid_plus_10``), and no arm loses
    held-out Solver accuracy on any hop count. gpu (and toy, its scaled copy): arm (c) gains >= 5 points on
    held-out 2- and 3-hop questions, and the ordering (c) >= (b) >= (a) of mean held-out accuracy."""
    gain, pgain = results["solver_gain"], results["proposer_gain"]
    out: dict[str, Any] = {}
    if size_name == "cpu":
        for key in ("b", "c"):
            if key in pgain and "kg" in pgain[key]:
                g = pgain[key]["kg"]["gain"]
                out[f"{key}_proposer_valid_plus_10"] = {"gain": g, "met": g >= 0.10}
            if key in pgain and SAMPLED_CELL in pgain[key]:  # the same target on the rate the game samples
                g = pgain[key][SAMPLED_CELL]["gain"]
                out[f"{key}_proposer_sampled_valid_plus_10"] = {"gain": g, "met": g >= 0.10}
        for key, arm in results["arms"].items():
            by_hop = gain.get(arm["label"], {})
            out[f"{key}_no_net_loss_any_hop"] = {
                "gain_by_hop": {h: v["gain"] for h, v in by_hop.items()},
                "met": all(v["gain"] >= 0 for v in by_hop.values()),
            }
        return out
    c = gain.get(results["arms"]["c"]["label"], {}) if "c" in results["arms"] else {}
    for h in ("2", "3"):
        if h in c:
            out[f"c_{h}hop_plus_5"] = {"gain": c[h]["gain"], "seeds": c[h]["seeds"], "met": c[h]["gain"] >= 0.05}
    means = {}  # per arm, the seeds' mean of the 2- and 3-hop held-out EM (the hop counts of the target)
    for key, arm in results["arms"].items():
        vals = [(r["solver"]["by_hops"]["2"]["mean"] + r["solver"]["by_hops"]["3"]["mean"]) / 2 for r in arm["runs"]]
        means[key] = sum(vals) / len(vals)
    if len(means) == len(ARMS):
        out["ordering_c_ge_b_ge_a"] = {"mean_em_2_3_hop": means, "met": means["c"] >= means["b"] >= means["a"]}
    return out


def plot(results: dict, path: Path) -> None:
    """One figure: per step, the Proposer's valid rate, its reward, the Solvers' reward (dashed: on the model's
    questions) and groups with signal, a line per run and a colour per arm; then held-out Solver accuracy by hop
    and the Proposer's held-out valid rate, cold start and every arm (bars: one run's 95 % interval, or the
    seeds' min-max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from searchgym.evaluation.plots import arm_curves, hop_bars, interval_bars
    from searchgym.evaluation.selfplay_results import shared_settings

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    panels = [
        (axes[0][0], "valid_rate", "Proposer valid-question rate"),
        (axes[0][1], "proposer_reward", "Proposer reward"),
        (axes[0][2], "solver_reward", "Solver reward (dashed: on the model's questions)"),
        (axes[1][0], "groups_with_signal", "Solver groups with signal"),
    ]
    arms = list(results["arms"].values())
    names, shared = shared_settings([arm["label"] for arm in arms])
    arm_curves(
        panels,
        [(name, [run["train"] for run in arm["runs"]]) for arm, name in zip(arms, names)],
        dashed=(axes[0][2], "solver_proposed_reward"),
    )
    stages = {"cold start": [results["cold_start"]]}
    stages.update({arm_name: arm["runs"] for arm, arm_name in zip(arms, names)})
    hop_bars(
        axes[1][1],
        {st: [r["solver"]["by_hops"] for r in runs] for st, runs in stages.items()},
        HOPS,
        ylabel="held-out exact match",
    )
    axes[1][1].set_title("held-out Solver exact match", fontsize=10)
    axes[1][1].set_ylim(0, 1)
    modes = ("kg", SAMPLED_CELL, "vanilla")
    interval_bars(
        axes[1][2],
        {st: [r.get("proposer_cells", {}) for r in runs] for st, runs in stages.items()},
        modes,
        ["KG prompt, greedy", f"KG prompt, sampled (T = {SAMPLED_TEMPERATURE:g})", "answer-only prompt"],
        ylabel="held-out valid-question rate",
    )
    axes[1][2].set_title("Proposer on held-out targets", fontsize=10)
    axes[1][2].set_ylim(0, 1)
    seeds = sorted({r["seed"] for arm in results["arms"].values() for r in arm["runs"]})
    fig.suptitle(
        f"KGSelfPlay-v0 from the cold start, both roles trained ({results['size']} size, seeds {seeds})"
        + (f"\nevery arm with {shared}" if shared else "")
    )
    fig.tight_layout()
    try:
        write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)


# ============================================================================ main
def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line; bad values end in argparse's one-line error (exit 2)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="cpu")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda for gpu, else cpu")
    ap.add_argument("--workdir", default="runs/bench_selfplay", help="stages are cached in <workdir>/<size>")
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset of a,b,c to run")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: the size's)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (default: the size's)")
    ap.add_argument("--model", default=None, help="the base model (default smollm2; --size toy needs a folder)")
    ap.add_argument("--init", default=None, help=f"start from: {SHIPPED_INIT} (default), a model folder, or none")
    ap.add_argument(
        "--proposer-baseline",
        choices=PROPOSER_BASELINES,
        default=None,
        help="an ablation: this Proposer baseline in every arm instead of each recipe's own (e.g. hop_group, EVE's "
        "HRPO); runs are cached, so give it its own --workdir",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an ablation: this training config value in every arm (repeatable, e.g. kl_coef=0.01), or a rule filter "
        "of the Proposer's questions as filter.FIELD=VALUE (e.g. filter.searches_at_least_required=true); runs are "
        "cached, so give it its own --workdir",
    )
    ap.add_argument(
        "--pool-hops",
        default=None,
        metavar="H=N,...",
        help="an ablation: the self-play pool's subgraphs per hop count (e.g. 3=128; default: the size's), named in "
        "each arm's label; a workdir plays one pool, so give it its own --workdir",
    )
    ap.add_argument(
        "--eval-at",
        default=None,
        metavar="STEP,...",
        help="also score every run on the held-out sets at these training steps (each a multiple of the size's "
        "save_every and below the run's last step); the runs keep those checkpoints",
    )
    ap.add_argument(
        "--stop-at",
        type=int,
        default=None,
        metavar="STEP",
        help="end every run at this step of its schedule (a multiple of the size's save_every below the last step): "
        "a run trains on to it, or one that went past it (killed later) is scored at its checkpoint there; the "
        "learning-rate schedule and the pool stay the whole run's, and the arm's label names the stop. Runs are "
        "cached, so a stopped run needs its own --workdir",
    )
    ap.add_argument(
        "--proposer-samples",
        type=int,
        default=None,
        help="rollouts a held-out Proposer target for the sampled valid rate, at the rollouts' temperature "
        "(default: the size's; 0: greedy only)",
    )
    ap.add_argument("--out", default=None, help="results JSON (default benchmarks/results/selfplay_<size>.json)")
    ap.add_argument("--collect", action="store_true", help="only write the JSON/PNG from the finished runs")
    ap.add_argument(
        "--cold-start-only",
        action="store_true",
        help="only the cold start's evaluation (greedy, then sampled), cached in the workdir: run it in a process of "
        "its own beside one training run, rather than after the runs; --arms and --seeds are ignored",
    )
    ap.add_argument(
        "--ship",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="also write the compact results `searchgym demo` shows to PATH "
        "(default searchgym/assets/selfplay_<size>.json, shipped with the package)",
    )
    ap.add_argument("--debug", action="store_true", help="show the traceback of a bad-input error too")
    args = ap.parse_args(argv)
    size = SIZES[args.size]
    unknown = [a for a in args.arms.split(",") if a not in ARMS]
    if unknown or not args.arms:
        ap.error(f"--arms {args.arms!r}: use a comma-separated subset of {','.join(ARMS)}")
    try:
        args.seed_list = [int(x) for x in args.seeds.split(",")] if args.seeds else list(size["seeds"])
    except ValueError:
        ap.error(f"--seeds {args.seeds!r}: give comma-separated integers, e.g. 0,1,2")
    if args.cold_start_only and args.collect:
        ap.error("--cold-start-only evaluates the cold start and --collect only collects: give one of them")
    if args.steps is not None and args.steps < 1:
        ap.error(f"--steps must be at least 1; got {args.steps}")
    if args.proposer_samples is not None and args.proposer_samples < 0:
        ap.error(f"--proposer-samples must be 0 (greedy only) or more; got {args.proposer_samples}")
    args.samples = size["proposer_samples"] if args.proposer_samples is None else args.proposer_samples
    args.device = args.device or size["device"]
    steps, save_every = args.steps or size["train"]["total_steps"], size["train"]["save_every"]
    if args.stop_at is not None and not checkpointed_before(args.stop_at, save_every, steps):
        ap.error(
            f"--stop-at {args.stop_at}: stop at a checkpointed step before the last ({steps}); use a multiple of "
            f"save_every={save_every} below {steps}"
        )
    args.eval_steps = parse_eval_at(ap, args.eval_at, save_every, args.stop_at or steps)
    try:
        args.pool = parse_pool_hops(args.pool_hops) if args.pool_hops else dict(size["pool"])
    except ValueError as exc:
        ap.error(f"--pool-hops {args.pool_hops!r}: {exc.args[0]!r} is not HOPS=COUNT; give e.g. 2=40,3=88")
    if args.size == "toy" and not args.model:
        ap.error("--size toy needs --model DIR: a small model folder (searchgym.llm.tiny_models.save_tiny makes one)")
    args.model = args.model or "smollm2"
    init = args.init if args.init is not None else size["init"]
    args.init = None if init in (None, "none") else init
    if args.init not in (None, SHIPPED_INIT) and not Path(args.init).exists():
        ap.error(f"--init {args.init}: no such folder; give a cold-start folder, {SHIPPED_INIT} or none")
    return args


def checkpointed_before(step: int, save_every: int, last: int) -> bool:
    """Whether a run checkpoints at ``step`` (a multiple of ``save_every``) before its ``last`` step: the steps
    ``--eval-at`` may score and ``--stop-at`` may stop at."""
    return 1 <= step < last and step % save_every == 0


def parse_eval_at(ap: argparse.ArgumentParser, text: Optional[str], save_every: int, steps: int) -> list[int]:
    """``--eval-at`` as sorted steps, each a checkpointed step (a multiple of ``save_every``) before the last."""
    if not text:
        return []
    try:
        out = sorted({int(x) for x in text.split(",")})
    except ValueError:
        ap.error(f"--eval-at {text!r}: give comma-separated training steps, e.g. 8,16")
    bad = [k for k in out if not checkpointed_before(k, save_every, steps)]
    if bad:
        ap.error(
            f"--eval-at {text!r}: step {bad[0]} is not a checkpointed step before the last ({steps}); use multiples of "
            f"save_every={save_every} below {steps}"
        )
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run (or ``--collect``) the benchmark; 0 on success, 2 on bad input or an unusable workdir."""
    return run_reporting_errors("bench_selfplay", run, parse_args(argv))


def run_reporting_errors(prog: str, job, args: argparse.Namespace) -> int:
    """``job(args)`` with logging on; 0 when it succeeds, 2 after one line ``<prog>: error: ...`` when it fails on bad
    input (:class:`BenchError` or searchgym's own errors; the traceback too with ``args.debug``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from searchgym.errors import SearchGymError

    try:
        job(args)
    except (BenchError, SearchGymError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> None:
    """The stages for ``args`` (pool, training, evaluation, cold start), then the collection of the workdir."""
    import torch

    from searchgym.construction import load_pool
    from searchgym.construction.path_answers import single_answer
    from searchgym.world.synthetic import default_world

    size = SIZES[args.size]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here; use --device cpu")
    if size["threads"] and args.device == "cpu":
        torch.set_num_threads(size["threads"])  # one thread per process: two arms side by side on 2 cores
    work = Path(args.workdir) / args.size
    work.mkdir(parents=True, exist_ok=True)
    world = default_world()
    pool_path = stage_pool(world, args.pool, work)
    heldout = heldout_sets(world, size)
    pool = load_pool(pool_path)
    disjoint = check_disjoint(pool, heldout)
    single = frozenset(t.id for t in heldout["proposer"] if t.subgraph is not None and single_answer(world, t.subgraph))
    opts = {
        "model": args.model,
        "init": args.init,
        "device": args.device,
        "steps": args.steps,
        "proposer_baseline": args.proposer_baseline,
        "overrides": parse_overrides(args.set),
        "eval_at": args.eval_steps,
    }
    if args.init:
        from searchgym.training.model_loading import resolve_init

        start = resolve_init(args.init)
    else:
        start = args.model
    start_record = stage_start(start, work, record=not args.collect)
    t0 = time.perf_counter()
    if not args.collect:
        for seed in () if args.cold_start_only else args.seed_list:  # --cold-start-only: no run, the cold start only
            for key in args.arms.split(","):
                arm = ARMS[key]
                cfg = train_config(arm, seed, size, opts, pool_path, work)
                final = stage_train(arm, seed, cfg, start, work, opts["overrides"], args.stop_at)
                modes = sorted({"kg", arm.proposer_mode})
                load = partial(open_trained, start, final)
                stage_eval(
                    run_name(key, seed),
                    load,
                    modes,
                    world,
                    size,
                    work,
                    args.device,
                    str(final),
                )
                if args.samples:
                    stage_sampled(run_name(key, seed), load, world, size, work, args.device, args.samples)
                for step in opts["eval_at"]:
                    policy = checkpoint_policy(work, run_name(key, seed), step)
                    stage_eval(
                        checkpoint_stage(run_name(key, seed), step),
                        lambda policy=policy: open_trained(start, policy),
                        modes,
                        world,
                        size,
                        work,
                        args.device,
                        str(policy),
                    )
        stage_cold(start, world, size, work, args.device, args.samples)
    if args.cold_start_only:
        print(f"the cold start's evaluation is in {work}; collect once a run has finished there")
        return
    header = {
        "benchmark": "selfplay",
        "size": args.size,
        "device": device_info(args.device),
        "machine": machine_info(),
        "torch_threads": torch.get_num_threads(),
        "start": {"model": args.model, "init": args.init, **start_record},
        "pool": {
            "hops": {str(h): n for h, n in args.pool.items()},
            "order": "hop counts interleaved in proportion",
            "seed": 0,
        },
        "eval": {
            "solver_per_hop": {str(h): n for h, n in size["eval_hops"].items()},
            "proposer_targets": size["eval_proposer"],
            "proposer_single_answer_targets": len(single),
            "proposer_samples": args.samples,
            "proposer_sampled_temperature": SAMPLED_TEMPERATURE,
        },
        "disjointness": disjoint,
        "proposer_baseline_override": args.proposer_baseline,
        "overrides": opts["overrides"],
        "seconds_this_invocation": None,
    }
    targets = heldout["proposer"]
    intermediates = {t.id: t.subgraph.bridge_names for t in heldout["solver"] if t.subgraph is not None}
    facts = TargetFacts(
        {t.id: t.hops for t in targets}, single, {t.id: t.subgraph for t in targets}, world, intermediates
    )
    results = collect(work, args.size, header, facts, pool)
    results["seconds_this_invocation"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out) if args.out else RESULTS / f"selfplay_{args.size}.json"
    write_text(out, json.dumps(results, indent=1, default=str) + "\n")
    plot(results, out.with_suffix(".png"))
    print_table(results)
    print(f"wrote {out} and {out.with_suffix('.png')}")
    if args.ship is not None:
        print(f"wrote {ship(results, Path(args.ship) if args.ship else ASSETS / f'selfplay_{args.size}.json')}")


def ship(results: dict, path: Path) -> Path:
    """Write the compact form of ``results`` (what ``searchgym demo`` shows) to ``path``, atomically; returns it."""
    from searchgym.evaluation.selfplay_results import compact_results

    write_text(path, json.dumps(compact_results(results), indent=1, allow_nan=False) + "\n")
    return path


def print_table(results: dict) -> None:
    """Held-out results per stage, one line each."""
    rows = [("cold start", results["cold_start"])]
    for a in results["arms"].values():
        for r in a["runs"]:
            rows += [(f"{a['label']} s{r['seed']} at step {c['step']}", c) for c in r.get("checkpoints", [])]
            rows.append((f"{a['label']} s{r['seed']}", r))
    for name, r in rows:
        by_hop = r["solver"]["by_hops"]
        hops = " ".join(f"{h}-hop {by_hop[str(h)]['mean']:.3f}" if str(h) in by_hop else f"{h}-hop   -  " for h in HOPS)
        cells = r.get("proposer_cells", {})
        prop = " ".join(f"{m} {c['mean']:.3f}" for m, c in cells.items())
        print(f"{name:32s} {hops}  proposer valid: {prop}")
        if "solver_reworded" in r:  # the same questions in held-out wordings
            by_hop = r["solver_reworded"]["by_hops"]
            print(
                f"{'  reworded':32s} "
                + " ".join(f"{h}-hop {by_hop[str(h)]['mean']:.3f}" for h in HOPS if str(h) in by_hop)
            )


if __name__ == "__main__":
    sys.exit(main())
