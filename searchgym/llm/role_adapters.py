"""LoRA adapters per role: a PEFT model holding an adapter named after a role plays that role with it.

Self-play trains one policy in two roles. With one adapter, the Proposer's updates move the weights the
Solver answers with (and back); ``proposer_adapter=true`` gives the Proposer its own copy of the starting
adapter, a second PEFT adapter named ``proposer``, while the Solver (and everything that is not a role's
rollout: the RAG verifier, judges) keeps PEFT's ``default``. The convention is only the name: a model holding
an adapter called ``proposer`` generates and trains the Proposer's turns with it.

``proposer_adapter_mode=stacked`` stacks the role's adapter on the shared one instead: an adapter named
``proposer_on_default`` that starts at zero (LoRA's ``B = 0``), that the Proposer plays with *together with*
``default`` (PEFT sums the active adapters), and that the Proposer's update trains alone. The Solvers' updates to
``default`` still reach the Proposer; the Proposer's updates never reach the Solvers. The name says how the adapter
is played, so a saved folder needs nothing else to be opened the same way.

Saved with ``save_pretrained``, the folder holds ``default`` at its root (so a loader that knows one adapter
opens the Solver's) and each other adapter in a sub-folder of its name (PEFT's layout);
:func:`attach_adapters` opens such a folder.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator, Optional

from ..errors import InvalidArgumentError

__all__ = [
    "DEFAULT_ADAPTER",
    "ROLE_ADAPTERS",
    "ROLE_ADAPTER_MODES",
    "add_role_adapter",
    "adapter_state",
    "attach_adapters",
    "is_peft_model",
    "role_adapter",
    "role_adapter_folders",
    "role_adapter_names",
    "role_adapter_parameters",
    "stacked_adapter_name",
    "use_adapter",
    "use_role_adapter",
]

#: PEFT's name of a model's first adapter: the one every role uses that has none of its own
DEFAULT_ADAPTER = "default"
#: the roles that may have an adapter of their own (the adapter is named after the role)
ROLE_ADAPTERS = ("proposer",)
#: how a role's own adapter is made and played: ``copy`` (a copy of ``default``, played instead of it) or
#: ``stacked`` (a zero-initialised adapter played on top of ``default``, which it leaves untrained)
ROLE_ADAPTER_MODES = ("copy", "stacked")


def stacked_adapter_name(role: str) -> str:
    """The name of ``role``'s adapter in ``stacked`` mode (``proposer_on_default``): played with ``default``."""
    return f"{role}_on_{DEFAULT_ADAPTER}"


def role_adapter_names(role: str) -> tuple[str, str]:
    """The names ``role``'s own adapter may have: ``copy`` mode's (the role's) and ``stacked`` mode's."""
    return (role, stacked_adapter_name(role))


def _played_with(name: str) -> list[str]:
    """The adapters active while adapter ``name`` plays, the trained one last: a stacked adapter plays on
    ``default``."""
    return [DEFAULT_ADAPTER, name] if name.endswith(f"_on_{DEFAULT_ADAPTER}") else [name]


def _activate(model: Any, names: list[str]) -> None:
    """Make ``names`` the PEFT model's active adapters with only the last one trainable."""
    if len(names) == 1:
        model.set_adapter(names[0])
        return
    model.base_model.set_adapter(names)  # PeftModel.set_adapter takes one name; its LoRA model takes several
    model.set_requires_grad(names[:-1], requires_grad=False)


def adapter_state(model: Any) -> tuple:
    """Which adapters ``model`` runs with now: a PEFT model's active adapters' names, and whether its adapter
    layers are switched off (``disable_adapter()``, also on adapter layers injected without a PEFT wrapper); ``()``
    for a model without adapters. Part of what cached keys/values and the rollout engine's bound weights are valid
    for."""
    names = tuple(model.active_adapters) if is_peft_model(model) else ()
    modules = model.modules() if callable(getattr(model, "modules", None)) else ()  # a scripted test LM has none
    # a tuner layer's flag (a bool); PEFT and transformers models have a method of that name
    off = next((m.disable_adapters for m in modules if isinstance(getattr(m, "disable_adapters", None), bool)), False)
    return names + (("off",) if off else ())


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a PEFT model (checked without importing peft: a model can only be one once it is)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def role_adapter(model: Any, role: Optional[str]) -> Optional[str]:
    """The name of ``role``'s own adapter when ``model`` holds one (``proposer``, or ``proposer_on_default`` when
    stacked), else ``None`` (the role plays with the model's active adapter, or its only weights)."""
    if role not in ROLE_ADAPTERS or not is_peft_model(model):
        return None
    return next((n for n in role_adapter_names(role) if n in model.peft_config), None)


