"""Untrusted text of any length is read in linear time, and never makes a reader raise.

Model output (actions, tool calls, selector replies, verl responses, proposed questions) and corpus text
(documents, reader passages) go through regular expressions and hand-written scans. Those that were
super-linear -- two adjacent quantifiers splitting one whitespace run (``<\\s*/?\\s*``: a lone ``<`` before
8,000 spaces took 3 s, 200,000 about half an hour), a lazy group rescanning to the end from every unclosed
opening tag, a list scan per document -- or that raised ``RecursionError`` on deeply nested JSON are fed a
200,000-character pathological input here and must return what a short one returns. The 60 s timeouts are
hang guards only; nothing here measures time (``benchmarks/bench_pathological_text.py`` does).

The second half proves the rewrites change no result: each old pattern is written here as the oracle and
compared with the new code on random tag soup.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.agents import scripted
from searchgym.agents.scripted import SimpleExtractor
from searchgym.construction import question_templates
from searchgym.construction.question_templates import read_path_question
from searchgym.construction.selectors import SelectorError, _unfenced, parse_selector_reply
from searchgym.core.text_scan import split_doc_headers, tag_bodies
from searchgym.core.types import Task, Trajectory, Turn
from searchgym.envs import function_calling, protocol
from searchgym.envs.function_calling import parse_message
from searchgym.envs.protocol import ERR_BAD_SEARCH_JSON, ERR_BAD_TOOL_CALL, ERR_NO_ACTION, parse_action
from searchgym.integrations.verl import reward as verl_reward
from searchgym.llm.tiny_models import question_of
from searchgym.scoring.extractive_reader import ExtractiveReader
from searchgym.scoring.outcomes import document_materials
from searchgym.scoring.rag_verifier import materials_from_trajectory
from searchgym.training.demonstrations import _titles
from tests.support.selfplay_bench import benchmark_module

N = 200_000  # characters of each pathological input
SHORT = 40

# ----------------------------------------------------------------------------------------------- the inputs
#: the benchmark's pathological inputs (one list for both: what is timed there is what must return here), and one
#: more: an unclosed tag whose ``<`` starts a whitespace run
GENERATORS = {
    **benchmark_module("bench_pathological_text").GENERATORS,
    "<answer>x< + spaces + !": lambda n: "<answer>x<" + " " * n + "!",
}
#: those that parse the same at every length (nested JSON decodes when short, not when deep: tested apart below)
SAME_AT_ANY_LENGTH = sorted(name for name in GENERATORS if "nested JSON" not in name)


def _deep_search(n: int) -> str:
    return "<search>" + '{"a":' * (n // 5) + "1" + "}" * (n // 5) + "</search>"


def _deep_tool_call(n: int) -> str:
    return "<tool_call>" + "[" * (n // 2) + "]" * (n // 2) + "</tool_call>"


def _deep_tool_arguments(n: int) -> str:
    return '<tool_call>{"name": "search", "arguments": "' + "[" * (n // 2) + "]" * (n // 2) + '"}</tool_call>'


def _kind(act: protocol.ParsedAction) -> tuple:
    """What an env acts on: the error codes and which actions were found (not their sizes)."""
    return (
        tuple(act.errors),
        act.answer is not None,
        act.question is not None,
        bool(act.searches),
        act.forged_information,
    )


def _trajectory(information: str) -> Trajectory:
    task = Task(id="t", question="Where was Alice Varn born?", answers=["Tarsk"])
    traj = Trajectory(role="proposer", task=task, prompt="p")
    traj.turns.append(Turn(index=0, action="<search>x</search>", information=information))
    return traj


# ------------------------------------------------------------------------------------- hang guards: parsing
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SAME_AT_ANY_LENGTH)
def test_parse_action_of_any_length_reads_like_a_short_one(name):
    make = GENERATORS[name]
    long = parse_action(make(N), max_chars=10 * N)
    assert _kind(long) == _kind(parse_action(make(SHORT), max_chars=10 * N))
    assert not long.truncated


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SAME_AT_ANY_LENGTH)
def test_parse_message_of_any_length_reads_like_a_short_one(name):
    make = GENERATORS[name]
    for wrap in (lambda t: t, lambda t: {"role": "assistant", "content": t}):
        long = parse_message(wrap(make(N)), max_chars=10 * N)
        short = parse_message(wrap(make(SHORT)), max_chars=10 * N)
        assert _kind(long.parsed) == _kind(short.parsed)
        assert len(long.calls) == len(short.calls)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text, code",
    [
        (_deep_search(N), ERR_BAD_SEARCH_JSON),
        (_deep_tool_call(N), ERR_BAD_TOOL_CALL),
        (_deep_tool_arguments(N), ERR_BAD_TOOL_CALL),
    ],
    ids=["search_json", "tool_call", "tool_call_arguments"],
)
def test_json_nested_too_deeply_is_a_bad_action_not_a_recursion_error(text, code):
    act = parse_action(text, max_chars=10 * N)
    assert act.errors == [code] and not act.searches
    turn = parse_message(text, max_chars=10 * N)  # a <search> tag is not a call there: no action at all
    assert all(c.error for c in turn.calls) and not turn.parsed.searches
    assert turn.parsed.errors == ([ERR_BAD_TOOL_CALL] if code == ERR_BAD_TOOL_CALL else [ERR_NO_ACTION])


# ---------------------------------------------------------------------------------- hang guards: env steps
@pytest.fixture(scope="module")
def envs(tiny_world):
    """Each text env on the tiny world, reading whole actions of up to 10·N characters."""
    kw = {"world": tiny_world, "max_action_chars": 10 * N}
    made = {
        "solver": gym.make("KGSolver-v0", **kw),
        "solver_function_calling": gym.make("KGSolver-v0", protocol="function_calling", **kw),
        "proposer": gym.make("KGProposer-v0", **kw),
        "selfplay": gym.make("KGSelfPlay-v0", **kw),
        "solver_default_cut": gym.make("KGSolver-v0", world=tiny_world),
    }
    yield made
    for env in made.values():
        env.close()


def _step(env, text: str):
    env.reset(seed=0)
    if isinstance(env.action_space, gym.spaces.Tuple):
        _, _, terminated, truncated, info = env.step((text,) + ("",) * (len(env.action_space) - 1))
        turn = info["trajectories"][0].turns[-1]
    else:
        _, _, terminated, truncated, info = env.step(text)
        turn = info["trajectory"].turns[-1]
    return turn.error, terminated or truncated


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "env_name", ["solver", "solver_function_calling", "proposer", "selfplay", "solver_default_cut"]
)
@pytest.mark.parametrize("name", ["< + spaces", "< / + spaces", "< + U+3000", "<answer>x< + spaces + !", "< repeated"])
def test_env_step_on_a_whitespace_run_after_lt_is_an_invalid_action(envs, env_name, name):
    env = envs[env_name]
    assert _step(env, GENERATORS[name](N)) == _step(env, GENERATORS[name](SHORT))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("env_name", ["solver", "solver_function_calling", "proposer"])
def test_env_step_on_the_documented_worst_case_returns_no_action(envs, env_name):
    assert _step(envs[env_name], "<" + " " * N) == (ERR_NO_ACTION, False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [_deep_search, _deep_tool_call, _deep_tool_arguments])
@pytest.mark.parametrize("env_name", ["solver", "solver_function_calling", "proposer"])
def test_env_step_on_deeply_nested_json_returns(envs, env_name, make):
    text = make(N)
    parsed = (
        parse_message(text).parsed if env_name.endswith("function_calling") else parse_action(text, max_chars=10 * N)
    )
    assert _step(envs[env_name], text) == (";".join(parsed.errors), False)


# ------------------------------------------------------------------- hang guards: scoring and other readers
@pytest.mark.timeout(60)
def test_selector_reply_of_any_length_is_refused_or_read():
    for text in ("```" + " " * N + "x", "```json" + " " * N + "x" + " " * N, "[" * N, "{" * N):
        with pytest.raises(SelectorError) as err:
            parse_selector_reply(text, 3)
        assert err.value.kind == "unparseable"
    assert parse_selector_reply("```json\n" + '{"answer": 2}' + " " * N + "\n```", 3) == 2


@pytest.mark.timeout(60)
def test_unclosed_information_blocks_are_scanned_once():
    opens = "<information>" * (N // 13)
    assert materials_from_trajectory(_trajectory(opens)) == []
    assert materials_from_trajectory(_trajectory(opens + "x</information>")) == [opens[13:] + "x"]
    assert tag_bodies("<a>" * N, "<a>", "</a>") == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tag", ["information", "tool_response", "Information"])
def test_verl_split_turns_of_unclosed_observation_tags(tag):
    text = f"<{tag}>" * (N // (len(tag) + 2)) + "<answer>x</answer>"
    assert verl_reward.split_turns(text) == [text]
    closed = "<search>q</search>" + text + f"</{tag.upper()}>" + "<answer>y</answer>"
    assert verl_reward.split_turns(closed) == ["<search>q</search>", "<answer>y</answer>"]


@pytest.fixture(scope="module")
def reader(tiny_world):
    return ExtractiveReader(tiny_world)


@pytest.mark.timeout(60)
def test_reader_on_a_long_passage_and_a_long_question(reader):
    question = "Where was Alice Varn born?"
    for passage in ('Doc 1 (Title: "' * (N // 15), "Alice Varn " + " " * N + "was born in Tarsk.", "1,000," * (N // 6)):
        assert isinstance(reader.answer(question, [passage]), str)
    heads = 'Doc 1 (Title: "' * (N // 15)
    assert reader.answer(question, [heads + '\nDoc 2 (Title: "Alice Varn") Alice Varn was born in Tarsk.']) == "Tarsk"
    for q in ("What is a" + " " * N + "b?", "What is " + "the capital of " * (N // 15) + "Merovia?"):
        assert isinstance(reader.answer(q, ["Merovia is a country. Its capital is Ostrel."]), str)


@pytest.mark.timeout(60)
def test_read_path_question_of_any_length_has_no_reading(tiny_world):
    def is_name(text: str) -> bool:
        return text in ("Merovia", "Tarsk")

    assert read_path_question("What is a" + " " * N + "b?", is_name) == []
    assert read_path_question("What is " + "the capital of " * (N // 15) + "Merovia?", is_name) == []
    (reading,) = read_path_question("What is the capital of Merovia?", is_name)
    assert reading[0] == "Merovia" and len(reading[1]) == 1


@pytest.mark.timeout(60)
def test_scripted_extractor_and_document_readers_on_long_text():
    ext = SimpleExtractor()
    for text in ("Alice" + " " * N + "!", "Doc" + " " * N + "x", 'Doc 1 (Title: "' * (N // 15)):
        assert ext.extract(text, "Bob", "", "Where?") == ext.extract(text[:SHORT] + text[-1], "Bob", "", "Where?")
    doc = 'Doc 1 (Title: "Alice") Alice was born in Tarsk.'
    assert ext.extract(doc, "Alice", "", "Alice" + " " * N + "?") == ext.extract(doc, "Alice", "", "Alice ?") == "Tarsk"
    assert _titles('Doc 1 (Title: "' * (N // 15)) == []
    docs = "".join(f'Doc {i} (Title: "t{i}") body {i}\n' for i in range(N // 30))
    assert len(document_materials(_trajectory(protocol.format_information(docs)))) == N // 30


@pytest.mark.timeout(60)
def test_tiny_model_question_of_a_long_context():
    assert question_of("Question: x" * (N // 11)) == ""
    assert question_of("Question: x" * (N // 11) + "\nQuestion: y\n") == "y"


# ============================================================================ equivalence with the old patterns
OLD_TAG = re.compile(r"<\s*(/?)\s*(think|search|answer|question|evidence|tool_call)\s*>", re.IGNORECASE)
OLD_PARTIAL_CLOSE = re.compile(r"<\s*(?:/\s*[A-Za-z]*\s*)?$")
OLD_ANY_TAG = re.compile(r"<\s*/?\s*[a-zA-Z_]+\s*>")
OLD_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(.*?)\n?\s*```$", re.DOTALL)
OLD_DOC = re.compile(r'Doc\s+\d+\s*\(Title:\s*"(.*?)"\)\s*')
OLD_TITLES = re.compile(r'Doc \d+ \(Title: "(.*?)"\)')
OLD_INSERTED = re.compile(
    r"<\s*(tool_response|information)\s*>.*?<\s*/\s*\1\s*>"
    r"|<\|im_start\|>\s*(?:user|tool|system)\b.*?(?:<\|im_end\|>|$)",
    re.IGNORECASE | re.DOTALL,
)
_WH_WORDS = sorted({w.lower() for w in question_templates._NOUNS.values()} | {"what"}, key=len, reverse=True)
OLD_WH = re.compile(rf"^\s*(?:{'|'.join(map(re.escape, _WH_WORDS))})\s+is\s+(.+?)\s*\?\s*$", re.IGNORECASE | re.DOTALL)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
OLD_SPAN = re.compile(
    rf"\b\d{{1,2}} (?:{_MONTHS}) \d{{1,4}}\b"
    rf"|\b(?:{_MONTHS}) \d{{1,2}}, \d{{1,4}}\b"
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+(?:\.\d+)?\b"
    r"|\b[A-Z][\w'\-]*(?:\s+(?:of|de|du|la|le|von|van|der)?\s*[A-Z][\w'\-]*)*"
)
OLD_QUESTION = re.compile(r"Question:\s*(.+?)\n", re.S)

#: whitespace re's \s and str.isspace() agree on, and letters that match ASCII ones only ignoring case
_ODD = [" ", "  ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", "İ", "ı", "ſ", "\u212a"]
_PROSE = ["x", "a", "Alice", "Varn", "of", "de", "B", "1", "12", ",", ".", "!", "?", '"', "(", ")", ":", ">", "<", "/"]


def _soup(*fragments: str, size: int = 30):
    """Random text: mostly the given fragments, then odd whitespace/letters, prose pieces and any text."""
    tags = st.sampled_from(fragments)
    pieces = st.one_of(tags, tags, tags, st.sampled_from(_ODD + _PROSE), st.text(max_size=3))
    return st.lists(pieces, max_size=size).map("".join)


_TAG_SOUP = _soup(
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "< / Answer >",
    "<answer",
    "</ answer",
    "<QUESTION>",
    "<evidence>",
    "</evidence >",
    "<tool_call>",
    "</tool_call>",
    "<Tool_Call >",
    "think",
    "answer",
    "tool_call",
    "< ",
    "</",
    "<\n/",
)


@settings(max_examples=400, deadline=None)
@given(_TAG_SOUP)
def test_tag_pattern_finds_what_the_old_one_found(text):
    old = [(m.start(), m.end(), m.group(1) == "/", m.group(2).lower()) for m in OLD_TAG.finditer(text)]
    new = [(m.start(), m.end(), m.group(1) is not None, m.group(2).lower()) for m in protocol._TAG_RE.finditer(text)]
    assert new == old


@settings(max_examples=400, deadline=None)
@given(_TAG_SOUP)
def test_partial_close_pattern_finds_what_the_old_one_found(text):
    for tail in (text, text + "</ques", text + "</ \n", text + "<  "):
        old, new = OLD_PARTIAL_CLOSE.search(tail), protocol._PARTIAL_CLOSE_RE.search(tail)
        assert (new and (new.start(), new.group(0))) == (old and (old.start(), old.group(0)))


@settings(max_examples=400, deadline=None)
@given(_TAG_SOUP)
def test_any_tag_pattern_removes_what_the_old_one_removed(text):
    assert function_calling._ANY_TAG.sub(" ", text) == OLD_ANY_TAG.sub(" ", text)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["", "```", "```json", "```JSON", "```Json", " ```json\n", "``"]),
    _soup("```", "json", "JSON", '{"answer": 1}', "`", "\n"),
    st.sampled_from(["", "```", "`", "\n```", "``` "]),
)
def test_unfenced_reply_is_what_the_old_fence_pattern_gave(head, body, tail):
    s = (head + body + tail).strip()  # parse_selector_reply strips the reply before unfencing it
    m = OLD_FENCE.match(s)
    assert _unfenced(s) == (m.group(1).strip() if m else s)


@settings(max_examples=400, deadline=None)
@given(_soup("<information>", "</information>", "<information", "information>", "<", "/"))
def test_tag_bodies_are_what_findall_gave(text):
    for open_tag, close_tag in (("<information>", "</information>"), ("<", ">"), ("a", "a")):
        old = re.findall(re.escape(open_tag) + "(.*?)" + re.escape(close_tag), text, re.DOTALL)
        assert tag_bodies(text, open_tag, close_tag) == old


_DOC_SOUP = _soup('Doc 1 (Title: "', "Doc  12", '(Title:  "', "Doc", '")', '"', ")", "\n", "T", 'Doc 3(Title:\n"')


@settings(max_examples=400, deadline=None)
@given(_DOC_SOUP)
def test_doc_headers_split_and_titles_are_what_the_old_patterns_gave(text):
    assert split_doc_headers(text) == OLD_DOC.split(text)
    assert _titles(text) == OLD_TITLES.findall(text)


def _old_split_turns(solution_str: str) -> list[str]:
    """searchgym.integrations.verl.reward.split_turns as it was, with re.split."""
    turns = []
    for i, piece in enumerate(OLD_INSERTED.split(solution_str)):
        if i % 2 == 1 or piece is None:
            continue
        text = verl_reward._MARKERS.sub("", piece).strip()
        if text:
            turns.append(text)
    return turns


_BLOCKS = (
    "<information>",
    "</information>",
    "<Information>",
    "</INFORMATION >",
    "< tool_response >",
    "</ tool_response>",
)
_ODD_BLOCKS = ("<tool_reſponse>", "</tool_reſponse>", "<İnformation>", "</ınformation>", "<\u212aey>", "< information")
_CHAT = ("<|im_start|>", "<|im_start|>user", "<|im_start|> tool", "<|IM_START|>System", "<|im_start|>assistant\n")


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(_soup(*_BLOCKS), _soup(*_BLOCKS, *_ODD_BLOCKS), _soup(*_BLOCKS, *_CHAT, "<|im_end|>", "<|endoftext|>"))
)
def test_verl_observation_blocks_are_what_the_old_pattern_found(text):
    assert verl_reward._inserted_spans(text) == [m.span() for m in OLD_INSERTED.finditer(text)]
    assert verl_reward.split_turns(text) == _old_split_turns(text)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["", " ", "  ", "\n"]),
    st.sampled_from(_WH_WORDS + ["What  place", "WHO", "whom"]),
    _soup("is", "?", " ", "the capital of ", "Merovia", "\n"),
)
def test_asked_phrase_is_what_the_old_question_pattern_captured(lead, word, rest):
    for question in (lead + word + rest, lead + word + " is" + rest, lead + word + " is " + rest + "?"):
        m = OLD_WH.match(question)
        assert question_templates._asked_phrase(question) == (m.group(1) if m else None)


@settings(max_examples=400, deadline=None)
@given(_soup("Alice", "Varn", "Bob", "of", "de", "van", "der", "La", "3 May 1204", "May 3, 1204", "1,234", "O'Neil"))
def test_scripted_span_pattern_finds_what_the_old_one_found(text):
    assert [m.span() for m in scripted._SPAN_RE.finditer(text)] == [m.span() for m in OLD_SPAN.finditer(text)]


@settings(max_examples=400, deadline=None)
@given(_soup("Question:", "Question: x", "\n", "Question:\n", "y"))
def test_question_of_is_what_the_old_findall_gave(text):
    found = OLD_QUESTION.findall(text)
    assert question_of(text) == (found[-1].strip() if found else "")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(['Doc 1 (Title: "a") x', 'Doc 2 (Title: "b") y', "fact", "", "\n"]), max_size=12))
def test_document_materials_are_the_old_distinct_documents_in_order(lines):
    traj = _trajectory(protocol.format_information("\n".join(lines)))
    old: list[str] = []
    for block in [traj.turns[0].information[len("\n<information>") : -len("</information>\n")]]:
        starts = [m.start() for m in re.finditer(r'^Doc \d+ ?\(Title: "', block, re.MULTILINE)] or [0]
        if starts[0] != 0:
            starts.insert(0, 0)
        for a, b in zip(starts, starts[1:] + [len(block)]):
            piece = block[a:b].strip()
            if piece and piece not in old:
                old.append(piece)
    assert document_materials(traj) == old
