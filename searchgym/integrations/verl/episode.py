"""Playing an env against verl's token generator: re-exported from :mod:`searchgym.integrations.episode`
(engine-neutral, shared with the TRL adapter)."""

from ..episode import *  # noqa: F401,F403 - this module's old import path
from ..episode import __all__  # noqa: F401
