"""searchgym inside verl: agent loops (:mod:`.agent_loop`, needs the ``verl`` extra), a
``compute_score`` reward entry point (:mod:`.reward`) and dataset rows (:mod:`.data`).

Importing this package imports no verl: :mod:`.reward` and :mod:`.data` work without it;
``searchgym.integrations.verl.agent_loop`` needs it.
"""
