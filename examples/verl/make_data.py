"""Write verl parquet datasets of searchgym Solver tasks (and self-play rows) for examples/verl/run_grpo_wcr.sh.

python examples/verl/make_data.py --out data/searchgym --train 128 --val 16
python examples/verl/make_data.py --out data/searchgym --selfplay   # searchgym_proposer + searchgym_selfplay rows
"""

from __future__ import annotations

import argparse
import sys

from searchgym.integrations.verl.data import dataset_rows, write_dataset
from searchgym.integrations.verl.environments import EnvSpec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for train.parquet and val.parquet")
    p.add_argument("--train", type=int, default=112, help="training rows (the default pool has 128 subgraphs)")
    p.add_argument("--val", type=int, default=16)
    p.add_argument(
        "--selfplay",
        action="store_true",
        help="self-play rows (a searchgym_proposer and a searchgym_selfplay row per subgraph) "
        "instead of searchgym_solver rows",
    )
    p.add_argument("--rewards", default="wcr", help="reward wrappers compute_score applies (verl's own tool loop)")
    a = p.parse_args(argv)
    env_id, loops = (
        ("KGSelfPlay-v0", ("searchgym_proposer", "searchgym_selfplay"))
        if a.selfplay
        else ("KGSolver-v0", ("searchgym_solver",))
    )
    rows = dataset_rows(EnvSpec(env_id), a.train + a.val, agent_names=loops, rewards=a.rewards)
    cut = a.train * len(loops)
    write_dataset(f"{a.out}/train.parquet", rows[:cut])
    write_dataset(f"{a.out}/val.parquet", rows[cut:])
    print(f"wrote {cut} + {len(rows) - cut} rows ({', '.join(loops)}) to {a.out}/train.parquet, val.parquet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
