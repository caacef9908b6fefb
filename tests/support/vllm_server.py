"""A loopback stand-in for ``vllm serve`` with the weight-transfer endpoints TRL's server mode uses.

Real HTTP (``OpenAIStubServer``) in front of a real tiny transformers model: completions come from
that model, and ``/update_weights`` loads the tensors it receives into it, so a test can see rollouts
follow the pushed weights. NCCL is replaced by :class:`QueueTransport`, an in-process queue the
server's handlers block on exactly where vLLM's workers block in the NCCL receive.
"""

from __future__ import annotations

import queue
import threading

from searchgym.core.llm import GenerationConfig
from searchgym.llm.transformers_backend import TransformersGenerator
from tests.support.openai_server import OpenAIStubServer

_TIMEOUT = 20.0


class QueueTransport:
    """The trainer side of the test's 'NCCL group': tensors are queued for the loopback server."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.sent = 0

    def init_info(self, world_size: int) -> dict:
        """Same keys as vLLM's NCCL init info."""
        return {
            "master_address": "127.0.0.1",
            "master_port": 0,
            "rank_offset": 1,
            "world_size": world_size + 1,
            "packed": True,
        }

    def update_info_extra(self) -> dict:
        """Nothing extra per update."""
        return {}

    def open(self, init_info: dict) -> None:
        """'Join the group': the server's init handler waits for this."""
        self.queue.put(("__open__", init_info))

    def send(self, named_tensors) -> None:
        """'Broadcast' each tensor (a copy, as a broadcast would deliver)."""
        for name, tensor in named_tensors:
            self.queue.put((name, tensor.clone()))
            self.sent += 1

    def close(self) -> None:
        """Nothing to release."""


class LoopbackVLLMServer:
    """Context manager: ``url`` is the server root. ``dev_mode=False`` hides the development endpoints
    (as ``vllm serve`` without ``VLLM_SERVER_DEV_MODE=1``); ``weight_transfer=False`` starts it without
    a weight-transfer engine. ``events`` lists the weight endpoints called, in order."""

    def __init__(
        self,
        model,
        tokenizer,
        transport: QueueTransport,
        *,
        dev_mode: bool = True,
        weight_transfer: bool = True,
        world_size: int = 1,
    ) -> None:
        self.model = model
        self.gen = TransformersGenerator(model, tokenizer, seed=0)
        self.transport = transport
        self.events: list[str] = []
        self.received: list[tuple[str, str, list]] = []
        self._lock = threading.Lock()
        routes = {
            ("POST", "/init_weight_transfer_engine"): self._init,
            ("POST", "/start_weight_update"): self._mark("start_weight_update"),
            ("POST", "/update_weights"): self._update,
            ("POST", "/finish_weight_update"): self._mark("finish_weight_update"),
            ("POST", "/reset_prefix_cache"): self._mark("reset_prefix_cache"),
        }
        if dev_mode:
            config = {"weight_transfer_config": {"backend": "nccl"} if weight_transfer else None}
            routes[("GET", "/server_info?config_format=json")] = lambda _: (200, {"vllm_config": config})
            routes[("GET", "/get_world_size")] = lambda _: (200, {"world_size": world_size})
        self.http = OpenAIStubServer(self._reply, routes=routes)

    @property
    def url(self) -> str:
        """Server root (no /v1)."""
        return self.http.url[: -len("/v1")]

    def _reply(self, prompt, body: dict) -> str:
        cfg = GenerationConfig(
            max_new_tokens=body.get("max_tokens", 16),
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            stop=tuple(body.get("stop") or ()),
            seed=body.get("seed"),
        )
        with self._lock:
            return self.gen.generate([prompt], cfg)[0]

    def _mark(self, name: str):
        def handler(body):
            self.events.append(name)
            return 200, {"success": True}

        return handler

    def _init(self, body: dict):
        kind, info = self.transport.queue.get(timeout=_TIMEOUT)
        if kind != "__open__" or info != body["init_info"]:
            return 400, {"error": {"message": f"rendezvous mismatch: {kind} {info} vs {body}"}}
        self.events.append("init_weight_transfer_engine")
        return 200, {}

    def _update(self, body: dict):
        import torch

        info = body["update_info"]
        params = dict(self.model.named_parameters())
        with self._lock, torch.no_grad():
            for name, dtype, shape in zip(info["names"], info["dtype_names"], info["shapes"]):
                got_name, tensor = self.transport.queue.get(timeout=_TIMEOUT)
                if got_name != name or str(tensor.dtype).removeprefix("torch.") != dtype or list(tensor.shape) != shape:
                    return 400, {"error": {"message": f"announced {name} {dtype} {shape}, received {got_name}"}}
                self.received.append((name, dtype, shape))
                if name in params:
                    params[name].copy_(tensor)
        self.events.append("update_weights")
        return 200, {}

    def __enter__(self) -> "LoopbackVLLMServer":
        self.http.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.http.__exit__(*exc)
