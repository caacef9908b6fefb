"""Every decoding and scoring call passes the KV cache under the name the model's ``forward`` takes.

transformers 5.2x renamed ``past_key_values`` to ``cache`` and warns on every call with the old name (the
warning filled every training log line); older versions take only the old name. The keyword is read from the
model class's signature, so both work: checked on the installed transformers' Llama (no deprecation warning
from the engine's decode, the trainer's shared-prefix scoring and the KV-reuse prefill) and on classes of
either kind.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.llm.cache_keyword import cache_keyword, cache_kwargs  # noqa: E402
from searchgym.llm.decoding import DynamicKV, StaticKV  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402


class _OldStyle(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None):
        return input_ids


class _NewStyle(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None, cache=None, use_cache=None):
        return input_ids


class _Wrapper:
    """A PEFT-like wrapper: ``forward(**kwargs)`` only, the real model behind ``get_base_model``."""

    def __init__(self, base):
        self._base = base

    def get_base_model(self):
        return self._base

    def forward(self, **kwargs):
        return self._base(**kwargs)


class _CallOnly:
    def __call__(self, input_ids, attention_mask, **kw):
        return input_ids


def test_keyword_follows_the_forward_signature():
    assert cache_keyword(_OldStyle()) == "past_key_values"
    assert cache_keyword(_NewStyle()) == "cache"
    assert cache_keyword(_Wrapper(_NewStyle())) == "cache"
    assert cache_keyword(_Wrapper(_OldStyle())) == "past_key_values"
    assert cache_keyword(_CallOnly()) == "past_key_values"
    marker = object()
    assert cache_kwargs(_NewStyle(), marker) == {"cache": marker}


@pytest.fixture(scope="module")
def model():
    return build_model(build_tokenizer()).eval()


def _no_cache_deprecation(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    bad = [str(w.message) for w in caught if "past_key_values" in str(w.message)]
    assert not bad, bad
    return out


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_decode_passes_the_installed_name(model, kind):
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    attn = torch.ones_like(ids)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    kv = DynamicKV(model) if kind == "dynamic" else StaticKV(model, compiled=False, bucket=False)

    def run():
        with torch.no_grad():
            first = kv.prefill(ids, attn, pos, max_new_tokens=2)
            nxt = first.argmax(-1)
            return first, kv.step(nxt, pos[:, -1:] + 1)

    first, second = _no_cache_deprecation(run)
    # the cache was really used: the step's logits equal a full forward over the prompt and the fed token
    with torch.no_grad():
        full_ids = torch.cat([ids, first.argmax(-1)[:, None]], dim=1)
        full = model(input_ids=full_ids, attention_mask=torch.ones_like(full_ids)).logits[:, -1, :]
    torch.testing.assert_close(second, full, rtol=1e-4, atol=1e-4)


def test_shared_prefix_scoring_passes_the_installed_name(model):
    from searchgym.llm.shared_prefix import pack_shared, shared_token_logprobs

    packed = pack_shared([[5, 6, 7, 8, 9], [5, 6, 7, 10, 11, 12]], [3, 3], 0)

    def run():
        with torch.no_grad():
            return shared_token_logprobs(model, packed)[0]

    logp = _no_cache_deprecation(run)
    assert logp.shape[0] == 2 and bool(torch.isfinite(logp).all())


def test_kv_reuse_warm_prefill_passes_the_installed_name(model):
    from searchgym.llm.kv_reuse import PrefixKVStore, warm_shared_prefix

    store = PrefixKVStore(model, max_bytes=1 << 24, min_prefix=4)
    rows = [[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 8, 9, 10, 12, 13]]
    warmed = _no_cache_deprecation(lambda: warm_shared_prefix(model, store, rows, "cpu"))
    assert warmed == 6  # the shared prefix was really prefilled through the cache and stored
