"""``searchgym demo``: the main job on the embedded default world, end to end.

Builds the default world, indexes it with BM25, prints world statistics and a few searches,
builds a subgraph pool and draws one subgraph, then plays ``KGSelfPlay-v0`` games (``--games`` at once, one
batch sharing its replay buffer and verification noise as a training step's games do) with the
Waypoint Coverage Reward wrapper and prints each game -- its question, whether it was verified (and
why not, in words) and every reward with its components (:mod:`searchgym.evaluation.game_text`) -- while
writing every game's trajectories to JSONL.

The agent is the bundled SmolLM2-135M model by default (``--agent llm``) or the scripted agents
(``--agent scripted``, seconds instead of minutes). With the LLM agent the demo first shows learning:
held-out accuracy (built-in benchmark questions whose answers no training task has) of the base
model, of the cold-started one (the LoRA adapter shipped in ``searchgym/assets``, made by the
``searchgym demos`` + ``searchgym sft`` commands in :data:`searchgym.training.cold_start.RECIPE`) and of the
cold start after a few live GRPO steps (``--rl-steps``, none by default, on training-side questions), drawn to
``learning.png``; the self-play games are then played by the last of these models.

Before the games (with either agent) it shows what training the game does at a scale the demo cannot run: the
committed results of ``benchmarks/bench_selfplay.py`` (three recipes trained from the cold start, both roles),
shipped as ``searchgym/assets/selfplay_cpu.json`` (``--selfplay-results PATH`` for another file) and redrawn
from that JSON to ``selfplay.png`` -- per-step Proposer valid rate and Solver reward, held-out Solver accuracy
by hop and the Proposer's held-out valid rate, cold start vs each arm (:mod:`searchgym.evaluation.selfplay_results`).
Nothing of it is re-run; without a shipped file the demo says so and names the command that makes it.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from ..core.renamed import add_renamed_flag

logger = logging.getLogger(__name__)

DEMO_QUERIES = 3
#: the model ``--agent llm`` plays when ``--model`` is not given
DEFAULT_MODEL = "smollm2"


def demo_model(args: argparse.Namespace) -> str:
    """The model ``--agent llm`` plays: ``--model``, else the bundled :data:`DEFAULT_MODEL` (``--model`` defaults to
    None so that one given to the scripted agents, which would ignore it, is seen and refused)."""
    return args.model or DEFAULT_MODEL


def _print_world(world, out):
    """Print world statistics and a few searches; returns the BM25 retriever it built."""
    from ..retrieval import format_hits
    from ..retrieval.bm25 import BM25Retriever

    s = world.stats()
    print(
        f"World {s.name!r}: {s.entities} entities, {s.relations} relations, {s.triples} triples "
        f"({s.literal_triples} literal), {s.documents} documents",
        file=out,
    )
    print("  entity types: " + ", ".join(f"{k} {v}" for k, v in s.entity_types.items()), file=out)
    print("  top relations: " + ", ".join(f"{k} ({v})" for k, v in s.top_relations[:8]), file=out)
    t0 = time.perf_counter()
    retriever = BM25Retriever.from_world(world)
    print(f"BM25 index over {world.num_documents} documents built in {time.perf_counter() - t0:.2f} s", file=out)
    step = max(1, world.num_entities // DEMO_QUERIES)
    for entity in (world.entity_at(i) for i in range(0, world.num_entities, step)[:DEMO_QUERIES]):
        edges = world.out_edges(entity.id)
        query = f"{entity.title} {edges[0].relation.label}" if edges else entity.title
        print(f"\nsearch: {query!r}", file=out)
        print(format_hits(retriever.search(query, k=3), max_chars=160), file=out)
    return retriever


#: the demo's numbers and the least each may be (checked before the world is built, so a typo costs no waiting)
_DEMO_MINIMUMS = {
    "games": 1,
    "max_games": 1,
    "threads": 1,
    "seed": 0,
    "pool_size": 1,
    "pool_hops": 1,
    "max_turns": 1,
    "max_new_tokens": 1,
    "group_size": 1,
    "rl_steps": 0,
    "rl_group": 2,
    "eval_1hop": 0,
    "eval_2hop": 0,
    "eval_base": 0,
}


def check_demo_args(args: argparse.Namespace) -> None:
    """One line naming every number out of range (``--threads 0`` once meant torch's default, ``--games 0`` failed
    only after the world, the searches and the subgraphs had been shown; ``--seed -1`` in numpy), and a
    ``--model`` given to the scripted agents, which play no model."""
    from ..errors import InvalidArgumentError
    from .number_checks import refuse_bad_numbers

    refuse_bad_numbers(args, least=_DEMO_MINIMUMS)
    if args.agent == "scripted" and args.model is not None:
        raise InvalidArgumentError(
            "--model is for --agent llm; the scripted agents play no model: drop --model or use --agent llm"
        )


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo with parsed CLI arguments; returns an exit code."""
    import sys

    from ..core.progress import Progress
    from ..envs.export import TrajectoryWriter
    from ..world.synthetic import default_world
    from ..wrappers.recording import RecordGames

    check_demo_args(args)
    out = sys.stdout
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    outdir = Path(args.output_dir)
    world = default_world(seed=args.seed)
    retriever = _print_world(world, out)

    pool = demo_pool(args, world)
    outdir.mkdir(parents=True, exist_ok=True)  # only once the pool exists: an impossible --pool-hops makes nothing
    if args.picture:  # matplotlib (~1.5 s to import on 2 cores) is imported only here, when drawing
        from ..construction.plot import plot_subgraph

        picture = outdir / "subgraph.png"
        plot_subgraph(pool[0], picture)
        where = f"first one drawn to {picture}"
    else:
        where = "first one (not drawn: --no-picture)"
    print(f"\nSubgraph pool: {len(pool)} subgraphs; {where}:\n{pool[0].describe()}", file=out)

    model = show_learning(args, world, outdir, out) if args.agent == "llm" else None
    show_selfplay_benchmark(args.selfplay_results, outdir if args.picture else None, out)
    # recording outermost: the file holds the WCR-shaped rewards the game lines print; one file for all the clones
    writer = TrajectoryWriter(outdir / "trajectories.jsonl")
    envs = [RecordGames(env, writer) for env in game_envs(args, world, retriever, pool)]
    agent = demo_agent(args, model)

    limit = max(args.games, args.max_games)
    print(
        f"\nPlaying {args.games} KGSelfPlay-v0 games at once with the {args.agent} agent (more, up to {limit}, until "
        "one question is verified) ...",
        file=out,
    )
    with Progress(args.games, "games", unit="game", enabled=args.agent == "llm") as bar:  # ~a minute a batch
        verified, game = _play_demo_games(envs, agent, args, bar, out)
    print(f"\n{verified} of {game} questions verified", file=out)
    for env in envs:
        env.close()
    print(f"\nTrajectories written to {outdir / 'trajectories.jsonl'}", file=out)
    return 0


