"""``searchgym eval``: one evaluation harness for any agent on the built-in benchmark and standard QA sets.

The Python API under the command::

    from searchgym.evaluation import AgentSpec, EvalConfig, evaluate, load_tasksets, make_agent

    tasks = load_tasksets("builtin,nq=nq.jsonl", limit=200, seed=0)
    result = evaluate(make_agent(AgentSpec("scripted")), tasks, out_dir="runs/eval/scripted")
    print(result.summary["datasets"]["builtin"]["em"])   # {"mean", "lo", "hi", "n"}

See docs/evaluation.md for the file formats.
"""

from .metrics import METRICS, answer_scores, bootstrap_ci, paired_diff_ci
from .report import compare_runs, markdown_table, plot_summary
from .runner import EvalConfig, EvalInterrupted, EvalResult, evaluate, play_tasks, record_of
from .tasksets import DatasetFormatError, TaskSet, load_flashrag_jsonl, load_searchr1_parquet, load_tasksets

__all__ = [
    "AGENTS",
    "AgentSpec",
    "EvalAgent",
    "LLMEvalAgent",
    "ScriptedEvalAgent",
    "make_agent",
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
    "DatasetFormatError",
    "TaskSet",
    "load_flashrag_jsonl",
    "load_searchr1_parquet",
    "load_tasksets",
]

# The agents an evaluation runs live on the agents floor, above this one (the trainer evaluates its policy
# with this package). They stay importable from here, the documented path, but only when asked for, so
# importing the harness never imports the agents floor.
_AGENT_NAMES = frozenset({"AGENTS", "AgentSpec", "EvalAgent", "LLMEvalAgent", "ScriptedEvalAgent", "make_agent"})


def __getattr__(name: str):
    if name in _AGENT_NAMES:
        from ..agents import eval_agents  # the one allowed upward import: tests/test_layering.py FACADES

        return getattr(eval_agents, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
