"""Turn a :class:`Trajectory` into training tensors with an exact token-level loss mask.

The one encoding of a rollout into ``(input_ids, loss_mask, step_index)``, shared by generation
(:class:`~searchgym.agents.llm_agent.LLMAgent` builds its next-turn context with it), the RL update
and any supervised use (SFT on demonstrations): what the policy is trained on is exactly what it
conditioned on and sampled.

* The prompt is ``chat_template(user: trajectory.prompt)`` tokenised once.
* Each ``agent`` segment contributes **the token ids the generator sampled** for that turn, read
  from ``trajectory.metadata["sampled_token_ids"]`` (one entry per turn, written by
  :func:`record_sampled`). Only when a backend returned text alone (an OpenAI-compatible server
  without token ids, scripted agents, hand-made trajectories) is the segment's text tokenised; the
  result says how many segments that was (:attr:`EncodedTrajectory.retokenised`).
* ``env`` segments (``<information>…``, corrective messages) are tokenised on their own.
* When the generator returned them, each sampled id's log-probability under the weights that sampled
  it is kept next to the ids (``metadata["sampled_logprobs"]``, one entry per turn) and encoded
  alongside them (:attr:`EncodedTrajectory.rollout_logprobs`): the trainer's importance correction of
  a rollout sampler that differs from the trained policy (bf16 rollouts of a float32 policy).

A trajectory of the function-calling protocol (``metadata["protocol"] == "function_calling"``) is
encoded the same way with the chat template doing the env's part: the prompt is rendered with the
trajectory's tool schemas, and each ``env`` segment becomes the template's tokens for the turn's
inserted messages (:class:`searchgym.core.chat_template.ToolChatEncoder`); the sampled ids are kept as
they are. :func:`turn_encoder` gives either protocol's prompt / env-insertion encoding to code that
builds token streams turn by turn (the verl and TRL adapters), so streams and this encoding agree.

Every token belongs to exactly one segment, so the mask is exact: only agent tokens carry loss. Each
agent token records its step: the index of the :class:`Turn` that wrote it (``Segment.turn``), which
is what step-level advantages (SAPO) are applied by. Steps are keyed by turn, not by counting agent
segments, because an empty agent turn is a Turn (and a GDCR step) that writes no agent segment.
Hand-built segments without a turn are numbered in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from ..core.chat_template import ToolChatEncoder
from ..core.prompts import check_protocol
from ..core.types import Trajectory, Turn
from ..errors import InvalidArgumentError

SAMPLED_IDS_KEY = "sampled_token_ids"
SAMPLED_LOGPROBS_KEY = "sampled_logprobs"


def render_prompt(tokenizer, prompt: str) -> str:
    """The chat-templated prompt text for a user message (raw text if the tokenizer has no template)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return prompt
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )


class _PromptCache:
    """The ids of recently encoded texts (a GRPO group encodes the same prompt G times, and its rollouts
    often get the same search results)."""

    size = 256

    def __init__(self) -> None:
        self._ids: dict[str, list[int]] = {}

    def get(self, prompt: str, encode) -> list[int]:
        ids = self._ids.get(prompt)
        if ids is None:
            if len(self._ids) >= self.size:
                self._ids.pop(next(iter(self._ids)))
            ids = self._ids[prompt] = encode(prompt)
        return list(ids)


class TagEncoder:
    """Token ids of the tag protocol: the chat-templated prompt, env insertions tokenised on their own."""

    protocol = "tags"

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._prompts = _PromptCache()
        self._inserted = _PromptCache()

    def prompt_ids(self, prompt: str) -> list[int]:
        """The chat-templated user prompt (raw text without a template)."""
        return self._prompts.get(prompt, lambda p: _text_ids(self.tokenizer, render_prompt(self.tokenizer, p)))

    def env_ids(self, inserted: str, turn: Optional[Turn], previous_ids: Sequence[int] = ()) -> list[int]:
        """The ids of the text the env inserted after a turn."""
        return self._inserted.get(inserted, lambda t: _text_ids(self.tokenizer, t)) if inserted else []


