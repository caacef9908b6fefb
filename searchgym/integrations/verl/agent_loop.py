"""verl agent loops that play searchgym envs (needs the ``verl`` extra; read against verl 0.9.1).

Two loops, registered with verl under searchgym names (and listed in
``examples/verl/agent_loops.yaml`` for ``actor_rollout_ref.rollout.agent.agent_loop_config_path``):

* ``searchgym_solver`` (:class:`SearchGymSolverLoop`): one sample = one ``KGSolver-v0`` rollout
  of the row's task (tag protocol), with the env's reward wrappers (``rewards: wcr``).
* ``searchgym_selfplay`` (:class:`SearchGymSelfPlayLoop`): one ``KGSelfPlay-v0`` game per row
  and rollout group; sample *i* of the group is Solver slot *i* (``rollout.n`` = the game's G).
  See the class docstring.
* ``searchgym_proposer`` (:class:`SearchGymProposerLoop`): one whole game per sample, returned as
  the Proposer's rollout and reward. A dataset mixing ``searchgym_proposer`` and
  ``searchgym_selfplay`` rows trains both roles of SSP with verl's stock GRPO step.

Both return ``AgentLoopOutput`` with ``response_mask`` 0 on every env-inserted token and
``reward_score`` set (so verl skips its own reward function), the reward components in
``extra_fields["reward_extra_info"]``. They need ``actor_rollout_ref.rollout.mode=async`` and
``data.return_raw_chat=True`` (verl's requirement for agent loops); the env settings come from the
YAML entry (``env_id``, ``rewards``, ``reward_options``, ``env_kwargs``, ``env_threads``), the task from the row's
``extra_info["searchgym"]`` (``task``: a ``Task.to_dict()``, or ``index`` / ``seed``) or, for a
Search-R1 / FlashRAG row without it, from the row's question and gold answers; a row with neither is
refused (:func:`searchgym.integrations.verl.data.row_options`).

Env work (building the env, resets, steps: retrieval and judging) runs in a thread pool of
``env_threads`` threads per process, off verl's event loop, so the rollouts of a worker wait on a slow
retriever together; self-play games of a process share a replay buffer and noise window, so their env
steps take turns (:func:`searchgym.integrations.environments.state_lock`).

A ``server_manager`` that fails mid-rollout marks the sample failed: ``response_mask`` all 0 (no
gradient), ``extra_fields["searchgym_failed"] = 1`` with the error, a warning logged and
:data:`FAILED_ROLLOUTS` counted — never a silent reward of 0 on a real rollout
(``on_generate_error: raise`` re-raises instead).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional
from uuid import uuid4

from omegaconf import DictConfig, ListConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from ...core.info import InfoKind
from ...envs.registration import env_ids
from ...errors import InvalidArgumentError, SearchGymRuntimeError
from ..env_threads import DEFAULT_ENV_THREADS, env_runner
from ..environments import EnvSpec, cached_env, state_lock
from ..episode import (
    TURN_STOPS,
    GameEpisode,
    GenerationFailed,
    TokenStream,
    play_selfplay_game,
    play_solver_episode,
)
from .data import VerlRowError, row_options

logger = logging.getLogger(__name__)

__all__ = [
    "SearchGymSolverLoop",
    "SearchGymSelfPlayLoop",
    "SearchGymProposerLoop",
    "FAILED_ROLLOUTS",
    "VERL_VERSION_READ",
]

#: The verl release these loops were written and tested against.
VERL_VERSION_READ = "0.9.1"
#: Rollouts marked failed in this process, by loop name (a generator error mid-rollout).
FAILED_ROLLOUTS: dict[str, int] = {}


class _SearchGymLoop(AgentLoopBase):
    """Shared parts: env settings from the YAML entry, the generator adapter, output building."""

    loop_name = "searchgym"

    def __init__(
        self,
        *args,
        env_id: str = "KGSolver-v0",
        rewards: Any = (),
        env_kwargs: Optional[dict] = None,
        reward_options: Optional[dict] = None,
        stop: Optional[list] = None,
        on_generate_error: str = "mark",
        env_threads: int = DEFAULT_ENV_THREADS,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(env_kwargs, DictConfig):  # from verl's agent-loop YAML, via hydra
            env_kwargs = OmegaConf.to_container(env_kwargs, resolve=True)
        if isinstance(reward_options, DictConfig):
            reward_options = OmegaConf.to_container(reward_options, resolve=True)
        if isinstance(rewards, ListConfig):
            rewards = list(rewards)
        self.spec = EnvSpec.from_config(
            {
                "env_id": env_id,
                "rewards": rewards,
                "env_kwargs": dict(env_kwargs or {}),
                "reward_options": reward_options,
            }
        )
        if self.spec.env_kwargs.get("protocol", "tags") != "tags":
            raise InvalidArgumentError(
                "the verl agent loops play the tag protocol; drop env_kwargs.protocol (function calling is offered "
                "by the TRL adapter, docs/trl.md)"
            )
        if on_generate_error not in ("mark", "raise"):
            raise InvalidArgumentError(f"on_generate_error must be 'mark' or 'raise', got {on_generate_error!r}")
        self.on_generate_error = on_generate_error
        self.env_threads = int(env_threads)
        env_runner(self.env_threads)  # a bad size fails when verl builds the loop
        self.stop = list(TURN_STOPS if stop is None else stop)
        self.response_length = int(self.rollout_config.response_length)

    def _generator(self, sampling_params: dict, priority: int):
        """Adapt ``server_manager.generate`` to the episode's generator (one ``request_id`` per rollout:
        verl's sticky sessions send every turn of it to the same server, whose prefix cache holds it)."""
        base = dict(sampling_params)
        if self.stop:
            base.setdefault("stop", self.stop)
            base.setdefault("include_stop_str_in_output", True)

        async def generate(prompt_ids: list[int], max_tokens: int, rollout_id: str):
            params = dict(base, max_tokens=min(int(base.get("max_tokens", max_tokens)), max_tokens))
            out = await self.server_manager.generate(
                request_id=rollout_id, prompt_ids=prompt_ids, sampling_params=params, priority=priority
            )
            return out.token_ids, out.log_probs

        return generate

    @staticmethod
    def _options(row: dict) -> tuple[Optional[int], dict]:
        """``(seed, reset options)`` of the row's task (:func:`~searchgym.integrations.verl.data.row_options`)."""
        return row_options(row)

    async def _env(self):
        """A copy of this loop's env, built off the event loop, and the runner its resets and steps go through."""
        env = await env_runner(self.env_threads)(cached_env, self.spec)
        return env, env_runner(self.env_threads, state_lock(env))

    def _output(self, stream: TokenStream, metrics: dict, extra: dict) -> AgentLoopOutput:
        n = self.response_length
        info = {k: float(v) for k, v in stream.components.items() if isinstance(v, (int, float))}
        return AgentLoopOutput(
            prompt_ids=stream.prompt_ids,
            response_ids=stream.response_ids[:n],
            response_mask=stream.response_mask[:n],
            response_logprobs=stream.response_logprobs[:n] if stream.logprobs_complete else None,
            reward_score=float(stream.reward),
            num_turns=2 * stream.turns,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"reward_extra_info": info, "searchgym_failed": 0, "searchgym_cut": int(stream.cut), **extra},
        )

    def _failed(self, error: GenerationFailed) -> AgentLoopOutput:
        """The output of a rollout whose generator failed: masked out, flagged and counted."""
        if self.on_generate_error == "raise":
            raise error
        FAILED_ROLLOUTS[self.loop_name] = FAILED_ROLLOUTS.get(self.loop_name, 0) + 1
        logger.warning(
            "%s rollout failed and is masked out (%d so far in this process): %s",
            self.loop_name,
            FAILED_ROLLOUTS[self.loop_name],
            error,
        )
        stream = error.stream
        # verl needs >= 1 response token; verl annotates its tokenizer as the AutoTokenizer factory class
        ids = stream.response_ids[: self.response_length] or [self.tokenizer.pad_token_id or 0]  # type: ignore[attr-defined]
        return AgentLoopOutput(
            prompt_ids=stream.prompt_ids,
            response_ids=ids,
            response_mask=[0] * len(ids),
            reward_score=0.0,
            num_turns=2 * stream.turns,
            metrics=AgentLoopMetrics(),
            extra_fields={
                "reward_extra_info": {},
                "searchgym_failed": 1,
                "searchgym_cut": 0,
                "searchgym_error": str(error),
            },
        )


