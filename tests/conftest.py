"""Shared fixtures: a tiny hand-built world every test can reason about exactly."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from searchgym.world import Literal, WorldBuilder

# Property tests draw the same examples on every run (the suite is deterministic: a failure found once is found
# again, and a clean run cannot turn red on a new random draw); the example database stays off for the same reason.
settings.register_profile("searchgym", derandomize=True, database=None)
settings.load_profile("searchgym")


def pytest_configure(config):
    """Under ``pytest -n N`` give each worker its share of the cores for torch's (OpenMP) threads.

    Left alone, every worker runs as many threads as the machine has cores, so ``make test``'s 2 workers
    run 4 spinning OpenMP threads on 2 cores and a torch test beside another one runs several times slower
    than alone. Set before torch loads (subprocesses the tests start inherit it); an explicit
    ``OMP_NUM_THREADS`` wins.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)  # Linux
    threads = max(1, cores // int(workers))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:  # a plugin imported it first: the variable no longer applies
        sys.modules["torch"].set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    """Longest first: tests with a raised ``timeout`` marker (the learning test: minutes), then those marked
    ``slow``, then the rest, each in collection order. The longest jobs start at once and, with ``make test``'s
    ``--dist worksteal``, the quick ones fill the other worker around them, so the suite's wall time is near
    its longest test instead of that test plus whatever ran before it."""

    def time_limit(item) -> float:
        marker = item.get_closest_marker("timeout")
        return float(marker.args[0]) if marker and marker.args else 0.0

    items.sort(key=lambda item: (-time_limit(item), item.get_closest_marker("slow") is None))


def build_tiny_world():
    """A 4-hop chain with a distractor and a same-name pair:

    Alice Varn -born in-> Tarsk -located in-> Merovia -capital-> Ostrel ; Merovia -founded-> 1204 (date)
    Bob Varn (namesake of Alice's family) -born in-> Ostrel ; Dura Labs -headquartered in-> Tarsk
    """
    b = WorldBuilder("tiny")
    b.add_relation("born_in", "place of birth")
    b.add_relation("located_in", "located in")
    b.add_relation("capital", "capital")
    b.add_relation("founded", "inception")
    b.add_relation("hq", "headquarters location")
    b.add_entity("E1", "Alice Varn", aliases=["A. Varn"], description="chemist", type="person")
    b.add_entity("E2", "Tarsk", description="city", type="location")
    b.add_entity("E3", "Merovia", aliases=["Republic of Merovia"], description="country", type="location")
    b.add_entity("E4", "Ostrel", description="capital city", type="location")
    b.add_entity("E5", "Bob Varn", description="painter", type="person")
    b.add_entity("E6", "Dura Labs", description="company", type="organisation")
    b.add_triple("E1", "born_in", "E2")
    b.add_triple("E2", "located_in", "E3")
    b.add_triple("E3", "capital", "E4")
    b.add_triple("E3", "founded", Literal("1204", "date"))
    b.add_triple("E5", "born_in", "E4")
    b.add_triple("E6", "hq", "E2")
    docs = {
        "E1": ("Alice Varn", "Alice Varn is a chemist. She was born in Tarsk."),
        "E2": ("Tarsk", "Tarsk is a city located in Merovia. Dura Labs has its headquarters in Tarsk."),
        "E3": ("Merovia", "Merovia is a country founded in 1204. Its capital is Ostrel."),
        "E4": ("Ostrel", "Ostrel is the capital of Merovia. The painter Bob Varn was born here."),
        "E5": ("Bob Varn", "Bob Varn is a painter born in Ostrel."),
        "E6": ("Dura Labs", "Dura Labs is a company headquartered in Tarsk."),
    }
    for i, (eid, (title, text)) in enumerate(docs.items()):
        b.add_document(f"D{i}", title, text, entity=eid)
    b.add_document("D99", "Weather", "It rains often in the northern hills.")
    return b.build()


@pytest.fixture(scope="session")
def tiny_world():
    """The tiny hand-built world (session-scoped; never mutate it)."""
    return build_tiny_world()


@pytest.fixture(scope="session")
def default_world():
    """The embedded default (synthetic) world at its default size."""
    from searchgym.world.synthetic import default_world as _default_world

    return _default_world()
