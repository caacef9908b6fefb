"""Rollouts from an external vLLM server, with the trainer's weights pushed to it after every update.

This is TRL's ``vllm_mode="server"``: the policy trains in this process while a separate ``vllm serve``
(its own GPUs) samples the rollouts through the OpenAI-compatible API. After each optimiser step
:meth:`VLLMServerGenerator.load_weights` streams the new weights into the server over vLLM's
weight-transfer engine, with the same endpoints TRL's ``VLLMClient`` uses:

1. ``GET /server_info`` (a development endpoint: the server needs ``VLLM_SERVER_DEV_MODE=1``) must show a
   ``weight_transfer_config``; ``GET /get_world_size`` gives the server's worker count;
2. once: ``POST /init_weight_transfer_engine`` while this process joins the NCCL group as rank 0;
3. per update: ``POST /start_weight_update``, ``POST /update_weights`` (names, dtypes, shapes) while the
   tensors are broadcast, ``POST /finish_weight_update``, then ``POST /reset_prefix_cache`` so no KV
   entry computed with the old weights is reused.

Start the server as::

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend": "nccl"}'

A server that cannot take weights (no development endpoints, no weight-transfer engine, or not vLLM
at all) is refused when the generator is built, with the fix in the message; pass
``push_weights=False`` to sample from a fixed model on purpose. The tensors travel through a
:class:`WeightTransport`; the default, :class:`NCCLWeightTransport`, needs vLLM and a CUDA device in
this process (vLLM's NCCL helpers), as TRL's client does.
"""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Protocol

from ..core.llm import GenerationConfig, GenerationError
from .openai_client import OpenAICompatibleGenerator

logger = logging.getLogger(__name__)

SERVE_HINT = 'VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config \'{"backend": "nccl"}\''


class WeightTransport(Protocol):
    """Moves tensors from this process into the server's workers (the server receives them concurrently)."""

    def init_info(self, world_size: int) -> dict:
        """The ``init_info`` sent to ``/init_weight_transfer_engine`` for a server of ``world_size`` workers."""

    def update_info_extra(self) -> dict:
        """Extra keys of each ``/update_weights`` ``update_info`` (e.g. vLLM's ``packed`` flag)."""

    def open(self, init_info: dict) -> None:
        """Join the transfer group described by ``init_info`` (blocks until the server joins too)."""

    def send(self, named_tensors: Iterator[tuple[str, object]]) -> None:
        """Send the tensors in order (blocks until the server has received them)."""

    def close(self) -> None:
        """Leave the group."""


class NCCLWeightTransport:
    """vLLM's NCCL weight-transfer engine, trainer side (rank 0); needs vLLM and CUDA in this process.

    ``master_address``: the address the server's workers reach this process at (default: vLLM's
    ``get_ip()``); ``port``: the rendezvous port (TRL's default 51216); ``device``: the CUDA device
    that broadcasts.
    """

    def __init__(self, *, master_address: str | None = None, port: int = 51216, device: str = "cuda:0") -> None:
        import torch

        try:
            import vllm  # noqa: F401
        except ImportError:
            raise GenerationError(
                "pushing weights to a vLLM server uses vLLM's NCCL helpers in the trainer process: "
                "pip install 'searchgym[vllm]' on a CUDA machine (or build the generator with push_weights=False)"
            ) from None
        if not torch.cuda.is_available():
            raise GenerationError(
                "pushing weights to a vLLM server needs a CUDA device in the trainer process "
                "(NCCL); none is visible here"
            )
        self.device = torch.device(device)
        self.port = port
        self.master_address = master_address
        self._group = None
        self._stateful = _vllm_at_least("0.28.0")

    def init_info(self, world_size: int) -> dict:
        """Rank 0 is this process; the server's workers follow it."""
        if self.master_address is None:
            from vllm.utils.network_utils import get_ip

            self.master_address = get_ip()
        info = {
            "master_address": self.master_address,
            "master_port": self.port,
            "rank_offset": 1,
            "world_size": world_size + 1,
        }
        if self._stateful:
            info["packed"] = True
        return info

    def update_info_extra(self) -> dict:
        """vLLM < 0.28 takes ``packed`` per update, later versions at init."""
        return {} if self._stateful else {"packed": True}

    def open(self, init_info: dict) -> None:
        """Join vLLM's stateless NCCL group as rank 0 on ``device``."""
        import torch

        if self.device.index is not None:
            torch.cuda.set_device(self.device)
        if self._stateful:
            from vllm.distributed.weight_transfer.nccl_common import trainer_init

            self._group = trainer_init(init_info)
        else:
            from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

            self._group = NCCLWeightTransferEngine.trainer_init(init_info)

    def send(self, named_tensors: Iterator[tuple[str, object]]) -> None:
        """Packed NCCL broadcast of the tensors, in order."""
        if self._stateful:
            from vllm.distributed.weight_transfer.packed_tensor import packed_nccl_broadcast_producer

            packed_nccl_broadcast_producer(
                iterator=named_tensors, group=self._group, src=0, post_iter_func=lambda item: item[1]
            )
        else:
            from vllm.distributed.weight_transfer.nccl_engine import (
                NCCLTrainerSendWeightsArgs,
                NCCLWeightTransferEngine,
            )

            NCCLWeightTransferEngine.trainer_send_weights(
                iterator=named_tensors, trainer_args=NCCLTrainerSendWeightsArgs(group=self._group, packed=True)
            )

    def close(self) -> None:
        """Drop the group's sockets so the server stops waiting on this process."""
        group = getattr(self._group, "group", None)
        if group is not None:
            group.store = None
            group.socket = None
        self._group = None