def demo_pool(args: argparse.Namespace, world) -> list:
    """The demo's subgraph pool: ``--pool-size`` training-side subgraphs (so the built-in benchmark stays held out
    from what the demo plays), of ``--pool-hops`` hops, by default the hop count the shipped cold start reaches (2)
    for the LLM agent and the paper's 3-7 for the scripted experts."""
    from ..tasks.heldout import training_subgraphs

    hops = args.pool_hops if args.pool_hops is not None else (2 if args.agent == "llm" else None)
    return training_subgraphs(world, args.pool_size, seed=args.seed, hops=hops, required=True)


def game_envs(args: argparse.Namespace, world, retriever, pool: list) -> list:
    """One ``KGSelfPlay-v0`` clone per game of ``--games`` (they play at once, as one batch: every pending turn in one
    model call), each under the Waypoint Coverage Reward; for the LLM agent with the cold-start settings (short
    passages keep a game near a minute on 2 CPU cores), ``--max-turns`` and ``--group-size``."""
    import gymnasium as gym

    from ..wrappers import WaypointCoverageReward

    kwargs: dict[str, Any] = dict(world=world, retriever=retriever, pool=pool)
    if args.agent == "llm":
        from ..training.demonstrations import cold_start_env_kwargs

        kwargs.update(cold_start_env_kwargs(world, max_turns=args.max_turns), group_size=args.group_size)
    return [WaypointCoverageReward(gym.make("KGSelfPlay-v0", **kwargs)) for _ in range(args.games)]


