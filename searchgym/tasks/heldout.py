"""Held-out answers, k-hop task lists, and the built-in benchmark of a world.

A learning claim needs held-out tasks whose *answers* the model never saw as targets. searchgym
splits every world's answers once, by name: :func:`is_heldout_name` hashes the normalised answer
string with a fixed salt (BLAKE2b, no RNG involved) and holds out ``HELDOUT_FRACTION`` of all
names. Splitting by normalised name rather than entity id keeps namesakes ("Mohurk" the city
and "Mohurk" the town) on the same side. A held-out task's answer *title* is held out; a training
task has no held-out name at all (title or alias), so no benchmark answer title is ever a training
target (an alias of a benchmark answer, e.g. "Dask" for "Dask District", may still be a training
answer when another entity bears that name).

* :func:`builtin_benchmark` — the versioned benchmark (``BENCHMARK_VERSION``): template questions
  of 1 … 7 hops whose answers are all held out, fixed by seed; ``Task.metadata`` carries
  ``hops`` and ``family`` (the answer type: person, location, organisation, date, number, other).
  ``wording="heldout"`` gives the same questions reworded (:mod:`searchgym.tasks.rewording`).
* :func:`training_subgraphs` / :func:`hop_tasks` — subgraphs and tasks whose answers are all on the
  training side. The envs' default pool (:func:`searchgym.envs.resources.default_pool`), and so the
  trainer's and the demo's default tasks, and the cold-start demonstrations are drawn through
  them. That is the disjointness guarantee: every default training source filters with the same
  :func:`is_heldout_name`, and the benchmark keeps only names it accepts.

Tasks come from :func:`searchgym.construction.build_pool` with ``min_hops == max_hops == k`` and
the heuristic selector; a pool is a deterministic function of (world, n, seed, config), and a
larger ``n`` extends a smaller one, so over-generating and filtering stays deterministic.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from typing import Iterable, Literal, Optional, Sequence

from ..core.arg_checks import check_choice, check_count, check_counts
from ..core.subgraph import Subgraph
from ..core.types import Task
from ..errors import InvalidArgumentError
from ..world import World
from ..world.world import normalize_name
from .sources import task_from_subgraph

logger = logging.getLogger(__name__)

__all__ = [
    "BENCHMARK_VERSION",
    "HELDOUT_FRACTION",
    "BENCHMARK_SIZES",
    "is_heldout_name",
    "is_heldout_answer",
    "answer_name",
    "training_subgraphs",
    "hop_tasks",
    "builtin_benchmark",
]

BENCHMARK_VERSION = "v1"
HELDOUT_FRACTION = 0.2
_SALT = b"searchgym-heldout-answers-v1"
#: questions per hop count in each benchmark version (the version fixes sizes and seeds)
BENCHMARK_SIZES: dict[str, dict[int, int]] = {"v1": {1: 100, 2: 100, 3: 100, 4: 50, 5: 50, 6: 50, 7: 50}}
_BENCHMARK_SEEDS = {"v1": 911_000}

Split = Literal["train", "heldout", "any"]
_MAX_DOUBLINGS = 5  # a small world recycles seeds forever; stop over-generating after 32x


def is_heldout_name(name: str) -> bool:
    """Whether the answer string ``name`` belongs to the held-out side (a fixed hash of its
    normalised form; the same in every process, world and version of Python)."""
    digest = hashlib.blake2b(normalize_name(name).encode("utf-8"), digest_size=8, key=_SALT).digest()
    return int.from_bytes(digest, "big") / 2**64 < HELDOUT_FRACTION


def answer_name(subgraph: Subgraph) -> str:
    """The answer string a subgraph's questions are scored against (its answer node's title)."""
    return subgraph.answer_node.title


def is_heldout_answer(world: World, entity_id: str) -> bool:
    """Whether entity ``entity_id`` of ``world`` (or a literal node id ``lit:kind:value``) is a
    held-out answer; decided by its title, see :func:`is_heldout_name`."""
    if entity_id.startswith("lit:"):
        return is_heldout_name(entity_id.split(":", 2)[2])
    return is_heldout_name(world.title(entity_id))


def _on_side(subgraph: Subgraph, split: Split) -> bool:
    """Held-out side: the answer's title is held out. Training side: no name of the answer (title or
    alias) is held out, so a benchmark answer's title is never a training answer string."""
    if split == "any":
        return True
    if split == "heldout":
        return is_heldout_name(answer_name(subgraph))
    return not any(is_heldout_name(name) for name in subgraph.answer_node.names)


def _extraction_config(hops: Optional[int], config):
    from ..construction.extract import ExtractionConfig

    config = config or ExtractionConfig()
    hops = check_count("hops", hops, optional=True, hint="None: the config's range")
    if hops is not None:
        config = replace(config, min_hops=hops, max_hops=hops)
    return config


