"""``searchgym eval``: one evaluation harness for any agent on the built-in benchmark and standard QA sets.

The Python API under the command::

    from searchgym.agents import AgentSpec, make_agent
    from searchgym.evaluation import EvalConfig, evaluate
    from searchgym.tasks import load_tasksets

    tasks = load_tasksets("builtin,nq=nq.jsonl", limit=200, seed=0)
    result = evaluate(make_agent(AgentSpec("scripted")), tasks, output_dir="runs/eval/scripted")
    print(result.summary["datasets"]["builtin"]["em"])   # {"mean", "lo", "hi", "n"}

See docs/evaluation.md for the file formats.
"""

from ..core.moved import moved_getattr
from .games import play_games
from .metrics import METRICS, answer_scores, bootstrap_ci, paired_diff_ci
from .report import compare_runs, markdown_table, plot_summary
from .runner import EvalConfig, EvalInterrupted, EvalResult, evaluate, record_of
from .task_rollouts import play_tasks

__all__ = [
    "play_games",
    "METRICS",
    "answer_scores",
    "bootstrap_ci",
    "paired_diff_ci",
    "compare_runs",
    "markdown_table",
    "plot_summary",
    "EvalConfig",
    "EvalInterrupted",
    "EvalResult",
    "evaluate",
    "play_tasks",
    "record_of",
]

__getattr__ = moved_getattr(__name__)
