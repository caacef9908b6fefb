"""core.atomic_writes: a file or folder is replaced whole, or left as it was, and no temporary stays behind."""

from __future__ import annotations

import gzip

import pytest

from searchgym.core.atomic_writes import write_file, write_folder, write_text


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_write_file_replaces_whole_and_returns_the_writers_result(tmp_path):
    path = tmp_path / "sub" / "a.json"
    write_text(path, "old")
    assert write_file(path, lambda tmp: tmp.write_text("new")) == 3
    assert path.read_text() == "new"
    assert _leftovers(path.parent) == []


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_text(tmp_path / "a.json", "old")

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_file(path, fail)
    assert path.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_the_temporary_keeps_the_suffix_a_writer_picks_its_format_by(tmp_path):
    path = tmp_path / "corpus.jsonl.gz"

    def write(tmp):
        assert tmp.suffix == ".gz" and tmp.parent == tmp_path
        with gzip.open(tmp, "wt") as f:
            f.write("{}\n")

    write_file(path, write)
    assert gzip.open(path, "rt").read() == "{}\n"


def test_write_folder_replaces_a_folder_whole_or_not_at_all(tmp_path):
    folder = tmp_path / "adapter"
    write_folder(folder, lambda tmp: (tmp / "a").write_text("1"))
    write_folder(folder, lambda tmp: (tmp / "b").write_text("2"))
    assert sorted(p.name for p in folder.iterdir()) == ["b"]

    def fail(tmp):
        (tmp / "c").write_text("3")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        write_folder(folder, fail)
    assert sorted(p.name for p in folder.iterdir()) == ["b"]
    assert _leftovers(tmp_path) == []


def test_the_old_module_name_says_where_the_writers_live_now():
    with pytest.raises(ModuleNotFoundError, match="searchgym.core.atomic_writes"):
        import searchgym.core.folders  # noqa: F401
