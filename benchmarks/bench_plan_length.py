"""How a cold start decides how many steps a question needs, read off the model's own next-token probabilities.

The Solver demonstrations open with a plan, one numbered step per hop ("Plan: 1) the author of X; 2) the place
where it was born."). After step 1 the next token is ``;`` (more steps follow) or ``.`` (the plan is done): that
one choice fixes how many times the model will search. For each held-out Solver question (the self-play and
learning benchmarks' sets, in the benchmark's wording and reworded) the prompt, as ``KGSolver-v0`` renders it
under the model's chat template, is followed by the *correct* first step, and the model's probability of ``;``
against ``.`` is read: ``P(more steps)``. A model that reads the question puts it low on 1-hop questions and
high on 2- and 3-hop ones; one that plans every question alike puts it at the same height everywhere. Greedy
decoding takes the more likely side, so the share on the right side (``right``) is the share of plans of the
right length, given a right first step.

Measured on the cold start shipped 2026-11-28 it explained its 1-hop accuracy: P(more steps) 0.61 on 1-hop questions
against 0.88 on 2-hop ones, so greedy plans 23 of 32 one-hop questions as two steps (docs/sft.md). One forward
pass per question: about a minute on one CPU thread for both adapters.

    .venv/bin/python benchmarks/bench_plan_length.py --adapter searchgym/assets/smollm2_cold_start \\
        [--adapter OTHER ...] [--out benchmarks/results/plan_length_cpu.json]

``--split training`` scores training-side questions instead (the same counts, a seed no demonstration set of the
shipped recipe uses, template and training wordings): what the shipped adapter's interpolation weight was chosen on
(``benchmarks/results/plan_length_training_cpu.json``), so that the held-out sets only score the choice.
"""

from __future__ import annotations

import argparse
import statistics

from machine import machine_info, write_result

#: held-out questions per hop count: the self-play benchmark's ``cpu`` size
EVAL_HOPS = {1: 32, 2: 32, 3: 16}
WORDINGS = ("template", "heldout")
#: ``--split training``: as many training-side questions per hop count, drawn with a seed no demonstration set of
#: the shipped recipe uses, in the template and the training rewordings -- what a setting (the weight of
#: ``interpolate_adapters``) is chosen on, so that the held-out sets only score the choice
TRAINING_SEED = 11
TRAINING_WORDINGS = ("template", "train")


def split_tasks(world, split: str) -> dict[str, list]:
    """The questions scored, by wording: the held-out benchmark's (``heldout``) or training-side draws
    (``training``, :data:`TRAINING_SEED`)."""
    if split == "training":
        from searchgym.training.demonstrations import demo_tasks

        return {w: demo_tasks(world, EVAL_HOPS, seed=TRAINING_SEED, wording=w) for w in TRAINING_WORDINGS}
    from searchgym.training.learning_checks import heldout_solver_tasks

    return {w: heldout_solver_tasks(world, EVAL_HOPS, wording=w) for w in WORDINGS}


def plan_prefix(task) -> str:
    """The first thought up to the end of the plan's step 1, cut from the plan the demonstrations write for ``task``
    (:func:`~searchgym.training.demonstrations.plan_text`), so a change to the plan's wording moves the cut with it."""
    from searchgym.training.demonstrations import hop_phrase, plan_text

    sg = task.subgraph
    plan, first_step = plan_text(sg), hop_phrase(sg, 0, sg.nodes[sg.path[0]].title)
    return "<think>" + plan[: plan.index(first_step) + len(first_step)]


def solver_prompt(world, task) -> str:
    """The prompt ``KGSolver-v0`` shows for ``task`` on the cold-start settings (its first observation)."""
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the envs)
    from searchgym.tasks.sources import ListTaskSource
    from searchgym.training.demonstrations import cold_start_env_kwargs

    env = gym.make("KGSolver-v0", tasks=ListTaskSource([task]), **cold_start_env_kwargs(world))
    try:
        prompt, _ = env.reset(seed=0)
    finally:
        env.close()
    return prompt


def more_steps_probability(model, tok, text: str, semi: int, dot: int) -> float:
    """``P(';') / (P(';') + P('.'))`` for the token after ``text``."""
    import torch

    ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        p = torch.softmax(model(ids).logits[0, -1].float(), -1)
    return float(p[semi] / (p[semi] + p[dot]))


def score_adapter(adapter: str, world, prompts: dict) -> dict:
    """Per wording: by hop count the mean ``P(more steps)``, its spread and the share on the right side, and the
    :func:`separation` of 1-hop questions from longer ones."""
    from searchgym.llm.pretrained import open_model
    from searchgym.llm.sequences import render_prompt

    model, tok = open_model(adapter)
    model.eval()
    semi, dot = tok.encode(";")[0], tok.encode(".")[0]
    out: dict = {}
    for wording, items in prompts.items():
        by_hops: dict = {}
        for task, prompt in items:
            p = more_steps_probability(model, tok, render_prompt(tok, prompt) + plan_prefix(task), semi, dot)
            by_hops.setdefault(task.subgraph.hops, []).append(p)
        cells = {
            str(h): {
                "n": len(ps),
                "p_more_steps": round(statistics.fmean(ps), 3),
                "p_more_steps_sd": round(statistics.pstdev(ps), 3),
                "right": sum((p > 0.5) == (h > 1) for p in ps),
            }
            for h, ps in sorted(by_hops.items())
        }
        longer = [p for h, ps in by_hops.items() if h > 1 for p in ps]
        out[wording] = {"by_hops": cells, "separation": separation(by_hops.get(1, []), longer)}
    return out


def separation(one_hop: list[float], longer: list[float]) -> float | None:
    """The chance that a longer question's ``P(more steps)`` is above a 1-hop one's (ties count half): 1.0 when the
    model tells them apart at some threshold, 0.5 when it plans them alike. Where ``right`` is low but this is
    high, the model reads the question and only its threshold is off (a matter of the data's mix); where both are
    low, it does not read the hop count from the question."""
    if not one_hop or not longer:
        return None
    wins = sum((b > a) + 0.5 * (b == a) for a in one_hop for b in longer)
    return round(wins / (len(one_hop) * len(longer)), 3)


def main(argv=None) -> dict:
    """Score each ``--adapter``; print a table and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", action="append", required=True, help="a cold-start adapter or model folder")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--out", default=None, help="results JSON (default benchmarks/results/plan_length_cpu.json)")
    ap.add_argument(
        "--split",
        choices=("heldout", "training"),
        default="heldout",
        help="the held-out benchmark's questions (default) or training-side ones, to choose a setting on",
    )
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from searchgym.world.synthetic import default_world

    world = default_world()
    prompts = {w: [(t, solver_prompt(world, t)) for t in tasks] for w, tasks in split_tasks(world, args.split).items()}
    results = {
        "what": __doc__.split("\n\n")[0],
        "machine": machine_info(),
        "split": args.split,
        "eval_hops": EVAL_HOPS,
        "adapters": {},
    }
    for adapter in args.adapter:
        results["adapters"][adapter] = scores = score_adapter(adapter, world, prompts)
        for wording, score in scores.items():
            cells = "  ".join(
                f"{h}-hop P(more) {c['p_more_steps']:.2f} right {c['right']}/{c['n']}"
                for h, c in score["by_hops"].items()
            )
            print(f"{adapter}  {wording:8s}  {cells}  separation {score['separation']}")
    print(f"wrote {write_result(results, args.out, 'plan_length_cpu.json')}")
    return results


if __name__ == "__main__":
    main()