def _check_family(loop_name: str, env_id: str, kind: InfoKind, hint: str = "") -> None:
    """Refuse an env the loop cannot play: a loop plays the registered envs of one ``kind`` whose turns
    include the Solver's (searchgym.envs.registration), so a new family of that kind plays without an edit here."""
    playable = env_ids(kind=kind, role="solver")
    if env_id not in playable:
        raise InvalidArgumentError(f"{loop_name} plays {' or '.join(playable)}, not {env_id}{hint}")


@register("searchgym_solver")
class SearchGymSolverLoop(_SearchGymLoop):
    """One ``KGSolver-v0`` rollout per sample (tag protocol), rewarded by the env's wrappers."""

    loop_name = "searchgym_solver"

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        """Play the row's task; see the module docstring."""
        games = " or ".join(env_ids(kind="selfplay"))
        _check_family(self.loop_name, self.spec.env_id, "single", f"; use searchgym_selfplay for {games}")
        seed, options = self._options(kwargs)
        env, run_env = await self._env()
        try:
            episode = await play_solver_episode(
                env,
                self._generator(sampling_params, int(priority)),
                self.tokenizer,
                response_length=self.response_length,
                seed=seed,
                options=options,
                run_env=run_env,
            )
        except GenerationFailed as exc:
            return self._failed(exc)
        return self._output(episode.stream, {}, {})