class ToolEncoder:
    """Token ids of the function-calling protocol: the prompt rendered with the tool schemas, and after
    each turn the template's tokens for the messages the env sent (``turn.messages``)."""

    protocol = "function_calling"

    def __init__(self, tokenizer, tools: Sequence[dict]) -> None:
        self.tokenizer = tokenizer
        self.chat = ToolChatEncoder(tokenizer, tools)
        self._prompts = _PromptCache()

    def prompt_ids(self, prompt: str) -> list[int]:
        """``apply_chat_template([user: prompt], tools=..., add_generation_prompt=True)``."""
        return self._prompts.get(prompt, lambda p: self.chat.prompt_ids([{"role": "user", "content": p}]))

    def env_ids(self, inserted: str, turn: Optional[Turn], previous_ids: Sequence[int] = ()) -> list[int]:
        """The template's tokens for ``turn.messages`` after the sampled ``previous_ids`` (a hand-built
        segment without messages: its text, tokenised)."""
        if turn is None or not turn.messages:
            return _text_ids(self.tokenizer, inserted) if inserted else []
        return self.chat.reply_ids(turn.messages, previous_ids)


def turn_encoder(tokenizer, protocol: str = "tags", tools: Optional[Sequence[dict]] = None):
    """The :class:`TagEncoder` or :class:`ToolEncoder` of ``protocol`` (tools required for function calling)."""
    if check_protocol(protocol) == "tags":
        return TagEncoder(tokenizer)
    if not tools:
        raise InvalidArgumentError("the function-calling protocol needs the env's tool schemas (env.tool_schemas())")
    return ToolEncoder(tokenizer, tools)


def trajectory_encoder(tokenizer, trajectory: Trajectory):
    """The encoder of the protocol ``trajectory`` was played in."""
    meta = trajectory.metadata
    return turn_encoder(tokenizer, meta.get("protocol", "tags"), meta.get("tools"))


def record_sampled(
    trajectory: Trajectory, token_ids: Optional[Sequence[int]], logprobs: Optional[Sequence[float]] = None
) -> None:
    """Remember the ids sampled for the turn the env is about to record on ``trajectory``.

    Call it once per action, before ``env.step``: entry ``i`` belongs to turn ``i``. ``None`` marks
    a turn whose ids are unknown (a text-only backend); earlier turns played without a record (e.g.
    by another agent) are padded with ``None``. ``logprobs``: the ids' log-probabilities under the
    sampler (one per id), kept in ``metadata["sampled_logprobs"]`` the same way; that table exists only
    once some turn recorded them.
    """
    _record_turn(trajectory, SAMPLED_IDS_KEY, None if token_ids is None else [int(x) for x in token_ids])
    if logprobs is None and SAMPLED_LOGPROBS_KEY not in trajectory.metadata:
        return
    if logprobs is not None and (token_ids is None or len(logprobs) != len(token_ids)):
        raise InvalidArgumentError(
            f"{0 if logprobs is None else len(logprobs)} log-probs for "
            f"{'no' if token_ids is None else len(token_ids)} sampled ids; give one log-prob per sampled id"
        )
    _record_turn(trajectory, SAMPLED_LOGPROBS_KEY, None if logprobs is None else [float(x) for x in logprobs])


def _record_turn(trajectory: Trajectory, key: str, entry: Optional[list]) -> None:
    """Set ``metadata[key]``'s entry for the turn about to be recorded (index ``len(trajectory.turns)``),
    padding turns played without one with ``None`` and dropping entries of turns never recorded."""
    n = len(trajectory.turns)
    table = trajectory.metadata.setdefault(key, [])
    table.extend([None] * (n - len(table)))
    del table[n:]
    table.append(entry)


def sampled_ids_of_segments(trajectory: Trajectory) -> list:
    """The sampled ids of each ``agent`` segment in order (``None`` where unknown).

    The env appends an agent segment for every turn with a non-empty action, so agent segment k is
    the k-th such turn.
    """
    return _per_agent_segment(trajectory, SAMPLED_IDS_KEY)