def default_args(**overrides: Any) -> argparse.Namespace:
    """The demo's arguments at their defaults, ``overrides`` replacing some: what a script measuring the demo's
    games plays (``benchmarks/bench_games.py``). An unknown name is refused."""
    from ..errors import InvalidArgumentError

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["demo"])
    unknown = sorted(set(overrides) - set(vars(args)))
    if unknown:
        raise InvalidArgumentError(f"not a demo argument: {', '.join(unknown)}")
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def _play_demo_games(envs, agent, args, bar, out) -> tuple[int, int]:
    """Play ``--games`` games (seed ``--seed`` + game) at once, one on each of ``envs``, as one batch sharing its
    replay buffer and verification noise (SSP's training batch), then more in batches of as many, up to
    ``--max-games``, until one question is verified; print each game as it ends. Returns ``(verified questions,
    games played)``."""
    from ..evaluation.game_text import game_lines
    from ..evaluation.games import PlayedGame, play_games

    verified: list[bool] = []

    def show(game: PlayedGame) -> None:
        verified.append(game.verified)
        lines = game_lines(game.game, game.events, game.info)
        lines[0] += f" ({game.seconds:.1f} s)"
        bar.update(1)
        bar.write("\n".join(lines), file=out)

    play_games(envs, agent, args.games, seed=args.seed, seed_each_game=True, on_game=show, share_batch_state=True)
    limit = max(args.games, args.max_games)
    if not any(verified) and limit > args.games:
        bar.total = limit
        bar.write(f"no question verified in {args.games} games: playing on, up to {limit}", file=out)
        play_games(
            envs[: limit - args.games],
            agent,
            limit - args.games,
            seed=args.seed,
            seed_each_game=True,
            first_game=args.games,
            on_game=show,
            until=lambda game: game.verified,
            share_batch_state=True,
        )
    return sum(verified), len(verified)


def show_learning(args, world, outdir: Path, out):
    """Held-out accuracy of the base model, the cold-started one and the cold start after ``--rl-steps`` live
    GRPO steps; returns the last ``(model, tokenizer)`` to play with."""
    from ..llm.pretrained import open_model
    from ..training.cold_start import load_cold_start, shipped_adapter
    from ..training.learning_checks import heldout_report, llm_eval_agent

    per_hop = {1: args.eval_1hop, 2: args.eval_2hop}
    print(
        f"\nLearning check: {sum(per_hop.values())} held-out questions ({args.eval_1hop} 1-hop, {args.eval_2hop} "
        f"2-hop) whose answers no training task has; greedy, cold-start env settings",
        file=out,
    )
    rows: list = []
    loaded: tuple[Any, Any] = (None, None)
    model_name = demo_model(args)
    adapter = shipped_adapter() if model_name == DEFAULT_MODEL else None
    # the base model never ends a turn, so it spends every token budget: scored on the first questions only
    base_hop = {h: min(n, args.eval_base) for h, n in per_hop.items()}
    stages = [("base " + model_name, lambda prev: open_model(model_name))]
    if adapter is not None:
        stages.append(("cold start (shipped LoRA)", lambda prev: load_cold_start(adapter)))
        if args.rl_steps > 0:  # the row's time includes the training
            rl_name = f"+ {args.rl_steps} live GRPO steps"
            stages.append((rl_name, lambda prev: (live_rl(args, world, prev[0], prev[1], outdir, out), prev[1])))
    for i, (name, load) in enumerate(stages):
        t0 = time.perf_counter()
        loaded = load(loaded)
        report = heldout_report(
            llm_eval_agent(*loaded, name, max_new_tokens=args.max_new_tokens),
            world,
            per_hop=base_hop if i == 0 else per_hop,
            max_turns=args.max_turns,
            progress=True,  # minutes per model on 2 cores: never silent
        )
        by = report["solver"]["by_hops"]
        rows.append((name, by))
        n = sum((base_hop if i == 0 else per_hop).values())
        print(
            f"  {name:28s} 1-hop {by['1']['mean']:.2f}  2-hop {by['2']['mean']:.2f}  (n={n})  "
            f"searches/rollout {report['solver']['searches'] or 0:.2f}  ({time.perf_counter() - t0:.0f} s)",
            file=out,
        )
    if adapter is None:
        print("  (no cold-start adapter for this model: the games below are played by the base model)", file=out)
    if args.picture:
        _plot_learning(rows, outdir / "learning.png")
        print(f"  drawn to {outdir / 'learning.png'}", file=out)
    return loaded


