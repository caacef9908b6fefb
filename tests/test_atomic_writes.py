"""core.atomic_writes: a file or folder is replaced whole, or left as it was, and no temporary stays behind."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time

import pytest

from searchgym.core.atomic_writes import STALE_AFTER_S, write_file, write_folder, write_text


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


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_a_killed_writers_old_temporaries_are_swept_by_the_next_write(tmp_path):
    dead, alive = _dead_pid(), os.getppid()
    old = tmp_path / f".a.json.tmp-{dead}-1.json"
    recent = tmp_path / f".a.json.tmp-{dead}-2.json"
    live = tmp_path / f".a.json.tmp-{alive}-3.json"
    other_target = tmp_path / f".a.json.gz.tmp-{dead}-4.gz"
    folder_tmp = tmp_path / f".a.json.tmp-{dead}-x1y2"
    for path in (old, recent, live, other_target):
        path.write_text("half")
    folder_tmp.mkdir()
    (folder_tmp / "shard").write_text("half")
    for path in (old, live, other_target, folder_tmp):
        _age(path, STALE_AFTER_S + 60)
    write_text(tmp_path / "a.json", "new")
    assert (tmp_path / "a.json").read_text() == "new"
    # only what a dead process left long ago for this very target goes: a live or recent writer may still finish
    assert _leftovers(tmp_path) == sorted(p.name for p in (recent, live, other_target))


def test_a_folder_moved_aside_by_a_killed_writer_is_put_back(tmp_path):
    folder = write_folder(tmp_path / "adapter", lambda tmp: (tmp / "weights").write_text("v1"))
    aside = tmp_path / f".adapter.old-{_dead_pid()}"
    os.rename(folder, aside)  # killed between the two renames: the target is missing
    _age(aside, STALE_AFTER_S + 60)

    def check_then_write(tmp):
        assert (folder / "weights").read_text() == "v1"  # the old version is back before the new one lands
        (tmp / "weights").write_text("v2")

    write_folder(folder, check_then_write)
    assert (folder / "weights").read_text() == "v2" and _leftovers(tmp_path) == []


def test_the_old_module_name_says_where_the_writers_live_now():
    with pytest.raises(ModuleNotFoundError, match="searchgym.core.atomic_writes"):
        import searchgym.core.folders  # noqa: F401