def _vllm_at_least(version: str) -> bool:
    import vllm
    from packaging.version import Version

    return Version(vllm.__version__.split("+")[0]) >= Version(version)


class VLLMServerGenerator(OpenAICompatibleGenerator):
    """Generate through a ``vllm serve`` endpoint and push policy weights to it (see the module docstring).

    ``base_url``: the server root (``http://host:8000``; ``/v1`` accepted). ``model``: the served model
    name (default: the first of ``/v1/models``). ``seed``: seeds calls whose config has no seed; prompt
    ``i`` of a call gets ``seed + i`` so identical prompts (a GRPO group) still sample independently.
    ``push_weights``: check now that the server can take weights (default) -- False samples from a
    fixed model and makes :meth:`load_weights` an error. ``transport``: how tensors travel (default
    :class:`NCCLWeightTransport`, built at the first push). ``weight_timeout``: seconds for one push.
    """

    rng: random.Random

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        seed: int = 0,
        push_weights: bool = True,
        transport: WeightTransport | None = None,
        weight_timeout: float = 600.0,
        **http_kwargs,
    ) -> None:
        super().__init__(base_url, model or "default", **http_kwargs)
        self.root_url = self.base_url[: -len("/v1")]
        self.rng = random.Random(seed)
        self.push_weights = push_weights
        self.weight_timeout = weight_timeout
        self._transport = transport
        self._world_size: int | None = None
        self._opened = False
        self.weight_updates = 0
        if model is None:
            models = self._request(self.base_url + "/models", method="GET").get("data") or []
            if not models:
                raise GenerationError(f"{self.base_url}/models lists no model; pass model= explicitly")
            self.model = models[0]["id"]
        if push_weights:
            self._world_size = self._check_weight_endpoints()

    # --------------------------------------------------------------- generation
    def _configs(self, n: int, cfg: GenerationConfig) -> list[GenerationConfig]:
        """Prompt ``i`` of a call is sampled with seed ``base + i`` (identical prompts differ)."""
        base = cfg.seed if cfg.seed is not None else self.rng.randrange(2**31)
        return [cfg.with_(seed=base + i) for i in range(n)]

    # ------------------------------------------------------------------ weights
    def _check_weight_endpoints(self) -> int:
        """The server's worker count, or a GenerationError saying why it cannot take weights and how to fix it."""
        try:
            info = self._request(self.root_url + "/server_info?config_format=json", method="GET", retries=0)
        except GenerationError as exc:
            if getattr(exc, "status", None) == 404:
                raise GenerationError(
                    f"the server at {self.root_url} cannot take weight updates: it has no /server_info development "
                    f"endpoint (not vLLM, or started without VLLM_SERVER_DEV_MODE=1). Start it with `{SERVE_HINT}`, "
                    f"or pass push_weights=False to sample from a fixed model (rollouts then ignore training)"
                ) from None
            raise
        config = info.get("vllm_config", info)
        if not isinstance(config, dict) or config.get("weight_transfer_config") is None:
            raise GenerationError(
                f"the vLLM server at {self.root_url} has no weight-transfer engine, so it cannot take weight "
                f"updates; restart it with `{SERVE_HINT}`"
            )
        world = self._request(self.root_url + "/get_world_size", method="GET", retries=0).get("world_size")
        if not isinstance(world, int) or world < 1:
            raise GenerationError(f"{self.root_url}/get_world_size answered {world!r}, not a worker count")
        return world

    def _concurrently(self, path: str, body: dict, local) -> None:
        """POST ``body`` to ``path`` while ``local()`` runs here (the server blocks until both sides meet)."""
        with ThreadPoolExecutor(max_workers=1) as ex:
            remote = ex.submit(self._request, self.root_url + path, body, retries=0, timeout=self.weight_timeout)
            try:
                local()
            finally:
                remote.result()

    def load_weights(self, state_dict) -> None:
        """Push new policy weights (a state dict or ``(name, tensor)`` pairs) to the server; reset its prefix cache."""
        world_size = self._world_size  # known once push_weights checked the server's weight endpoints
        if not self.push_weights or world_size is None:
            raise GenerationError("this generator was built with push_weights=False; the server keeps its weights")
        if self._transport is None:
            self._transport = NCCLWeightTransport()
        transport = self._transport
        if not self._opened:
            init = transport.init_info(world_size)
            self._concurrently("/init_weight_transfer_engine", {"init_info": init}, lambda: transport.open(init))
            self._opened = True
        items: list = list(state_dict.items() if hasattr(state_dict, "items") else state_dict)
        if not items:
            raise GenerationError("load_weights got no tensors")
        update_info = {
            "names": [n for n, _ in items],
            "dtype_names": [str(t.dtype).removeprefix("torch.") for _, t in items],
            "shapes": [list(t.shape) for _, t in items],
            **transport.update_info_extra(),
        }
        self._request(self.root_url + "/start_weight_update", {}, retries=0)
        try:
            self._concurrently(
                "/update_weights",
                {"update_info": update_info},
                lambda: transport.send(iter((n, t.detach()) for n, t in items)),
            )
        finally:
            self._request(self.root_url + "/finish_weight_update", {}, retries=0)
        self._request(self.root_url + "/reset_prefix_cache", {}, retries=0)
        self.weight_updates += 1
        logger.debug("pushed %d tensors to %s (update %d)", len(items), self.root_url, self.weight_updates)

    def close(self) -> None:
        """Leave the transfer group and stop the HTTP workers."""
        if self._transport is not None and self._opened:
            self._transport.close()
            self._opened = False
        super().close()