def show_selfplay_benchmark(path: str | Path | None, picture_dir: Path | None, out) -> Path | None:
    """Print the self-play benchmark's committed results (``path``, default the shipped
    ``searchgym/assets/selfplay_cpu.json``) as :func:`~searchgym.evaluation.selfplay_results.format_selfplay_table`
    and, unless ``picture_dir`` is None, draw them to ``picture_dir/selfplay.png``; returns the picture's path.
    Nothing is re-run, and nothing here ends the demo: a missing or unreadable file is one line saying so and
    naming the command that makes it."""
    from ..errors import MissingFileError, SearchGymError
    from ..evaluation.selfplay_results import (
        MAKE_COMMAND,
        format_selfplay_table,
        load_selfplay_results,
        plot_selfplay_curves,
        shipped_results_path,
    )

    print("\nSelf-play benchmark (committed results of benchmarks/bench_selfplay.py, not re-run):", file=out)
    try:
        results = load_selfplay_results(path)
    except MissingFileError:
        if path is not None:
            print(f"  no results file at {path}; make one with: {MAKE_COMMAND}", file=out)
        else:
            print(f"  no results shipped yet ({shipped_results_path()}); make them with: {MAKE_COMMAND}", file=out)
        return None
    except SearchGymError as exc:
        print(f"  {exc}", file=out)
        return None
    print("\n".join("  " + line for line in format_selfplay_table(results).splitlines()), file=out)
    note = start_note(results.start)
    if note:
        print(f"  {note}", file=out)
    if picture_dir is None:
        return None
    picture = plot_selfplay_curves(results, picture_dir / "selfplay.png")
    print(f"  curves and held-out bars drawn to {picture}", file=out)
    return picture


def start_note(start: str) -> str:
    """A line saying so when the benchmark's runs started from the shipped cold start but not from the adapter
    shipped now (its weights' fingerprint is not in ``start``): the table then measures an earlier adapter, which
    the demo's own games and held-out check do not play. Empty otherwise."""
    from ..training.cold_start import shipped_adapter, weights_fingerprint
    from ..training.recipes import SHIPPED_INIT

    folder = shipped_adapter()
    if not start.startswith(SHIPPED_INIT) or folder is None:
        return ""
    now = weights_fingerprint(folder)
    if now in start:
        return ""
    return (
        f"(these runs started from an earlier shipped adapter; the one shipped now, weights {now}, is what this demo "
        "plays: re-run the benchmark to measure it)"
    )


def live_rl(args, world, model, tok, outdir: Path, out):
    """``args.rl_steps`` GRPO steps (binary reward, fresh rank-16 LoRA, no KL) from the cold-started model on
    training-side 1-hop questions, printing each step's reward; returns the trained model, merged. (The shipped
    LoRA learned 1-hop questions only; it answers 0.06 of held-out 2-hop ones, so sampled 2-hop groups nearly
    always score all 0 and carry no gradient.)"""
    import gymnasium as gym

    from ..core.progress import Progress
    from ..tasks.sources import ListTaskSource
    from ..training.demonstrations import cold_start_env_kwargs, rl_tasks
    from ..training.learning_checks import cold_start_rl_config
    from ..training.selfplay_trainer import SelfPlayTrainer

    batch = 2
    drawn = rl_tasks(world, {1: batch * args.rl_steps}, seed=args.seed)  # the hop count the shipped LoRA learned
    kw = cold_start_env_kwargs(world, max_turns=args.max_turns)
    envs = [
        gym.make("KGSolverGroup-v0", tasks=ListTaskSource(drawn), group_size=args.rl_group, **kw) for _ in range(batch)
    ]
    cfg = cold_start_rl_config(
        batch_size=batch,
        group_size=args.rl_group,
        model=demo_model(args),
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        lr=1e-4,
        total_steps=args.rl_steps,
        output_dir=str(outdir / "rl"),
        save_every=0,
        progress=False,
        seed=args.seed,
    )
    print(
        f"  live GRPO: {args.rl_steps} steps x {batch} questions x {args.rl_group} rollouts, LoRA r16, lr 1e-4",
        file=out,
    )
    trainer = SelfPlayTrainer(cfg, envs=envs, model=model, tokenizer=tok)
    with Progress(args.rl_steps, "live GRPO", unit="step") as bar:
        for step in range(args.rl_steps):
            t0 = time.perf_counter()
            m = trainer.train_step()
            bar.update(1)
            bar.write(
                f"    step {step + 1}: solver reward {m.get('solver/reward', 0.0):.2f}, groups without signal "
                f"{batch - round(m.get('solver/groups_with_signal', 0.0) * batch)}/{batch}, "
                f"{time.perf_counter() - t0:.0f} s",
                file=out,
            )
    for env in envs:
        env.close()
    return trainer.policy.merge_and_unload().eval()


