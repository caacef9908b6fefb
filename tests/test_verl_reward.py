"""verl users who keep verl's own tool loop: ``compute_score``, the dataset rows, and ``searchgym serve``
as the retrieval service of verl's ``SearchTool`` (no verl install needed, except the one test that
runs verl's own search code when it ships)."""

from __future__ import annotations

import json

import pytest
import requests

from searchgym.integrations.environments import EnvSpec
from searchgym.integrations.verl.data import dataset_rows, task_options, write_dataset
from searchgym.integrations.verl.reward import compute_score, split_turns
from searchgym.retrieval import BM25Retriever, RetrievalServer


@pytest.fixture(scope="module")
def rows():
    return dataset_rows(EnvSpec("KGSolver-v0"), 3, rewards="wcr")


def tool_loop_response(turns: list[str]) -> str:
    """A decoded response as verl's tool loop builds it (ChatML turns with tool responses between)."""
    out = []
    for i, t in enumerate(turns):
        out.append(f"{t}<|im_end|>")
        if i < len(turns) - 1:
            out.append(
                '\n<|im_start|>user\n<tool_response>\nDoc 1 (Title: "X") text</tool_response><|im_end|>\n'
                "<|im_start|>assistant\n"
            )
    return "".join(out)


def test_split_turns_drops_tool_blocks():
    text = tool_loop_response(["<think>a</think><search>q1</search>", "<answer>B</answer>"])
    assert split_turns(text) == ["<think>a</think><search>q1</search>", "<answer>B</answer>"]
    assert split_turns("<search>q</search>\n<information>Doc 1</information>\n<answer>x</answer>") == [
        "<search>q</search>",
        "<answer>x</answer>",
    ]


def test_compute_score_replays_the_turns_through_the_env(rows):
    row = rows[0]
    gold = row["reward_model"]["ground_truth"]
    task = json.loads(row["extra_info"]["searchgym"]["task"])
    think = " ".join(task["waypoints"])  # the agent's reasoning names every waypoint: full WCR coverage
    right = tool_loop_response(
        [
            f"<think>{think}</think><search>{task['question']}</search>",
            f"<think>{think}</think><answer>{gold[0]}</answer>",
        ]
    )
    good = compute_score("searchgym", right, gold, row["extra_info"])
    assert good["outcome"] == 1.0 and good["wcr_coverage"] == 1.0 and good["score"] == 1.0
    wrong = compute_score("searchgym", right.replace(f"<answer>{gold[0]}", "<answer>nobody"), gold, row["extra_info"])
    assert wrong["outcome"] == 0.0 and wrong["score"] == pytest.approx(0.3)  # WCR's partial credit, alpha 0.3
    bare = compute_score("searchgym", right.replace(f"<answer>{gold[0]}", "<answer>nobody"), gold)
    assert bare["score"] == 0.0  # without the row's task and rewards: exact match alone
    plain = compute_score("searchgym", f"<answer>{gold[0]}</answer>", gold)  # no extra_info: exact match only
    assert plain == {"score": 1.0, "outcome": 1.0, "unfinished": 0.0, "turns": 1.0}


def test_compute_score_flags_an_unfinished_response(rows):
    out = compute_score("searchgym", "<think>hmm</think><search>x</search>", rows[0]["reward_model"]["ground_truth"])
    assert out["unfinished"] == 1.0 and out["score"] == 0.0


def test_compute_score_bad_input():
    with pytest.raises(ValueError, match="needs a ground_truth"):
        compute_score("searchgym", "<answer>x</answer>", [])
    with pytest.raises(ValueError, match="unknown reward 'wrc'"):
        compute_score("searchgym", "<answer>x</answer>", "x", {"searchgym": {"rewards": "wrc"}})


