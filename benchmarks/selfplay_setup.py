"""The self-play benchmark's set-up (``bench_selfplay.py``): its arms and sizes, the pool and its hop counts, the
held-out sets and their disjointness from the pool, each run's training config and the ``--set`` overrides it
accepts, and the lock two processes sharing a workdir wait on."""

from __future__ import annotations

import json
import logging
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from searchgym.core.atomic_writes import write_text
from searchgym.training.recipes import SIZES as RECIPE_SIZES

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
    # a LoRA adapter on the merged cold start (a few MB to copy off the machine): the recipes' cpu size's adapter
    # and lr, read from there so the two sizes cannot drift apart
    **{key: RECIPE_SIZES["cpu"][key] for key in ("lora", "lora_r", "lora_alpha", "lora_dropout", "lr")},
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
