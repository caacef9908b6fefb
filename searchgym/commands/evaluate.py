"""``searchgym eval``: score an agent on task sets and write table, summary, records and PNG.

Examples::

    searchgym eval --agent scripted --tasks builtin --output-dir runs/eval/scripted
    searchgym eval --agent transformers --model runs/ssp/checkpoints/step_00000040 --tasks builtin \\
        --output-dir runs/eval/ck40
    searchgym eval --agent openai --endpoint http://127.0.0.1:8000/v1 --model Qwen2.5-3B \\
        --tasks nq=nq.jsonl,hotpotqa=hotpot.jsonl --retriever http://127.0.0.1:8001 --limit 500 \\
        --output-dir runs/eval/qwen
    searchgym eval --compare runs/eval/base/summary.json runs/eval/ck40/summary.json
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap

from ..core.ray_support import add_ray_args, ray_config_from_args
from ..core.renamed import add_renamed_flag
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def register(subparsers) -> None:
    """Add the ``eval`` sub-command."""
    from ..agents.eval_agents import SCRIPTED_AGENTS, AgentSpec
    from ..core.config_fields import fields_help_text
    from ..evaluation.metrics import METRICS
    from ..evaluation.runner import EvalConfig
    from ..llm.registry import backend_help

    p = subparsers.add_parser(
        "eval",
        help="evaluate an agent on the built-in benchmark or QA datasets (EM/F1/cover-EM/LLM judge)",
        description=textwrap.fill(
            "Evaluate an agent on task sets; write summary.md, summary.json, eval.jsonl "
            "and accuracy.png. Resumes from eval.jsonl when rerun with the same --output-dir.",
            width=100,
        ),
        epilog=fields_help_text(EvalConfig, "evaluation settings (EvalConfig; the flags above set them)")
        + "\n\n"
        + fields_help_text(AgentSpec, "agent settings (AgentSpec; the flags above set them)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--agent",
        default="scripted",
        help=f"one of {', '.join(SCRIPTED_AGENTS)} (model-free) or an LLM backend: {backend_help(evaluates=True)} "
        "(default scripted)",
    )
    p.add_argument(
        "--model", help="transformers/vllm: model folder, checkpoint folder or 'smollm2'; openai: served model name"
    )
    p.add_argument("--endpoint", help="OpenAI-compatible base URL (agent openai)")
    p.add_argument("--api-key", help="bearer token for the endpoint")
    p.add_argument(
        "--tasks",
        default="builtin",
        help="comma list of builtin, atlas, [name=]file.jsonl (FlashRAG), file.parquet (Search-R1) (default builtin)",
    )
    p.add_argument("--limit", type=int, help="seeded sample of at most N questions per dataset")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, the bootstrap and sampling (default 0)")
    p.add_argument(
        "--on-error",
        choices=("stop", "skip"),
        default="stop",
        help="malformed dataset lines: stop (default) or skip and count",
    )
    p.add_argument(
        "--retriever", help="Search-R1 retrieval-server URL or saved index folder (default: BM25 over the world)"
    )
    p.add_argument(
        "--world", help="saved world folder for the builtin tasks / default retriever (default: the embedded world)"
    )
    p.add_argument(
        "--metrics", default="em,f1,cover_em", help=f"comma list of {', '.join(METRICS)} (default em,f1,cover_em)"
    )
    p.add_argument("--judge-endpoint", help="OpenAI-compatible URL of the llm_judge model")
    p.add_argument("--judge-model", default=None, help="served name of the judge model (default: 'default')")
    p.add_argument(
        "--layout",
        choices=("searchgym", "search-r1"),
        default="searchgym",
        help="observation layout; search-r1 = Search-R1's exact <information> text (default searchgym)",
    )
    p.add_argument("--max-turns", type=int, default=None, help="turns per question (default 10)")
    p.add_argument("--top-k", type=int, default=3, help="documents per search (default 3)")
    p.add_argument("--concurrency", type=int, default=16, help="questions in flight / concurrent requests (default 16)")
    add_ray_args(p)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per endpoint request (default 60)")
    p.add_argument("--retries", type=int, default=2, help="retries per endpoint request (default 2)")
    p.add_argument("--max-new-tokens", type=int, default=512, help="tokens per agent turn (default 512)")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0: greedy)")
    p.add_argument("--dtype", default=None, help="transformers/vllm dtype (default float32)")
    p.add_argument("--device", help="transformers device, e.g. cuda (default: the model's)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads of a transformers/vllm agent (default 1: more than one per process "
        "oversubscribes a busy machine)",
    )
    p.add_argument(
        "--engine",
        choices=("auto", "static", "hf"),
        default="auto",
        help="transformers decoding loop: auto (the static rollout engine on CPU for Llama-family models, "
        "transformers' loop elsewhere), static (the engine), hf (transformers' loop) (default auto)",
    )
    p.add_argument(
        "--rollout-dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="weights and KV cache of the static engine: auto (= --dtype), bfloat16 (half the bytes per "
        "decode step on CPUs with AVX-512 BF16; answers may differ from float32) (default auto)",
    )
    p.add_argument("--trajectories", action="store_true", help="store each full trajectory in eval.jsonl")
    p.add_argument("--output-dir", help="output folder (eval.jsonl, summary.json, summary.md, accuracy.png)")
    add_renamed_flag(p, "--out", "--output-dir")
    p.add_argument(
        "--restart", action="store_true", help="discard the records already in --output-dir instead of resuming"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--compare", nargs=2, metavar=("A.json", "B.json"), help="print B − A with paired 95%% intervals and exit"
    )
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ImportError as exc:  # an optional backend (vllm, pyarrow, the bundled model) is missing
        print(f"searchgym eval: error: {exc}", file=sys.stderr)
        return 2


def set_threads(args: argparse.Namespace) -> None:
    """``--threads`` for the agents that run torch in this process (others never import it)."""
    if args.threads < 1:
        raise InvalidArgumentError(f"--threads must be >= 1, got {args.threads}")
    if args.agent in ("transformers", "vllm"):
        import torch

        torch.set_num_threads(args.threads)


#: the least value of each numeric ``eval`` argument (``--seed -1`` failed in numpy after the run folder was made);
#: --max-turns, --top-k and --concurrency are EvalConfig's to refuse, before anything is read either
_LEAST = {
    "seed": 0,
    "limit": 1,
    "timeout": 0.001,
    "retries": 0,
    "max_new_tokens": 1,
    "temperature": 0,
    "threads": 1,
    "ray_workers": 1,
    "ray_chunk": 0,
}
#: flags only an LLM agent reads (default None, so that one given to a model-free agent is seen), and their defaults
_LLM_ONLY = ("dtype", "temperature")
_DEFAULT_DTYPE, _DEFAULT_TEMPERATURE = "float32", 0.0


def check_eval_args(args: argparse.Namespace) -> None:
    """Refuse, in one line and before anything is read or made, what ``eval`` cannot use: numbers out of range,
    an empty ``--output-dir`` (it meant the current folder), a malformed ``--ray`` address, and flags that the
    run would silently ignore (LLM sampling flags for a model-free agent, a judge model without ``llm_judge``)."""
    from ..agents.eval_agents import SCRIPTED_AGENTS
    from ..core.path_errors import refuse_empty_path
    from ..evaluation.metrics import check_metrics
    from ..evaluation.ray_eval import check_ray_address
    from .number_checks import refuse_bad_numbers

    refuse_bad_numbers(args, least=_LEAST)
    if args.output_dir is not None:
        refuse_empty_path(args.output_dir, "--output-dir", "a folder for the run, e.g. --output-dir runs/eval")
    check_ray_address(args.ray)
    metrics = check_metrics(args.metrics)
    if args.judge_model is not None and "llm_judge" not in metrics:
        raise InvalidArgumentError("--judge-model names the llm_judge metric's model; add --metrics ...,llm_judge")
    given = [f"--{name}" for name in _LLM_ONLY if getattr(args, name) is not None]
    if given and args.agent in SCRIPTED_AGENTS:
        said = f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'}"
        raise InvalidArgumentError(
            f"{said} for an LLM agent, but --agent is {args.agent!r} (model-free); add --agent transformers "
            "(a local model or 'smollm2') or --agent openai (a served one)"
        )


def _run(args: argparse.Namespace) -> int:
    check_eval_args(args)
    set_threads(args)
    if args.compare:
        from ..evaluation.report import compare_runs

        table, _ = compare_runs(*args.compare, seed=args.seed)
        print(table)
        return 0
    from ..agents.eval_agents import AgentSpec, make_agent
    from ..envs.episode import DEFAULT_MAX_TURNS
    from ..evaluation.report import markdown_table
    from ..evaluation.runner import EvalConfig, EvalInterrupted, evaluate
    from ..tasks.tasksets import load_tasksets

    config = EvalConfig(
        metrics=args.metrics,
        max_turns=DEFAULT_MAX_TURNS if args.max_turns is None else args.max_turns,
        top_k=args.top_k,
        layout=args.layout,
        concurrency=args.concurrency,
        seed=args.seed,
        progress=not args.no_progress,
        save_trajectories=args.trajectories,
    )
    spec = AgentSpec(
        kind=args.agent,
        model=args.model,
        endpoint=args.endpoint,
        api_key=args.api_key,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        max_new_tokens=args.max_new_tokens,
        temperature=_DEFAULT_TEMPERATURE if args.temperature is None else args.temperature,
        dtype=args.dtype or _DEFAULT_DTYPE,
        device=args.device,
        seed=args.seed,
        engine=args.engine,
        rollout_dtype=args.rollout_dtype,
    )
    judge = None
    if "llm_judge" in config.metrics:
        if not args.judge_endpoint:
            raise InvalidArgumentError("metric llm_judge needs --judge-endpoint URL (an OpenAI-compatible judge model)")
        from ..llm.openai_client import OpenAICompatibleGenerator
        from ..scoring.judge import LLMJudge

        judge = LLMJudge(
            OpenAICompatibleGenerator(
                args.judge_endpoint,
                args.judge_model or "default",
                timeout=args.timeout,
                max_retries=args.retries,
                concurrency=args.concurrency,
            )
        )
    world = None
    if args.world:
        from ..world import load_world

        world = load_world(args.world)
    tasksets = load_tasksets(args.tasks, limit=args.limit, seed=args.seed, on_error=args.on_error, world=world)
    for ts in tasksets:
        if ts.skipped:
            print(f"{ts.name}: skipped {ts.skipped} malformed lines (first: {ts.errors[0]})", file=sys.stderr)
    agent = make_agent(spec, world=world or (tasksets[0].world if len(tasksets) == 1 else None))
    try:
        result = evaluate(
            agent,
            tasksets,
            retriever=args.retriever,
            world=world,
            config=config,
            output_dir=args.output_dir,
            judge=judge,
            restart=args.restart,
            ray=ray_config_from_args(args),
        )
    except EvalInterrupted as exc:
        print(f"searchgym eval: error: {exc}", file=sys.stderr)
        return 3
    finally:
        agent.close()
    print(markdown_table(result.summary))
    t = result.summary["timing"]
    if t["questions_per_s"]:
        print(f"{t['questions_this_run']} questions in {t['seconds']:.1f} s ({t['questions_per_s']:.2f} questions/s)")
    for name, path in result.files.items():
        print(f"{name}: {path}")
    return 0
