"""Helpers for the env tests: a hand-built subgraph of the tiny world, stub verifiers/retrievers,
and a loop that plays one episode with an agent."""

from __future__ import annotations

from searchgym.core.subgraph import Branch, Subgraph, SubgraphNode, literal_node_id
from searchgym.retrieval.base import Hit, Retriever
from searchgym.scoring.rag_verifier import VerifierResult


def tiny_subgraph() -> Subgraph:
    """Alice Varn -place of birth-> Tarsk -located in-> Merovia -capital-> Ostrel (+ a distractor)."""
    lit = literal_node_id("date", "1204")
    nodes = {
        "E1": SubgraphNode("E1", "Alice Varn", ("A. Varn",), "person"),
        "E2": SubgraphNode("E2", "Tarsk", (), "location"),
        "E3": SubgraphNode("E3", "Merovia", ("Republic of Merovia",), "location"),
        "E4": SubgraphNode("E4", "Ostrel", (), "location"),
        lit: SubgraphNode(lit, "1204", (), "date", True),
    }
    return Subgraph(
        id="tiny-0",
        seed="E1",
        path=["E1", "E2", "E3", "E4"],
        relations=["place of birth", "located in", "capital"],
        relation_ids=["born_in", "located_in", "capital"],
        nodes=nodes,
        distractors=[Branch(2, [lit], ["inception"], ["founded"])],
        answer_type="location",
    )


class AcceptAll:
    """A verifier that accepts every question (isolates reward logic from the reader)."""

    def verify(self, question, answers, materials, noise_pool=(), rng=0):
        return VerifierResult(True, None, answers[0] if not isinstance(answers, str) else answers)


class RejectAll:
    """A verifier that rejects every question as unanswerable."""

    def verify(self, question, answers, materials, noise_pool=(), rng=0):
        return VerifierResult(False, "verifier_incorrect", "nothing")


class RecordingVerifier(AcceptAll):
    """Accepts and records what it was given."""

    def __init__(self):
        self.calls = []

    def verify(self, question, answers, materials, noise_pool=(), rng=0):
        self.calls.append({"question": question, "materials": list(materials), "noise_pool": list(noise_pool)})
        return super().verify(question, answers, materials, noise_pool, rng)


class UselessRetriever(Retriever):
    """Always returns the same irrelevant document (the path-following agent must then fail)."""

    def batch_search(self, queries, k=3):
        return [[Hit("junk", "Weather", "It rains often in the northern hills.", 1.0)] for _ in queries]


def play(env, agent, *, seed=None, options=None, max_steps=200):
    """Play one episode; returns (list of per-step (obs, reward, terminated, truncated, info), reset info)."""
    obs, info = env.reset(seed=seed, options=options)
    first = info
    steps = []
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        steps.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            return steps, first
    raise AssertionError("episode did not end")
