"""Write verl parquet datasets (train.parquet, val.parquet) of searchgym tasks for examples/verl/run_grpo_wcr.sh.

python examples/verl/make_data.py --out data/searchgym                  # the built-in tasks: 112 train, 16 val
python examples/verl/make_data.py --out data/searchgym --pool pool.jsonl --n 2000 --val 64 --seed 1
python examples/verl/make_data.py --out data/searchgym --selfplay       # searchgym_proposer + searchgym_selfplay rows
python examples/verl/make_data.py --out data/searchgym --reward-option wcr.waypoint_answer_credit=false  # WCR options
python examples/verl/make_data.py --out data/nq --flashrag nq_train.jsonl --n 5000   # searchgym_qa rows
python examples/verl/make_data.py --out data/sr1 --parquet nq_hotpotqa_train.parquet # Search-R1's rows, re-written

Tasks of a subgraph pool (or the built-in ones) carry their KG path, so the searchgym_solver loop can
reward them with WCR; FlashRAG / Search-R1 questions have none and are written for the searchgym_qa loop
(exact match). --n tasks are drawn with --seed (kept in the source's order); --val of them, drawn with
the same seed, go to val.parquet. Bad input: one line naming the fix, exit 2 (--debug: the traceback).
"""

from __future__ import annotations

import argparse
import random
import sys

from searchgym.errors import SearchGymError
from searchgym.integrations.environments import EnvSpec
from searchgym.integrations.verl.data import dataset_rows, write_dataset
from searchgym.wrappers.registry import reward_options_from_items


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for train.parquet and val.parquet")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--pool", help="a subgraph pool JSONL (`searchgym subgraphs build`); default: the built-in tasks")
    src.add_argument("--flashrag", help="a FlashRAG JSONL (question, golden_answers): Solver rows for searchgym_qa")
    src.add_argument("--parquet", help="Search-R1's verl parquet (prompt, reward_model.ground_truth.target)")
    p.add_argument("--n", type=int, default=None, help="tasks to write in all (train + val); default: every task")
    p.add_argument("--val", type=int, default=16, help="of those, how many go to val.parquet (default 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --n sample, the val split and the reset seeds")
    p.add_argument(
        "--selfplay",
        action="store_true",
        help="self-play rows (a searchgym_proposer and a searchgym_selfplay row per subgraph) instead of Solver rows",
    )
    p.add_argument(
        "--rewards",
        default=None,
        help="reward wrappers compute_score applies (verl's own tool loop); default: wcr, binary for QA sources",
    )
    p.add_argument(
        "--reward-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a keyword argument of one --rewards wrapper, VALUE read as YAML (repeatable), written into every row "
        "for compute_score, e.g. --reward-option wcr.waypoint_answer_credit=false",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    a = p.parse_args(argv)
    if a.val < 1:
        p.error(f"--val must be >= 1, got {a.val}")
    if a.n is not None and a.n <= a.val:
        p.error(f"--n {a.n} leaves no training rows after --val {a.val}; give --n > --val")
    if a.selfplay and (a.flashrag or a.parquet):
        p.error("--selfplay needs KG subgraphs: use --pool (or no source: the built-in pool), not --flashrag/--parquet")
    return a


def write(a: argparse.Namespace) -> str:
    """Write the two files; a one-line summary."""
    qa = bool(a.flashrag or a.parquet)
    if a.selfplay:
        env_id, loops = "KGSelfPlay-v0", ("searchgym_proposer", "searchgym_selfplay")
    else:
        env_id, loops = "KGSolver-v0", ("searchgym_qa",) if qa else ("searchgym_solver",)
    rewards = a.rewards or ("binary" if qa else "wcr")
    rows = dataset_rows(
        EnvSpec(env_id),
        a.n,
        agent_names=loops,
        seed=a.seed,
        rewards=rewards,
        reward_options=reward_options_from_items(a.reward_option),
        pool=a.pool,
        flashrag=a.flashrag,
        parquet=a.parquet,
    )
    groups = [rows[i : i + len(loops)] for i in range(0, len(rows), len(loops))]  # one group per task
    if len(groups) <= a.val:
        raise SearchGymError(f"the source holds {len(groups)} tasks, not more than --val {a.val}; lower --val")
    val = set(random.Random(a.seed).sample(range(len(groups)), a.val))
    train_rows = [r for i, g in enumerate(groups) if i not in val for r in g]
    val_rows = [r for i, g in enumerate(groups) if i in val for r in g]
    write_dataset(f"{a.out}/train.parquet", train_rows)
    write_dataset(f"{a.out}/val.parquet", val_rows)
    return f"wrote {len(train_rows)} + {len(val_rows)} rows ({', '.join(loops)}) to {a.out}/train.parquet, val.parquet"


def main(argv=None) -> int:
    """Parse, write, report; a searchgym error is one line and exit 2."""
    a = parse_args(argv)
    try:
        print(write(a))
    except SearchGymError as exc:
        if a.debug:
            raise
        print(f"make_data.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
