"""``--threads`` on the commands that generate: ``train`` and ``sft`` set the config field ``threads``
(``cpu_threads`` before, still read with a warning), ``eval`` sets torch's threads for in-process agents only,
and both refuse a count below 1."""

from __future__ import annotations

import argparse

import pytest

from searchgym.cli import build_parser
from searchgym.errors import InvalidArgumentError


def test_train_threads_sets_the_threads_field():
    from searchgym.commands.train import resolve_config

    def resolve(*argv):
        return resolve_config(build_parser().parse_args(["train", *argv]))

    assert resolve("--size", "cpu", "--threads", "2").threads == 2
    assert resolve("--size", "cpu").threads == 1  # the cpu size's own setting stays the default
    with pytest.raises(InvalidArgumentError, match=r"--threads 0 \(at least 1\)"):
        resolve("--threads", "0")
    with pytest.raises(InvalidArgumentError, match=r"--threads 99999999999999999999 \(at most 1024\)"):
        resolve("--threads", "99999999999999999999")  # torch's set_num_threads overflowed, after the model loaded


def test_eval_threads_defaults_to_one_and_applies_to_in_process_agents():
    torch = pytest.importorskip("torch")
    from searchgym.commands.evaluate import set_threads

    args = build_parser().parse_args(["eval", "--agent", "transformers", "--model", "smollm2"])
    assert args.threads == 1
    before = torch.get_num_threads()
    try:
        set_threads(argparse.Namespace(agent="transformers", threads=1))
        assert torch.get_num_threads() == 1
        set_threads(argparse.Namespace(agent="scripted", threads=3))  # no torch work in this process: untouched
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(InvalidArgumentError, match="--threads must be >= 1"):
        set_threads(argparse.Namespace(agent="openai", threads=0))


def test_sft_and_demo_take_threads():
    from searchgym.commands.sft import resolve_sft_config

    parser = build_parser()
    assert resolve_sft_config(parser.parse_args(["sft", "--data", "d.jsonl", "--threads", "1"])).threads == 1
    assert parser.parse_args(["demo", "--threads", "2"]).threads == 2
    assert parser.parse_args(["demo"]).threads is None  # the demo runs alone: torch's default, every core
