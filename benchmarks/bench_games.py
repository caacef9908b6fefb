"""Self-play games one at a time vs several at once: what batching the demo's games buys on the machine at hand.

``searchgym demo`` plays its ``KGSelfPlay-v0`` games with the shipped cold start on clones of the env, all at
once (:func:`searchgym.evaluation.games.play_games` on a list of clones: every pending turn of every game in one
model call). This script plays the same games, seeds and settings as the demo (default world, a pool of 200
two-hop training subgraphs, the cold-start env settings, 4 turns x 96 tokens, 3 Solvers per question, the Waypoint
Coverage Reward, temperature 1) on each side:

- ``one-at-a-time``: one env, game after game (how the demo played them before);
- ``at-once``: one clone per game, sharing the batch's replay buffer and verification noise (the demo now).

It records per side: wall and process CPU seconds, the agent calls and the rows each carried, each game's
seconds and verdict. The two sides sample different tokens (a row's draws depend on the batch it is in), so
their games are not the same games: compare the seconds per model call and the calls per game as well as the
total, and read the verdicts as what happened, not as an effect of batching.

    .venv/bin/python benchmarks/bench_games.py                    # 4 games, 2 torch threads (the demo, alone)
    .venv/bin/python benchmarks/bench_games.py --games 2 --threads 1

Writes ``benchmarks/results/games_cpu.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import machine_info, write_result  # noqa: E402

SIDES = ("one-at-a-time", "at-once")


class CountingAgent:
    """An agent's ``act_batch`` that records how many rows each model call carried and how long it took."""

    def __init__(self, agent) -> None:
        self.agent = agent
        self.calls: list[tuple[int, float]] = []

    def act_batch(self, turns):
        """The wrapped agent's actions, timed."""
        t0 = time.perf_counter()
        actions = self.agent.act_batch(turns)
        rows = sum(sum(map(int, obs["active"])) if isinstance(obs, dict) and "active" in obs else 1 for obs, _ in turns)
        self.calls.append((rows, time.perf_counter() - t0))
        return actions


def play_side(side: str, model, games: int, seed: int) -> dict:
    """Play ``games`` games on one side, with the demo's own pool, envs and agent; its figures."""
    from searchgym.commands.demo import default_args, demo_agent, demo_pool, game_envs
    from searchgym.evaluation.games import play_games
    from searchgym.retrieval.bm25 import BM25Retriever
    from searchgym.world.synthetic import default_world

    args = default_args(games=1 if side == "one-at-a-time" else games, seed=seed)
    world = default_world(seed=seed)
    envs = game_envs(args, world, BM25Retriever.from_world(world), demo_pool(args, world))
    agent = CountingAgent(demo_agent(args, model))
    played: list[dict] = []

    def done(game) -> None:
        played.append({"game": game.game, "seconds": round(game.seconds, 2), "verified": game.verified})
        print(f"  {side}: game {game.game} {game.seconds:.1f} s, verified {played[-1]['verified']}", flush=True)

    c0, t0 = time.process_time(), time.perf_counter()
    play_games(
        envs if side == "at-once" else envs[0],
        agent,
        games,
        seed=seed,
        seed_each_game=True,
        on_game=done,
        share_batch_state=side == "at-once",
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    for env in envs:
        env.close()
    calls = agent.calls
    return {
        "side": side,
        "games": games,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "agent_calls": len(calls),
        "rows_per_call": round(sum(r for r, _ in calls) / len(calls), 2),
        "seconds_per_call": round(sum(s for _, s in calls) / len(calls), 2),
        "agent_s": round(sum(s for _, s in calls), 2),
        "verified": sum(g["verified"] for g in played),
        "per_game": sorted(played, key=lambda g: g["game"]),
    }


def main(argv=None) -> dict:
    """Run both sides and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=4, help="games per side (default 4)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2: the demo runs alone)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="result JSON (default benchmarks/results/games_cpu.json)")
    args = ap.parse_args(argv)
    if args.games < 1 or args.threads < 1:
        raise SystemExit("--games and --threads must be at least 1")
    import torch

    torch.set_num_threads(args.threads)
    from searchgym.commands.demo import default_args
    from searchgym.training.cold_start import load_cold_start

    model = load_cold_start()
    demo = default_args()
    rows = [play_side(side, model, args.games, args.seed) for side in SIDES]
    base = rows[0]
    for row in rows:
        row["speedup_wall"] = round(base["wall_s"] / row["wall_s"], 2)
        print(
            f"{row['side']:14s} {row['wall_s']:7.1f} s wall, {row['agent_calls']} model calls of "
            f"{row['rows_per_call']:.1f} rows ({row['seconds_per_call']:.1f} s each), "
            f"{row['verified']}/{row['games']} verified, x{row['speedup_wall']:.2f}"
        )
    result = {
        "benchmark": "bench_games",
        "machine": machine_info(),
        "torch": torch.__version__,
        "threads": args.threads,
        "model": "SmolLM2-135M + shipped cold start (merged)",
        "settings": {
            "games": args.games,
            "seed": args.seed,
            **{k: vars(demo)[k] for k in ("pool_size", "max_turns", "max_new_tokens", "group_size")},
        },
        "sides": rows,
        "note": "the sides sample different tokens (a row's draws depend on its batch), so their games differ; "
        "compare seconds per model call and calls per game as well as the totals",
    }
    print("wrote", write_result(result, args.out, "games_cpu.json"))
    return result


if __name__ == "__main__":
    main()
