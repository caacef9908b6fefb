"""Playing an env against verl's token generator: re-exported from :mod:`searchgym.integrations.episode`
(engine-neutral, shared with the TRL adapter)."""

from ..episode import (
    TURN_STOPS,
    EnvEpisode,
    GameEpisode,
    GenerationFailed,
    Generator,
    SolverEpisode,
    TokenStream,
    play_episode,
    play_selfplay_game,
    play_solver_episode,
)

__all__ = [
    "TURN_STOPS",
    "Generator",
    "TokenStream",
    "GenerationFailed",
    "EnvEpisode",
    "SolverEpisode",
    "GameEpisode",
    "play_episode",
    "play_solver_episode",
    "play_selfplay_game",
]
