"""Train stable-baselines3 PPO on ``KGNavigate-v0`` and compare it with a random policy.

No LLM involved: the agent sees numeric features of the current node's edges and learns to
follow the relation the question asks next and to answer when no hops remain. Evaluation uses
200 episodes with fixed reset seeds (the same task sequence for every policy) on the embedded
default world; an oracle (perfect feature reader) gives the upper bound.

    .venv/bin/python examples/sb3_ppo.py                # ~1 min on 2 CPU cores (40k PPO steps)
    .venv/bin/python examples/sb3_ppo.py --timesteps 20000 --episodes 100 --json out.json

Needs the ``sb3`` extra (``pip install 'searchgym[sb3]'``).
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> dict:
    """Train, evaluate, print a markdown table; returns the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=40_000, help="PPO training steps (default 40000)")
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes per policy (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (PPO init and env resets)")
    parser.add_argument(
        "--search",
        choices=("none", "bm25"),
        default="none",
        help="what the search action does (default none: stay; bm25: jump to the best document's entity)",
    )
    parser.add_argument("--eval-seed", type=int, default=10_000, help="first reset seed of the evaluation episodes")
    parser.add_argument("--num-tasks", type=int, default=300, help="subgraph-pool tasks to navigate (default 300)")
    parser.add_argument(
        "--order",
        choices=("relevance", "stable"),
        default="relevance",
        help="candidate slot order (stable = harder: find the slot from features alone)",
    )
    parser.add_argument("--n-envs", type=int, default=4, help="parallel envs in PPO's vectorised rollout (default 4)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: fastest for a small MLP)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError as exc:
        raise SystemExit(f"this example needs stable-baselines3 and torch: pip install 'searchgym[sb3]' ({exc})")
    import numpy as np

    from searchgym.envs.navigate import KGNavigateEnv, evaluate_policy

    torch.set_num_threads(args.threads)
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    kwargs = {"num_tasks": args.num_tasks, "candidate_order": args.order, "search": args.search}
    eval_env = KGNavigateEnv(**kwargs)
    env = make_vec_env(
        KGNavigateEnv, n_envs=args.n_envs, seed=args.seed, env_kwargs={**kwargs, "world": eval_env.world}
    )

    rng = np.random.default_rng(args.seed)
    random_rate = evaluate_policy(
        eval_env, lambda obs, e: int(rng.integers(e.action_space.n)), args.episodes, args.eval_seed
    )
    oracle_rate = evaluate_policy(eval_env, lambda obs, e: e.oracle_action(), args.episodes, args.eval_seed)

    model = PPO(
        "MlpPolicy",
        env,
        seed=args.seed,
        n_steps=256,
        batch_size=256,
        learning_rate=1e-3,
        ent_coef=0.0,
        gamma=0.99,
        verbose=0,
        device="cpu",
    )
    # verbose=0 writes no logs, but SB3 still makes an empty SB3-<date> folder in the temp dir per learn() unless
    # it is handed a logger: give it one that writes nowhere
    model.set_logger(Logger(folder=None, output_formats=[]))
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    train_s = time.perf_counter() - start
    ppo_rate = evaluate_policy(
        eval_env, lambda obs, e: int(model.predict(obs, deterministic=True)[0]), args.episodes, args.eval_seed
    )

    figures = {
        "timesteps": args.timesteps,
        "episodes": args.episodes,
        "train_seconds": round(train_s, 1),
        "random": random_rate,
        "ppo": ppo_rate,
        "oracle": oracle_rate,
        "order": args.order,
        "tasks": len(eval_env.tasks),
        "actions": int(eval_env.action_space.n),
        "obs_dim": int(eval_env.observation_space.shape[0]),
    }
    print("| policy | success rate |\n|---|---|")
    print(f"| random | {random_rate:.3f} |\n| PPO ({args.timesteps} steps, {train_s:.0f} s) | {ppo_rate:.3f} |")
    print(f"| oracle (upper bound) | {oracle_rate:.3f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return figures


if __name__ == "__main__":
    main()