def test_reward_options_travel_in_the_rows_and_shape_compute_score(rows, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    no_credit = {"wcr": {"waypoint_answer_credit": False}}
    written = dataset_rows(EnvSpec("KGSolver-v0"), 3, rewards="wcr", reward_options=no_credit)
    (row,) = pq.read_table(write_dataset(tmp_path / "train.parquet", written[:1])).to_pylist()
    assert json.loads(row["extra_info"]["searchgym"]["reward_options"]) == no_credit
    assert "reward_options" not in rows[0]["extra_info"]["searchgym"]  # none given: none written
    gold = row["reward_model"]["ground_truth"]
    task = json.loads(row["extra_info"]["searchgym"]["task"])
    # reasoning through every waypoint, then a wrong answer that is the seed (a waypoint)
    think = " ".join(task["waypoints"])
    response = tool_loop_response([f"<think>{think}</think><answer>{task['waypoints'][0]}</answer>"])
    paid = compute_score("searchgym", response, gold, rows[0]["extra_info"])
    assert paid["score"] == pytest.approx(0.3)  # Eq. 6: WCR's partial credit
    for extra in (row["extra_info"], {"searchgym": {**row["extra_info"]["searchgym"], "reward_options": no_credit}}):
        withheld = compute_score("searchgym", response, gold, extra)  # the row's JSON, or a mapping
        assert withheld["score"] == 0.0 and withheld["wcr_answered_waypoint"] == 1.0
    with pytest.raises(ValueError, match="reward 'wcr' has no option credit; its options: alpha"):
        dataset_rows(EnvSpec("KGSolver-v0"), 1, rewards="wcr", reward_options={"wcr": {"credit": False}})
    with pytest.raises(ValueError, match="given with no reward stack"):
        dataset_rows(EnvSpec("KGSolver-v0"), 1, reward_options=no_credit)
    torn = {"searchgym": {**row["extra_info"]["searchgym"], "reward_options": '{"wcr": {"waypoint'}}
    with pytest.raises(ValueError, match="extra_info.searchgym.reward_options is not JSON"):
        compute_score("searchgym", response, gold, torn)


def test_dataset_rows_round_trip_through_parquet(rows, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    path = write_dataset(tmp_path / "train.parquet", rows)
    back = pq.read_table(path).to_pylist()
    assert [r["agent_name"] for r in back] == ["searchgym_solver"] * 3
    both = dataset_rows(EnvSpec("KGSelfPlay-v0"), 2, agent_names=("searchgym_proposer", "searchgym_selfplay"))
    assert [r["agent_name"] for r in both] == ["searchgym_proposer", "searchgym_selfplay"] * 2
    seed, options = task_options(back[1]["extra_info"]["searchgym"])
    assert seed == 1 and options["task"].answers == back[1]["reward_model"]["ground_truth"]
    assert back[1]["prompt"][0]["content"].count(options["task"].question) == 1


# verl's SearchTool (verl/tools/utils/search_r1_like_utils.py, read at volcengine/verl@b178a3c, Jan 2026):
# POST {"queries": [...], "topk": k, "return_scores": true} with these headers, then reads
# result[i][j]["document"]["contents"], title = first line, text = the rest.
VERL_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def verl_passages2string(retrieval_result):
    """verl's ``_passages2string`` (same commit), verbatim in behaviour."""
    out = ""
    for idx, doc_item in enumerate(retrieval_result):
        content = doc_item["document"]["contents"]
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        out += f"Doc {idx + 1} (Title: {title})\n{text}\n\n"
    return out.strip()


def test_searchgym_serve_answers_verls_search_tool_payload(default_world):
    with RetrievalServer(BM25Retriever.from_world(default_world), port=0) as srv:
        payload = {"queries": ["capital of Kosor", "Draezendgard population harbour"], "topk": 2, "return_scores": True}
        r = requests.post(srv.url + "/retrieve", headers=VERL_HEADERS, json=payload, timeout=10)
        assert r.status_code == 200
        result = r.json()["result"]
        assert len(result) == 2 and all(len(hits) == 2 for hits in result)
        for hit in result[0]:
            assert set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"}
            assert isinstance(hit["score"], float)
        text = verl_passages2string(result[0])
        assert text.startswith('Doc 1 (Title: "') and "Doc 2 (Title:" in text


def test_verls_own_search_code_against_searchgym_serve(default_world):
    utils = pytest.importorskip(
        "verl.tools.utils.search_r1_like_utils",
        reason="verl 0.9.1's wheel ships no search tool; the pinned contract above covers it",
    )
    with RetrievalServer(BM25Retriever.from_world(default_world), port=0) as srv:
        text, meta = utils.perform_single_search_batch(srv.url + "/retrieve", ["capital of Kosor"], topk=3)
        assert meta["status"] == "success" and meta["total_results"] == 3
        assert json.loads(text)["result"].startswith('Doc 1 (Title: "')