def training_subgraphs(
    world: World,
    n: int,
    *,
    seed: int = 0,
    hops: Optional[int] = None,
    config=None,
    split: Split = "train",
    required: bool = False,
) -> list[Subgraph]:
    """Up to ``n`` heuristic subgraphs of ``world`` whose answers are all on ``split``'s side
    (``"any"``: no filter).

    ``hops`` fixes the path length (else ``config``'s range, default 3–7). Over-generates with
    :func:`~searchgym.construction.build_pool` and filters, doubling until ``n`` are found or the
    world has no more (or none of a build's answers is on ``split``'s side); returns fewer (with a warning) when
    the world runs out. ``required``: a world with no such subgraph at all is an error
    (:func:`no_subgraphs_of`, raised before any warning) -- for a command whose output would be empty.
    """
    from ..construction import build_pool

    n = check_count("n", n, least=0)
    if split not in ("train", "heldout", "any"):
        raise InvalidArgumentError(f"split must be 'train', 'heldout' or 'any', got {split!r}")
    config = _extraction_config(hops, config)
    share = {"heldout": HELDOUT_FRACTION, "train": 1 - HELDOUT_FRACTION, "any": 1.0}[split]
    want = int(n / share * 1.2) + 8
    for _ in range(_MAX_DOUBLINGS + 1):
        result = build_pool(world, want, seed=seed, config=config, progress=False)
        kept = [sg for sg in result.subgraphs if _on_side(sg, split)]
        if len(kept) >= n or len(result.subgraphs) < want:
            break
        if not kept:  # none of `want` answers on this side: a small world whose names hash to the other side
            break  # doubling would extract 32x as many for nothing (seconds to minutes), so stop here
        want *= 2
    if required and n > 0 and not kept:
        raise no_subgraphs_of(world, hops)
    if len(kept) < n:
        logger.warning(
            "world %r yields only %d %s-side subgraphs of %s hops (asked for %d)",
            world.name,
            len(kept),
            split,
            hops if hops is not None else "3-7",
            n,
        )
    return kept[:n]


def no_subgraphs_of(world: World, hops: Optional[int]) -> InvalidArgumentError:
    """The error for a request of ``hops``-hop subgraphs that ``world`` gave none of (a path longer than any it
    has): it names the hop counts the extractor builds by default, so the caller can ask for fewer."""
    from ..construction.extract import ExtractionConfig

    cfg = ExtractionConfig()
    asked = f"{hops} hops" if hops is not None else f"{cfg.min_hops}-{cfg.max_hops} hops"
    return InvalidArgumentError(
        f"world {world.name!r} has no training-side subgraph of {asked}; ask for a hop count it has "
        f"(its pools run {cfg.min_hops}-{cfg.max_hops} hops by default, the built-in benchmark 1-7)"
    )


def _dedupe(tasks: Iterable[Task]) -> list[Task]:
    seen: set[str] = set()
    out = []
    for t in tasks:
        key = t.question.lower()
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _with_family(task: Task, source: str) -> Task:
    task.metadata["family"] = task.metadata.get("answer_type", "other")
    task.source = source
    return task


def hop_tasks(
    world: World,
    hops: int,
    n: int,
    *,
    seed: int = 0,
    split: Split = "train",
    source: str = "hop",
    required: bool = False,
) -> list[Task]:
    """``n`` template-question tasks of exactly ``hops`` hops whose answers lie on ``split``'s side
    (distinct questions; fewer if the world runs out; ``required``: none at all is an error, see
    :func:`training_subgraphs`). ``metadata`` has ``hops`` and ``family``."""
    hops = check_count("hops", hops)
    n = check_count("n", n, least=0)
    subgraphs = training_subgraphs(world, n + n // 4 + 4, seed=seed, hops=hops, split=split, required=required)
    tasks = _dedupe(
        _with_family(task_from_subgraph(sg, world, source=f"{source}{hops}"), f"{source}{hops}") for sg in subgraphs
    )
    return tasks[:n]


def builtin_benchmark(
    world: Optional[World] = None,
    *,
    version: str = BENCHMARK_VERSION,
    hops: Optional[Sequence[int]] = None,
    wording: str = "template",
) -> list[Task]:
    """The built-in held-out benchmark of ``world`` (default: the embedded default world).

    Fixed by ``version`` (sizes and seeds in ``BENCHMARK_SIZES``); every answer is held out from
    the default training sources. ``hops`` restricts it to some hop counts. Task ids are
    ``bench-<version>-h<k>:<subgraph id>``. ``wording="heldout"``: the same tasks (ids, paths, answers)
    with each question reworded in the held-out phrasings and shapes no training task uses
    (:mod:`searchgym.tasks.rewording`, drawn from the version's seed; sources ``bench-<version>-h<k>-reworded``),
    which scores whether a model searches rather than parses the template.
    """
    from .rewording import WORDINGS, reword_tasks

    check_choice("wording", wording, WORDINGS)
    if version not in BENCHMARK_SIZES:
        raise InvalidArgumentError(f"unknown benchmark version {version!r}; known: {', '.join(BENCHMARK_SIZES)}")
    if world is None:
        from ..world.synthetic import default_world

        world = default_world()
    sizes = BENCHMARK_SIZES[version]
    chosen = sorted(sizes) if hops is None else list(check_counts("hops", hops, example="[1, 2]"))
    unknown = [h for h in chosen if h not in sizes]
    if unknown:
        raise InvalidArgumentError(f"benchmark {version} has hop counts {sorted(sizes)}; not {unknown}")
    out: list[Task] = []
    for h in chosen:
        out.extend(
            hop_tasks(
                world, h, sizes[h], seed=_BENCHMARK_SEEDS[version] + h, split="heldout", source=f"bench-{version}-h"
            )
        )
    return reword_tasks(out, wording, seed=_BENCHMARK_SEEDS[version])
