"""The ``searchgym`` command line's sub-commands, one module per area (the top floor: they wire every layer).

Each module exposes ``register(subparsers)``; :mod:`searchgym.cli` lists them in ``COMMAND_MODULES``.
"""
