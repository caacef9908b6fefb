"""``searchgym play``: play games of a registered text env with a scripted agent and print each game: its
question, whether it was verified (why not, in words) and every reward with its components."""

from __future__ import annotations

import argparse
import logging
import time

from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

AGENTS = ("scripted", "random", "malformed", "leaky")


def _agent(name: str, env_id: str, seed: int):
    """The scripted agent ``name`` for ``env_id``'s family: the self-play agent for a game with a Proposer and
    Solvers, a Proposer for a Proposer-only env, else the path-following Solver."""
    from ..agents import scripted as s
    from ..envs.registration import env_ids, env_spec

    if name == "random":
        return s.RandomAgent(seed)
    if name == "malformed":
        return s.MalformedAgent()
    family = env_spec(env_id)
    if name == "leaky" and "proposer" not in family.roles:
        proposers = " or ".join(env_ids(role="proposer", text=True))
        raise InvalidArgumentError(f"--agent leaky is a proposer; use it with {proposers}")
    if family.kind == "selfplay":
        return s.ScriptedSelfPlayAgent(seed, proposer=s.LeakyProposer() if name == "leaky" else None)
    if family.roles == ("proposer",):
        return s.LeakyProposer() if name == "leaky" else s.ScriptedProposer()
    return s.PathFollowingSolver()


def check_play_args(args: argparse.Namespace) -> None:
    """Refuse, in one line before the world loads, numbers out of range (``--seed -1`` failed in gymnasium with a
    traceback) and an empty ``--export`` (it exported nothing, silently)."""
    from ..core.path_errors import refuse_empty_path
    from .number_checks import refuse_bad_numbers

    refuse_bad_numbers(args, least={"games": 1, "seed": 0})  # --max-turns 0 is the env's to refuse
    if args.export is not None:
        refuse_empty_path(args.export, "--export", "the JSONL file to write the games to, e.g. games.jsonl")


def run_play(args: argparse.Namespace) -> int:
    """Play ``args.games`` games (:func:`~searchgym.evaluation.games.play_games`, game ``g`` seeded ``--seed`` + g);
    print each one (:func:`~searchgym.evaluation.game_text.game_lines`). Returns 0."""
    import gymnasium as gym

    from .. import envs  # noqa: F401  (registers the ids)
    from ..evaluation.games import PlayedGame, play_games
    from ..wrappers.registry import reward_options_from_items, reward_plan

    check_play_args(args)
    if args.reward_option and args.reward is None:
        raise InvalidArgumentError(
            "--reward-option configures a reward of --reward; add it, e.g. "
            "--reward wcr --reward-option wcr.waypoint_answer_credit=false"
        )
    plan = reward_plan(args.reward) if args.reward is not None else None  # a bad stack fails before the world loads
    options = plan.check_options(reward_options_from_items(args.reward_option)) if plan else {}
    kwargs = {}
    if args.export:
        kwargs["export_path"] = args.export
    if args.world:
        kwargs["world"] = args.world
    if args.max_turns is not None:  # 0 is refused by the env, not read as "the default"
        kwargs["max_turns"] = args.max_turns
    env = gym.make(args.env, **kwargs)
    if plan is not None:
        env = plan.wrap(env, options=options)
    agent = _agent(args.agent, args.env, args.seed)
    totals: dict[str, list[float]] = {"proposer": [], "solver": []}
    components: dict[str, list[float]] = {}

    def show(game: PlayedGame) -> None:
        for ev in game.events:
            totals[ev["role"]].append(ev["reward"])
            if ev["role"] == "solver":
                for name, value in (ev.get("components") or {}).items():
                    if isinstance(value, (int, float)):
                        components.setdefault(name, []).append(float(value))
        print("\n".join(game.summary["lines"]))

    t0 = time.perf_counter()
    play_games(env, agent, args.games, seed=args.seed, seed_each_game=True, on_game=show)
    env.close()
    dt = time.perf_counter() - t0
    means = "; ".join(f"mean {role} reward {sum(xs) / len(xs):.3f}" for role, xs in totals.items() if xs)
    print(f"{args.games} game{'s' if args.games != 1 else ''} in {dt:.2f} s ({args.games / dt:.1f} games/s); {means}")
    if args.reward and components:
        print(
            "mean solver reward components: "
            + ", ".join(f"{k} {sum(v) / len(v):.3f}" for k, v in sorted(components.items()))
        )
    if args.export:
        print(f"trajectories written to {args.export}")
    return 0


def register(sub) -> None:
    """Add ``searchgym play``; its ``--env`` choices are the registered text envs."""
    from ..envs.registration import env_ids

    p = sub.add_parser("play", help="play games of a searchgym env with a scripted agent and print rewards")
    p.add_argument("--env", choices=env_ids(text=True), default="KGSelfPlay-v0")
    p.add_argument("--games", type=int, default=5)
    p.add_argument("--agent", choices=AGENTS, default="scripted")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--world", default=None, help="saved world directory (default: the embedded synthetic world)")
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--export", default=None, help="write every finished game to this JSONL file")
    p.add_argument(
        "--reward",
        default=None,
        metavar="NAMES",
        help="rewards to stack, comma-separated, innermost first: a registered name (binary, wcr, gdcr, "
        "dynasearcher, search_discount, ...) or package.module:Wrapper",
    )
    p.add_argument(
        "--reward-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a keyword argument of one --reward wrapper, VALUE read as YAML (repeatable), e.g. "
        "--reward wcr --reward-option wcr.waypoint_answer_credit=false",
    )
    p.set_defaults(func=run_play)
