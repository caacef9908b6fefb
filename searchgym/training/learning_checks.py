"""Held-out learning checks shared by the learning benchmark, the demo and the learning test.

:func:`heldout_report` scores one model on the cold-start env settings
(:func:`~searchgym.training.demonstrations.cold_start_env_kwargs`): Solver exact match by hop count on
built-in benchmark questions (answers held out from every training source), searches per rollout,
and the KG Proposer's valid-question rate on held-out answers (rule filters + RAG verification; a
rollout that writes no question counts as invalid, so the rate fails closed). With ``reworded=True``
it also scores the same questions in held-out wordings (``solver_reworded``): a model that parses the
template rather than searching drops there.
:func:`cold_start_rl_config` holds the GRPO settings the benchmark and the demo use for RL after a cold start.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

from ..core.atomic_writes import write_text
from ..core.renamed import renamed_kwargs
from ..core.types import Task
from ..errors import InvalidArgumentError

__all__ = [
    "heldout_solver_tasks",
    "heldout_proposer_tasks",
    "heldout_report",
    "proposer_valid_rate",
    "proposer_records_name",
    "llm_eval_agent",
    "cold_start_rl_config",
]


def cold_start_rl_config(*, batch_size: int, group_size: int, lora: bool = True, **fields: Any):
    """A :class:`~searchgym.training.selfplay_config.TrainConfig` for Solver GRPO from a cold start: one update per step
    over the whole batch, DAPO's no KL term and skipped zero-advantage groups (no reference forward, no update
    for groups that all scored alike: what keeps a CPU step affordable), no warmup (runs are a few steps),
    temperature 1, and with ``lora`` a fresh rank-16 adapter on the attention projections. ``fields`` set the
    rest (model, init, lr, total_steps, output_dir, ...) and may override any of these."""
    from .selfplay_config import TrainConfig

    adapter = dict(lora=True, lora_r=16, lora_alpha=32, lora_dropout=0.0) if lora else {}
    settings: dict[str, Any] = dict(
        batch_size=batch_size,
        group_size=group_size,
        mini_batch_size=batch_size * group_size,
        micro_batch_size=4,
        kl_coef=0.0,
        skip_zero_advantage=True,
        warmup_steps=0,
        temperature=1.0,
        train_proposer=False,
        val_every=0,
        tensorboard=False,
        **adapter,
    )
    return TrainConfig(**{**settings, **fields})


def heldout_solver_tasks(world, per_hop: dict[int, int], *, wording: str = "template") -> list[Task]:
    """The first ``per_hop[h]`` built-in benchmark questions of each hop count ``h`` (fixed order);
    ``wording="heldout"``: the same tasks reworded in the held-out wordings (see
    :func:`~searchgym.tasks.heldout.builtin_benchmark`)."""
    from ..tasks.heldout import builtin_benchmark

    bench = builtin_benchmark(world, hops=sorted(per_hop), wording=wording)
    return [t for h, n in sorted(per_hop.items()) for t in [x for x in bench if x.metadata["hops"] == h][:n]]


def heldout_proposer_tasks(world, n: int) -> list[Task]:
    """``n`` held-out 2- and 3-hop targets for the Proposer (the benchmark's, interleaved)."""
    from ..tasks.heldout import builtin_benchmark

    two, three = builtin_benchmark(world, hops=[2]), builtin_benchmark(world, hops=[3])
    mixed = [t for pair in zip(two, three) for t in pair]
    return mixed[:n]


def llm_eval_agent(
    model: Any,
    tokenizer: Any,
    name: str,
    *,
    max_new_tokens: int = 48,
    device: Optional[str] = None,
    temperature: float = 0.0,
    seed: int = 0,
):
    """An :class:`~searchgym.agents.eval_agents.LLMEvalAgent` over an in-memory model: greedy by default;
    ``temperature`` > 0 samples, every draw from the generator's stream seeded with ``seed`` (the same rollouts
    for the same model, tasks and concurrency)."""
    from ..agents.eval_agents import LLMEvalAgent
    from ..core.llm import GenerationConfig
    from ..llm.transformers_backend import TransformersGenerator

    gen = TransformersGenerator(model, tokenizer, device=device, seed=seed)
    return LLMEvalAgent(gen, name, GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature))


