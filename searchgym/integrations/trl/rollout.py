"""TRL's ``rollout_func`` entry point: searchgym plays whole multi-turn episodes for a GRPO step.

``GRPOTrainer(rollout_func=rollout_func(dataset, rewards="wcr"), reward_funcs=[env_reward], ...)``.
TRL hands the function the step's prompts (each dataset row repeated G = ``num_generations`` times in
a row) and the trainer; it returns, per row, ``prompt_ids``, ``completion_ids``, ``logprobs`` and
``env_mask`` (1 on the ids the model sampled, 0 on every token the env inserted: TRL multiplies it
into the loss mask) plus the env's reward and its components as extra fields (``searchgym_reward``,
``searchgym_<component>``, ``searchgym_cut``, ...), which TRL passes to the reward functions —
:func:`env_reward` returns ``searchgym_reward``.

What a group of G identical rows plays (the row's ``role``, :mod:`.rows`):

* ``"solver"``: one ``KGSolverGroup-v0`` episode with ``group_size`` G — the G generations are the G
  Solver rollouts of the task, so group-normalised rewards (WCR's g̃) are the env's group's;
* ``"selfplay"``: one ``KGSelfPlay-v0`` game on the row's subgraph: the Proposer's turns, filters and
  RAG verification run in the same step, and the G generations are the G Solvers of its question
  (``environment_factory`` cannot express this);
* ``"proposer"``: each of the G generations plays a whole game and returns its Proposer rollout,
  rewarded ``1 − solve rate`` (0 for a rejected question): GRPO's group is G questions for one subgraph.

All episodes of a step are played in lock-step: each turn, every stream that must act is generated in
one batched call (:class:`.generation.TrainerGeneration`), then each env steps. ``protocol="tags"``
(default, Search-R1 style ``<search>``/``<information>``/``<answer>``: a turn ends at its first closing
tag) or ``"function_calling"`` (the env's tools in the prompt, ``role: tool`` replies appended with the
chat template's tokens; any tool-capable template, as searchgym parses the calls itself and answers
malformed ones with a corrective message). No turn samples more than ``max_turn_tokens`` (default 512;
TRL's own generation would give every turn the whole rollout's budget). ``max_completion_length`` is
the budget of a whole rollout (sampled and inserted tokens); a rollout that exhausts it is cut:
reward 0, ``searchgym_cut`` = 1, counted. A rollout the env ended gets an end-of-sequence token
(mask 0) appended, so TRL does not count it as truncated.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional, Sequence

from searchgym.core.prompts import check_protocol
from searchgym.llm.sequences import turn_encoder

from ...errors import InvalidArgumentError
from ..environments import EnvSpec, cached_env, reward_names
from ..episode import TURN_STOPS, EnvEpisode, TokenStream, sample_into
from .generation import TrainerGeneration, cut_at_stop
from .rows import DatasetRowError, RowTask, prompt_text, task_of_row
from .stats import STATS, bad_tool_call

logger = logging.getLogger(__name__)

__all__ = ["SearchGymRollout", "rollout_func", "env_reward", "PromptIndex"]

#: Default cap on the tokens one turn may sample (a rollout's whole budget is ``max_completion_length``).
DEFAULT_TURN_TOKENS = 512

_ENV_OF_ROLE = {"solver": "KGSolverGroup-v0", "selfplay": "KGSelfPlay-v0", "proposer": "KGSelfPlay-v0"}


class PromptIndex:
    """Which task each prompt of a dataset plays (TRL gives a ``rollout_func`` the prompts alone)."""

    def __init__(self, rows: Iterable[dict]) -> None:
        self.by_prompt: dict[str, RowTask] = {}
        for i, row in enumerate(rows):
            if "prompt" not in row:
                raise DatasetRowError(f"dataset row {i} has no 'prompt' column; build rows with train_dataset(...)")
            key = prompt_text(row["prompt"])
            try:
                task = task_of_row(row)
            except DatasetRowError as exc:
                raise DatasetRowError(f"dataset row {i}: {exc}") from None
            seen = self.by_prompt.setdefault(key, task)
            if seen.task.answers != task.task.answers or seen.role != task.role:
                raise DatasetRowError(
                    f"dataset row {i} repeats the prompt of an earlier row with another task or role; a rollout_func "
                    "finds a row's task by its prompt, so prompts must be unique per task"
                )
        if not self.by_prompt:
            raise DatasetRowError("the dataset has no rows")

    def __len__(self) -> int:
        return len(self.by_prompt)

    def lookup(self, prompt: Any) -> RowTask:
        """The task of a prompt TRL passed; raises :class:`DatasetRowError` for one not in the dataset."""
        key = prompt_text(prompt)
        found = self.by_prompt.get(key)
        if found is None:
            raise DatasetRowError(
                f"prompt {key[:80]!r}... is not in the dataset this rollout_func was built from; pass the same dataset "
                "to rollout_func(...) and GRPOTrainer(train_dataset=...)"
            )
        return found


class SearchGymRollout:
    """The ``rollout_func`` (see the module docstring); build it with :func:`rollout_func`."""

    def __init__(
        self,
        dataset: Iterable[dict],
        *,
        rewards: Any = "binary",
        reward_options: Optional[dict] = None,
        protocol: str = "tags",
        kg_tool: bool = False,
        wrappers: Sequence = (),
        env_kwargs: Optional[dict] = None,
        proposer_group: Optional[int] = None,
        max_turn_tokens: int = DEFAULT_TURN_TOKENS,
    ) -> None:
        self.index = PromptIndex(dataset)
        self.rewards = reward_names(rewards)
        self.reward_options = reward_options or {}
        self.protocol = check_protocol(protocol)
        self.kg_tool = bool(kg_tool)
        self.wrappers = tuple(wrappers)
        self.env_kwargs = dict(env_kwargs or {})
        for key in ("protocol", "kg_tool", "group_size"):
            if key in self.env_kwargs:
                raise InvalidArgumentError(f"give {key} as rollout_func's own argument, not in env_kwargs")
        if proposer_group is not None and proposer_group < 1:
            raise InvalidArgumentError(f"proposer_group must be >= 1, got {proposer_group}")
        self.proposer_group = proposer_group
        if max_turn_tokens < 1:
            raise InvalidArgumentError(f"max_turn_tokens must be >= 1, got {max_turn_tokens}")
        self.max_turn_tokens = int(max_turn_tokens)
        # unknown reward names and options and bad env settings fail here, not mid-training; the checked copy kept
        self.reward_options = self.spec("solver", 2).reward_options
        self.stops = list(TURN_STOPS) if self.protocol == "tags" else []
        self.__name__ = "searchgym_rollout"
        self._free: dict[str, list] = {}  # envs of finished steps, by spec, reused (a copy costs ~10 ms)
        self._encoders: dict = {}

    def _take_env(self, spec: EnvSpec):
        free = self._free.setdefault(spec.key(), [])
        return free.pop() if free else cached_env(spec)

    def _give_back(self, used: list) -> None:
        for ep, spec in used:
            self._free.setdefault(spec.key(), []).append(ep.env)

    def spec(self, role: str, group: int) -> EnvSpec:
        """The env a group of ``role`` rows plays with G = ``group``."""
        kwargs = {**self.env_kwargs, "protocol": self.protocol, "kg_tool": self.kg_tool, "group_size": group}
        return EnvSpec(_ENV_OF_ROLE[role], self.rewards, kwargs, self.wrappers, self.reward_options)

    # ------------------------------------------------------------------ TRL's call
    def __call__(self, prompts: list, trainer) -> dict:
        """Play the step's episodes; TRL's ``rollout_func(prompts, trainer)`` contract."""
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        generation = TrainerGeneration(trainer, self.stops)
        group = int(trainer.num_generations if trainer.model.training else trainer.num_generations_eval)
        budget = int(trainer.max_completion_length)
        with STATS.timed():
            rows = [self.index.lookup(p) for p in prompts]
            if len(rows) % group:
                raise InvalidArgumentError(
                    f"TRL passed {len(rows)} prompts, not a multiple of num_generations={group}; "
                    "use TRL's default sampler"
                )
            streams: list[Optional[TokenStream]] = [None] * len(rows)
            episodes: list[EnvEpisode] = []
            plan: list[tuple[EnvEpisode, list[int]]] = []  # which rows each episode's streams fill
            used: list = []
            for start in range(0, len(rows), group):
                block = rows[start : start + group]
                if any(r is not block[0] for r in block):
                    raise InvalidArgumentError(
                        "a group of num_generations prompts holds different rows; use TRL's default RepeatSampler"
                    )
                for ep, slots, spec in self._episodes(block[0], group, tokenizer, budget, start):
                    episodes.append(ep)
                    plan.append((ep, slots))
                    used.append((ep, spec))
        try:
            self._play(episodes, generation, tokenizer, budget)
        finally:
            self._give_back(used)
        with STATS.timed():
            for ep, slots in plan:
                role = rows[slots[0]].role
                found = ep.slots("proposer") if role == "proposer" else ep.slots("solver")
                for row_i, stream in zip(slots, found if role != "proposer" else found[:1]):
                    streams[row_i] = stream
            return self._output(rows, streams, plan, tokenizer)

    def _episodes(self, row: RowTask, group: int, tokenizer, budget: int, start: int):
        """``[(episode, row indices, env spec)]`` for one group of rows."""
        options: dict[str, Any]
        if row.role == "solver":
            options, count, size = {"task": row.task}, 1, group
        else:
            if row.task.subgraph is None:
                raise DatasetRowError(
                    f"a {row.role!r} row needs a task with a subgraph (task {row.task.id!r} has none)"
                )
            options = {"subgraph": row.task.subgraph}
            count, size = (group, self.proposer_group or group) if row.role == "proposer" else (1, group)
        env_spec = self.spec(row.role, size)
        out = []
        for k in range(count):
            env = self._take_env(env_spec)
            encoder = self._encoder(tokenizer, env)
            seed = None if row.seed is None else row.seed + k
            ep = EnvEpisode(env, tokenizer, response_length=budget, encoder=encoder).reset(seed=seed, options=options)
            out.append((ep, [start + k] if row.role == "proposer" else list(range(start, start + group)), env_spec))
        return out

    def _encoder(self, tokenizer, env):
        """The protocol's encoder(s) for ``tokenizer`` (kept: they cache the prompts they encoded)."""
        key = id(tokenizer)
        if key not in self._encoders:
            base = env.unwrapped
            self._encoders[key] = (
                turn_encoder(tokenizer, "tags")
                if self.protocol == "tags"
                else {
                    role: turn_encoder(tokenizer, self.protocol, base.tool_schemas(role))
                    for role in ("solver", "proposer")
                }
            )
        return self._encoders[key]

    def _play(self, episodes: list[EnvEpisode], generation: TrainerGeneration, tokenizer, budget: int) -> None:
        """Lock-step: one batched generation per turn for every stream that must act, then every env steps."""
        while True:
            with STATS.timed():
                pending = [(ep, key, s) for ep in episodes for key, s in ep.pending()]
                live = [(ep, key, s) for ep, key, s in pending if s.room(budget) > 0]
            if not generation.any_active(len(pending)):
                return
            texts: dict[int, dict] = {id(ep): {} for ep in episodes}
            if live:
                caps = [min(self.max_turn_tokens, s.room(budget)) for _, _, s in live]  # each stream's own room
                ids, logprobs = generation([s.prompt_ids + s.response_ids for _, _, s in live], caps)
            elif generation.processes > 1:
                generation.idle()
            with STATS.timed():
                for j, (ep, key, s) in enumerate(live):
                    keep = cut_at_stop(ids[j], tokenizer, self.stops)
                    lps = None if logprobs is None else logprobs[j][:keep]
                    texts[id(ep)][key] = sample_into(s, ids[j][:keep], lps, tokenizer, budget)
                for ep in {id(e): e for e, _, _ in pending}.values():
                    ep.step(texts[id(ep)])  # streams without room get None: cut

    def _output(self, rows: list[RowTask], streams: list, plan: list, tokenizer) -> dict:
        eos = int(tokenizer.eos_token_id)
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        extra: dict[str, list] = {k: [] for k in ("searchgym_reward", "searchgym_cut", "searchgym_role")}
        components: list[dict] = []
        complete = all(s.logprobs_complete for s in streams)
        for row, s in zip(rows, streams):
            ids, mask, lps = list(s.response_ids), list(s.response_mask), list(s.response_logprobs)
            if not ids or (not s.cut and ids[-1] != eos):  # the env ended it: say so to TRL (mask 0)
                ids, mask, lps = ids + [eos], mask + [0], lps + [0.0]
            out["prompt_ids"].append(list(s.prompt_ids))
            out["completion_ids"].append(ids)
            out["env_mask"].append(mask)
            out["logprobs"].append(lps)
            extra["searchgym_reward"].append(float(s.reward))
            extra["searchgym_cut"].append(int(s.cut))
            extra["searchgym_role"].append(row.role)
            components.append(dict(s.components))
        for name in sorted({k for c in components for k in c}):
            extra[f"searchgym_{name}"] = [c.get(name) for c in components]
        self._count(streams, plan)
        result: dict[str, Any] = {**out, **extra}
        if not complete:
            result["logprobs"] = None
        return result

    @staticmethod
    def _count(streams: list, plan: list) -> None:
        STATS.count("rollouts", len(streams))
        STATS.count("cut", sum(int(s.cut) for s in streams))
        for ep, _ in plan:
            for traj in ep.trajectories():
                STATS.count("invalid_turns", int(traj.metadata.get("invalid_turns", 0)))
                STATS.count("bad_tool_calls", sum(1 for t in traj.turns if bad_tool_call(t)))


