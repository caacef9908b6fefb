"""searchgym: Gymnasium environments for training LLM search agents by self-play over a
knowledge-graph + text world. ``import searchgym`` registers the environments.

The floors, bottom to top (docs/architecture.md): ``core`` (shared types and helpers), ``llm`` (backends),
``world``, ``retrieval``, ``construction``, ``scoring``, ``tasks``, ``envs``, ``wrappers``, ``evaluation``,
``agents``, ``training``, ``integrations``, ``commands``.
"""

from .core import moved as _moved

_moved.install()  # an old import path (before the regrouping) raises an error naming the new home

from . import envs  # noqa: E402,F401  (registers environments)
from .world import World, WorldBuilder, load_world  # noqa: E402

__version__ = "0.1.0"
__all__ = ["World", "WorldBuilder", "load_world", "__version__"]
