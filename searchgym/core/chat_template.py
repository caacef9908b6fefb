"""Token ids of a function-calling conversation, built so the sequence stays exact across turns.

A function-calling rollout alternates what the model samples (an assistant message: reasoning, tool
calls) with what the environment inserts (``role: tool`` results, or a ``role: user`` correction). The
ids trained on must be the ids the model conditioned on and sampled: rendering the whole conversation
again with the chat template after each turn would re-tokenise the sampled text (a different split
of the same characters is a different sequence) and some templates re-render earlier turns
differently (Qwen3 drops earlier ``<think>`` blocks). :class:`ToolChatEncoder` therefore

* renders the prompt once: ``apply_chat_template(messages, tools=schemas, add_generation_prompt=True)``;
* keeps the sampled ids of every assistant turn as they are;
* appends, after each turn, only the template's tokens for the inserted messages plus the next
  assistant header (:meth:`ToolChatEncoder.reply_ids`). They are the difference between rendering a
  short stand-in conversation with and without those messages, cut after the assistant's end-of-turn
  token, so the sampled ids (which end with that token) are followed by exactly what the template
  puts there. A turn that did not end with the end-of-turn token gets it prepended (as an inserted,
  untrained token) so the sequence stays well formed.

:func:`supports_tools` checks that a chat template renders the tool schemas, an assistant tool call
and a tool message (plain ChatML templates such as SmolLM2's silently drop all three);
:func:`require_tool_template` raises :class:`ChatTemplateError` naming the fix. The tokenizer is any
object with Hugging Face's ``apply_chat_template`` (nothing here imports transformers).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..errors import InvalidArgumentError, SearchGymError

__all__ = ["ChatTemplateError", "ToolChatEncoder", "supports_tools", "require_tool_template", "TOOL_TEMPLATE_FIX"]

#: How to get a template that renders tools (said by every error about one).
TOOL_TEMPLATE_FIX = (
    "use protocol='tags' (the <search>/<answer> tag protocol works with any chat template), or a model whose chat "
    "template renders tools (Qwen2.5 / Qwen3, Llama 3.1+, ...), or set tokenizer.chat_template to such a template "
    "(e.g. TRL's trl/chat_templates/qwen2_5.jinja)"
)

_NAME, _KEY, _VALUE, _RESULT, _SCHEMA = (
    "sg_tool_name_7f3a",
    "sg_arg_key_2c9e",
    "sg_arg_value_5d1b",
    "sg_tool_result_8e4f",
    "sg_schema_desc_3a6c",
)


class ChatTemplateError(SearchGymError, ValueError):
    """A tokenizer whose chat template cannot render a function-calling conversation; the message names the fix."""


def _name_of(tokenizer) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


def _probe() -> tuple[list[dict], list[dict]]:
    tools: list[dict] = [
        {
            "type": "function",
            "function": {
                "name": _NAME,
                "description": _SCHEMA,
                "parameters": {"type": "object", "properties": {_KEY: {"type": "string"}}, "required": [_KEY]},
            },
        }
    ]
    messages: list[dict] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": _NAME, "arguments": {_KEY: _VALUE}}}],
        },
        {"role": "tool", "name": _NAME, "content": _RESULT},
    ]
    return messages, tools


def _missing_parts(tokenizer) -> list[str]:
    """What of a tool conversation the template drops (empty: it renders all of it)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return ["everything (the tokenizer has no chat template)"]
    messages, tools = _probe()
    try:
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    except Exception as exc:  # noqa: BLE001 - jinja raises many types; any failure means "cannot render tools"
        return [f"the conversation (rendering failed: {type(exc).__name__}: {exc})"]
    parts = {
        "the tool schemas": _SCHEMA,
        "the assistant's tool call": _NAME,
        "the tool-call arguments": _VALUE,
        "the tool message": _RESULT,
    }
    return [what for what, marker in parts.items() if marker not in text]