def rollout_func(dataset: Iterable[dict], **kwargs: Any) -> SearchGymRollout:
    """The ``rollout_func`` for ``GRPOTrainer`` over ``dataset`` (the same rows as ``train_dataset``).

    ``rewards``: registry names (``"binary"``, ``"wcr"``, ``"wcr,gdcr"``, ...); ``reward_options``: their
    wrappers' keyword arguments by reward name (``{"wcr": {"waypoint_answer_credit": False}}``); ``protocol``:
    ``"tags"`` or ``"function_calling"`` (must match the dataset's); ``kg_tool``; ``wrappers``: extra
    wrapper factories; ``env_kwargs``: ``world``, ``retriever``, ``max_turns``, ``judge``, ...;
    ``proposer_group``: Solvers per game of a ``"proposer"`` row (default G); ``max_turn_tokens``: the
    most tokens one turn may sample (default 512; each rollout's whole budget is TRL's
    ``max_completion_length``)."""
    return SearchGymRollout(dataset, **kwargs)


_LAST_LOGGED: dict = {}


def env_reward(completions: list, searchgym_reward: Optional[list] = None, **kwargs: Any) -> list[float]:
    """The TRL reward function of the ``rollout_func`` entry point: the env's reward of each rollout
    (``searchgym_reward``), logging searchgym's counters (``searchgym/cut`` ...) through ``log_metric``."""
    if searchgym_reward is None:
        raise InvalidArgumentError(
            "env_reward reads the rewards searchgym's rollout_func returns; "
            "pass GRPOTrainer(rollout_func=rollout_func(...))"
        )
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        now = STATS.snapshot()
        for name in ("cut", "invalid_turns", "bad_tool_calls"):
            log_metric(f"searchgym/{name}", float(now.get(name, 0) - _LAST_LOGGED.get(name, 0)))
        _LAST_LOGGED.update(now)
    return [float(r) for r in searchgym_reward]
