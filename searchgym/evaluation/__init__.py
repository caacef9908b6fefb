"""``searchgym eval``: one evaluation harness for any agent on the built-in benchmark and standard QA sets.

The Python API under the command::

    from searchgym.agents import AgentSpec, make_agent
    from searchgym.evaluation import EvalConfig, evaluate
    from searchgym.tasks import load_tasksets

    tasks = load_tasksets("builtin,nq=nq.jsonl", limit=200, seed=0)
    result = evaluate(make_agent(AgentSpec("scripted")), tasks, output_dir="runs/eval/scripted")
    print(result.summary["datasets"]["builtin"]["em"])   # {"mean", "lo", "hi", "n"}

See docs/evaluation.md for the file formats. The self-play benchmark's committed results, which ``searchgym demo``
shows, load with :func:`load_selfplay_results` (:mod:`searchgym.evaluation.selfplay_results`). Why a KG
Proposer's question was invalid, read against its target path: :func:`invalid_kind`
(:mod:`searchgym.evaluation.proposer_errors`).
"""

from ..core.moved import moved_getattr
from .games import play_games
from .metrics import METRICS, answer_scores, bootstrap_ci, paired_diff_ci
from .proposer_errors import INVALID_KINDS, count_invalid_kinds, invalid_kind
from .report import compare_runs, markdown_table, plot_summary
from .runner import EvalConfig, EvalInterrupted, EvalResult, evaluate, record_of
from .selfplay_results import (
    SelfPlayResults,
    compact_results,
    format_selfplay_table,
    load_selfplay_results,
    plot_selfplay_curves,
)
from .task_rollouts import play_tasks

__all__ = [
    "play_games",
    "METRICS",
    "answer_scores",
    "bootstrap_ci",
    "paired_diff_ci",
    "INVALID_KINDS",
    "count_invalid_kinds",
    "invalid_kind",
    "compare_runs",
    "markdown_table",
    "plot_summary",
    "EvalConfig",
    "EvalInterrupted",
    "EvalResult",
    "evaluate",
    "play_tasks",
    "record_of",
    "SelfPlayResults",
    "compact_results",
    "format_selfplay_table",
    "load_selfplay_results",
    "plot_selfplay_curves",
]

__getattr__ = moved_getattr(__name__)