def sampled_logprobs_of_segments(trajectory: Trajectory) -> list:
    """The sampler's log-probabilities of each ``agent`` segment's ids, in order (``None`` where unknown)."""
    return _per_agent_segment(trajectory, SAMPLED_LOGPROBS_KEY)


def _per_agent_segment(trajectory: Trajectory, key: str) -> list:
    """``metadata[key]``'s per-turn entries for the turns with an action (one agent segment each)."""
    table = trajectory.metadata.get(key) or []
    return [table[t.index] if t.index < len(table) else None for t in trajectory.turns if t.action]


@dataclass
class EncodedTrajectory:
    """Token ids, the loss mask (1 = agent token), the step index of each token (-1 = not agent), how
    many agent segments had no sampled ids and were tokenised from text, and -- when the trajectory
    recorded them -- each token's log-probability under the rollout sampler (``rollout_logprobs``, NaN
    for tokens without one: prompt, env text, turns recorded without log-probs)."""

    input_ids: list[int]
    loss_mask: list[int]
    step_index: list[int]
    truncated: bool = False
    retokenised: int = 0
    prompt_len: int = 0
    rollout_logprobs: Optional[list[float]] = None

    @property
    def first_agent_token(self) -> int:
        """Index of the first token that carries loss (len(input_ids) if none)."""
        return next((i for i, m in enumerate(self.loss_mask) if m), len(self.input_ids))

    @property
    def num_agent_tokens(self) -> int:
        """How many tokens carry loss."""
        return sum(self.loss_mask)

    @property
    def agent_segments(self) -> list[list[int]]:
        """The ids of each agent segment, in order (for checks and SFT)."""
        out: dict[int, list[int]] = {}
        for tok, s in zip(self.input_ids, self.step_index):
            if s >= 0:
                out.setdefault(s, []).append(tok)
        return [out[k] for k in sorted(out)]


def _text_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _agent_ids(tokenizer, text: str, sampled: Optional[list[int]]) -> list[int]:
    """The sampled ids of an agent segment, checked against its text; the text's tokens if unknown."""
    if sampled is None:
        return _text_ids(tokenizer, text)
    decoded = tokenizer.decode(sampled, skip_special_tokens=True)
    if not decoded.startswith(text):
        raise InvalidArgumentError(
            f"the sampled token ids of an agent turn decode to {decoded[:60]!r}, which does not start with the "
            f"turn's text {text[:60]!r}: metadata[{SAMPLED_IDS_KEY!r}] does not belong to this trajectory "
            f"(record ids with record_sampled() before each env.step, or drop the key to re-tokenise)"
        )
    return list(sampled)