def _plot_learning(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    width = 0.8 / len(rows)
    for i, (name, by) in enumerate(rows):
        hops = sorted(by, key=int)
        ax.bar([int(h) + width * i for h in hops], [by[h]["mean"] for h in hops], width, label=name)
    ax.set_xticks([1 + width * (len(rows) - 1) / 2, 2 + width * (len(rows) - 1) / 2], ["1-hop", "2-hop"])
    ax.set_ylabel("held-out exact match")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def demo_agent(args: argparse.Namespace, model):
    """The agent that plays the demo's games: the scripted experts, or ``LLMAgent`` on ``model`` (``(model,
    tokenizer)``) sampling at temperature 1 with ``--max-new-tokens`` a turn, seeded with ``--seed``."""
    if args.agent == "scripted":
        from ..agents.scripted import ScriptedSelfPlayAgent

        return ScriptedSelfPlayAgent(seed=args.seed)
    from ..agents.llm_agent import LLMAgent
    from ..core.llm import GenerationConfig
    from ..llm.transformers_backend import TransformersGenerator

    generator = TransformersGenerator(*model, seed=args.seed)
    return LLMAgent(
        generator, config=GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed)
    )


def register(sub) -> None:
    """Add ``searchgym demo``."""
    p = sub.add_parser("demo", help="the main job: world, search, subgraphs and self-play games on the default world")
    p.add_argument(
        "--agent", choices=["llm", "scripted"], default="llm", help="bundled SmolLM2 agent or scripted agents"
    )
    p.add_argument(
        "--model",
        default=None,
        help="model for --agent llm: 'smollm2' (bundled, the default) or a local HF directory",
    )
    p.add_argument(
        "--games",
        type=int,
        default=2,
        help="self-play games to play at once, as one batch (every pending turn in one model call)",
    )
    p.add_argument(
        "--max-games",
        type=int,
        default=4,
        help="when none of the --games games has a verified question, play on (in batches of --games) until one "
        "has, up to this many",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's, every core; the demo runs alone)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-size", type=int, default=200)
    p.add_argument(
        "--pool-hops",
        type=int,
        default=None,
        help="path length of the played subgraphs (default: 2 for --agent llm, the cold start's reach; 3-7 scripted)",
    )
    p.add_argument("--max-turns", type=int, default=4, help="turns per rollout for the LLM agent (paper: 10)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="tokens per LLM turn (a planned 2-hop turn runs ~60)")
    p.add_argument("--group-size", type=int, default=3, help="Solvers per question for the LLM agent (paper: 5)")
    p.add_argument(
        "--rl-steps",
        type=int,
        default=0,
        help="live GRPO steps after the cold start (default 0: two CPU steps change nothing measurable; "
        "benchmarks/bench_selfplay.py measures training)",
    )
    p.add_argument("--rl-group", type=int, default=4, help="rollouts per question in the live GRPO steps")
    p.add_argument("--eval-1hop", type=int, default=16, help="held-out 1-hop questions in the learning check")
    p.add_argument("--eval-2hop", type=int, default=16, help="held-out 2-hop questions in the learning check")
    p.add_argument(
        "--eval-base", type=int, default=4, help="of those, per hop count, how many the base model is scored on"
    )
    p.add_argument(
        "--selfplay-results",
        default=None,
        metavar="PATH",
        help="the self-play benchmark's compact results to show (default: the shipped "
        "searchgym/assets/selfplay_cpu.json, written by benchmarks/bench_selfplay.py --ship)",
    )
    p.add_argument(
        "--output-dir",
        default="out/demo",
        help="directory for trajectories.jsonl and the pictures (subgraph.png, learning.png, selfplay.png)",
    )
    add_renamed_flag(p, "--out", "--output-dir")
    p.add_argument(
        "--no-picture",
        dest="picture",
        action="store_false",
        help="skip drawing the pictures (and importing matplotlib)",
    )
    p.set_defaults(func=run_demo)