@contextmanager
def use_adapter(model: Any, name: str) -> Iterator[None]:
    """``model`` (a PEFT model) runs with adapter ``name`` inside the block (a stacked one together with
    ``default``), its former active adapters after it. Only ``name``'s weights are trainable inside: an update in
    the block trains ``name`` alone."""
    before = list(model.active_adapters)
    wanted = _played_with(name)
    if before == wanted:
        yield
        return
    _activate(model, wanted)
    try:
        yield
    finally:
        _activate(model, before)


def use_role_adapter(model: Any, role: Optional[str]):
    """:func:`use_adapter` of ``role``'s own adapter, or a no-op when the model holds none for it."""
    name = role_adapter(model, role)
    return use_adapter(model, name) if name is not None else nullcontext()


def role_adapter_parameters(model: Any, role: str) -> list:
    """The parameters of ``role``'s own adapter (PEFT names them ``...lora_A.<adapter>.weight``), trainable or
    not."""
    name = role_adapter(model, role)
    if name is None:
        return []
    return [p for n, p in model.named_parameters() if f".{name}." in n]


def role_adapter_folders(folder: str | Path) -> dict[str, Path]:
    """The role adapters saved beside the ``default`` one in ``folder`` (PEFT's sub-folder per extra adapter),
    by adapter name (``proposer`` or ``proposer_on_default``)."""
    root = Path(folder)
    names = [n for r in ROLE_ADAPTERS for n in role_adapter_names(r)]
    return {n: root / n for n in names if (root / n / "adapter_config.json").is_file()}


def add_role_adapter(model: Any, role: str, mode: str = "copy") -> None:
    """Give ``role`` its own adapter, of the ``default`` adapter's configuration: in ``copy`` mode named after the
    role and starting from ``default``'s weights (so both roles start where the run does); in ``stacked`` mode
    named :func:`stacked_adapter_name` and starting at zero (LoRA's own initialisation, ``B = 0``; its ``A`` drawn
    from torch's RNG, which the caller seeds), so the role starts playing exactly as ``default``. ``default``
    stays active."""
    import copy

    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    if role not in ROLE_ADAPTERS:
        raise InvalidArgumentError(
            f"role {role!r} cannot have an adapter of its own; use one of {', '.join(ROLE_ADAPTERS)}"
        )
    if mode not in ROLE_ADAPTER_MODES:
        raise InvalidArgumentError(f"role adapter mode {mode!r}: use one of {', '.join(ROLE_ADAPTER_MODES)}")
    config = copy.deepcopy(model.peft_config[DEFAULT_ADAPTER])
    if mode == "stacked":
        config.init_lora_weights = True  # B = 0: the stack plays as default until the role's update moves it
        model.add_adapter(stacked_adapter_name(role), config)
    else:
        model.add_adapter(role, config)
        state = get_peft_model_state_dict(model, adapter_name=DEFAULT_ADAPTER)
        set_peft_model_state_dict(model, state, adapter_name=role)
    model.set_adapter(DEFAULT_ADAPTER)


def attach_adapters(model: Any, folder: str | Path) -> Any:
    """``model`` with the adapter saved in ``folder``: merged into its weights when it is the only one, else a
    PEFT model holding ``default`` and each role's adapter (unmerged: each role generates with its own)."""
    from peft import PeftModel

    roles = role_adapter_folders(folder)
    peft = PeftModel.from_pretrained(model, str(folder))
    if not roles:
        return peft.merge_and_unload()
    for name, sub in roles.items():
        peft.load_adapter(str(sub), adapter_name=name)
    peft.set_adapter(DEFAULT_ADAPTER)
    return peft
