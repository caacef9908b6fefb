"""Every prompt searchgym sends to a model, in one place.

Written for this project in the spirit of the papers' appendices (SSP App. D, kg-paths-wcr
App. F, EVE-Agent, DynaSearcher). Each template is a plain ``str.format`` string so users can
copy and change them; each ``render_*`` function fills one and is what the rest of the package
calls, so a change here reaches envs, verifier, judge and selector alike.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import InvalidArgumentError

SOLVER_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by <search> query </search> and it will return the top searched results between <information> "
    "and </information>. You can search as many times as you want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>.{kg_hint} Question: {question}\n"
)

SOLVER_KG_HINT = (
    " You may also look facts up in a knowledge graph by putting JSON inside the search tag: "
    '<search>{{"query": "...", "entity": ["..."], "relation": ["..."]}}</search>.'
)

#: The Solver prompt of the function-calling protocol (envs/function_calling.py): the same task and
#: reasoning instructions, with the search and answer tools instead of tags.
SOLVER_TOOLS_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call the search "
    "tool with a query and its results come back as the tool's reply. You can search as many times as you "
    "want. If you find no further external knowledge needed, call the answer tool with the final answer, "
    "without detailed illustrations (for example, the answer Beijing).{kg_hint} Question: {question}\n"
)

SOLVER_TOOLS_KG_HINT = (
    " You may also look facts up in a knowledge graph with the kg_lookup tool (entity names and relation names)."
)

#: How the Proposer is told to search, per protocol (the ``{search_howto}`` of the Proposer prompts).
PROPOSER_SEARCH_HOWTO = {
    "tags": "To search, write <search> query </search>; results come back between <information> and </information>.",
    "function_calling": "To search, call the search tool with a query; its results come back as the tool's reply.",
}

PROPOSER_KG_PROMPT = (
    "You are an expert question creator. You are given a small knowledge-graph subgraph: a target path "
    "from a seed entity to an answer, plus distractor branches. Write one challenging question whose "
    "unique answer is the answer below and whose solution requires following the target path hop by hop.\n"
    "Rules: ground every clue in facts you confirm by searching; never name the answer or the intermediate "
    "entities of the path (describe them by their relations instead); the question must need about {n} "
    "searches to solve and must have a single unambiguous answer; do not use the distractor branches as "
    "clues.\n"
    "You must conduct reasoning inside <think> and </think> every time you get new information. {search_howto} "
    "Search at least twice with different queries. When the question is ready, check it against the rules and "
    "give it inside <question> and </question>.\n\n"
    "Subgraph:\n{subgraph}\n\nAnswer: {answer}\nRequired searches: {n}\n"
)

PROPOSER_VANILLA_PROMPT = (
    "You are an expert question creator. Your task is to reverse-engineer a challenging question from a given "
    "answer; solving it must require {n} sequential searches. Start from the answer, find a closely related "
    "but distinct concept, search for the bridging fact that connects it to the answer, and keep working "
    "backwards until the chain has {n} links. The first fact of the chain becomes the question's clue.\n"
    "You must conduct reasoning inside <think> and </think> every time you get new information. {search_howto} "
    "Search at least twice with different queries. Rules: strictly fact-based; no spoilers (never state the answer or "
    "the intermediate facts); search must be mandatory; a single unambiguous answer. When the question is "
    "ready, check it against the rules and give it inside <question> and </question>.\n\n"
    "The answer I provided is: {answer}.\nYou need to create a question that requires {n} searches.\n"
)

EVE_PROPOSER_SUFFIX = (
    "Also give the answer inside <answer> and </answer> and copy, word for word, the shortest passage from "
    "the retrieved documents that supports it inside <evidence> and </evidence>.\n"
)

RAG_VERIFIER_PROMPT = (
    "Answer the given question based on the provided materials. You should first conduct very concise "
    "reasoning within 50 words, and then directly provide your answer without detailed illustrations after "
    "saying 'Answer:'.\n\nMaterials: {materials}\n\nQuestion: {question}\n"
)

JUDGE_PROMPT = (
    "You are a professional judge who evaluates the correctness of answers based on given criteria.\n"
    "Please determine whether the model's answer is consistent with the reference answer:\n\n"
    "Question: {question}\n\nModel Answer: {prediction}\n\nReference Answer: {reference}\n\n"
    "Evaluation Criteria:\n{criteria}\n\n"
    "Reply with exactly one word: Correct or Wrong.\n"
)

#: The judge's evaluation criteria by name. ``ssp`` (default) restates, in this project's words, the
#: five criteria of SSP's judge (App. D): same meaning as the reference, numbers equal or very close,
#: the core meaning right for text, wording/language free, and an answer that includes the correct
#: one without conflicting information counts as correct. ``strict`` is this project's stricter
#: variant: an answer naming another entity, adding a wrong claim or hedging between answers is wrong.
JUDGE_CRITERIA = {
    "ssp": (
        "1. The model answer must answer the question and mean the same as the reference answer.\n"
        "2. For a numerical question, the numbers must be equal or very close.\n"
        "3. For a textual question, the core meaning must be right.\n"
        "4. Different wording or a different language is fine when the core answer is the same.\n"
        "5. An answer that includes the correct answer and says nothing that conflicts with it is correct."
    ),
    "strict": (
        "1. The model answer must accurately respond to the question and be consistent with the reference "
        "answer in meaning.\n2. Minor differences in wording, formatting or level of detail are acceptable if "
        "the meaning is the same.\n3. An answer that names a different entity, adds a wrong claim, or hedges "
        "between several answers is wrong."
    ),
}
DEFAULT_JUDGE_CRITERIA = "ssp"

SELECTOR_PROMPT = (
    "You are helping build a multi-hop reasoning question from a knowledge graph by extending a path one "
    "edge at a time. Prefer edges that lead to specific, well-documented entities and make an interesting, "
    "unambiguous chain; avoid generic relations (instance of, country of citizenship for famous people, "
    "etc.) and avoid going back to entities already on the path. Answer 0 to stop extending the path.\n\n"
    "Path so far:\n{path}\n\nCurrent node: {current}\n\nCandidate edges:\n{candidates}\n\n"
    'Reply with JSON only: {{"answer": <number of the chosen edge, or 0 to stop>}}\n'
)

EVIDENCE_ANSWER_PROMPT = (
    "Answer the question in a few words, with no explanation.{evidence_block}\n\nQuestion: {question}\nAnswer:"
)


PROTOCOLS = ("tags", "function_calling")


def check_protocol(protocol: str) -> str:
    """``protocol`` validated: ``"tags"`` (<search>/<answer> tags) or ``"function_calling"`` (tools)."""
    if protocol not in PROTOCOLS:
        raise InvalidArgumentError(f"protocol {protocol!r} unknown; use one of {', '.join(PROTOCOLS)}")
    return protocol


def render_solver(question: str, *, kg_tool: bool = False, protocol: str = "tags") -> str:
    """The Solver's prompt for one question (SSP/Search-R1 format; KG hint when the KG tool is on);
    ``protocol="function_calling"`` asks for the search / answer tools instead of tags."""
    if check_protocol(protocol) == "function_calling":
        return SOLVER_TOOLS_PROMPT.format(question=question.strip(), kg_hint=SOLVER_TOOLS_KG_HINT if kg_tool else "")
    return SOLVER_PROMPT.format(question=question.strip(), kg_hint=SOLVER_KG_HINT if kg_tool else "")


def render_proposer(
    answer: str,
    n_searches: int,
    *,
    subgraph_text: str | None = None,
    evidence: bool = False,
    protocol: str = "tags",
) -> str:
    """The Proposer's prompt: KG-grounded when ``subgraph_text`` is given, SSP vanilla otherwise; the
    search instruction follows ``protocol`` (the question is given in ``<question>`` tags in both)."""
    howto = PROPOSER_SEARCH_HOWTO[check_protocol(protocol)]
    if subgraph_text is not None:
        text = PROPOSER_KG_PROMPT.format(subgraph=subgraph_text, answer=answer, n=n_searches, search_howto=howto)
    else:
        text = PROPOSER_VANILLA_PROMPT.format(answer=answer, n=n_searches, search_howto=howto)
    return text + (EVE_PROPOSER_SUFFIX if evidence else "")


def render_rag_verifier(question: str, materials: Sequence[str]) -> str:
    """SSP's RAG verification prompt over numbered materials."""
    body = "\n".join(f"[{i}] {m.strip()}" for i, m in enumerate(materials, 1))
    return RAG_VERIFIER_PROMPT.format(materials=body, question=question.strip())


