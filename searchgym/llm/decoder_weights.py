"""The rollout engine's view of a decoder's weights: converted, fused and prepacked, refreshed on change.

:class:`DecoderWeights` binds each layer of a Llama-family decoder to plain calls (RMSNorm as
transformers computes it, the q/k/v and gate/up projections fused into one matmul each, oneDNN-prepacked
copies on CPU, copies in the rollout dtype) and keeps every derived tensor keyed by the parameters it
came from, so :meth:`DecoderWeights.refresh` after an optimiser step remakes only what changed (a LoRA
step re-derives the adapter's tensors, not the frozen base weights'). A PEFT LoRA layer's active adapters are
folded into a derived copy of its base weight (``W + scaling * B @ A``), so an adapted projection runs as fast as a
plain one (fused, packed, in the rollout dtype); switching adapters off or to another adapter re-derives it.
Projections it cannot fold (DoRA and other variants, ``fold_lora=False``) are called as modules.
:class:`~searchgym.llm.rollout_engine.DecoderRunner` runs the forward over them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .bf16_hardware import warn_if_bf16_emulated
from .role_adapters import adapter_state

__all__ = ["DecoderWeights", "PACK_LIMIT_BYTES", "packed_linear", "prepack_linear", "rollout_dtype"]

#: prepack the weights by default when the linear layers' copies take at most this many bytes
PACK_LIMIT_BYTES = 2 << 30


def prepack_linear(weight, rows: int):
    """oneDNN's copy of ``weight`` (out x in) laid out for ``rows``-row inputs: what the engine's dense calls read on
    CPU (``benchmarks/bench_projection_kernels.py`` times the same kernel)."""
    import torch

    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)


def packed_linear(packed, bias=None) -> Callable:
    """``x -> x @ weight.T + bias`` on a :func:`prepack_linear` copy."""
    import torch

    linear = torch.ops.mkldnn._linear_pointwise
    return lambda x: linear(x, packed, bias, "none", [None], "")


def rollout_dtype(name: str, model_dtype):
    """The torch dtype of ``name`` (``"auto"``: the model's own)."""
    import torch

    return model_dtype if name == "auto" else getattr(torch, name)


class DecoderWeights:
    """A decoder's embedding, layers, final norm and LM head as calls in the rollout dtype (module docstring).

    After :meth:`refresh`: ``embed(ids)``, ``layers`` (per layer ``(input norm, qkv projections, o_proj,
    post-attention norm, gate/up projections, down_proj, activation)``), ``norm(h)`` and ``head(h)``."""

    def __init__(
        self, model, decoder, head_module, dtype: str, *, pack: Optional[bool], pack_rows: int, fold_lora: bool = True
    ) -> None:
        import torch

        self.model = model
        #: fold PEFT LoRA adapters into derived dense weights (else LoRA layers are called as modules)
        self.fold_lora = fold_lora
        self.decoder = decoder
        self.head_module = head_module
        param = next(model.parameters())
        self.device = param.device
        self.dtype = rollout_dtype(dtype, param.dtype)
        # oneDNN-prepacked weight copies (CPU): by default when the weights are copied anyway (another dtype)
        # or the copies are small (at most PACK_LIMIT_BYTES)
        can_pack = self.device.type == "cpu" and torch.backends.mkldnn.is_available()
        if self.dtype == torch.bfloat16:  # oneDNN packs bf16 only on CPUs with AVX-512 BW/VL/DQ or AVX-NE-CONVERT
            can_pack = can_pack and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
            warn_if_bf16_emulated(
                self.device,
                "bfloat16 rollouts",
                "emulated bf16 decodes slower than float32 (3.6x at batch 16 on a Zen 3); use rollout_dtype=float32",
            )
        if pack is None:
            linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
            pack = self.dtype != param.dtype or linear * param.element_size() <= PACK_LIMIT_BYTES
        self.pack = can_pack and bool(pack)
        self._derived_cache: dict[tuple, tuple[tuple, tuple, Any]] = {}
        self._used: set[tuple] = set()
        #: the refresh that last used each derived tensor: one unused for a whole refresh is dropped after the next,
        #: so the tensors of two adapters used in turn (a role's own, ``proposer_adapter``) both stay
        self._last_used: dict[tuple, int] = {}
        self._refreshes = 0
        self.pack_rows = max(1, int(pack_rows))
        self._fingerprint: Optional[int] = None
        #: advances when :meth:`refresh` binds the layers to other memory or another code path: a weight replaced or
        #: re-derived into a new tensor, an adapter toggled. Captured CUDA graphs hold those addresses and paths; a
        #: weight updated in place (an optimiser step on the weights the layers read, or a derived CUDA copy
        #: refreshed in place) keeps them, and the graphs replay reading the new values
        self.version = 0
        self._binding: Optional[int] = None
        self.layers: list[tuple] = []
        self.embed: Any = None
        self.norm: Any = None
        self.head: Any = None

    def _fingerprint_now(self) -> int:
        """A hash of every parameter's identity and version counter, and of the adapter state (:func:`adapter_state`):
        changes when a weight is replaced or updated, or a PEFT adapter is toggled (``disable_adapter()``) or
        another one made active."""
        params = tuple((id(p), p._version) for p in self.model.parameters())
        return hash((params, adapter_state(self.model)))

    def refresh(self) -> None:
        """Bind the layers' weights (converting, fusing and packing them as configured) unless nothing changed
        since the last call; only tensors derived from changed parameters are remade."""
        fp = self._fingerprint_now()
        if fp == self._fingerprint and self.layers:
            return
        self._used = set()
        bound = (self.embed, self.layers, self.norm, self.head)

        def conv(t):
            if t is None or t.dtype == self.dtype:
                return t
            return self._derived("dtype", (t,), lambda: t.detach().to(self.dtype))

        dec = self.decoder
        self.embed = self._embedding(dec.embed_tokens, conv)
        self.layers = []
        for layer in dec.layers:
            attn, mlp = layer.self_attn, layer.mlp
            self.layers.append(
                (
                    self._rms(layer.input_layernorm, conv),
                    self._projections((attn.q_proj, attn.k_proj, attn.v_proj), conv),
                    self._linear(attn.o_proj, conv),
                    self._rms(layer.post_attention_layernorm, conv),
                    self._projections((mlp.gate_proj, mlp.up_proj), conv),
                    self._linear(mlp.down_proj, conv),
                    mlp.act_fn,
                )
            )
        self.norm = self._rms(dec.norm, conv)
        self.head = self._linear(self.head_module, conv)
        self._refreshes += 1
        for key in self._used:
            self._last_used[key] = self._refreshes
        for key in [k for k, n in self._last_used.items() if n < self._refreshes - 1]:  # unused for two refreshes
            del self._derived_cache[key], self._last_used[key]
        self._fingerprint = self._fingerprint_now()
        binding = self._binding_now()
        if binding != self._binding:
            self._binding = binding
            self.version += 1
        elif bound[1]:  # the same memory and path: keep the bound calls (a compiled step's guards hold them)
            self.embed, self.layers, self.norm, self.head = bound

    def _binding_now(self) -> int:
        """A hash of where the bound layers read their weights (each parameter's and each derived tensor's
        address, shape and dtype) and of the adapter state (which adapters are active, whether switched off)."""

        def where(t) -> tuple:
            try:
                return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))
            except (RuntimeError, NotImplementedError):  # an opaque (oneDNN-packed) CPU tensor: its identity
                return (id(t), tuple(t.shape), str(t.dtype))

        params = tuple(where(p) for p in self.model.parameters())
        derived = tuple(where(self._derived_cache[k][2]) for k in sorted(self._used))
        return hash((params, derived, adapter_state(self.model)))

    def _derived(self, kind: str, sources: tuple, make: Callable):
        """``make()``, a tensor derived from the parameters ``sources``, remade only when one of them was
        replaced or updated in place since (version counters): a LoRA step re-derives the adapter's tensors,
        not the frozen base weights'."""
        key = (kind, *(id(t) for t in sources))  # all of them: a stacked adapter's fold shares its first with default's
        self._used.add(key)
        stamp = tuple((id(t), t._version) for t in sources)
        hit = self._derived_cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[2]
        value = make()
        old = hit[2] if hit is not None else None
        if (
            old is not None
            and value.device.type == "cuda"
            and (old.shape, old.dtype, old.device, old.stride())
            == (value.shape, value.dtype, value.device, value.stride())
        ):
            old.copy_(value)  # on CUDA the old tensor's address is kept: captured graphs read the new values
            value = old
        self._derived_cache[key] = (stamp, sources, value)  # the sources are held: their ids stay theirs
        return value

    def _cast_module(self, module) -> Callable:
        """``module`` called in its own dtype, its output in the rollout dtype."""
        params = list(module.parameters())
        own = params[0].dtype if params else self.dtype
        if own == self.dtype:
            return module
        dtype = self.dtype
        return lambda x: module(x.to(own)).to(dtype)

    def _dense(self, weight, bias, sources: tuple) -> Callable:
        """``x -> x @ weight.T + bias``: oneDNN on a prepacked copy when packing, else ``F.linear``."""
        import torch.nn.functional as F

        if self.pack:
            rows = self.pack_rows
            return packed_linear(self._derived("pack", sources, lambda: prepack_linear(weight, rows)), bias)
        return lambda x: F.linear(x, weight, bias)

    def _effective(self, module) -> Optional[tuple]:
        """``(weight, bias)`` a linear layer computes with: a plain ``nn.Linear``'s own, or a PEFT LoRA layer's base
        weight with its active adapters folded in (``W + scaling * B @ A``, re-derived when any of them changes;
        the base weight alone with the adapters switched off). ``None`` for anything else (DoRA and other LoRA
        variants, a bias on the adapter, ``fold_lora=False``): the layer is then called as a module."""
        import torch

        if type(module) is torch.nn.Linear:
            return module.weight, module.bias
        base = getattr(module, "base_layer", None)
        if not self.fold_lora or type(base) is not torch.nn.Linear or not hasattr(module, "lora_A"):
            return None
        if getattr(module, "fan_in_fan_out", False) or not isinstance(module.disable_adapters, bool):
            return None
        if module.disable_adapters or module.merged:  # merged: the base weight already holds the adapter
            return base.weight, base.bias
        names = [a for a in module.active_adapters if a in module.lora_A]
        if any(a in module.lora_variant or module.lora_bias.get(a, False) for a in names):
            return None
        if not names:
            return base.weight, base.bias
        pairs = [(module.lora_A[a].weight, module.lora_B[a].weight, float(module.scaling[a])) for a in names]
        sources = tuple(t for A, B, _ in pairs for t in (A, B)) + (base.weight,)

        def fold():
            # an ordinary tensor even under inference mode: the tensors derived from it are stamped by its version
            with torch.inference_mode(False):
                w = base.weight.detach().clone()
                for A, B, scale in pairs:
                    w.addmm_(B.detach().to(w.dtype), A.detach().to(w.dtype), alpha=scale)
            return w

        return self._derived("lora", sources, fold), base.bias

    def _linear(self, module, conv) -> Callable:
        """A linear layer as a call on its effective (converted, packed) weight (:meth:`_effective`), else the
        module itself."""
        eff = self._effective(module)
        if eff is None:  # a wrapper this view cannot fold: call it (adapters on/off work)
            return self._cast_module(module)
        weight, bias = eff
        return self._dense(conv(weight), conv(bias), (weight,))

    def _projections(self, modules: tuple, conv) -> Callable:
        """``x -> (m(x) for m in modules)``: one matmul over the concatenated effective weights when every module
        has one (:meth:`_effective`) and they are copied anyway (packed or converted), else one call per module."""
        import torch

        found = [self._effective(m) for m in modules]
        effs = [e for e in found if e is not None]
        biased = [e[1] is not None for e in effs]
        if not (len(effs) == len(modules) and self.pack and len(set(biased)) == 1):
            calls = [self._linear(m, conv) for m in modules]
            return lambda x: tuple(f(x) for f in calls)
        weights = tuple(e[0] for e in effs)
        fused = self._derived("fuse", weights, lambda: torch.cat([conv(w).detach() for w in weights]))
        bias = None
        if biased[0]:
            biases = tuple(e[1] for e in effs)
            bias = self._derived("fuse-bias", biases, lambda: torch.cat([conv(b).detach() for b in biases]))
        dense = self._dense(fused, bias, weights)
        sizes = [int(w.shape[0]) for w in weights]
        return lambda x: dense(x).split(sizes, dim=-1)

    def _embedding(self, module, conv) -> Callable:
        """The token embedding as a call on its (converted) weight, or the module when it is not plain."""
        import torch
        import torch.nn.functional as F

        if type(module) is not torch.nn.Embedding:
            return self._cast_module(module)
        w = conv(module.weight)
        return lambda ids: F.embedding(ids, w)

    def _rms(self, module, conv) -> Callable:
        """transformers' RMSNorm, same operations in the same order (statistics in float32)."""
        import torch

        eps = getattr(module, "variance_epsilon", None)
        weight = getattr(module, "weight", None)
        if eps is None or weight is None or not type(module).__name__.endswith("RMSNorm"):
            return self._cast_module(module)
        w = conv(weight)
        dtype = self.dtype

        def norm(x):
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
            return w * h.to(dtype)

        return norm
