"""Issue 30, item 6: where searchgym keeps its own code beside a well-kept library, the two are checked
against each other here, and the measured reason to keep ours is checked to still hold.

* The OpenAI HTTP client (:mod:`searchgym.llm.openai_client`) sends the official ``openai``
  client's request bodies, and — the reason it is kept — ends a request at its *total* deadline,
  where the official client's timeout bounds each read, so a trickling server holds it for minutes.
* The function-calling template code (:mod:`searchgym.core.chat_template`) agrees with TRL's
  ``supports_tool_calling`` and with the tool-result ids TRL's GRPO tool loop appends.

(The bootstrap interval now *is* ``scipy.stats.bootstrap``; tests/test_eval_metrics.py checks it
reports the intervals the hand-written resampler did.) docs/trainer.md, evaluation.md and protocol.md give the
figures.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from searchgym.core.llm import GenerationConfig, GenerationError
from searchgym.llm.openai_client import OpenAICompatibleGenerator
from tests.support.openai_server import OpenAIStubServer
from tests.support.trickle_server import TrickleServer

openai = pytest.importorskip("openai")

STOP = ["</search>", "</answer>"]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where was Alice Varn born?"}]


def test_generator_sends_the_official_clients_request_bodies():
    with OpenAIStubServer(lambda prompt, body: "<answer> Tarsk </answer>") as srv:
        ours = OpenAICompatibleGenerator(srv.url, "m", timeout=5, max_retries=0)
        cfg = GenerationConfig(max_new_tokens=8, temperature=0.7, top_p=0.9, stop=tuple(STOP), seed=3)
        ours.generate([MESSAGES], cfg)
        ours.generate(["Alice Varn was born in"], cfg)
        ids = OpenAICompatibleGenerator(srv.url, "m", timeout=5, max_retries=0, request_token_ids=True)
        ids.generate([MESSAGES], cfg)
        for g in (ours, ids):
            g.close()
        official = openai.OpenAI(base_url=srv.url, api_key="unused", max_retries=0, timeout=5)
        same = dict(model="m", max_tokens=8, temperature=0.7, top_p=0.9, stop=STOP, seed=3)
        official.chat.completions.create(messages=MESSAGES, **same)
        official.completions.create(prompt="Alice Varn was born in", **same)
        official.chat.completions.create(
            messages=MESSAGES,
            logprobs=True,
            extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
            **same,
        )
    chat, text, chat_ids, official_chat, official_text, official_chat_ids = srv.requests
    assert chat == official_chat and text == official_text and chat_ids == official_chat_ids


def _still_waiting_after(call, seconds: float) -> bool:
    """Whether ``call()`` is still running ``seconds`` after it started (it runs on in a daemon thread)."""
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except (openai.APIError, GenerationError, OSError):
            pass  # the outcome does not matter, only when it came
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return not done.wait(seconds)


def test_the_official_clients_timeout_bounds_each_read_and_ours_the_whole_request():
    """The measured reason searchgym keeps its client: with ``timeout=1`` against a server that sends
    its answer one byte every 0.2 s, ours gives up at 1 s and the official client is still reading
    at 4 s (it would read the 1 MB body for days). If this ever fails, the official client gained a
    total deadline: reconsider switching (docs/trainer.md, OpenAICompatibleGenerator)."""
    with TrickleServer(stage="body", interval=0.2) as server:
        ours = OpenAICompatibleGenerator(server.url, "m", timeout=1.0, max_retries=0)
        t0 = time.monotonic()
        with pytest.raises(GenerationError, match="timed out"):
            ours.generate([MESSAGES])
        assert time.monotonic() - t0 < 3.0
        ours.close()
        official = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=1.0, max_retries=0)
        assert _still_waiting_after(lambda: official.chat.completions.create(model="m", messages=MESSAGES), 4.0)


# ------------------------------------------------------------------ function-calling templates
def _text_templates() -> dict[str, str]:
    """searchgym's bundled Qwen2.5 template, a plain ChatML one and every text template TRL ships."""
    trl = pytest.importorskip("trl")
    from searchgym.llm.tiny_models import CHAT_TEMPLATE, QWEN25_TEMPLATE

    found = {"chatml": CHAT_TEMPLATE, "searchgym/qwen2_5": QWEN25_TEMPLATE.read_text(encoding="utf-8")}
    for path in sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja")):
        if not any(k in path.stem for k in ("vl", "idefics", "llava", "smolvlm")):  # image processors
            found[f"trl/{path.stem}"] = path.read_text(encoding="utf-8")
    return found


def test_tool_template_code_agrees_with_trl():
    pytest.importorskip("transformers")
    from trl.chat_template_utils import supports_tool_calling

    from searchgym.core.chat_template import ChatTemplateError, ToolChatEncoder, supports_tools
    from searchgym.envs.function_calling import tool_schemas
    from searchgym.llm.tiny_models import build_tokenizer

    try:
        from trl.trainer.grpo_trainer import GRPOTrainer

        trl_suffix = GRPOTrainer._get_tool_suffix_ids
    except (ImportError, AttributeError):
        pytest.skip("this TRL version has no GRPOTrainer._get_tool_suffix_ids to compare with")
    tok = build_tokenizer()
    tool_reply = [{"role": "tool", "name": "search", "content": 'Doc 1 (Title: "Tarsk") Alice Varn was born in Tarsk.'}]
    probes, suffixes, refused = {}, 0, []
    for name, template in _text_templates().items():
        tok.chat_template = template
        probes[name] = (supports_tools(tok), supports_tool_calling(tok))
        if not all(probes[name]):
            continue
        stand_in = type("Trainer", (), {"processing_class": tok, "_tokenizer": tok, "_is_vlm": False})()
        stand_in.chat_template, stand_in.chat_template_kwargs = None, {}
        try:
            ours = ToolChatEncoder(tok, tool_schemas()).reply_ids(tool_reply, [tok.eos_token_id])
        except ChatTemplateError:  # not prefix-preserving (Qwen3's original template): TRL refuses it too
            with pytest.raises(ValueError, match="not a prefix"):
                trl_suffix(stand_in, tool_reply)
            refused.append(name)
            continue
        assert ours == trl_suffix(stand_in, tool_reply), name
        suffixes += 1
    differ = {name for name, (a, b) in probes.items() if a != b}
    # DeepSeek-V3's template fails on dict tool-call arguments; TRL's probe retries with a JSON string,
    # searchgym passes dicts and so refuses it (with the fix in the error).
    assert differ <= {"trl/deepseekv3", "trl/deepseekv3_training"}, differ
    assert probes["searchgym/qwen2_5"] == (True, True) and probes["chatml"] == (False, False)
    assert suffixes >= 20 and "trl/qwen3" in refused  # both branches ran
