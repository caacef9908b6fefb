"""TRL's ``environment_factory`` entry point: a searchgym Solver env whose tools TRL exposes to the model.

``GRPOTrainer(environment_factory=environment_factory(rewards="wcr"), ...)`` makes one instance per
rollout. TRL renders every public method of the class (except ``reset`` and ``get_reward``) as a
function-calling tool from its type hints and docstring — ``search(query)``, ``kg_lookup(entity,
relation)`` when the KG tool is on, ``answer(answer)`` — calls ``reset(**row)`` before generation and
``get_reward()`` once the rollout is over. Behind the methods is a real ``KGSolver-v0`` in the
function-calling protocol with the reward wrappers of the registry (``binary``, ``wcr``, ``gdcr``,
``dynasearcher``, stacks, ``package.module:Wrapper``; EVE through ``wrappers=``): every tool call is a
turn of that env (its retriever, KG tool, turn limit and trajectory), and ``get_reward()`` returns the
sum of the env's reward events for the rollout — the number the searchgym env gives.

TRL calls the tools with their arguments only; the model's own text (its reasoning, which WCR, GDCR
and EVE read, and an ``<answer>`` written in its last message) reaches the env when
:func:`attach_transcripts` is among the trainer's ``reward_funcs`` (it contributes 0 to the reward and
runs before ``get_reward``): ``get_reward()`` then replays the whole conversation — every assistant
message with its content and tool calls — through a fresh env on the same task, which is exactly
what the searchgym env gives for that conversation. Without it the env sees the tool calls alone
(one turn per call, no reasoning): outcome rewards are the same, reasoning-based terms are 0.

A rollout that ends without an answer (the model stopped calling tools) is played to the env's turn
limit with empty turns, as the env treats any unanswered rollout (reward 0 for the outcome, the
wrappers' terms as they come), and counted (``STATS.counts["unanswered"]``). A tool call after the
episode ended gets a message saying so and is counted. Bad arguments (TRL passes what the model
wrote) get the env's corrective tool message and count as ``bad_tool_calls``; a call whose JSON TRL
cannot parse never reaches the env (TRL treats that message as the rollout's last) — with
transcripts attached the env still sees it and counts it. Bad rows raise
:class:`~searchgym.integrations.trl.rows.DatasetRowError` from ``reset``.

TRL 1.16 parses tool calls only for chat templates it recognises (Qwen2.5/3, Llama 3.1/3.2, gpt-oss,
GLM-4-MoE, ...); SmolLM2's plain template is refused (``Unrecognized chat template``): check a
tokenizer with :func:`searchgym.integrations.trl.check_tokenizer` first, or use the ``rollout_func``
entry point, which parses tool calls itself.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Optional, Sequence

from searchgym.core.types import Trajectory
from searchgym.envs.function_calling import TOOL_ANSWER, TOOL_KG, TOOL_SEARCH
from searchgym.envs.registration import env_ids

from ...errors import InvalidArgumentError, SearchGymRuntimeError
from ..environments import EnvSpec, cached_env, reward_names
from .rows import DatasetRowError, RowTask, prompt_text, task_of_row
from .stats import STATS, bad_tool_call

logger = logging.getLogger(__name__)

__all__ = ["SearchGymToolEnv", "SearchGymKGToolEnv", "environment_factory", "attach_transcripts"]

_OVER = "The episode is over: no more tool calls are run. Stop here."


def _assistant(name: str, arguments: dict) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def _done(env) -> bool:
    rollout = env.unwrapped.rollout
    return rollout is None or rollout.done


def _finish(env) -> list[dict]:
    """Play empty turns until the env ends the rollout (its turn limit); the reward events on the way."""
    events: list[dict] = []
    while not _done(env):
        *_, info = env.step("")
        events += info["rewards"]
    return events


class SearchGymToolEnv:
    """One Solver rollout of a searchgym env, its tools exposed to TRL (see the module docstring).

    Make the class with :func:`environment_factory`, which binds the env settings.
    """

    spec: ClassVar[Optional[EnvSpec]] = None

    def __init__(self) -> None:
        if self.spec is None:
            raise SearchGymRuntimeError(
                "make the environment class with searchgym.integrations.trl.environment_factory(...), "
                "which binds the env settings"
            )
        self._env = cached_env(self.spec)
        self._replay_env: Any = None
        self._row: Optional[RowTask] = None
        self._events: list[dict] = []
        self._transcript: Optional[list[dict]] = None
        self._scored: Optional[Trajectory] = None

    # ------------------------------------------------------------------ TRL's hooks
    def reset(self, **example: Any) -> None:
        """Start a rollout on the row's task (TRL passes the dataset row's columns)."""
        with STATS.timed():
            row = task_of_row(example)
            if row.role != "solver":
                raise DatasetRowError(
                    f"a {row.role!r} row is a self-play game; environment_factory plays Solver tasks. Train self-play "
                    "with the rollout_func entry point (searchgym.integrations.trl.rollout_func)"
                )
            obs, _ = self._env.reset(seed=row.seed, options={"task": row.task})
            if "prompt" in example and prompt_text(example["prompt"]) != obs:
                raise DatasetRowError(
                    f"the row's prompt is not the env's prompt for task {row.task.id!r}; build the dataset for the "
                    "same env: train_dataset(protocol='function_calling', kg_tool=<as the env>, "
                    "env_kwargs=<as the env>)"
                )
            self._row, self._events, self._transcript, self._scored = row, [], None, None
            STATS.count("rollouts")
        return None

    def get_reward(self) -> float:
        """The env's reward for the finished rollout (sum of its reward events, after the reward wrappers)."""
        if self._row is None:
            raise SearchGymRuntimeError("get_reward() before reset(): TRL resets every environment before a rollout")
        with STATS.timed():
            if self._transcript is not None:
                return self._score_transcript()
            if not _done(self._env):
                STATS.count("unanswered")
                self._events += _finish(self._env)
            self._scored = self._env.unwrapped.rollout.trajectory
            return float(sum(ev["reward"] for ev in self._events))

    # ------------------------------------------------------------------ tools
    def search(self, query: str) -> str:
        """Search the document collection and return the top documents (title and text) for a query.

        Args:
            query: What to look up, in a few words (for example an entity name and a relation).
        """
        return self._call(TOOL_SEARCH, {"query": query})

    def answer(self, answer: str) -> str:
        """Give the final answer to the question. This ends the episode.

        Args:
            answer: The answer, in a few words, without explanation.
        """
        return self._call(TOOL_ANSWER, {"answer": answer})

    # ------------------------------------------------------------------ internals
    def _call(self, name: str, arguments: dict) -> str:
        if self._row is None:
            raise SearchGymRuntimeError(f"{name}() before reset(): TRL resets every environment before a rollout")
        with STATS.timed():
            STATS.count("tool_calls")
            if _done(self._env):
                STATS.count("calls_after_end")
                return _OVER
            *_, terminated, truncated, info = self._env.step(_assistant(name, arguments))
            self._events += info["rewards"]
            turn = info["turn"]
            if bad_tool_call(turn):
                STATS.count("bad_tool_calls")
            if terminated:
                return f"Your answer was recorded. {_OVER}"
            reply = "\n\n".join(m["content"] for m in turn.messages)
            return f"{reply}\n\n(The turn limit is reached. {_OVER})" if truncated else reply

    def _attach(self, messages: Sequence[dict]) -> None:
        self._transcript = [dict(m) for m in messages]

    def _score_transcript(self) -> float:
        """Replay the conversation's assistant messages through a fresh env on the same task."""
        assert self.spec is not None and self._row is not None  # checked by __init__ / get_reward
        if self._replay_env is None:
            self._replay_env = cached_env(self.spec)
        env, row = self._replay_env, self._row
        env.reset(seed=row.seed, options={"task": row.task})
        events: list[dict] = []
        for message in self._transcript or []:
            if message.get("role") != "assistant":
                continue
            if _done(env):  # TRL lets the model write once more after the answer: only calls count
                STATS.count("calls_after_end", len(message.get("tool_calls") or []))
                continue
            *_, info = env.step(message)
            events += info["rewards"]
            if bad_tool_call(info["turn"]):
                STATS.count("bad_tool_calls")
        if not _done(env):
            STATS.count("unanswered")
            events += _finish(env)
        self._scored = env.unwrapped.rollout.trajectory
        return float(sum(ev["reward"] for ev in events))

    @property
    def trajectory(self) -> Optional[Trajectory]:
        """The scored trajectory of the last ``get_reward()`` (the replayed one with transcripts)."""
        return self._scored

    @property
    def reward_components(self) -> dict:
        """The reward components of the scored trajectory (``{}`` before ``get_reward()``)."""
        return dict(self._scored.reward_components) if self._scored is not None else {}


