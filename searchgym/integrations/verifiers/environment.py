"""searchgym as a verifiers environment (``verifiers.v1``; written and tested against verifiers 0.4.0).

A verifiers v1 environment is a *taskset* (the rows), a *harness* (the program that plays a row, its model
calls going through verifiers' interception server, which records the trace — messages, and with prime-rl's
train client the token ids and loss masks) and an *env* that runs them. searchgym's, exported by the
``searchgym_verifiers`` package (taskset id ``searchgym-verifiers``):

* :class:`SearchGymTaskset`: one task per Solver task of the source (``--env.taskset.pool``, ``flashrag``,
  ``parquet``; none: the built-in tasks), its prompt the env's own, its data carrying the task (waypoints and
  subgraph included) and the env settings (``rewards``, ``reward_options``, ``protocol``, ``kg_tool``,
  ``max_turns``, ``retriever``, ``world``).
* :class:`SearchGymHarness`: plays the task in-process through
  :class:`~searchgym.integrations.text_rollout.TextRollout`: each turn one chat completion from the
  interception endpoint (the official ``openai`` client), the reply stepped through ``KGSolver-v0``, the
  env's insertion sent back — tags: a ``user`` message with ``<information>…</information>`` (turns stop at
  ``</search>`` / ``</answer>``; the env reads a turn with the stop string the server dropped put back, the
  conversation keeps the reply as sampled so verifiers' trace stays one branch); function calling: the env's
  tool schemas in the request and its ``tool`` messages back — until the env ends the rollout. The env's
  reward, its named components, the turns and each turn as the env read it (``actions``) land in
  ``trace.info["searchgym"]``.
* :class:`SearchGymTask`: ``@reward searchgym_reward`` (weight 1: the env's reward after its reward
  wrappers, the number verl and TRL train on) and ``@metric searchgym_metrics`` (each reward component,
  ``turns``, ``answered``), so ``trace.reward`` is searchgym's reward and the components are logged.
* :class:`SearchGymEnv`: the single-agent env with a local (subprocess) runtime by default — the harness runs
  no program, so verifiers' default remote sandbox is not needed.

Token masks are verifiers' own: its graph marks only the model-sampled completion tokens trainable and
every message the harness sends (the env's insertions included) as prompt scaffold.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Literal, Optional

import verifiers.v1 as vf
from pydantic import Field, model_validator

from searchgym.core.types import Task

from ...errors import InvalidArgumentError, SearchGymRuntimeError
from ..env_threads import env_runner
from ..environments import EnvSpec, reward_names
from ..episode import TURN_STOPS
from ..task_sources import solver_tasks
from ..text_rollout import TEXT_ENV_ID, TextRollout

logger = logging.getLogger(__name__)

__all__ = [
    "ENV_ID",
    "VERIFIERS_VERSION_READ",
    "SearchGymData",
    "SearchGymTask",
    "SearchGymTasksetConfig",
    "SearchGymTaskset",
    "SearchGymHarnessConfig",
    "SearchGymHarness",
    "SearchGymEnvConfig",
    "SearchGymEnv",
    "result_of",
]

#: The verifiers id of the environment (the ``searchgym_verifiers`` package).
ENV_ID = "searchgym-verifiers"
#: The verifiers release this environment was written and tested against.
VERIFIERS_VERSION_READ = "0.4.0"
#: Where the harness leaves the rollout's result on the trace.
INFO_KEY = "searchgym"


class SearchGymData(vf.TaskData):
    """A task's data: the verifiers fields (``id``, ``prompt``) plus ``searchgym`` — the searchgym task
    (``Task.to_dict()``), its reset ``seed`` and the env settings (``rewards``, ``reward_options``, ``env_kwargs``)."""

    searchgym: dict[str, Any] = Field(default_factory=dict)


def result_of(trace: vf.Trace) -> dict:
    """What :class:`SearchGymHarness` left on ``trace`` (``reward``, ``components``, ``metrics``, ...); raises
    when no searchgym harness played it."""
    found = trace.info.get(INFO_KEY)
    if not isinstance(found, dict) or "reward" not in found:
        raise SearchGymRuntimeError(
            f"the trace has no searchgym result: the rollout did not finish in searchgym's harness; play "
            f"{ENV_ID} with its own harness (the default; --env.agent.harness.id {ENV_ID})"
        )
    return found


class SearchGymTask(vf.Task[SearchGymData]):
    """One searchgym Solver task; scored from what the harness recorded (see the module docstring)."""

    @vf.reward(weight=1.0)
    async def searchgym_reward(self, trace: vf.Trace) -> float:
        """The env's reward for the rollout (the sum of its reward events, after the reward wrappers)."""
        return float(result_of(trace)["reward"])

    @vf.metric
    async def searchgym_metrics(self, trace: vf.Trace) -> dict[str, float]:
        """The reward components (``outcome``, ``wcr_bonus``, ...), ``turns`` and ``answered``."""
        return {k: float(v) for k, v in result_of(trace)["metrics"].items() if k != "reward"}


class SearchGymTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: the env every task is played in and where the tasks come from."""

    rewards: str = "binary"
    """Reward wrapper names, innermost first: ``binary`` (the env's exact match), ``wcr``, ``dynasearcher,wcr``..."""
    reward_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Keyword arguments of the reward wrappers by reward name, e.g. ``{"wcr": {"waypoint_answer_credit": false}}``;
    each name must be in ``rewards`` and each option a parameter of its wrapper."""
    protocol: Literal["tags", "function_calling"] = "tags"
    """``tags`` (``<search>`` / ``<answer>``) or ``function_calling`` (the env's tools in the request)."""
    kg_tool: bool = False
    """Offer the knowledge-graph lookup too."""
    max_turns: Optional[int] = None
    """The env's turn limit (default: the env's)."""
    retriever: Optional[str] = None
    """A ``searchgym serve`` URL to search instead of the world's own BM25 index."""
    world: Optional[str] = None
    """A world folder (default: the built-in world)."""
    pool: Optional[str] = None
    """A subgraph pool JSONL: template questions over its KG paths (waypoints for WCR)."""
    flashrag: Optional[str] = None
    """A FlashRAG JSONL (``question``, ``golden_answers``); needs a retriever over its corpus."""
    parquet: Optional[str] = None
    """A Search-R1 parquet (its prompt kept, golds from ``reward_model.ground_truth.target``)."""
    seed: int = 0
    """Task *i* resets the env with ``seed + i``."""

    @model_validator(mode="after")
    def _check_env(self) -> "SearchGymTasksetConfig":
        """Unknown reward names fail when the config is read (the CLI shows which), not mid-run."""
        self.env_spec()
        return self

    def env_spec(self) -> EnvSpec:
        """The searchgym env these settings describe."""
        kwargs: dict[str, Any] = {"protocol": self.protocol, "kg_tool": self.kg_tool}
        for name in ("max_turns", "retriever", "world"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return EnvSpec(TEXT_ENV_ID, reward_names(self.rewards), kwargs, reward_options=self.reward_options)


class SearchGymTaskset(vf.Taskset[SearchGymTask, SearchGymTasksetConfig]):
    """The Solver tasks of the configured source (see the module docstring)."""

    def load(self) -> list[SearchGymTask]:
        """One :class:`SearchGymTask` per source task, in the source's order."""
        cfg = self.config
        spec = cfg.env_spec()
        rollout = TextRollout(spec)
        found = solver_tasks(rollout.env.unwrapped, pool=cfg.pool, flashrag=cfg.flashrag, parquet=cfg.parquet)
        out = []
        for i, task in enumerate(found):
            prompt = rollout.reset(seed=cfg.seed + i, options={"task": task})
            payload = {
                "task": task.to_dict(),
                "seed": cfg.seed + i,
                "rewards": list(spec.rewards),
                "reward_options": spec.reward_options,
                "env_kwargs": dict(spec.env_kwargs),
            }
            out.append(SearchGymTask(SearchGymData(id=task.id, prompt=prompt, searchgym=payload), cfg.task))
        return out


class SearchGymHarnessConfig(vf.HarnessConfig):
    """``--env.agent.harness.*``."""

    max_turn_tokens: Optional[int] = Field(512, ge=1)
    """``max_tokens`` of each turn's request (``None``: leave it to the run's sampling settings)."""
    env_threads: int = Field(64, ge=1)
    """Threads the env's resets and steps run in (off the event loop: rollouts wait on a slow retriever together)."""


def _restore_stop(text: str, choice: Any) -> str:
    """``text`` with the stop string the server dropped put back (``stop_reason``, which vLLM and searchgym's
    server send; else the closing tag of the last unclosed ``<search>`` / ``<answer>``)."""
    matched = getattr(choice, "stop_reason", None)
    if isinstance(matched, str) and matched in TURN_STOPS:
        return text if text.endswith(matched) else text + matched
    if getattr(choice, "finish_reason", None) == "stop":
        for stop in TURN_STOPS:
            if text.count("<" + stop[2:]) > text.count(stop):
                return text + stop
    return text


class SearchGymHarness(vf.Harness[SearchGymHarnessConfig]):
    """Plays a :class:`SearchGymTask` in-process through the interception endpoint (see the module docstring)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = False
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        """Play the task to the env's end; the result goes to ``trace.info["searchgym"]``."""
        from openai import AsyncOpenAI

        payload = getattr(data, "searchgym", None)
        if not isinstance(payload, dict) or "task" not in payload:
            raise InvalidArgumentError(
                f"task {data.id!r} carries no searchgym task; the searchgym harness plays tasks of the {ENV_ID} taskset"
            )
        spec = _spec(payload)
        run = env_runner(self.config.env_threads)
        rollout: TextRollout = await run(TextRollout, spec)  # the first one builds the env (seconds): off the loop
        await run(functools.partial(rollout.reset, seed=payload.get("seed"), options={"task": _task(payload)}))
        system, _ = self.resolve_prompt(data)
        messages: list[Any] = ([{"role": "system", "content": system}] if system else []) + rollout.prompt_messages()
        request: dict[str, Any] = {"model": ctx.model}
        if rollout.protocol == "tags":
            request["stop"] = list(TURN_STOPS)
        else:
            request["tools"] = rollout.tools()
        if self.config.max_turn_tokens is not None:
            request["max_tokens"] = self.config.max_turn_tokens
        client = AsyncOpenAI(base_url=endpoint, api_key=secret)
        reply, actions = "", []
        try:
            while not rollout.done:
                completion = await client.chat.completions.create(messages=messages, **request)
                choice = completion.choices[0]
                reply = choice.message.content or ""
                # the reply goes back as the model wrote it (verifiers' trace stays one branch, its tokens the
                # sampled ones); the env reads the turn with the stop string the server dropped put back
                assistant = choice.message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
                assistant.setdefault("content", reply)
                action: Any = _restore_stop(reply, choice) if rollout.protocol == "tags" else assistant
                step = await run(rollout.step, action)
                actions.append(action)
                messages += [assistant, *step.messages]
        finally:
            await client.close()
        traj = rollout.trajectory
        trace.info[INFO_KEY] = {
            "reward": rollout.reward,
            "components": {k: v for k, v in rollout.components.items() if isinstance(v, (int, float, str, bool))},
            "metrics": rollout.metrics(),
            "task_id": rollout.task.id,
            "answer": traj.answer,
            "turns": len(traj.turns),
            "terminated": bool(traj.terminated),
            "actions": actions,  # each turn as the env read it (tags: with a dropped stop string put back)
        }
        return vf.ProgramResult(exit_code=0, stdout=reply, stderr="")


def _task(payload: dict) -> Task:
    """The searchgym task a harness payload carries."""
    return Task.from_dict(payload["task"])


def _spec(payload: dict) -> EnvSpec:
    """The env a harness payload describes (:meth:`SearchGymTaskset.load` wrote its settings)."""
    return EnvSpec(
        TEXT_ENV_ID, tuple(payload["rewards"]), dict(payload["env_kwargs"]), reward_options=payload["reward_options"]
    )


class SearchGymEnvConfig(vf.EnvConfig):
    """``--env.*``: the single ``agent`` seat, on a local runtime by default (the harness runs no program)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The policy under evaluation/training (``--env.agent.*``)."""


class SearchGymEnv(vf.Env[SearchGymEnvConfig]):
    """One ``agent`` playing each task of the taskset with searchgym's harness."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        """The agent plays ``task``."""
        await agents.agent.run(task)
