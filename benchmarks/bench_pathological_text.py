"""Time of every public reader of untrusted text on pathological inputs, and how it grows with their length.

Each entry point that sees model output (actions, tool calls, proposed questions, selector replies, verl
responses) or corpus text (retrieved documents, reader passages) is run on each generator of pathological text
(a lone ``<`` before a run of spaces, tabs or Unicode spaces; ``<``, ``< ``, ``<think>``, ``<search>``,
``<tool_call>``, ``<answer>x``, ``<information>``, ``</information>`` repeated; an unclosed fence; ``{`` and
``[`` runs and JSON nested too deeply; long words; repeated document headers; ...) at ``--sizes`` characters
(default 10k, 40k, 160k). Reported per pair: the best of ``--repeat`` runs at each size and the growth exponent
(the least-squares slope of log time over log size: 1 is linear, 2 quadratic). An input that raises is reported
with its exception. A size slower than ``--guard`` seconds skips the larger ones, so the script also measures
an old checkout (``PYTHONPATH=<old tree>``) that is quadratic there. Prints the worst input per entry point and
writes ``benchmarks/results/pathological_text_cpu.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pathological_text.py [--sizes 10000,40000,160000]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any, Callable

from machine import machine_info, machine_line


def _rep(unit: str, n: int) -> str:
    """``unit`` repeated to ``n`` characters."""
    return (unit * (n // len(unit) + 1))[:n]


GENERATORS: dict[str, Callable[[int], str]] = {
    "< + spaces": lambda n: "<" + " " * n,
    "< + spaces + !": lambda n: "<" + " " * n + "!",
    "< / + spaces": lambda n: "< / " + " " * n,
    "< + newlines": lambda n: "<" + "\n" * n,
    "< + tabs": lambda n: "<" + "\t" * n,
    "< + U+00A0": lambda n: "<" + "\u00a0" * n,
    "< + U+3000": lambda n: "<" + "\u3000" * n,
    "<answer>x</ + spaces + !": lambda n: "<answer>x</" + " " * n + "!",
    "< repeated": lambda n: "<" * n,
    "'< ' repeated": lambda n: _rep("< ", n),
    "<think> repeated": lambda n: _rep("<think>", n),
    "<search> repeated": lambda n: _rep("<search>", n),
    "<tool_call> repeated": lambda n: _rep("<tool_call>", n),
    "<answer>x repeated": lambda n: _rep("<answer>x", n),
    "<information> repeated": lambda n: _rep("<information>", n),
    "</information> repeated": lambda n: _rep("</information>", n),
    "<tool_response> repeated": lambda n: _rep("<tool_response>", n),
    "newlines": lambda n: "\n" * n,
    "``` + spaces + x": lambda n: "```" + " " * n + "x",
    "{ run": lambda n: "{" * n,
    "[ run": lambda n: "[" * n,
    "<search> + nested JSON": lambda n: "<search>" + '{"a":' * (n // 5) + "1" + "}" * (n // 5) + "</search>",
    "<tool_call> + nested JSON": lambda n: "<tool_call>" + "[" * (n // 2) + "]" * (n // 2) + "</tool_call>",
    "one long word": lambda n: "a" * n,
    "Capitalised word + spaces": lambda n: "Alice" + " " * n + "!",
    'Doc 1 (Title: " repeated': lambda n: _rep('Doc 1 (Title: "', n),
    "one document per line": lambda n: "".join(f'Doc {i} (Title: "t{i}") body {i}\n' for i in range(n // 30 + 1))[:n],
    "What is a + spaces + b?": lambda n: "What is a" + " " * n + "b?",
    "What is the capital of ... (nested)": lambda n: "What is " + "the capital of " * (n // 15) + "Merovia?",
    "Question: x repeated": lambda n: _rep("Question: x", n),
}


def entry_points() -> dict[str, Callable[[str], Any]]:
    """``name -> f(text)``; an env entry returns its own step time (reset is not timed)."""
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the envs)
    from searchgym.agents.scripted import SimpleExtractor
    from searchgym.construction.question_templates import read_path_question
    from searchgym.construction.selectors import SelectorError, parse_selector_reply
    from searchgym.core.answers import exact_match, normalize_answer
    from searchgym.core.types import Task, Trajectory, Turn
    from searchgym.envs.function_calling import parse_message
    from searchgym.envs.protocol import parse_action, strip_forged
    from searchgym.integrations.verl.reward import split_turns
    from searchgym.llm.tiny_models import question_of
    from searchgym.scoring.extractive_reader import ExtractiveReader
    from searchgym.scoring.judge import parse_verdict
    from searchgym.scoring.outcomes import document_materials
    from searchgym.scoring.rag_verifier import ReaderError, extract_final_answer, materials_from_trajectory
    from searchgym.training.demonstrations import _titles
    from searchgym.world.synthetic import default_world
    from searchgym.wrappers.diagnostics import information_utilisation
    from searchgym.wrappers.dynasearcher_reward import answer_score
    from searchgym.wrappers.evidence_verifier_reward import evidence_is_verbatim
    from searchgym.wrappers.waypoint_coverage_reward import waypoint_coverage

    world = default_world()
    reader = ExtractiveReader(world)
    reader.answer("warm-up", ['Doc 1 (Title: "x") x'])  # builds the name automaton
    extractor = SimpleExtractor()
    task = Task(id="t", question="Where was Alice Varn born?", answers=["Paris"])

    def trajectory(information: str = "", think: str = "") -> Trajectory:
        traj = Trajectory(role="proposer", task=task, prompt="p")
        traj.turns.append(Turn(index=0, action="<search>q</search>", think="x", information=information))
        traj.turns.append(Turn(index=1, action="<answer>a</answer>", think=think))
        return traj

    def selector(text: str) -> Any:
        try:
            return parse_selector_reply(text, 3)
        except SelectorError as exc:
            return exc.kind

    def final_answer(text: str) -> Any:
        try:
            return extract_final_answer(text)
        except ReaderError:
            return None

    def env_step(env_id: str, **kwargs: Any) -> Callable[[str], float]:
        env = gym.make(env_id, **kwargs)
        slots = len(env.action_space) if isinstance(env.action_space, gym.spaces.Tuple) else 0

        def step(text: str) -> float:
            env.reset(seed=0)
            t0 = time.perf_counter()
            env.step((text,) + ("",) * (slots - 1) if slots else text)
            return time.perf_counter() - t0

        step.timed = True  # type: ignore[attr-defined]
        return step

    uncut = {"max_action_chars": 10**7}
    return {
        "parse_action": lambda s: parse_action(s, max_chars=10**7),
        "strip_forged": strip_forged,
        "parse_message (text)": lambda s: parse_message(s, max_chars=10**7),
        "parse_message (message dict)": lambda s: parse_message({"role": "assistant", "content": s}, max_chars=10**7),
        "KGSolver-v0 step": env_step("KGSolver-v0", **uncut),
        "KGSolver-v0 step (default 20k cut)": env_step("KGSolver-v0"),
        "KGSolver-v0 step (function_calling)": env_step("KGSolver-v0", protocol="function_calling", **uncut),
        "KGProposer-v0 step": env_step("KGProposer-v0", **uncut),
        "KGSelfPlay-v0 step": env_step("KGSelfPlay-v0", **uncut),
        "normalize_answer / exact_match": lambda s: (normalize_answer(s), exact_match(s, ["Paris"])),
        "WCR waypoint_coverage": lambda s: waypoint_coverage(s, ["Alice Varn", "a" * 60 + "b"]),
        "EVE evidence_is_verbatim": lambda s: evidence_is_verbatim(s, ["abc " + s]),
        "DynaSearcher answer_score": lambda s: answer_score(s, ["Paris"]),
        "diagnostics information_utilisation": lambda s: information_utilisation(trajectory(s, s)),
        "judge parse_verdict": parse_verdict,
        "verifier extract_final_answer": final_answer,
        "verifier materials_from_trajectory": lambda s: materials_from_trajectory(trajectory(s)),
        "outcomes document_materials": lambda s: document_materials(trajectory(s)),
        "ExtractiveReader.answer (passage)": lambda s: reader.answer("Where was Alice Varn born?", [s]),
        "ExtractiveReader.answer (question)": lambda s: reader.answer(s, ["Merovia's capital is Ostrel."]),
        "read_path_question": lambda s: read_path_question(s, lambda t: t == "Merovia"),
        "verl split_turns": split_turns,
        "selector parse_selector_reply": selector,
        "SimpleExtractor.extract": lambda s: extractor.extract(s, "Bob", "place of birth", s[:200]),
        "tiny_models question_of": question_of,
        "demonstrations _titles": _titles,
    }


def _slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) over log(size); None below two points or under 0.1 ms."""
    pts = [(math.log(n), math.log(t)) for n, t in points if t >= 1e-4]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def measure(f: Callable[[str], Any], make: Callable[[int], str], sizes: list[int], repeat: int, guard: float) -> dict:
    """Best-of-``repeat`` seconds per size (larger sizes skipped once one exceeds ``guard``), slope, error."""
    times: list[tuple[int, float]] = []
    error = None
    for n in sizes:
        text, best = make(n), math.inf
        try:
            for _ in range(repeat):
                t0 = time.perf_counter()
                out = f(text)
                took = out if getattr(f, "timed", False) else time.perf_counter() - t0
                best = min(best, took)
                if took > 0.5:  # one run is enough to see a slow size
                    break
        except Exception as exc:  # reported, not hidden: a reader that raises on untrusted text is a finding
            error = f"{type(exc).__name__}: {str(exc)[:120]}"
            break
        times.append((n, best))
        if best > guard:
            break
    return {"seconds": {str(n): t for n, t in times}, "exponent": _slope(times), "error": error}


