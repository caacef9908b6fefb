"""The moved-name table (``searchgym.core.moved``) stays true: every new home exists, every old path is really
gone, and each kind of old import fails with a message naming the new home."""

from __future__ import annotations

import importlib

import pytest

import searchgym  # noqa: F401  (installs the finder)
from searchgym.core.moved import MOVED_MODULES, MOVED_NAMES, RENAMED, new_home


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_every_moved_module_has_a_home_and_its_old_path_names_it(old, new):
    importlib.import_module(new)  # the new home imports
    with pytest.raises(ModuleNotFoundError, match=f"{old} moved to {new}"):
        importlib.import_module(old)


@pytest.mark.parametrize("old, home", sorted(MOVED_NAMES.items()))
def test_every_moved_name_lives_at_its_new_home(old, home):
    name = old.rsplit(".", 1)[1]
    assert hasattr(importlib.import_module(home), name), f"{old} -> {home}: {home} has no {name}"


@pytest.mark.parametrize("old", sorted(set(MOVED_NAMES) | set(RENAMED)))
def test_reading_a_moved_name_from_its_old_module_names_the_new_home(old):
    module_name, name = old.rsplit(".", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:  # the old module itself moved: its own entry names the home
        assert new_home(module_name) is not None
        return
    with pytest.raises(AttributeError, match="moved|replaced"):
        getattr(module, name)


def test_from_a_package_import_a_moved_name_names_the_new_home():
    with pytest.raises(ImportError, match="from searchgym.training import TrainConfig"):
        from searchgym.agents import TrainConfig  # noqa: F401
    with pytest.raises(ImportError, match="searchgym.agents.trainer moved to searchgym.training.selfplay_trainer"):
        from searchgym.agents import trainer  # noqa: F401
