"""Multi-turn generation contexts as the agent builds them (prompt ids + sampled ids + env ids per turn): shared
by the KV-reuse and rollout-engine tests, which compare decoding loops on the same conversations."""

from __future__ import annotations

SYSTEM = "You are a search agent. Think, then <search> a query </search>, then <answer> it </answer>."
QUESTIONS = ["Where was Alice Varn born?", "What is the capital of Merovia?", "Who founded Dura Labs?"]
ENV = "\n<information> Tarsk is a city of Merovia founded in 1204 by Bob Varn. </information>\n"


def multiturn_rollouts(gen, tok, cfg_kw: dict, turns: int = 3) -> list:
    """``turns`` rounds of ``gen.generate_with_stats`` over the three questions, each turn's sampled ids and
    :data:`ENV` appended to its row; returns ``[(texts, token_ids)]`` per turn."""
    from searchgym.core.llm import GenerationConfig

    contexts = [
        tok(
            f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n",
            add_special_tokens=False,
        )["input_ids"]
        for q in QUESTIONS
    ]
    env = tok(ENV, add_special_tokens=False)["input_ids"]
    history = []
    for turn in range(turns):
        res = gen.generate_with_stats(contexts, GenerationConfig(seed=100 + turn, **cfg_kw))
        history.append((res.texts, res.token_ids))
        contexts = [c + list(ids) + env for c, ids in zip(contexts, res.token_ids)]
    return history
