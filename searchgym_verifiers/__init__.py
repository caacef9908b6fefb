"""searchgym's verifiers environment (id ``searchgym-verifiers``): ``vf-eval searchgym-verifiers``.

verifiers loads an environment by importing the top-level package its id names and taking the Taskset,
Harness and Env subclasses it exports; the classes live in :mod:`searchgym.integrations.verifiers`.
"""

from searchgym.integrations.verifiers.environment import SearchGymEnv, SearchGymHarness, SearchGymTaskset

__all__ = ["SearchGymEnv", "SearchGymHarness", "SearchGymTaskset"]