class SearchGymKGToolEnv(SearchGymToolEnv):
    """:class:`SearchGymToolEnv` with the KG tool (``kg_lookup``), for envs made with ``kg_tool=True``."""

    def kg_lookup(self, entity: list[str], relation: Optional[list[str]] = None) -> str:
        """Look facts up in the knowledge graph: the facts that link the given entities through the given relations.

        Args:
            entity: Names of the entities to look up.
            relation: Names of relations to follow from those entities (may be empty).
        """
        return self._call(TOOL_KG, {"entity": entity, "relation": relation or []})


def environment_factory(
    rewards: Any = "binary",
    *,
    reward_options: Optional[dict] = None,
    env_id: str = "KGSolver-v0",
    kg_tool: bool = False,
    wrappers: Sequence = (),
    **env_kwargs: Any,
) -> type:
    """The class to pass as ``GRPOTrainer(environment_factory=...)``: a :class:`SearchGymToolEnv`
    (``kg_lookup`` added when ``kg_tool``) bound to ``KGSolver-v0`` in the function-calling protocol
    with the named ``rewards`` (``"binary"``, ``"wcr"``, ``"dynasearcher,wcr"``, ...) given
    ``reward_options`` (their wrappers' keyword arguments by reward name:
    ``{"wcr": {"waypoint_answer_credit": False}}``), further
    ``wrappers`` (``env -> wrapped env``) and ``env_kwargs`` (``world``, ``retriever``, ``max_turns``,
    ``judge``, ...). Unknown env ids, reward names and reward options raise here, naming the valid ones."""
    solvers = env_ids(kind="single", role="solver")  # the one-Solver-rollout families of the env registry
    if env_id not in solvers:
        EnvSpec(env_id)  # an unknown id raises, naming the registered ones
        raise InvalidArgumentError(
            f"environment_factory plays one Solver rollout per TRL environment ({' or '.join(solvers)}), not "
            f"{env_id}; for "
            "Solver groups and self-play use searchgym.integrations.trl.rollout_func"
        )
    if "protocol" in env_kwargs and env_kwargs["protocol"] != "function_calling":
        raise InvalidArgumentError("environment_factory speaks the function-calling protocol; drop protocol=")
    spec = EnvSpec(
        env_id,
        reward_names(rewards),
        {**env_kwargs, "kg_tool": kg_tool, "protocol": "function_calling"},
        tuple(wrappers),
        reward_options or {},
    )
    base = SearchGymKGToolEnv if kg_tool else SearchGymToolEnv
    return type("SearchGymEnv", (base,), {"spec": spec, "__doc__": base.__doc__, "__module__": __name__})


def attach_transcripts(completions: list, environments: Optional[list] = None, **kwargs: Any) -> list[float]:
    """A TRL reward function that hands each searchgym environment its rollout's messages, so
    ``get_reward()`` scores the whole conversation (reasoning included); it adds 0 to every reward.
    List it in ``reward_funcs`` next to ``environment_factory``."""
    if environments is None:
        raise SearchGymRuntimeError("attach_transcripts works with environment_factory=...; TRL gave no environments")
    for messages, env in zip(completions, environments):
        if isinstance(env, SearchGymToolEnv):
            env._attach(messages if isinstance(messages, list) else [{"role": "assistant", "content": str(messages)}])
    return [0.0] * len(completions)
