"""One error hierarchy: everything searchgym raises on purpose is a SearchGymError (and keeps its built-in
type); the command line prints those as one line and exits 2, and lets anything else show its traceback."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import searchgym
from searchgym import cli
from searchgym.errors import InvalidArgumentError, MissingFileError, NotFoundError, SearchGymError

PACKAGE = Path(searchgym.__file__).parent
BUILTIN_RAISE = re.compile(r"raise (ValueError|TypeError|FileNotFoundError|KeyError|RuntimeError)\(")


def _modules():
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="searchgym."):
        if ".integrations.verl" in info.name:  # imports verl (an optional extra): scanned by source below
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra that is not installed
            if "searchgym" in str(exc):
                raise


def test_every_exception_class_of_the_package_is_a_searchgym_error():
    found = []
    for module in _modules():
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found.append(obj)
                assert issubclass(obj, SearchGymError), f"{module.__name__}.{name} does not derive from SearchGymError"
    assert len(found) >= 25  # the scan did see the package's error classes


def test_no_module_raises_a_bare_builtin_error():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if BUILTIN_RAISE.search(line):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{lineno}: {line.strip()}")
    assert not offenders, "raise a searchgym.errors class instead (it keeps the built-in type):\n" + "\n".join(
        offenders
    )


def test_the_built_in_types_are_kept_for_older_except_clauses():
    assert issubclass(InvalidArgumentError, ValueError) and issubclass(MissingFileError, FileNotFoundError)
    assert str(NotFoundError("no entity 'Tarsk'")) == "no entity 'Tarsk'"  # a sentence, not a quoted key
    for cls in ast.walk(ast.parse((PACKAGE / "errors.py").read_text())):
        if isinstance(cls, ast.ClassDef) and cls.name != "SearchGymError":
            assert any(getattr(b, "id", "") == "SearchGymError" for b in cls.bases)


def test_the_cli_prints_a_searchgym_error_as_one_line_and_exits_2(tmp_path, capsys):
    code = cli.main(["eval", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("searchgym eval: error: ") and "a.json" in err and "Traceback" not in err


def test_debug_shows_the_traceback_of_a_searchgym_error(tmp_path, capsys):
    code = cli.main(["--debug", "eval", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" in err and "MissingFileError" in err


def test_any_other_exception_is_a_bug_and_keeps_its_traceback(tmp_path, monkeypatch):
    from searchgym.evaluation import report

    def broken(*_a, **_k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(report, "compare_runs", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        cli.main(["eval", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["subgraphs", "build", "--synthetic", "--out", "p.jsonl", "--hops", "2"],
            "--hops: did you mean --min-hops or --max-hops?",
        ),
        (["eval", "--limt", "3"], "--limt: did you mean --limit"),
        (["search", "--synthetic", "--top-k", "3", "capital"], "--top-k: did you mean -k?"),
        (["train", "--kl-coef", "0.1"], "--kl-coef: did you mean --set kl_coef=...?"),
        (["sft", "--lora-r", "8"], "--lora-r: did you mean --set lora_r=...?"),
    ],
)
def test_an_unknown_flag_gets_the_commands_usage_and_what_was_meant(argv, said, capsys):
    """argparse reported an unknown flag with the top-level usage (``searchgym: error: unrecognized arguments``)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    err = capsys.readouterr().err
    command = " ".join(argv[:2] if argv[0] == "subgraphs" else argv[:1])
    assert exit_info.value.code == 2 and f"usage: searchgym {command} " in err
    assert f"searchgym {command}: error: unrecognized arguments: " in err and said in err, err
