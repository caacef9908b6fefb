"""Language-model backends: what turns prompts into text and token ids.

* :mod:`.transformers_backend` (a local Hugging Face model, decoded by :mod:`.rollout_engine` on CPU),
  :mod:`.vllm_backend`, :mod:`.vllm_server` and :mod:`.openai_client` (any OpenAI-compatible server) implement
  :class:`searchgym.core.llm.TextGenerator`;
* :mod:`.decoding`, :mod:`.kv_reuse`, :mod:`.shared_prefix`, :mod:`.lm_head` and :mod:`.cache_keyword` are the
  decoding pieces they share;
* :mod:`.pretrained` opens a model folder or adapter, :mod:`.bundled_model` the bundled SmolLM2-135M,
  :mod:`.tiny_models` the tiny models the tests use; :mod:`.openai_server` serves a local model over HTTP.
"""
