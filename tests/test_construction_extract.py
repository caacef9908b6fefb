"""Algorithm 1 (kg-paths-wcr App. A.4) rules on small hand-built worlds, and the heuristic selector."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from searchgym.construction import (
    Candidate,
    ExtractionConfig,
    HeuristicSelector,
    Rejected,
    SelectionContext,
    SelectorError,
    Subgraph,
    eligible_seeds,
    extract_subgraph,
)
from searchgym.world import Literal, WorldBuilder
from tests.support.construction_world import build_random_world


class Scripted:
    """Selector driven by a policy ``f(context) -> int``; records every context it saw."""

    def __init__(self, policy):
        self.policy = policy
        self.contexts: list[SelectionContext] = []

    def select(self, ctx: SelectionContext) -> int:
        self.contexts.append(ctx)
        return self.policy(ctx)


def first(ctx):
    return 1 if ctx.candidates else 0


def chain_world(extra=None):
    """S -r1-> A -r2-> B -r3-> C -r4-> D -r5-> E -r6-> F -r7-> G -r8-> H, with traps:
    C -back-> A (revisit), A -dated-> 1999 (literal), C -instance of-> Klass (blocked by default)."""
    b = WorldBuilder("chain")
    names = "S A B C D E F G H".split()
    for n in names:
        b.add_entity(n, f"Node {n}", type="location" if n == "H" else "person")
    b.add_entity("K", "Klass", type="other")
    for i, (x, y) in enumerate(zip(names, names[1:]), 1):
        b.add_triple(x, f"r{i}", y)
    b.add_triple("C", "back", "A")
    b.add_triple("A", "dated", Literal("1999", "date"))
    b.add_relation("P31", "instance of")
    b.add_triple("C", "P31", "K")
    if extra:
        extra(b)
    return b.build()


@pytest.fixture(scope="module")
def chain():
    return chain_world()


@pytest.fixture(scope="module")
def rworld():
    return build_random_world(400, seed=3)


def test_tiny_world_path_and_record_fields(tiny_world):
    sel = Scripted(lambda c: next((i for i, x in enumerate(c.candidates, 1) if x.relation == "capital"), 1))
    sg = extract_subgraph(tiny_world, "E1", sel, ExtractionConfig(num_distractors=(0, 0)), random.Random(0))
    assert [sg.nodes[n].title for n in sg.path] == ["Alice Varn", "Tarsk", "Merovia", "Ostrel"]
    assert sg.relations == ["place of birth", "located in", "capital"]
    assert sg.relation_ids == ["born_in", "located_in", "capital"]
    assert sg.answer == "Ostrel" and sg.answer_type == "location"
    assert sg.waypoints == ["Alice Varn", "Tarsk", "Merovia"]  # seed included, answer excluded
    assert sg.node_count == 4 and sg.seed == "E1"
    assert Subgraph.from_dict(sg.to_dict()).to_dict() == sg.to_dict()
    # the selector saw the path so far as (title) -[relation]-> (title) lines
    assert sel.contexts[2].path_lines == [
        "(Alice Varn) -[place of birth]-> (Tarsk)",
        "(Tarsk) -[located in]-> (Merovia)",
    ]
    assert sel.contexts[2].current == "Merovia"
    assert sorted(sel.contexts[2].candidate_texts) == ["capital -> Ostrel", "inception -> 1204"]


def test_literal_answer_is_terminal_and_typed(tiny_world):
    sel = Scripted(lambda c: next((i for i, x in enumerate(c.candidates, 1) if x.is_literal), 1))
    sg = extract_subgraph(tiny_world, "E1", sel, ExtractionConfig(num_distractors=(0, 0)), random.Random(0))
    assert sg.answer == "1204" and sg.answer_type == "date"
    assert sg.answer_node.is_literal and sg.path[-1] == "lit:date:1204"
    assert sg.metadata["stop"] == "literal"
    assert len(sel.contexts) == 3  # no call after the literal was chosen


def test_literal_never_in_the_middle(chain):
    # always prefer the literal when offered: at A it ends the path there (too short) ...
    sel = Scripted(lambda c: next((i for i, x in enumerate(c.candidates, 1) if x.is_literal), 1))
    with pytest.raises(Rejected) as ei:
        extract_subgraph(chain, "S", sel, ExtractionConfig(), random.Random(0))
    assert ei.value.reason == "too_short"
    # ... and with literal answers disabled it is never offered at all
    sel = Scripted(first)
    extract_subgraph(chain, "S", sel, ExtractionConfig(allow_literal_answers=False), random.Random(0))
    assert not any(c.is_literal for ctx in sel.contexts for c in ctx.candidates)


def test_no_revisit_and_blocklist(chain):
    sel = Scripted(lambda c: len(c.candidates))  # last candidate: "back" to A would be last at C if offered
    sg = extract_subgraph(
        chain, "S", sel, ExtractionConfig(allow_literal_answers=False, num_distractors=(0, 0)), random.Random(0)
    )
    assert len(set(sg.path)) == len(sg.path)
    offered = [(c.relation_id, c.target_id) for ctx in sel.contexts for c in ctx.candidates]
    assert ("back", "A") not in offered and sg.path[:4] == ["S", "A", "B", "C"]
    assert not any(r == "P31" for r, _ in offered)  # default blocklist matches the label "instance of"
    # with an empty blocklist the generic relation becomes a candidate
    sel = Scripted(first)
    extract_subgraph(chain, "S", sel, ExtractionConfig(relation_blocklist=()), random.Random(0))
    assert any(c.relation_id == "P31" for ctx in sel.contexts for c in ctx.candidates)


def test_allowlist_restricts_relations(rworld):
    cfg = ExtractionConfig(relation_allowlist={"part of", "located_in"}, min_hops=1)
    sel = Scripted(first)
    for i, sid in enumerate(eligible_seeds(rworld, cfg)[:30]):
        try:
            sg = extract_subgraph(rworld, sid, sel, cfg, random.Random(i))
        except Rejected as exc:
            assert exc.reason == "too_short"
            continue
        for e in sg.edges():
            assert e.relation_id in {"part_of", "located_in"}
    assert {c.relation_id for ctx in sel.contexts for c in ctx.candidates} == {"part_of", "located_in"}


def test_selector_zero_stops_and_too_short_is_rejected(chain):
    stop_at = lambda d: Scripted(lambda c: 0 if c.depth == d else 1)  # noqa: E731
    sg = extract_subgraph(chain, "S", stop_at(4), ExtractionConfig(allow_literal_answers=False), random.Random(0))
    assert sg.hops == 4 and sg.metadata["stop"] == "selector"
    with pytest.raises(Rejected) as ei:
        extract_subgraph(chain, "S", stop_at(2), ExtractionConfig(allow_literal_answers=False), random.Random(0))
    assert ei.value.reason == "too_short" and "2 hop" in str(ei.value)


def test_max_hops_caps_the_path(chain):
    sel = Scripted(first)
    sg = extract_subgraph(chain, "S", sel, ExtractionConfig(allow_literal_answers=False, max_hops=5), random.Random(0))
    assert sg.hops == 5 and sg.metadata["stop"] == "max_hops" and len(sel.contexts) == 5


def test_at_most_max_candidates_shown_sampled_by_rng():
    def hub(b):
        for i in range(30):
            b.add_entity(f"X{i}", f"Spoke {i}")
            b.add_triple("S", f"s{i}", f"X{i}")

    w = chain_world(hub)
    shown = {}
    for seed in (1, 2):
        sel = Scripted(lambda c: 0)
        with pytest.raises(Rejected):
            extract_subgraph(w, "S", sel, ExtractionConfig(), random.Random(seed))
        assert len(sel.contexts[0].candidates) == 10
        shown[seed] = [c.target_id for c in sel.contexts[0].candidates]
    assert shown[1] != shown[2]
    sel = Scripted(lambda c: 0)
    with pytest.raises(Rejected):
        extract_subgraph(w, "S", sel, ExtractionConfig(max_candidates=4), random.Random(1))
    assert len(sel.contexts[0].candidates) == 4


def test_retries_then_success_or_rejection(chain):
    calls = Counter()

    def flaky(fail_times):
        def policy(ctx):
            calls[ctx.depth] += 1
            if ctx.attempt < fail_times:
                raise SelectorError("injected", "unparseable")
            return 1

        return policy

    cfg = ExtractionConfig(allow_literal_answers=False, max_hops=3)
    sg = extract_subgraph(chain, "S", Scripted(flaky(5)), cfg, random.Random(0))
    assert sg.hops == 3 and calls[0] == 6  # 1 call + 5 retries
    assert sg.metadata["selector_failures"] == 15
    calls.clear()
    with pytest.raises(Rejected) as ei:
        extract_subgraph(chain, "S", Scripted(flaky(6)), cfg, random.Random(0))
    assert ei.value.reason == "selector_failed" and calls[0] == 6
    assert "6 selector attempts failed" in str(ei.value) and "unparseable" in str(ei.value)
    # an out-of-range or non-int answer is a failed call too
    for bad in (99, -1, True, "1", 1.0):
        with pytest.raises(Rejected) as ei:
            extract_subgraph(
                chain, "S", Scripted(lambda c, b=bad: b), ExtractionConfig(max_retries=1), random.Random(0)
            )
        assert ei.value.reason == "selector_failed"


def test_unknown_seed_no_candidates_and_no_eligible_relations(chain, tiny_world):
    with pytest.raises(Rejected) as ei:
        extract_subgraph(chain, "NOPE", Scripted(first), ExtractionConfig(), random.Random(0))
    assert ei.value.reason == "unknown_seed" and "'NOPE'" in str(ei.value)
    with pytest.raises(Rejected) as ei:
        extract_subgraph(chain, "H", Scripted(first), ExtractionConfig(), random.Random(0))
    assert ei.value.reason == "no_candidates"
    with pytest.raises(Rejected) as ei:
        extract_subgraph(
            tiny_world, "E1", Scripted(first), ExtractionConfig(relation_allowlist={"nope"}), random.Random(0)
        )
    assert ei.value.reason == "no_eligible_relations" and "allowlist" in str(ei.value)


def test_no_shortcut_to_seed_neighbours():
    # S -r1-> A -r2-> B ... and S -direct-> C, D -into-> S: C and D are one hop from the seed, so a
    # path S -> A -> B -> C or ... -> D would have an answer trivially adjacent to the seed.
    def extra(b):
        b.add_entity("Z", "Zed")
        b.add_triple("S", "direct", "C")
        b.add_triple("D", "into", "S")
        b.add_triple("B", "jump", "D")
        b.add_triple("B", "jump2", "Z")

    w = chain_world(extra)
    sel = Scripted(lambda c: len(c.candidates) if c.depth else 1)
    sg = extract_subgraph(
        w, "S", sel, ExtractionConfig(allow_literal_answers=False, num_distractors=(0, 0)), random.Random(0)
    )
    assert sg.path == ["S", "A", "B", "Z"]
    later = {c.target_id for ctx in sel.contexts if ctx.depth >= 1 for c in ctx.candidates}
    assert "C" not in later and "D" not in later and "Z" in later
    assert "C" not in sg.path[2:] and "D" not in sg.path


def test_inverse_edges_optional(tiny_world):
    # Bob Varn has out-edge born_in -> Ostrel; inverse walking from Ostrel reaches Merovia (capital, reversed)
    cfg = ExtractionConfig(allow_inverse_edges=True, num_distractors=(0, 0))
    sel = Scripted(
        lambda c: next((i for i, x in enumerate(c.candidates, 1) if not x.forward and x.target_id != "E5"), 1)
    )
    sg = extract_subgraph(tiny_world, "E5", sel, cfg, random.Random(0))
    assert sg.path[:3] == ["E5", "E4", "E3"] and sg.forward[:2] == [True, False]
    e = sg.edges()[1]
    assert (e.head, e.relation_id, e.tail) == ("E3", "capital", "E4")  # KG direction kept
    assert "capital <- Merovia" in sel.contexts[1].candidate_texts
    assert Subgraph.from_dict(sg.to_dict()).forward == sg.forward
    # off by default: E5 -> E4 is a dead end without inverse edges
    with pytest.raises(Rejected):
        extract_subgraph(tiny_world, "E5", Scripted(first), ExtractionConfig(), random.Random(0))


def test_distractors_diverge_inside_the_path(rworld):
    cfg = ExtractionConfig()
    seen_k, seen_d = Counter(), Counter()
    sel = HeuristicSelector(0)
    for i, sid in enumerate(eligible_seeds(rworld, cfg)[:120]):
        try:
            sg = extract_subgraph(rworld, sid, sel, cfg, random.Random(i))
        except Rejected:
            continue
        assert 1 <= sg.metadata["distractors_planned"] <= 3
        assert len(sg.distractors) <= sg.metadata["distractors_planned"]
        seen_d[len(sg.distractors)] += 1
        on_path = set(sg.path)
        for br in sg.distractors:
            assert 1 <= br.diverge_at <= sg.hops - 1
            seen_k[br.diverge_at] += 1
            assert 1 <= len(br.nodes) <= 2 and not on_path & set(br.nodes)
            assert all(not sg.nodes[n].is_literal for n in br.nodes[:-1])  # literals end branches too
        all_branch = [n for br in sg.distractors for n in br.nodes]
        assert len(all_branch) == len(set(all_branch))
        assert sg.node_count == len(on_path) + len(all_branch)
        assert sg.answer_type in {"person", "location", "organisation", "date", "number", "other"}
    assert set(seen_d) >= {1, 2, 3} and set(seen_k) >= {1, 2, 3}


def test_same_rng_same_subgraph(rworld):
    sid = eligible_seeds(rworld)[5]
    a = extract_subgraph(rworld, sid, HeuristicSelector(7), None, random.Random(42)).to_dict()
    b = extract_subgraph(rworld, sid, HeuristicSelector(7), None, random.Random(42)).to_dict()
    assert a == b


def test_config_validation():
    for bad in (
        dict(min_hops=0),
        dict(min_hops=4, max_hops=3),
        dict(max_candidates=0),
        dict(max_retries=-1),
        dict(num_distractors=(2, 1)),
        dict(distractor_hops=(0, 1)),
        dict(relation_blocklist="P31"),
    ):
        with pytest.raises(ValueError):
            ExtractionConfig(**bad)
    assert ExtractionConfig(distractors=(0, 2)).num_distractors == (0, 2)  # the alias earlier versions documented
    assert ExtractionConfig().as_dict()["min_hops"] == 3


def _ctx(cands, depth=0, seed_id="x"):
    return SelectionContext([], "cur", cands, depth, 3, 7, seed_id)


def test_heuristic_prefers_rare_relations_and_documents():
    common = Candidate(
        "P1", "instance of", "a", "A", out_degree=3, relation_frequency=50_000, num_triples=100_000, has_document=True
    )
    rare = Candidate(
        "P2", "discoverer", "b", "B", out_degree=3, relation_frequency=20, num_triples=100_000, has_document=True
    )
    nodoc = Candidate("P2", "discoverer", "c", "C", out_degree=3, relation_frequency=20, num_triples=100_000)
    sel = HeuristicSelector(0)
    picks = Counter(sel.select(_ctx([common, rare], seed_id=f"s{i}")) for i in range(300))
    assert picks[2] > 3 * picks[1]
    picks = Counter(sel.select(_ctx([nodoc, rare], seed_id=f"s{i}")) for i in range(300))
    assert picks[2] > 1.3 * picks[1]
    # deterministic for the same context, whatever happened before
    assert [sel.select(_ctx([common, rare], seed_id="q")) for _ in range(5)] == [
        sel.select(_ctx([common, rare], seed_id="q"))
    ] * 5


def test_heuristic_avoids_dead_ends_before_min_hops_and_stops_after():
    dead = Candidate("P2", "r", "d", "D", out_degree=0, relation_frequency=1, num_triples=1000)
    lit = Candidate("P3", "date", "lit:date:1", "1", is_literal=True, relation_frequency=1, num_triples=1000)
    alive = Candidate("P4", "r2", "e", "E", out_degree=2, relation_frequency=900, num_triples=1000)
    sel = HeuristicSelector(1)
    assert {sel.select(_ctx([dead, lit, alive], depth=0, seed_id=f"s{i}")) for i in range(200)} == {3}
    assert all(sel.select(_ctx([alive], depth=2, seed_id=f"s{i}")) == 1 for i in range(50))  # never stops early
    # target lengths are uniform over 3..7: at depth d a fraction (d - 2) / 5 of extractions stop
    for depth, expected in ((3, 0.2), (5, 0.6), (7, 1.0)):
        stops = sum(sel.select(_ctx([alive], depth=depth, seed_id=f"s{i}")) == 0 for i in range(400)) / 400
        assert abs(stops - expected) < 0.08


def test_heuristic_spreads_lengths_over_3_to_7(rworld):
    lengths = Counter()
    for i, sid in enumerate(eligible_seeds(rworld)[:300]):
        try:
            lengths[extract_subgraph(rworld, sid, HeuristicSelector(0), None, random.Random(i)).hops] += 1
        except Rejected:
            pass
    assert set(lengths) == {3, 4, 5, 6, 7}
    assert min(lengths.values()) >= 0.08 * sum(lengths.values())


def test_to_dict_matches_dataclass_fields(tiny_world):
    """The hand-written to_dict covers every field and equals the generic asdict form."""
    from dataclasses import asdict, fields

    sel = Scripted(first)
    sg = extract_subgraph(tiny_world, "E1", sel, ExtractionConfig(num_distractors=(1, 1)), random.Random(0))
    sg.metadata["nested"] = {"a": [1, 2]}
    d = sg.to_dict()
    assert list(d) == [f.name for f in fields(Subgraph)]
    ref = asdict(sg)
    ref["nodes"] = {k: {**asdict(v), "aliases": list(v.aliases)} for k, v in sg.nodes.items()}
    assert d == ref
    d["metadata"]["nested"]["a"].append(3)
    assert sg.metadata["nested"]["a"] == [1, 2]  # a copy, not a view
    assert Subgraph.from_dict(d).path == sg.path


def test_heuristic_prefers_stopping_over_a_bare_figure():
    qty = Candidate(
        "P9", "population", "lit:quantity:12345", "12345", is_literal=True, relation_frequency=5, num_triples=1000
    )
    entity = Candidate("P2", "r", "e", "E", out_degree=0, relation_frequency=900, num_triples=1000)
    sel = HeuristicSelector(0)
    final_ctx = [i for i in range(200) if sel.target_length(_ctx([qty], seed_id=f"s{i}")) == 4]
    assert final_ctx
    # at depth 3 (>= min_hops) with L = 4 the last hop would be the figure only: stop instead
    assert {sel.select(_ctx([qty], depth=3, seed_id=f"s{i}")) for i in final_ctx} == {0}
    assert {sel.select(_ctx([qty, entity], depth=3, seed_id=f"s{i}")) for i in final_ctx} <= {1, 2}
    with pytest.raises(ValueError):
        HeuristicSelector(0, quantity_weight=-1)
