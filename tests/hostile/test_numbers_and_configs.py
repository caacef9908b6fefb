"""Hostile numbers, sizes, paths and config values (NaN, inf, huge, negative, empty, misplaced) end in one line.

Each bad value a user can type -- ``--k1 nan``, ``--entities 99999999999999999999``, ``--port 70000``,
``--set lr=nan``, ``--set env_kwargs.bogus=1``, ``--device bogus``, ``--output-dir ""``, a flag the chosen source
or backend never reads -- is refused before any work starts: exit status 2, exactly one ``searchgym CMD: error:``
line naming the flag or field and the fix, no traceback. The config checks are also tried on the config classes
directly, for every float field at once.
"""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from searchgym.cli import main
from searchgym.errors import InvalidArgumentError


def _refused(capsys, argv: list[str], *words: str) -> str:
    """Run ``searchgym ARGV``; assert it exits 2 with one error line holding every one of ``words``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"searchgym {argv[0]}: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def saved_index(saved_tiny, tmp_path_factory):
    """A BM25 index of the tiny world, built through the command line."""
    path = tmp_path_factory.mktemp("index") / "idx"
    assert main(["index", "build", "--world", str(saved_tiny), "--output-dir", str(path)]) == 0
    return path


# ----------------------------------------------------------------- 1: sizes
@pytest.mark.parametrize(
    "size, words",
    [
        (["--entities", "99999999999999999999"], ("at most 2,000,000", "--entities")),
        (["--scale", "1e9"], ("2,000,000", "scale of at most")),
        (["--scale", "inf"], ("finite", "--scale")),
        (["--scale", "nan"], ("finite", "--scale")),
    ],
)
def test_a_huge_or_non_finite_world_size_is_refused_before_it_allocates(tmp_path, capsys, size, words):
    _refused(capsys, ["world", "build", "--output-dir", str(tmp_path / "w"), *size], *words)
    assert not (tmp_path / "w").exists()


def test_the_size_limit_holds_in_the_library_too():
    from searchgym.world.synthetic_config import MAX_ENTITIES, SyntheticConfig

    with pytest.raises(InvalidArgumentError, match="at most"):
        SyntheticConfig.for_entities(MAX_ENTITIES + 1)
    assert SyntheticConfig.for_entities(MAX_ENTITIES).num_entities == MAX_ENTITIES  # the limit itself is allowed
    with pytest.raises(InvalidArgumentError, match="finite"):
        SyntheticConfig().scaled(math.nan)


# ------------------------------------------------------------ 2: NaN and inf
def test_nan_bm25_parameters_are_refused(tmp_path, capsys):
    _refused(capsys, ["index", "build", "--synthetic", "--output-dir", str(tmp_path / "i"), "--k1", "nan"], "--k1")
    assert not (tmp_path / "i").exists()
    _refused(capsys, ["search", "capital", "--synthetic", "--b", "inf"], "--b", "finite")
    _refused(capsys, ["serve", "--synthetic", "--k1", "nan"], "--k1", "finite")


def test_the_bm25_retriever_refuses_nan_itself():
    from searchgym.retrieval.bm25 import BM25Retriever, RankBM25Retriever

    for cls in (BM25Retriever, RankBM25Retriever):
        with pytest.raises(InvalidArgumentError, match="finite k1"):
            cls(["d"], ["t"], ["some words"], k1=math.nan)


@pytest.mark.parametrize("value", ["nan", "inf", ".nan", "-.inf"])
def test_train_refuses_a_non_finite_number_in_dump_config(tmp_path, capsys, value):
    for key in ("lr", "temperature", "max_grad_norm"):
        _refused(capsys, ["train", "--set", f"{key}={value}", "--dump-config", str(tmp_path / "c.yaml")], key, "finite")
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize(
    "item, words",
    [
        ("batch_size=1e999", "batch_size expects an integer, got inf"),  # int(inf): OverflowError traceback
        ("seed=.nan", "seed expects an integer, got nan"),
        ("threads=abc", "threads expects an integer, got 'abc'"),  # an optional int was not checked at all
        ("model=[a]", "model expects a string, got ['a']"),  # kept as a list by the string branch
        ("env_id=[1]", "env_id expects a string, got [1]"),  # unhashable-list traceback in check_env_id
    ],
)
def test_train_refuses_a_config_value_of_the_wrong_kind(tmp_path, capsys, item, words):
    _refused(capsys, ["train", "--set", item, "--dump-config", str(tmp_path / "o.yaml")], words)
    assert not (tmp_path / "o.yaml").exists()


def test_sft_refuses_non_finite_flags_before_loading_a_model(tmp_path, capsys):
    out = ["--data", str(tmp_path / "games.jsonl"), "--output-dir", str(tmp_path / "r")]
    _refused(capsys, ["sft", "--epochs", "nan", *out], "--epochs", "finite")
    _refused(capsys, ["sft", "--lr", "nan", *out], "--lr", "finite")
    _refused(capsys, ["sft", "--min-reward", "nan", *out], "--min-reward", "finite")
    _refused(capsys, ["sft", "--set", "min_reward=nan", *out], "min_reward", "finite")
    assert not (tmp_path / "r").exists()


def _float_fields(config_class) -> list[str]:
    return [f.name for f in fields(config_class) if "float" in str(f.type)]


@pytest.mark.parametrize("config_path", ["selfplay_config:TrainConfig", "sft_config:SFTConfig"])
def test_every_float_field_of_a_training_config_refuses_nan_and_inf(config_path):
    import importlib

    module, _, name = config_path.partition(":")
    config_class = getattr(importlib.import_module(f"searchgym.training.{module}"), name)
    names = _float_fields(config_class)
    assert "lr" in names and len(names) > 5
    for field_name in names:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(InvalidArgumentError, match=f"^{field_name}=.*finite"):
                config_class(**{field_name: bad})


# ---------------------------------------------------------------- 3: env_kwargs
def test_an_unknown_env_kwarg_is_refused_naming_the_accepted_ones(tmp_path, capsys):
    line = _refused(
        capsys,
        ["train", "--steps", "1", "--output-dir", str(tmp_path / "rt7"), "--set", "env_kwargs.bogus=1"],
        "env_kwargs.bogus",
        "top_k",
        "proposer_mode",
    )
    assert "TypeError" not in line
    _refused(capsys, ["train", "--set", "env_kwargs.top_k=abc", "--dump-config", str(tmp_path / "c")], "top_k", "int")
    assert not (tmp_path / "rt7").exists()


def test_env_kwargs_the_env_takes_still_pass():
    from searchgym.training.selfplay_config import TrainConfig
    from searchgym.training.sft_config import SFTConfig

    cfg = TrainConfig().with_overrides(["env_kwargs={order: shuffle, top_k: 5, doc_max_chars: null, kg_tool: true}"])
    assert cfg.env_kwargs["top_k"] == 5
    assert SFTConfig(env_id="KGProposer-v0", env_kwargs={"pool_hops": [2, 3]}).env_kwargs["pool_hops"] == [2, 3]
    with pytest.raises(InvalidArgumentError, match="env_kwargs.bogus"):
        SFTConfig(env_kwargs={"bogus": 1})


# ---------------------------------------------------------------- 4: device
def test_a_bad_device_is_refused_before_the_model_loads(tmp_path, capsys):
    _refused(capsys, ["train", "--set", "device=bogus", "--steps", "1", "--output-dir", str(tmp_path / "t")], "device")
    _refused(capsys, ["train", "--set", "device=cuda:x", "--dump-config", str(tmp_path / "c")], "device", "cuda:N")
    _refused(capsys, ["sft", "--device", "bogus", "--data", "g.jsonl", "--output-dir", str(tmp_path / "s")], "device")
    assert not (tmp_path / "t").exists() and not (tmp_path / "s").exists()


def test_devices_torch_parses_still_pass():
    from searchgym.training.sft_config import SFTConfig

    for device in ("auto", "cpu", "cuda", "cuda:1", "mps", "cpu:0"):
        assert SFTConfig(device=device).device == device


# ------------------------------------------------------------------- 5: serve
@pytest.mark.parametrize("port", ["-1", "70000"])
def test_serve_refuses_a_port_out_of_range(saved_index, capsys, port):
    _refused(capsys, ["serve", "--index", str(saved_index), "--port", port], "--port", port)


def test_serve_names_the_real_problem_of_a_bad_host_and_no_source(saved_index, capsys):
    line = _refused(capsys, ["serve", "--index", str(saved_index), "--host", "nonexistent.invalid"], "--host")
    assert "--port" not in line
    line = _refused(capsys, ["serve", "--port", "0"], "--world DIR, --synthetic or --index DIR")
    assert "--url" not in line  # serve has no --url


# ------------------------------------------------------------ 6: loader paths
def test_a_missing_corpus_is_refused_before_the_dump_is_read(tmp_path, capsys):
    dump = tmp_path / "dump.json"
    dump.write_text("[\n]\n")
    argv = ["world", "build", "--source", "wikidata", "--input", str(dump), "--corpus", str(tmp_path / "nope.jsonl")]
    _refused(capsys, [*argv, "--output-dir", str(tmp_path / "w")], "--corpus", "no such file")


def test_an_empty_wikidata5m_folder_names_the_flag_and_the_files(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    argv = ["world", "build", "--source", "wikidata5m", "--input", str(tmp_path / "empty")]
    line = _refused(capsys, [*argv, "--output-dir", str(tmp_path / "w")], "--input", "wikidata5m_entity.txt")
    assert "triplet_files=" not in line


# --------------------------------------------------------- 7: meaningless numbers
@pytest.mark.parametrize(
    "argv, words",
    [
        (["world", "stats", "{world}", "--top", "-3"], ("--top",)),
        (["world", "build", "--output-dir", "{tmp}/w", "--seed", "-1"], ("--seed", "at least 0")),
        (["world", "build", "--output-dir", "{tmp}/w", "--source", "atlas", "--max-cities", "0"], ("--max-cities",)),
        (["search", "capital", "--synthetic", "--max-chars", "0"], ("--max-chars",)),
        (["search", "capital", "--synthetic", "--max-chars", "-5"], ("--max-chars",)),
        (["search", "capital", "--synthetic", "--seed", "-1"], ("--seed", "at least 0")),
        (["world", "build", "--output-dir", ""], ("--output-dir", "empty")),
        (["index", "build", "--synthetic", "--output-dir", ""], ("--output-dir", "empty")),
    ],
)
def test_meaningless_numbers_and_empty_paths_are_refused(saved_tiny, tmp_path, capsys, argv, words):
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{world}", str(saved_tiny)) for a in argv]
    _refused(capsys, argv, *words)
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------- 8: dependencies' bars
def test_index_build_shows_no_dependency_bars_without_verbose(saved_tiny, tmp_path, capsys):
    assert main(["index", "build", "--world", str(saved_tiny), "--output-dir", str(tmp_path / "i")]) == 0
    assert "BM25S" not in capsys.readouterr().err


# ------------------------------------------------------- 9: flags that do nothing
@pytest.mark.parametrize(
    "argv, words",
    [
        (["world", "build", "--output-dir", "{tmp}/w", "--max-cities", "5"], ("--max-cities", "atlas")),
        (["world", "build", "--output-dir", "{tmp}/w", "--no-wiki-summaries"], ("--no-wiki-summaries", "atlas")),
        (["world", "stats", "{world}", "--entities", "500"], ("--entities", "--synthetic")),
        (["search", "x", "--world", "{world}", "--index", "{index}"], ("--index", "only one of")),
        (["search", "x", "--index", "{index}", "--backend", "dense", "--k1", "3"], ("--k1", "--index")),
        (["search", "x", "--world", "{world}", "--backend", "dense", "--k1", "3"], ("--k1", "bm25")),
        (["index", "build", "--synthetic", "--output-dir", "{tmp}/w", "--nlist", "5"], ("--nlist", "dense")),
        (["index", "build", "--synthetic", "--output-dir", "{tmp}/w", "--index-type", "ivf"], ("--index-type",)),
    ],
)
def test_flags_the_command_would_ignore_are_refused(saved_tiny, saved_index, tmp_path, capsys, argv, words):
    argv = [
        a.replace("{tmp}", str(tmp_path)).replace("{world}", str(saved_tiny)).replace("{index}", str(saved_index))
        for a in argv
    ]
    _refused(capsys, argv, *words)
    assert not (tmp_path / "w").exists()
