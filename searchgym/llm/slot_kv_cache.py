"""The rollout engine's slot KV cache: one preallocated tensor, a slot per row being decoded.

``kv`` is ``[2, layers, slots, kv_heads, columns + 1, head_dim]`` (zeroed when made, so masked columns
never hold NaN); a row's keys/values fill columns ``0 .. length - 1`` of its slot, the last column is a
trash column that padding writes to. The decoder writes one column per row and step through the flat
per-layer views ``k_rows`` / ``v_rows`` (row ``head_base[slot, head] + column``). The columns grow by
half when a row needs more; rows leave by :meth:`SlotKVCache.move` (the last active slots fill the
holes). :class:`~searchgym.llm.rollout_engine.DecoderRunner` runs the model over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    import torch

__all__ = ["SlotKVCache"]


class SlotKVCache:
    """Keys and values of the rows being decoded, a slot each, with their lengths (see the module docstring)."""

    def __init__(self, n_layers: int, n_kv: int, head_dim: int, dtype: Any, device: Any) -> None:
        self.n_layers, self.n_kv, self.head_dim = n_layers, n_kv, head_dim
        self.dtype, self.device = dtype, device
        self.kv: Optional[torch.Tensor] = None
        self.slots = 0
        self.columns = 0
        self.grows = 0
        self.lengths: list[int] = []
        self.lengths_t: Optional[torch.Tensor] = None
        self.k_rows: list = []
        self.v_rows: list = []
        self.head_base: Optional[torch.Tensor] = None
        self.column_ids: Optional[torch.Tensor] = None

    def allocate(self, slots: int, columns: int) -> None:
        """A cache of at least ``slots`` rows and ``columns`` positions (plus one trash column), every row
        empty: the one kept from the last call when it is large enough, else a new zeroed one (masked
        columns are read, so they must hold finite numbers: zeros or earlier rows' keys and values)."""
        import torch

        if self.kv is not None and self.slots >= slots and self.columns >= columns:
            self.lengths = [0] * self.slots
            assert self.lengths_t is not None
            self.lengths_t.zero_()
            return
        self.kv = None
        self.kv = torch.zeros(
            (2, self.n_layers, slots, self.n_kv, columns + 1, self.head_dim), dtype=self.dtype, device=self.device
        )
        self.slots, self.columns = slots, columns
        self.lengths = [0] * slots
        self.lengths_t = torch.zeros(slots, dtype=torch.long, device=self.device)
        self._make_views()

    def _make_views(self) -> None:
        """Per-layer flat views of the keys and values, each slot's and head's first flat row, column ids."""
        import torch

        assert self.kv is not None
        d = self.head_dim
        self.k_rows = [self.kv[0, layer].view(-1, d) for layer in range(self.n_layers)]
        self.v_rows = [self.kv[1, layer].view(-1, d) for layer in range(self.n_layers)]
        heads = torch.arange(self.n_kv, device=self.device)
        rows = torch.arange(self.slots, device=self.device)
        self.head_base = (rows[:, None] * self.n_kv + heads[None, :]) * (self.columns + 1)  # [slots, kv_heads]
        self.column_ids = torch.arange(self.columns + 1, device=self.device)

    @property
    def cache_bytes(self) -> int:
        """Bytes the slot cache holds (0 when released)."""
        return 0 if self.kv is None else self.kv.numel() * self.kv.element_size()

    def release(self) -> None:
        """Drop the cache (its memory goes back)."""
        self.kv = None
        self.k_rows, self.v_rows = [], []
        self.head_base = self.lengths_t = self.column_ids = None
        self.slots = self.columns = 0
        self.lengths = []

    def ensure_columns(self, needed: int) -> bool:
        """Grow the cache (by half at least) so ``needed`` columns fit; True if it grew."""
        import torch

        if needed <= self.columns:
            return False
        assert self.kv is not None
        new = max(needed, self.columns + self.columns // 2 + 1)
        old = self.kv
        self.kv = torch.zeros(
            (2, self.n_layers, self.slots, self.n_kv, new + 1, self.head_dim), dtype=self.dtype, device=self.device
        )
        self.kv[:, :, :, :, : self.columns].copy_(old[:, :, :, :, : self.columns])
        self.columns = new
        self.grows += 1
        self._make_views()
        return True

    def move(self, src: Sequence[int], dst: Sequence[int]) -> None:
        """Copy slots ``src`` into slots ``dst`` (keys, values and lengths)."""
        import torch

        if not src:
            return
        assert self.kv is not None and self.lengths_t is not None
        width = max(self.lengths[s] for s in src)
        s_idx = torch.tensor(list(src), device=self.device)
        d_idx = torch.tensor(list(dst), device=self.device)
        self.kv[:, :, d_idx, :, :width] = self.kv[:, :, s_idx, :, :width]
        for s, d in zip(src, dst):
            self.lengths[d] = self.lengths[s]
        self.lengths_t[d_idx] = self.lengths_t[s_idx]

    def row_kv(self, slot: int):
        """``(keys, values)``: per layer ``[kv_heads, length, head_dim]`` copies of a slot's cache."""
        assert self.kv is not None
        kv = self.kv[:, :, slot, :, : self.lengths[slot]].clone()
        return list(kv[0].unbind(0)), list(kv[1].unbind(0))

    def load_prefix(self, slot: int, keys: Sequence, values: Sequence, n: int) -> None:
        """Copy the first ``n`` positions of stored per-layer keys/values into ``slot``."""
        import torch

        assert self.kv is not None
        self.kv[0, :, slot, :, :n].copy_(torch.stack([k[:, :n] for k in keys]))
        self.kv[1, :, slot, :, :n].copy_(torch.stack([v[:, :n] for v in values]))