def encode_trajectory(
    tokenizer, trajectory: Trajectory, *, max_tokens: int | None = None, for_generation: bool = False
) -> EncodedTrajectory:
    """Encode ``trajectory`` segment by segment (see the module docstring).

    For training (default) trailing env text is dropped (it trains nothing) and the sequence is cut
    at ``max_tokens`` (tail dropped, flagged). ``for_generation=True`` keeps everything: the ids are
    the context the policy continues on its next turn.
    """
    encoder = trajectory_encoder(tokenizer, trajectory)
    ids = encoder.prompt_ids(trajectory.prompt)
    prompt_len = len(ids)
    mask = [0] * len(ids)
    steps = [-1] * len(ids)
    sampled = iter(sampled_ids_of_segments(trajectory))
    has_lps = SAMPLED_LOGPROBS_KEY in trajectory.metadata
    sampled_lps = iter(sampled_logprobs_of_segments(trajectory))
    lps: list[float] = [math.nan] * len(ids)
    step = -1
    retok = 0
    for seg in trajectory.segments:
        if seg.source == "prompt" or not seg.text:
            continue
        if seg.source == "agent":
            step = seg.turn if seg.turn is not None else step + 1
            known = next(sampled, None)
            known_lps = next(sampled_lps, None)
            retok += known is None
            seg_ids = _agent_ids(tokenizer, seg.text, known)
            mask.extend([1] * len(seg_ids))
            steps.extend([step] * len(seg_ids))
            if known is not None and known_lps is not None and len(known_lps) == len(seg_ids):
                lps.extend(float(x) for x in known_lps)
            elif known_lps is not None:
                raise InvalidArgumentError(
                    f"an agent turn recorded {len(known_lps)} sampled log-probs for {len(seg_ids)} ids: "
                    f"metadata[{SAMPLED_LOGPROBS_KEY!r}] does not belong to this trajectory (record both with "
                    "record_sampled(), or drop the key)"
                )
            else:
                lps.extend([math.nan] * len(seg_ids))
        else:
            turn = trajectory.turns[seg.turn] if seg.turn is not None and seg.turn < len(trajectory.turns) else None
            seg_ids = encoder.env_ids(seg.text, turn, ids)
            mask.extend([0] * len(seg_ids))
            steps.extend([-1] * len(seg_ids))
            lps.extend([math.nan] * len(seg_ids))
        ids.extend(seg_ids)
    rollout = lps if has_lps else None
    if for_generation:
        return EncodedTrajectory(ids, mask, steps, False, retok, prompt_len, rollout)
    last = max((i for i, m in enumerate(mask) if m), default=len(ids) - 1)
    ids, mask, steps = ids[: last + 1], mask[: last + 1], steps[: last + 1]  # trailing env text trains nothing
    truncated = max_tokens is not None and len(ids) > max_tokens
    if truncated:
        ids, mask, steps = ids[:max_tokens], mask[:max_tokens], steps[:max_tokens]
    if rollout is not None:
        rollout = rollout[: len(ids)]
    return EncodedTrajectory(ids, mask, steps, truncated, retok, min(prompt_len, len(ids)), rollout)


def collate(encoded: list[EncodedTrajectory], pad_id: int, step_advantages: list[list[float]], device=None):
    """Right-pad a batch: ``input_ids``, ``attention_mask``, shifted ``loss_mask`` and per-token advantages.

    ``step_advantages[i][t]`` is the advantage of step t of sequence i (a single value = same for all
    steps; steps beyond the list reuse its last value). The returned mask / advantages are aligned
    with :func:`searchgym.training.losses.token_logprobs` (position t scores token t + 1).
    """
    import torch

    width = max(len(e.input_ids) for e in encoded)
    n = len(encoded)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.float32)
    adv = torch.zeros((n, width), dtype=torch.float32)
    for i, e in enumerate(encoded):
        L = len(e.input_ids)
        input_ids[i, :L] = torch.tensor(e.input_ids)
        attn[i, :L] = 1
        mask[i, :L] = torch.tensor(e.loss_mask, dtype=torch.float32)
        table = step_advantages[i] or [0.0]
        adv[i, :L] = torch.tensor([table[min(s, len(table) - 1)] if s >= 0 else 0.0 for s in e.step_index])
    out = (input_ids, attn, mask[:, 1:].contiguous(), adv[:, 1:].contiguous())
    if device is not None:
        return tuple(t.to(device) for t in out)
    return out


def collate_rollout_logprobs(encoded: list[EncodedTrajectory], device=None):
    """The rollout sampler's log-probability of each token, right-padded and shifted like
    :func:`collate`'s mask (``[B, T - 1]``: position t holds token t + 1's), NaN where unknown; ``None``
    when no sequence of the batch recorded any."""
    import torch

    if all(e.rollout_logprobs is None for e in encoded):
        return None
    width = max(len(e.input_ids) for e in encoded)
    out = torch.full((len(encoded), width), math.nan, dtype=torch.float32)
    for i, e in enumerate(encoded):
        if e.rollout_logprobs is not None:
            out[i, : len(e.rollout_logprobs)] = torch.tensor(e.rollout_logprobs, dtype=torch.float32)
    out = out[:, 1:].contiguous()
    return out.to(device) if device is not None else out