@renamed_kwargs(out_dir="output_dir")
def proposer_valid_rate(
    agent,
    world,
    tasks: Sequence[Task],
    *,
    concurrency: int = 32,
    output_dir: str | Path | None = None,
    mode: str = "kg",
    progress: bool = False,
    samples: int = 1,
    sampled: bool = False,
) -> dict:
    """Proposer rollouts on ``tasks`` (``mode``: ``kg``, the KG-grounded prompt, or ``vanilla``, SSP's
    answer-only one): the share whose question passes the rule filters and RAG verification, with the
    rejection reasons counted. ``output_dir``: also write one line per rollout (task, queries, question,
    verdict, the verifier's answer) to ``output_dir/`` :func:`proposer_records_name` ``(mode, sampled)``, so a low
    rate can be read rollout by rollout. ``progress``: a progress line (minutes on 2 CPU cores: never silent).
    ``samples`` > 1 plays every target that many times (for a sampling agent: the rate of the policy's
    distribution rather than of its greedy mode), each episode seeded by (target, sample), records sorted by
    target. ``sampled``: the agent samples; its records go to the ``sampled`` file, so they never replace a greedy
    run's, however many ``samples``."""
    if samples < 1:
        raise InvalidArgumentError(f"samples must be >= 1 (rollouts per target), got {samples}")
    import gymnasium as gym

    from .. import envs as _envs  # noqa: F401  (registers the env ids)
    from ..core.progress import Progress
    from ..evaluation.task_rollouts import play_tasks
    from ..tasks.sources import ListTaskSource
    from .demonstrations import cold_start_env_kwargs

    if not tasks:
        return {"valid_rate": 0.0, "n": 0, "reasons": {}, "mode": mode}
    kw = cold_start_env_kwargs(world)
    envs = [
        gym.make("KGProposer-v0", tasks=ListTaskSource(list(tasks)), mode=mode, **kw)
        for _ in range(min(concurrency, len(tasks)))
    ]
    rows: list[dict] = []
    label = f"proposer ({mode})" if samples == 1 else f"proposer ({mode}, {samples} samples a target)"
    bar = Progress(len(tasks) * samples, label, unit="rollout" if samples > 1 else "target", enabled=progress)

    def done(trajs) -> None:
        bar.update(len(trajs))
        for traj in trajs:
            v = traj.metadata.get("validation") or {"valid": False, "reason": "no_question"}
            rows.append(
                {
                    "task": traj.task.id,
                    "answers": list(traj.task.answers),
                    "queries": [c.query for t in traj.turns for c in t.searches],
                    "question": traj.question,
                    "valid": bool(v.get("valid")),
                    "reason": v.get("reason"),
                    "prediction": v.get("prediction"),
                }
            )

    with bar:
        play_tasks(agent, envs, list(tasks), done, repeats=samples)
    if output_dir is not None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        ordered = sorted(rows, key=lambda r: (r["task"], json.dumps(r, sort_keys=True)))  # same file, any finish order
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered)
        write_text(Path(output_dir) / proposer_records_name(mode, sampled=sampled), text)
    reasons = Counter("valid" if r["valid"] else str(r["reason"]) for r in rows)
    n = len(rows)
    return {"valid_rate": reasons["valid"] / n, "n": n, "reasons": dict(reasons), "mode": mode}


def proposer_records_name(mode: str = "kg", *, sampled: bool = False) -> str:
    """The per-rollout file :func:`proposer_valid_rate` writes for Proposer ``mode`` (``proposer.jsonl`` for kg;
    ``sampled``: several rollouts a target, ``proposer_sampled.jsonl``)."""
    stem = "proposer" if mode == "kg" else f"proposer_{mode}"
    return f"{stem}_sampled.jsonl" if sampled else f"{stem}.jsonl"


def _solver_summary(records: Sequence[dict], seed: int) -> dict:
    """EM overall and by hop (95 % intervals), searches and invalid-format rate of evaluation ``records``, and per
    hop count the share of rollouts that searched exactly as many times as the question has hops
    (``searched_to_length_by_hops``): a Solver that plans every question as two steps shows there as a low
    1-hop share, whatever its accuracy."""
    from ..evaluation.metrics import group_records, summarize

    overall = summarize(records, ("em",), seed=seed)
    groups = group_records(records, "hops")
    by_hops = {str(h): summarize(recs, ("em",), seed=seed) for h, recs in groups.items()}
    return {
        "overall": overall["em"],
        "searches": overall.get("searches"),
        "invalid_format": overall.get("invalid_format"),
        "by_hops": {h: v["em"] for h, v in by_hops.items()},
        "searches_by_hops": {h: v.get("searches") for h, v in by_hops.items()},
        "searched_to_length_by_hops": {str(h): _searched_to_length(recs, h) for h, recs in groups.items()},
    }