class _Game:
    """One self-play game shared by the samples of a rollout group (same ``uid``)."""

    def __init__(self, task: asyncio.Task) -> None:
        self.task = task
        self.claimed = 0


@register("searchgym_proposer")
class SearchGymProposerLoop(_SearchGymLoop):
    """The Proposer's side of self-play: one whole ``KGSelfPlay-v0`` game per sample, returned as the
    Proposer's rollout with its reward (``1 - solve rate`` of the game's G Solvers, 0 for a question
    the filters or the verifier reject). verl's ``rollout.n`` samples of a row are ``n`` questions
    proposed for the same subgraph, so GRPO's group baseline is the Proposer's baseline. The Solver
    rollouts are generated (their mean reward is ``extra_fields["searchgym_solve_rate"]``) but not
    returned: rows of ``searchgym_selfplay`` train the Solvers.
    """

    loop_name = "searchgym_proposer"

    def __init__(self, *args, env_id: str = "KGSelfPlay-v0", **kwargs) -> None:
        super().__init__(*args, env_id=env_id, **kwargs)
        _check_family(self.loop_name, self.spec.env_id, "selfplay")

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        """Play one game on the row's subgraph and return the Proposer's rollout."""
        seed, options = _selfplay_options(self._options(kwargs), self.loop_name)
        env, run_env = await self._env()
        try:
            game = await play_selfplay_game(
                env,
                self._generator(sampling_params, int(priority)),
                self.tokenizer,
                response_length=self.response_length,
                seed=seed,
                options=options,
                run_env=run_env,
            )
        except GenerationFailed as exc:
            return self._failed(exc)
        solve = sum(s.reward for s in game.solvers) / max(len(game.solvers), 1)
        return self._output(
            game.proposer,
            {},
            {
                "searchgym_valid_question": float(bool((game.validation or {}).get("valid"))),
                "searchgym_solve_rate": float(solve),
                "searchgym_replay": str(game.replay),
            },
        )