def render_judge(question: str, prediction: str, reference: str, *, criteria: str = DEFAULT_JUDGE_CRITERIA) -> str:
    """The LLM-as-a-judge prompt (SSP's layout) with the named :data:`JUDGE_CRITERIA`, asking for a
    one-word verdict. ``criteria="ssp"`` (default) follows SSP's five criteria; ``"strict"`` also
    rejects hedged answers."""
    if criteria not in JUDGE_CRITERIA:
        raise InvalidArgumentError(f"judge criteria {criteria!r} unknown; use one of {', '.join(JUDGE_CRITERIA)}")
    return JUDGE_PROMPT.format(
        question=question.strip(),
        prediction=prediction.strip(),
        reference=reference.strip(),
        criteria=JUDGE_CRITERIA[criteria],
    )


def render_selector(path_lines: Sequence[str], current: str, candidates: Sequence[str]) -> str:
    """The relation-selection prompt of LLM-guided subgraph extraction (kg-paths-wcr Fig. 10)."""
    path = "\n".join(path_lines) if path_lines else "(empty: the current node is the seed)"
    cands = "\n".join(f"{i}. {c}" for i, c in enumerate(candidates, 1))
    return SELECTOR_PROMPT.format(path=path, current=current, candidates=cands)


def render_evidence_answer(question: str, evidence: str | None = None) -> str:
    """EVE's single-turn, no-search answer prompt, with or without the evidence span."""
    block = f"\n\nEvidence: {evidence.strip()}" if evidence else ""
    return EVIDENCE_ANSWER_PROMPT.format(question=question.strip(), evidence_block=block)