def main(argv=None) -> dict:
    """Run the benchmark; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,40000,160000", help="input lengths in characters")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size, best kept (default 3)")
    ap.add_argument("--guard", type=float, default=10.0, help="seconds after which larger sizes are skipped")
    ap.add_argument("--only", default="", help="comma-separated substrings of the entry points to run")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "pathological_text_cpu.json"))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    only = [s for s in args.only.split(",") if s]

    rows: dict[str, dict[str, dict]] = {}
    for name, f in entry_points().items():
        if only and not any(o in name for o in only):
            continue
        rows[name] = {gen: measure(f, make, sizes, args.repeat, args.guard) for gen, make in GENERATORS.items()}

    def last_time(r: dict) -> float:
        return max(r["seconds"].values(), default=0.0) if not r["error"] else -1.0

    print(f"pathological inputs of {', '.join(f'{n:,}' for n in sizes)} characters ({machine_line()}, one thread)")
    print("| entry point | slowest input | " + " | ".join(f"{n // 1000}k ms" for n in sizes) + " | exponent |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    for name, by_gen in rows.items():
        gen, r = max(by_gen.items(), key=lambda kv: last_time(kv[1]))
        cells = [f"{r['seconds'][str(n)] * 1e3:.1f}" if str(n) in r["seconds"] else "-" for n in sizes]
        exp = "-" if r["exponent"] is None else f"{r['exponent']:.2f}"
        print(f"| {name} | {gen} | " + " | ".join(cells) + f" | {exp} |")
    errors = [(name, gen, r["error"]) for name, by_gen in rows.items() for gen, r in by_gen.items() if r["error"]]
    for name, gen, err in errors:
        print(f"raised: {name} on {gen!r}: {err}")
    exponents = [r["exponent"] for by_gen in rows.values() for r in by_gen.values() if r["exponent"] is not None]
    worst = max(exponents, default=None)
    print(f"largest growth exponent over all {sum(len(g) for g in rows.values())} pairs: {worst and round(worst, 2)}")
    result = {"sizes": sizes, "repeat": args.repeat, "machine": machine_info(), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
