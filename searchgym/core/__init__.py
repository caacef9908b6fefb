"""Bottom floor of searchgym: pure functions that import nothing else from the package.

:mod:`searchgym.core.answers` holds the one definition of a correct answer (normalisation, EM,
token F1, cover-EM) that the envs' judges, the trainer's validation and ``searchgym eval`` share.
The outputs every floor writes share three modules: :mod:`~searchgym.core.jsonl` (append-only JSON
Lines that survive torn writes), :mod:`~searchgym.core.output_lock` (one writer per output) and
:mod:`~searchgym.core.artefacts` (what a folder or file holds; no builder writes over another kind).
"""

from .answers import cover_exact_match, exact_match, normalize_answer, token_f1

__all__ = ["normalize_answer", "exact_match", "token_f1", "cover_exact_match"]