def supports_tools(tokenizer) -> bool:
    """Whether the tokenizer's chat template renders tool schemas, tool calls and tool messages."""
    return not _missing_parts(tokenizer)


def require_tool_template(tokenizer) -> None:
    """Raise :class:`ChatTemplateError` (naming what is dropped and the fix) unless :func:`supports_tools`."""
    missing = _missing_parts(tokenizer)
    if missing:
        raise ChatTemplateError(
            f"the chat template of {_name_of(tokenizer)} cannot be used for function calling: it drops "
            f"{', '.join(missing)}. Fix: {TOOL_TEMPLATE_FIX}"
        )


def _ids(rendered: Any) -> list[int]:
    """``apply_chat_template(..., tokenize=True)`` output as a flat id list (a dict or batch in some versions)."""
    if isinstance(rendered, dict) or hasattr(rendered, "keys"):
        rendered = rendered["input_ids"]
    if rendered and isinstance(rendered[0], list):
        rendered = rendered[0]
    return [int(x) for x in rendered]


class ToolChatEncoder:
    """Prompt and inserted-message token ids of one tokenizer + tool set (see the module docstring).

    ``end_ids``: the ids that end an assistant turn (default: the tokenizer's EOS). Raises
    :class:`ChatTemplateError` when the template cannot render tools.
    """

    def __init__(self, tokenizer, tools: Sequence[dict], *, end_ids: Optional[Sequence[int]] = None) -> None:
        require_tool_template(tokenizer)
        if not tools:
            raise InvalidArgumentError("a function-calling conversation needs at least one tool schema")
        self.tokenizer = tokenizer
        self.tools = [dict(t) for t in tools]
        eos = getattr(tokenizer, "eos_token_id", None)
        self.end_ids = [int(x) for x in (end_ids if end_ids is not None else ([eos] if eos is not None else []))]

    def render(self, messages: Sequence[dict], *, add_generation_prompt: bool) -> list[int]:
        """The ids of ``messages`` (with this encoder's tools) as the chat template renders them."""
        return _ids(
            self.tokenizer.apply_chat_template(
                list(messages),
                tools=self.tools,
                tokenize=True,
                add_generation_prompt=add_generation_prompt,
                return_dict=False,
            )
        )

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        """The prompt: ``messages`` (system / user) rendered with the tools and the assistant header."""
        return self.render(messages, add_generation_prompt=True)

    def reply_ids(self, messages: Sequence[dict], previous_ids: Sequence[int] = ()) -> list[int]:
        """Ids to append after an assistant turn whose sampled ids are ``previous_ids``: the template's
        rendering of the inserted ``messages`` (tool results or a user correction) and the next
        assistant header. The end-of-turn token is prepended when the turn did not sample it."""
        if not messages:
            raise InvalidArgumentError("reply_ids needs the messages the environment inserted")
        closed = bool(previous_ids) and int(previous_ids[-1]) in self.end_ids
        body = self._suffix(messages)
        return body if closed or not self.end_ids else [self.end_ids[0]] + body

    def _suffix(self, messages: Sequence[dict]) -> list[int]:
        tool_reply = messages[0].get("role") == "tool"
        name = str(messages[0].get("name") or "search")
        assistant: dict = {"role": "assistant", "content": "x"}
        if tool_reply:
            assistant = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}],
            }
        stand_in = [{"role": "user", "content": "x"}, assistant]
        prefix = self.render(stand_in, add_generation_prompt=False)
        full = self.render(stand_in + list(messages), add_generation_prompt=True)
        ends = [i for i, tok in enumerate(prefix) if tok in self.end_ids]
        if ends:  # cut after the assistant's end-of-turn token: what follows it belongs to the reply
            prefix = prefix[: ends[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ChatTemplateError(
                f"the chat template of {_name_of(self.tokenizer)} re-renders the assistant turn when messages follow "
                f"it (not prefix-preserving), so inserted messages cannot be appended to sampled ids. Fix: "
                f"{TOOL_TEMPLATE_FIX}"
            )
        return full[len(prefix) :]
