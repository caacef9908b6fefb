"""The keyword arguments an env takes through ``gymnasium.make``, read from its constructors, and the check of a
config's ``env_kwargs`` against them: a key the env does not take (``env_kwargs.bogus=1``) or a value of the wrong
plain type (``top_k=abc``) is refused when the config is built, not as a TypeError once the run has started.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any, Optional

from ..errors import InvalidArgumentError
from .registration import env_spec

__all__ = ["env_keywords", "check_env_kwargs"]

#: keyword arguments ``gymnasium.make`` keeps for itself instead of passing them to the env
_GYM_MAKE_KEYWORDS = ("max_episode_steps", "disable_env_checker")
#: annotation (``Optional``/``| None`` removed) -> the values a plain-typed env keyword argument accepts
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def env_keywords(env_id: str) -> Optional[dict[str, inspect.Parameter]]:
    """The keyword arguments ``gymnasium.make(env_id, ...)`` passes to the env's constructor, by name: the
    parameters of its ``__init__`` and of each base ``__init__`` it forwards ``**kwargs`` to. ``None`` when the
    chain ends in one that takes any keyword (nothing can be refused then)."""
    module, _, name = env_spec(env_id).entry_point.partition(":")
    cls = getattr(importlib.import_module(module), name)
    accepted: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]  # after self
        for p in params:  # a subclass's parameter shadows its base's
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                accepted.setdefault(p.name, p)
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return accepted
    return None


def _accepts(param: inspect.Parameter, value: Any) -> bool:
    """Whether ``value`` fits ``param``'s annotation where that is a plain int, float, str or bool (optionally
    ``Optional``); any other annotation accepts every value (the env checks it)."""
    annotation = str(param.annotation).replace(" ", "")
    optional = re.fullmatch(r"Optional\[(\w+)\]|(\w+)\|None", annotation)
    base = next(g for g in optional.groups() if g) if optional else annotation
    if base not in _PLAIN_TYPES:
        return True
    if value is None:
        return optional is not None
    return isinstance(value, _PLAIN_TYPES[base]) and (base == "bool" or not isinstance(value, bool))


def check_env_kwargs(env_id: str, env_kwargs: Any) -> None:
    """Refuse an ``env_kwargs`` key the env does not take, or a value of the wrong plain type (``top_k=abc``),
    naming the keys it accepts: ``gymnasium.make`` would raise a TypeError only once the run has started."""
    if not isinstance(env_kwargs, dict):
        raise InvalidArgumentError(
            f"env_kwargs expects a mapping like env_kwargs={{order: shuffle}}, got {env_kwargs!r}"
        )
    accepted = env_keywords(env_id)
    if accepted is None:
        return
    names = sorted({*accepted, *_GYM_MAKE_KEYWORDS})
    for key, value in env_kwargs.items():
        if key not in names:
            raise InvalidArgumentError(
                f"env_kwargs.{key}: {env_id} takes no such keyword argument; use one of {', '.join(names)}"
            )
        if key in accepted and not _accepts(accepted[key], value):
            raise InvalidArgumentError(
                f"env_kwargs.{key}={value!r}: {env_id} expects {accepted[key].annotation}; give one"
            )
