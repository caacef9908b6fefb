"""Play whole games of any searchgym env with an agent and summarise each one (used by the demo).

``play_games(env, agent, n)`` runs the user loop of the env contract; the agent is anything with
``act(obs, info)`` (:class:`~searchgym.agents.llm_agent.LLMAgent`, the scripted agent, ...). The
summary per game holds the proposer reward, the solver rewards, their WCR terms when a WCR wrapper
is in place, the question and the gold answer, why a question was rejected, and the game in words.
``export_path`` writes every finished trajectory as one JSON line (``Trajectory.to_dict`` plus ``game``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from ..errors import InvalidArgumentError, SearchGymRuntimeError

logger = logging.getLogger(__name__)


def play_games(
    env, agent, n_games: int, *, export_path: str | Path | None = None, seed: Optional[int] = 0, max_steps: int = 10_000
) -> list[dict]:
    """Play ``n_games`` games; returns one summary dict per game.

    The first reset uses ``seed`` (later ones continue the env's own sequence). ``max_steps`` guards
    against an env that never ends a game (raises RuntimeError naming the game).
    """
    if n_games < 1:
        raise InvalidArgumentError(f"n_games must be >= 1, got {n_games}")
    out = Path(export_path) if export_path is not None else None
    fh = None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        fh = open(out, "w")
    summaries = []
    try:
        for game in range(n_games):
            obs, info = env.reset(seed=seed if game == 0 else None)
            events: list[dict] = []
            done, steps = False, 0
            while not done:
                obs, _, term, trunc, info = env.step(agent.act(obs, info))
                events.extend(info.get("rewards", []))
                done = bool(term or trunc)
                steps += 1
                if steps > max_steps:
                    raise SearchGymRuntimeError(
                        f"game {game} did not end after {max_steps} steps; is the env's max_turns set?"
                    )
            summaries.append(summarise_game(game, events, info))
            if fh is not None:
                for ev in events:
                    rec = ev["trajectory"].to_dict()
                    rec.update(game=game, event_reward=ev["reward"], slot=ev.get("slot"))
                    fh.write(json.dumps(rec, default=str) + "\n")
    finally:
        if fh is not None:
            fh.close()
    return summaries


def summarise_game(game: int, events: list[dict], info: dict) -> dict:
    """Per-game summary from the game's reward events; ``rejection`` says why a proposed question was
    rejected (``""`` if verified) and ``lines`` is the game in words, each reward with its terms
    (:func:`~searchgym.evaluation.game_text.game_lines`)."""
    from .game_text import game_lines, rejection_text

    solver = sorted((e for e in events if e["role"] == "solver"), key=lambda e: e.get("slot", 0))
    prop = [e for e in events if e["role"] == "proposer"]
    task = info.get("task")
    summary: dict[str, Any] = {
        "game": game,
        "question": getattr(task, "question", None),
        "answer": getattr(task, "answer", None),
        "solver_rewards": [float(e["reward"]) for e in solver],
        "solver_correct": [bool(e["trajectory"].correct) for e in solver],
        "solver_searches": [e["trajectory"].num_searches for e in solver],
    }
    for key in ("wcr_coverage", "wcr_bonus"):
        vals = [(e.get("components") or {}).get(key) for e in solver]
        if any(isinstance(x, (int, float)) for x in vals):
            summary[key] = [float(x) if isinstance(x, (int, float)) else None for x in vals]
    if prop:
        p = prop[-1]
        summary["proposer_reward"] = float(p["reward"])
        summary["valid_question"] = bool(p["components"].get("valid", 1.0))
        summary["proposed_question"] = p["trajectory"].question
        summary["rejection"] = rejection_text(info.get("validation"), list(p["trajectory"].task.answers))
    summary["lines"] = game_lines(game, events, info)
    return summary
