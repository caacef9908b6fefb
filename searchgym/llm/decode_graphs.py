"""Fixed-shape decode steps for the rollout engine, replayed as CUDA graphs on a GPU.

On a GPU a 135M-parameter model's decode step is a few hundred small kernels, and launching them from
Python costs more than running them: the step is bound by the host, not by the card. A CUDA graph
records the kernels of one step once and replays them with one launch, but it fixes every shape and
every address. :class:`FixedShapeDecode` gives the engine's step that form
(:meth:`~searchgym.llm.rollout_engine.DecoderRunner.decode_fixed`):

* **Slots in buckets.** A step runs ``bucket(active)`` slots -- the next power of two, at most the
  cache's slots -- so one graph serves every active count of its bucket (at most ``log2(slots) + 1``
  graphs a cache); the padded slots write the cache's trash column and their logits are dropped.
* **All columns.** Attention reads every column of the cache under a mask made from the slots'
  lengths (a device tensor), so the attended width does not change per step; masked columns weigh
  exactly 0. The engine sizes the cache for the longest prompt plus the largest ``max_new_tokens``
  up front in this mode, so it rarely grows.
* **Inputs in place.** The step reads the tokens and the live-row count from buffers it owns and
  writes the logits to one it owns; a replay copies the new tokens in, replays, and returns a view.
* **Recaptured when stale.** A graph holds the addresses of the cache, its index tensors and the
  weights' tensors: when the cache is made anew or grows, or the weights move to other memory
  (:attr:`~searchgym.llm.decoder_weights.DecoderWeights.version`; an optimiser step updating in place
  moves nothing), every graph is dropped and captured again on first use (one eager warm-up step and
  one capture per bucket).

``graphs=False`` runs the same fixed-shape steps eagerly: what the tests check on a CPU, where CUDA
graphs do not exist, against the engine's exact steps (the same token ids at temperature 0).
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import InvalidArgumentError

__all__ = ["FixedShapeDecode", "bucket_size"]

#: eager warm-up steps before a capture (lazy initialisation such as cuBLAS workspaces must not be captured)
WARMUP_STEPS = 2


def bucket_size(active: int, slots: int) -> int:
    """The slots a fixed-shape step runs for ``active`` live rows: the next power of two, at most ``slots``."""
    if active < 1 or active > slots:
        raise InvalidArgumentError(f"active={active} rows must be in 1 .. slots={slots}")
    size = 1
    while size < active:
        size *= 2
    return min(size, slots)


class FixedShapeDecode:
    """Decode steps of a :class:`~searchgym.llm.rollout_engine.DecoderRunner` with fixed shapes, as CUDA graphs
    (``graphs=True``, a CUDA runner) or eagerly (see the module docstring), traced by ``torch.compile`` with
    ``compile_backend`` when given. :attr:`captures` and :attr:`replays` count what it did (a capture per bucket
    and binding)."""

    def __init__(self, runner: Any, *, graphs: bool, compile_backend: Optional[str] = None) -> None:
        if graphs and runner.device.type != "cuda":
            raise InvalidArgumentError(f"CUDA graphs need a CUDA device, not {runner.device.type}")
        self.runner = runner
        self.graphs = graphs
        self._step = runner.decode_fixed
        if compile_backend is not None:  # traced whole (a graph break would leave kernels unfused), the slots dynamic
            import torch

            self._step = torch.compile(runner.decode_fixed, backend=compile_backend, dynamic=True, fullgraph=True)
        self.captures = 0
        self.replays = 0
        self._graphs: dict[int, tuple[Any, Any, Any, Any]] = {}  # bucket -> (graph, tokens, active, logits)
        self._binding: Optional[tuple] = None
        self._pool: Any = None

    def step(self, tokens, active: int):
        """Feed ``tokens`` ``[active]`` to slots ``0 .. active - 1`` at their next positions and advance them;
        returns the next-token logits ``[active, vocab]`` (float32; with graphs a view of the graph's output
        buffer, valid until the next step)."""
        import torch

        runner = self.runner
        runner.make_room(active)
        batch = bucket_size(active, runner.cache.slots)
        if not self.graphs:
            padded = torch.zeros(batch, dtype=torch.long, device=runner.device)
            padded[:active] = tokens
            active_t = torch.tensor(active, dtype=torch.long, device=runner.device)
            logits = self._step(padded, active_t, batch)[:active]
        else:
            graph, tok_buf, active_buf, out = self._graph_for(batch)
            tok_buf[:active].copy_(tokens)
            tok_buf[active:].zero_()
            active_buf.fill_(active)
            graph.replay()
            self.replays += 1
            logits = out[:active]
        runner.advance(active)
        return logits

    def reset(self) -> None:
        """Drop every captured graph and its memory pool (the next step captures again)."""
        self._graphs.clear()
        self._pool = None
        self._binding = None

    def _graph_for(self, batch: int):
        """The graph of ``batch`` slots for the current cache and weights, captured now when there is none."""
        runner = self.runner
        cache = runner.cache
        binding = (id(cache.kv), cache.slots, cache.columns, runner.weights.version)
        if binding != self._binding:
            self.reset()
            self._binding = binding
        entry = self._graphs.get(batch)
        if entry is None:
            entry = self._graphs[batch] = self._capture(batch)
        return entry

    def _capture(self, batch: int):
        """Record one fixed-shape step of ``batch`` slots (after eager warm-up steps on a side stream, whose
        cache writes the replay repeats with the same inputs: the lengths are only advanced after it)."""
        import torch

        runner = self.runner
        device = runner.device
        tok_buf = torch.zeros(batch, dtype=torch.long, device=device)
        active_buf = torch.zeros((), dtype=torch.long, device=device)  # 0 live rows: warm-up writes only trash
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self._step(tok_buf, active_buf, batch)
        torch.cuda.current_stream(device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self._step(tok_buf, active_buf, batch)
        self.captures += 1
        return graph, tok_buf, active_buf, out