def _searched_to_length(records: Sequence[dict], hops) -> Optional[float]:
    """The share of ``records`` (one hop count's) that searched exactly ``hops`` times; None without records
    or hop count."""
    try:
        n_hops = int(hops)
    except (TypeError, ValueError):
        return None
    counted = [r for r in records if r.get("searches") is not None]
    if not counted:
        return None
    return sum(int(r["searches"]) == n_hops for r in counted) / len(counted)


def _paired_wordings(plain: Sequence[dict], reworded: Sequence[dict]) -> dict:
    """The same questions in two wordings, paired by task id: how many were right in both, only in the
    benchmark's wording, only reworded, in neither (a drop is template parsing when ``plain_only`` dominates)."""
    right = {r["id"]: r["em"] > 0 for r in plain}
    pairs = [(right[r["id"]], r["em"] > 0) for r in reworded if r["id"] in right]
    return {
        "n": len(pairs),
        "both": sum(a and b for a, b in pairs),
        "plain_only": sum(a and not b for a, b in pairs),
        "reworded_only": sum(b and not a for a, b in pairs),
        "neither": sum(not a and not b for a, b in pairs),
    }


@renamed_kwargs(out_dir="output_dir")
def heldout_report(
    agent,
    world,
    *,
    per_hop: dict[int, int],
    proposer: int = 0,
    output_dir: str | Path | None = None,
    progress: bool = False,
    max_turns: Optional[int] = None,
    proposer_modes: Sequence[str] = ("kg",),
    reworded: bool = False,
    trajectories: bool = False,
) -> dict:
    """Solver EM (with 95 % intervals) overall and by hop, searches per rollout, and (``proposer`` > 0)
    the Proposer's valid-question rate, for ``agent`` on the cold-start env settings. ``output_dir``
    keeps the per-question records (resumable, see :func:`~searchgym.evaluation.runner.evaluate`);
    ``max_turns`` overrides the cold-start turn budget (both sides of a comparison must share it).
    ``proposer_modes``: the Proposer prompts to score on the same targets, reported as ``proposer``
    (kg) and ``proposer_<mode>`` (others, e.g. ``vanilla``). ``reworded``: also score the same questions in
    held-out wordings no training task uses (:mod:`searchgym.tasks.rewording`), reported as ``solver_reworded``
    (same fields, plus ``paired``: per question, right in both wordings, only in the benchmark's, only reworded).
    ``trajectories``: keep each rollout's full trajectory in the records (to see which query and plan an answer came
    from; a records file with them never resumes one without)."""
    from ..evaluation.runner import EvalConfig, evaluate
    from ..tasks.tasksets import TaskSet
    from .demonstrations import COLD_START_MAX_TURNS, COLD_START_TOP_K, cold_start_env_kwargs

    cfg = EvalConfig(
        metrics=("em",),
        max_turns=max_turns or COLD_START_MAX_TURNS,
        top_k=COLD_START_TOP_K,
        concurrency=64,
        progress=progress,
        save_trajectories=trajectories,
    )
    tasksets = [TaskSet("heldout", heldout_solver_tasks(world, per_hop), world=world)]
    if reworded:  # one run: the reworded tasks' sources differ, so their records keep apart (and resume alike)
        tasksets.append(
            TaskSet("heldout-reworded", heldout_solver_tasks(world, per_hop, wording="heldout"), world=world)
        )
    result = evaluate(
        agent,
        tasksets,
        retriever=cold_start_env_kwargs(world)["retriever"],
        world=world,
        config=cfg,
        output_dir=output_dir,
    )
    n_plain = len(tasksets[0].tasks)
    plain, other = result.records[:n_plain], result.records[n_plain:]
    report = {"solver": _solver_summary(plain, cfg.seed)}
    if reworded:
        report["solver_reworded"] = {**_solver_summary(other, cfg.seed), "paired": _paired_wordings(plain, other)}
    if proposer:
        tasks = heldout_proposer_tasks(world, proposer)
        for mode in proposer_modes:
            key = "proposer" if mode == "kg" else f"proposer_{mode}"
            report[key] = proposer_valid_rate(agent, world, tasks, output_dir=output_dir, mode=mode, progress=progress)
    return report