def _selfplay_options(seed_options: tuple[Optional[int], dict], loop_name: str) -> tuple[Optional[int], dict]:
    """Row options for a self-play game: a task stands for its subgraph (a task without one is refused)."""
    seed, options = seed_options
    if "task" in options:
        task = options["task"]
        if task.subgraph is None:
            raise VerlRowError(
                f"{loop_name} plays a game on the row's KG subgraph, and task {task.id!r} has none (a Search-R1 / "
                "FlashRAG question); play such rows with searchgym_qa (a Solver loop), or write self-play rows with "
                "examples/verl/make_data.py --selfplay"
            )
        options = {"subgraph": task.subgraph}
    return seed, options


@register("searchgym_selfplay")
class SearchGymSelfPlayLoop(_SearchGymLoop):
    """Self-play at scale: one ``KGSelfPlay-v0`` game per row and rollout group.

    The first sample of a group (verl repeats each row ``rollout.n`` times under one ``uid``) starts
    the game: the Proposer's turns through the ``server_manager``, the env's filters and RAG
    verification, then the G Solver rollouts, their turns generated concurrently. Each sample of the
    group returns one Solver slot (arrival order), rewarded by the env (+ wrappers: WCR, GDCR), so
    verl's GRPO groups are exactly the game's Solver group. The Proposer's rollout (its ids, mask,
    and reward ``1 - solve rate``, 0 for an invalid question) and the validation come back in every
    sample's ``extra_fields`` (``searchgym_proposer_*``) for a Proposer update; verl's stock PPO
    step trains the Solver samples only. Needs ``rollout.n`` == ``env_kwargs.group_size`` (default 5)
    and each group inside one agent-loop worker (``train_batch_size`` divisible by the workers).
    """

    loop_name = "searchgym_selfplay"
    _games: dict[str, _Game] = {}

    def __init__(self, *args, env_id: str = "KGSelfPlay-v0", **kwargs) -> None:
        super().__init__(*args, env_id=env_id, **kwargs)
        _check_family(self.loop_name, self.spec.env_id, "selfplay")
        group = int(self.spec.env_kwargs.get("group_size", 5))
        n = int(self.rollout_config.get("n", group))
        if n != group:
            raise InvalidArgumentError(
                f"actor_rollout_ref.rollout.n={n} must equal the game's group_size={group}: "
                "each sample of a group plays one Solver slot"
            )
        self.group_size = group

    async def _play_game(self, sampling_params: dict, priority: int, seed: Optional[int], options: dict) -> GameEpisode:
        """Play the group's game (started by its first sample) with a copy of this loop's env."""
        env, run_env = await self._env()
        return await play_selfplay_game(
            env,
            self._generator(sampling_params, priority),
            self.tokenizer,
            response_length=self.response_length,
            seed=seed,
            options=options,
            run_env=run_env,
        )

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        """Join (or start) the game of this row's ``uid`` and return this sample's Solver slot."""
        key = str(kwargs.get("uid") or kwargs.get("index") or uuid4().hex)
        game = self._games.get(key)
        if game is None:
            seed, options = _selfplay_options(self._options(kwargs), self.loop_name)  # a bad row registers nothing
            game = self._games[key] = _Game(
                asyncio.ensure_future(self._play_game(sampling_params, int(priority), seed, options))
            )
        slot = game.claimed
        game.claimed += 1
        if game.claimed >= self.group_size:
            self._games.pop(key, None)  # every slot claimed: the next row with this uid starts a new game
        try:
            episode: GameEpisode = await asyncio.shield(game.task)
        except GenerationFailed as exc:
            return self._failed(exc)
        finally:
            if self._games.get(key) is game:  # fewer samples than slots (validation's val_kwargs.n): release it
                del self._games[key]
        if slot >= len(episode.solvers):
            raise SearchGymRuntimeError(
                f"game {key} has {len(episode.solvers)} Solver slots but sample {slot + 1} joined it"
            )
        p = episode.proposer
        extra = {
            "searchgym_slot": slot,
            "searchgym_proposer_prompt_ids": p.prompt_ids,
            "searchgym_proposer_response_ids": p.response_ids,
            "searchgym_proposer_response_mask": p.response_mask,
            "searchgym_proposer_reward": float(p.reward),
            "searchgym_valid_question": float(bool((episode.validation or {}).get("valid"))),
        }
        return self._output(episode.solvers[slot], {}, extra)
