"""The glossary (docs/glossary.md) and the config reference (docs/config.md): every config field users set
has help text, ``train`` / ``sft`` / ``eval --help`` print each field, docs/config.md is current, and every
renamed flag, config key and keyword argument still works under its old spelling with a warning naming the new."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from searchgym.cli import build_parser
from searchgym.core.config_fields import config_fields, fields_markdown, missing_help
from searchgym.core.renamed import RenamedWarning, renamed_kwargs
from searchgym.errors import InvalidArgumentError
from searchgym.training.selfplay_config import TrainConfig
from searchgym.training.sft_config import SFTConfig

ROOT = Path(__file__).resolve().parents[1]


def _gen_config():
    spec = importlib.util.spec_from_file_location("gen_config", ROOT / "docs" / "gen_config.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen_config()


@pytest.mark.parametrize("cls", GEN.CONFIGS, ids=lambda c: c.__name__)
def test_every_config_field_has_help(cls):
    assert config_fields(cls), f"{cls.__name__} has no fields"
    assert missing_help(cls) == []


def test_missing_help_is_reported():
    from dataclasses import dataclass, field

    @dataclass
    class Half:
        documented: int = field(default=1, metadata={"help": "Says what it does."})
        bare: int = 2

    assert missing_help(Half) == ["bare"]
    assert "| `bare` | `int` | `2` |  |" in fields_markdown(Half)


def test_config_reference_page_is_current():
    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == GEN.render(), (
        "docs/config.md is stale: run `python docs/gen_config.py`"
    )
    assert GEN.main(["--check"]) == 0


@pytest.mark.parametrize(
    ("command", "classes"),
    [(["train"], (TrainConfig,)), (["sft"], (SFTConfig,)), (["eval"], tuple(GEN.CONFIGS[3:5]))],
)
def test_help_prints_every_config_field(command, classes, capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([*command, "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    for cls in classes:
        for f in config_fields(cls):
            assert f"  {f.name} ({f.type}, default {f.default})" in text, f.name
            assert f.help.split()[0] in text


# ---------------------------------------------------------------- old spellings


def test_renamed_keyword_warns_and_passes_the_value():
    @renamed_kwargs(old="new")
    def f(*, new: int = 0) -> int:
        return new

    with pytest.warns(RenamedWarning, match="old= is deprecated, use new="):
        assert f(old=3) == 3
    with pytest.raises(TypeError, match="both old= and new="):
        f(old=1, new=2)
    assert issubclass(RenamedWarning, DeprecationWarning)


@pytest.mark.parametrize("cls", [TrainConfig, SFTConfig])
def test_old_config_key_cpu_threads_maps_to_threads(cls, tmp_path):
    with pytest.warns(RenamedWarning, match="cpu_threads is deprecated, use threads"):
        assert cls.from_dict({"cpu_threads": 2}).threads == 2
    with pytest.warns(RenamedWarning, match="cpu_threads is deprecated, use threads"):
        assert cls().with_overrides(["cpu_threads=3"]).threads == 3
    path = tmp_path / "old.yaml"
    path.write_text("cpu_threads: 1\n")
    with pytest.warns(RenamedWarning):
        assert cls.load(path).threads == 1
    with pytest.raises(InvalidArgumentError, match="both cpu_threads and threads"):
        cls.from_dict({"cpu_threads": 1, "threads": 2})
    assert "cpu_threads" not in cls().to_dict()  # saved configs use the new key


@pytest.mark.parametrize(
    ("argv", "dest", "value", "old", "new"),
    [
        (["eval", "--out", "runs/e"], "output_dir", "runs/e", "--out", "--output-dir"),
        (["demo", "--out", "runs/d"], "output_dir", "runs/d", "--out", "--output-dir"),
        (["world", "build", "--out", "w"], "output_dir", "w", "--out", "--output-dir"),
        (["index", "build", "--synthetic", "--out", "i"], "output_dir", "i", "--out", "--output-dir"),
        (["serve", "--synthetic", "--processes", "2"], "workers", 2, "--processes", "--workers"),
        (
            ["subgraphs", "build", "--synthetic", "--out", "p", "--workers", "3"],
            "concurrency",
            3,
            "--workers",
            "--concurrency",
        ),
    ],
)
def test_old_flag_warns_and_sets_the_new_destination(argv, dest, value, old, new):
    parser = build_parser()
    with pytest.warns(RenamedWarning, match=f"{old} is deprecated, use {new}"):
        args = parser.parse_args(argv)
    assert getattr(args, dest) == value
    new_argv = [new if a == old else a for a in argv]
    assert getattr(parser.parse_args(new_argv), dest) == value  # the new spelling, no warning needed


def test_required_output_dir_accepts_either_spelling_but_not_none(capsys):
    parser = build_parser()
    for argv in (["world", "build"], ["index", "build", "--synthetic"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert "--output-dir" in capsys.readouterr().err


def test_old_flags_are_hidden_from_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = capsys.readouterr().out
    assert "--workers" in text and "--processes" not in text


def test_cli_prints_the_warning():
    """Python hides a DeprecationWarning raised outside __main__; the CLI shows this one on stderr."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "searchgym.cli", "serve", "--synthetic", "--processes", "0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert "--processes is deprecated, use --workers" in res.stderr
    assert "--workers must be >= 1" in res.stderr


def test_old_keywords_of_public_functions(tiny_world):
    from searchgym.construction.pool import build_pool
    from searchgym.llm.openai_client import OpenAICompatibleGenerator
    from searchgym.retrieval.bm25 import BM25Retriever

    with pytest.warns(RenamedWarning, match="max_concurrency= is deprecated, use concurrency="):
        gen = OpenAICompatibleGenerator("http://127.0.0.1:9/v1", max_concurrency=3)
    try:
        assert gen.concurrency == 3
    finally:
        gen.close()
    with pytest.warns(RenamedWarning, match="n_threads= is deprecated, use threads="):
        assert BM25Retriever.from_world(tiny_world, n_threads=2).threads == 2
    with pytest.warns(RenamedWarning, match="workers= is deprecated, use concurrency="):
        old = build_pool(tiny_world, 3, seed=1, progress=False, workers=2)
    new = build_pool(tiny_world, 3, seed=1, progress=False, concurrency=2)
    assert [s.to_dict() for s in old.subgraphs] == [s.to_dict() for s in new.subgraphs]
