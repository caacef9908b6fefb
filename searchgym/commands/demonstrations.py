"""``searchgym demos``: write cold-start demonstrations by playing the real envs with scripted experts.

Example::

    searchgym demos --out demos.jsonl --solver 1:300,2:200,3:60 --proposer 2:60,3:40 --vanilla 2:30 \
        --openings 1:200,2:400,3:200
    searchgym sft --model smollm2 --data demos.jsonl --lora --output-dir runs/sft
"""

from __future__ import annotations

import json
import re

from ..errors import InvalidArgumentError
from ..tasks.rewording import DEFAULT_TRAINING_WORDING, TRAINING_WORDINGS
from .number_checks import refuse_bad_numbers

#: the most tasks one hop count may ask for: ten times the largest recipe's, far beyond what a world yields, and a
#: bound so that a typo (``1:30000000000``) fails at once instead of growing memory for hours
MAX_TASKS_PER_HOP = 100_000
_HOP_COUNT = re.compile(r"([0-9]+):([0-9]+)")  # ASCII digits only: str.isdigit() also takes '²', which int() refuses


def parse_hop_counts(text: str, flag: str = "--solver") -> dict[int, int]:
    """``"1:300,2:200"`` -> ``{1: 300, 2: 200}`` (hop count: number of tasks). A malformed pair, a hop count
    below 1, a count above :data:`MAX_TASKS_PER_HOP` or a hop count given twice is one error naming ``flag``."""
    out: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        match = _HOP_COUNT.fullmatch(part)
        if match is None or int(match.group(1)) < 1:
            raise InvalidArgumentError(
                f"{flag}: bad hop count {part!r}: write HOPS:N pairs separated by commas, e.g. 1:300,2:200"
            )
        hops, n = int(match.group(1)), int(match.group(2))
        if n > MAX_TASKS_PER_HOP:
            raise InvalidArgumentError(
                f"{flag}: {part!r} asks for more than {MAX_TASKS_PER_HOP:,} tasks; ask for fewer"
            )
        if hops in out:
            raise InvalidArgumentError(f"{flag}: hop count {hops} is given twice; give each hop count once")
        out[hops] = n
    return out


def register(subparsers) -> None:
    """Add the ``demos`` sub-command."""
    p = subparsers.add_parser(
        "demos",
        help="cold-start demonstrations: scripted experts play the real envs",
        description="Scripted experts play KGSolver-v0 / KGProposer-v0 on training-side tasks "
        "(answers held out from the built-in benchmark never appear); rollouts the "
        "env rewards are written as trajectory JSONL for `searchgym sft`.",
    )
    p.add_argument("--out", required=True, help="output JSONL (overwritten)")
    p.add_argument("--world", help="saved world folder (default: the embedded default world)")
    p.add_argument("--solver", default="1:300,2:200,3:60", help="Solver tasks per hop count, HOPS:N,...")
    p.add_argument("--proposer", default="2:60,3:40", help="KG-grounded Proposer tasks per hop count")
    p.add_argument("--vanilla", default="2:30", help="answer-only Proposer tasks per hop count")
    p.add_argument(
        "--openings",
        default="",
        help="Solver tasks per hop count of which only the first turn (plan + first search) is written",
    )
    p.add_argument("--proposer-openings", default="", help="KG Proposer tasks per hop count, first turn only")
    p.add_argument(
        "--wording",
        choices=TRAINING_WORDINGS,
        default=DEFAULT_TRAINING_WORDING,
        help="Solver questions: varied (the template or a train rewording per task: teaches searching, not "
        "template parsing), template (every question as the templates write it), train (every one reworded)",
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a rule filter of the Proposer envs (a FilterConfig field; repeatable), e.g. "
        "min_searches_at_most_required=true to keep 1-hop Proposer demonstrations, which search once",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args) -> int:
    """Generate the demonstrations and print what was kept and dropped."""
    from ..envs.resources import resolve_world
    from ..scoring.question_filters import filter_settings
    from ..training.demonstrations import demonstrations_by_hops

    refuse_bad_numbers(args, least={"seed": 0})
    counts = {
        role: parse_hop_counts(getattr(args, role), "--" + role.replace("_", "-"))
        for role in ("solver", "proposer", "vanilla", "openings", "proposer_openings")
    }
    if not any(n for per_hop in counts.values() for n in per_hop.values()):  # before --out is opened: it is rewritten
        raise InvalidArgumentError(
            "no demonstrations asked for: every count of --solver, --proposer, --vanilla, --openings and "
            "--proposer-openings is empty or 0; ask for some, e.g. --solver 1:300"
        )
    filters = filter_settings(args.filter)
    world = resolve_world(args.world)
    stats = demonstrations_by_hops(
        world,
        args.out,
        **counts,
        seed=args.seed,
        progress=True,
        wording=args.wording,
        filter_config=filters,
    )
    print(json.dumps(stats.as_dict(), indent=1))
    print(f"wrote {sum(stats.written.values())} demonstrations to {args.out}")
    dropped = sum(n for k, n in stats.dropped.items() if k.startswith("proposer-kg") and k.endswith("too_few_searches"))
    if dropped and not filters.get("min_searches_at_most_required"):
        print(
            f"note: {dropped} KG Proposer rollouts searched fewer times than the filters' min_searches and were "
            "dropped; a 1-hop one searches once: keep those with --filter min_searches_at_most_required=true"
        )
    return 0
