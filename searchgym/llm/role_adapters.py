"""LoRA adapters per role: a PEFT model holding an adapter named after a role plays that role with it.

Self-play trains one policy in two roles. With one adapter, the Proposer's updates move the weights the
Solver answers with (and back); ``proposer_adapter=true`` gives the Proposer its own copy of the starting
adapter, a second PEFT adapter named ``proposer``, while the Solver (and everything that is not a role's
rollout: the RAG verifier, judges) keeps PEFT's ``default``. The convention is only the name: a model holding
an adapter called ``proposer`` generates and trains the Proposer's turns with it.

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
    "add_role_adapter",
    "adapter_state",
    "attach_adapters",
    "is_peft_model",
    "role_adapter",
    "role_adapter_folders",
    "role_adapter_parameters",
    "use_adapter",
    "use_role_adapter",
]

#: PEFT's name of a model's first adapter: the one every role uses that has none of its own
DEFAULT_ADAPTER = "default"
#: the roles that may have an adapter of their own (the adapter is named after the role)
ROLE_ADAPTERS = ("proposer",)


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
    """The adapter ``role`` plays with: the one named after it when ``model`` holds one, else ``None`` (the
    model's active adapter, or its only weights)."""
    if role in ROLE_ADAPTERS and is_peft_model(model) and role in model.peft_config:
        return role
    return None


@contextmanager
def use_adapter(model: Any, name: str) -> Iterator[None]:
    """``model`` (a PEFT model) runs with adapter ``name`` inside the block, its former active adapter after it.
    PEFT marks the active adapter's weights trainable and the others' frozen: an update inside the block trains
    ``name`` alone."""
    before = model.active_adapter
    if before == name:
        yield
        return
    model.set_adapter(name)
    try:
        yield
    finally:
        model.set_adapter(before)


def use_role_adapter(model: Any, role: Optional[str]):
    """:func:`use_adapter` of ``role``'s own adapter, or a no-op when the model holds none for it."""
    name = role_adapter(model, role)
    return use_adapter(model, name) if name is not None else nullcontext()


def role_adapter_parameters(model: Any, role: str) -> list:
    """The parameters of ``role``'s own adapter (PEFT names them ``...lora_A.<role>.weight``), trainable or not."""
    if role_adapter(model, role) is None:
        return []
    return [p for name, p in model.named_parameters() if f".{role}." in name]


def role_adapter_folders(folder: str | Path) -> dict[str, Path]:
    """The role adapters saved beside the ``default`` one in ``folder`` (PEFT's sub-folder per extra adapter)."""
    root = Path(folder)
    return {r: root / r for r in ROLE_ADAPTERS if (root / r / "adapter_config.json").is_file()}


def add_role_adapter(model: Any, role: str) -> None:
    """Give ``role`` its own adapter: a second PEFT adapter of the ``default`` adapter's configuration, starting
    from the ``default`` adapter's weights (so both roles start where the run does). ``default`` stays active."""
    import copy

    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    if role not in ROLE_ADAPTERS:
        raise InvalidArgumentError(
            f"role {role!r} cannot have an adapter of its own; use one of {', '.join(ROLE_ADAPTERS)}"
        )
    model.add_adapter(role, copy.deepcopy(model.peft_config[DEFAULT_ADAPTER]))
    set_peft_model_state_dict(model, get_peft_model_state_dict(model, adapter_name=DEFAULT_ADAPTER), adapter_name=role)
    model.set_adapter(DEFAULT_ADAPTER)


def attach_adapters(model: Any, folder: str | Path) -> Any:
    """``model`` with the adapter saved in ``folder``: merged into its weights when it is the only one, else a
    PEFT model holding ``default`` and each role's adapter (unmerged: each role generates with its own)."""
    from peft import PeftModel

    roles = role_adapter_folders(folder)
    peft = PeftModel.from_pretrained(model, str(folder))
    if not roles:
        return peft.merge_and_unload()
    for role, sub in roles.items():
        peft.load_adapter(str(sub), adapter_name=role)
    peft.set_adapter(DEFAULT_ADAPTER)
    return peft
