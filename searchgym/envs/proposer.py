"""``KGProposer-v0``: one Proposer rollout, then SSP's rule filters and RAG verification.

Mode ``"kg"`` (default, kg-paths-wcr Eq. 4): the prompt shows the subgraph (target path +
distractors) and the answer. Mode ``"vanilla"`` (SSP): the answer only. The rollout searches like
a Solver and terminates on ``<question>``; the env then checks the question with
:func:`~searchgym.scoring.question_filters.check_question` and verifies it with a
:class:`~searchgym.scoring.rag_verifier.RAGVerifier` over the rollout's retrieved materials plus noise
materials from recent proposer rollouts (``noise_window`` trajectories, default 4; the first
episode has none) — or, under the trainer, from the other Proposer rollouts of the same batch
(:class:`BatchNoise`, SSP).

Reward of this lone env: question validity (1 valid / 0 invalid), reported with the rejection
reason in ``info["validation"]``. SSP's Proposer reward ``1 − mean c_i`` needs Solver rollouts
and exists only in ``KGSelfPlay-v0``.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from typing import Any, Mapping, Optional, Sequence, Union

from ..core.arg_checks import MAX_INDEX, check_choice, check_count
from ..core.info import ProposerInfo
from ..core.rewards import RewardEvent
from ..core.types import Task
from ..core.validation import VERIFIER_DEFAULT, VERIFIER_OFF, ValidationResult, VerifierSetting
from ..errors import InvalidTypeError
from ..scoring.outcomes import document_materials, reward_event, validate_question
from .base import proposer_search_count, resolve_tasks
from .episode import Rollout
from .single import SingleRolloutEnv
from .spaces import text_space

logger = logging.getLogger(__name__)

__all__ = [
    "KGProposerEnv",
    "ProposerValidation",
    "BatchNoise",
    "PROPOSER_MODES",
    "VerifierArg",
    "verifier_setting_of",
    "batch_noise",
]

PROPOSER_MODES = ("kg", "vanilla")

#: the ``verifier=`` argument: a :data:`~searchgym.core.validation.VerifierSetting` (``"default"``, ``"off"``),
#: a verifier object, or the earlier spellings ``None`` (= ``"default"``) and ``False`` (= ``"off"``)
VerifierArg = Union[VerifierSetting, Any, None]


def verifier_setting_of(verifier: Any) -> Any:
    """The ``verifier=`` argument that rebuilds the verification of a :class:`ProposerValidation` whose
    :attr:`~ProposerValidation.verifier` is ``verifier`` (``None``: ``"off"``, rule filters only)."""
    return VERIFIER_OFF if verifier is None else verifier


class BatchNoise:
    """SSP's noise source for RAG verification: the other Proposer trajectories of one training batch.

    Shared by the env clones that play a batch (the batch runner passes it to every clone's reset as
    ``options["batch_noise"]`` and calls :meth:`begin` before each batch). Each clone registers
    its Proposer rollout when a game starts; a question is then verified with noise drawn from the
    documents every *other* registered rollout of the batch has retrieved so far (in lock-step
    play the other rollouts have searched as many turns as this one).
    """

    def __init__(self) -> None:
        self._trajectories: list = []

    def __len__(self) -> int:
        return len(self._trajectories)

    def begin(self) -> None:
        """Start a new batch: forget the previous batch's rollouts."""
        self._trajectories.clear()

    def add(self, trajectory) -> None:
        """Register a Proposer rollout of this batch (its materials grow as it is played)."""
        self._trajectories.append(trajectory)

    def noise_for(self, trajectory) -> list[str]:
        """The documents retrieved by the batch's other Proposer rollouts, in registration order."""
        return [m for t in self._trajectories if t is not trajectory for m in document_materials(t)]


def batch_noise(options: dict) -> Optional[BatchNoise]:
    """The :class:`BatchNoise` a reset's ``options["batch_noise"]`` passes (``None`` when absent)."""
    noise = options.get("batch_noise")
    if noise is not None and not isinstance(noise, BatchNoise):
        raise InvalidTypeError(f"options['batch_noise'] must be a BatchNoise, got {type(noise).__name__}")
    return noise


def filter_config_of(value: Any) -> Any:
    """The rule filters' settings: a :class:`~searchgym.scoring.question_filters.FilterConfig`, ``None`` (SSP's
    defaults), or a mapping of its fields (as a YAML config or ``env_kwargs`` gives it), type-checked; an unknown
    field is one line naming the valid ones."""
    from ..core.config_io import dataclass_from_mapping
    from ..scoring.question_filters import FilterConfig

    if value is None or isinstance(value, FilterConfig):
        return value
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"filter_config must be a FilterConfig or a mapping of its fields, got {value!r}")
    return dataclass_from_mapping(FilterConfig, value, what="filter_config field")


class ProposerValidation:
    """Filters + RAG verification with a bounded memory of recent proposer materials (noise).

    ``verifier``: an object with ``verify(question, answers, materials, noise_pool, rng)``; ``"default"``
    (also ``None``): ``RAGVerifier(ExtractiveReader(world), ExactMatchJudge(), n_noise=n_noise)`` (offline);
    ``"off"`` (also ``False``): no RAG verification (filters only). :attr:`verifier` is then the verifier
    object, or ``None`` when verification is off. ``noise_window``: how many recent proposer
    trajectories supply noise materials when the env is driven alone. With :attr:`batch` set (a
    :class:`BatchNoise`, as the trainer does) noise comes from the batch's other Proposer
    trajectories instead, as in SSP.
    """

    def __init__(
        self,
        world,
        *,
        verifier: VerifierArg = VERIFIER_DEFAULT,
        filter_config: Any = None,
        n_noise: int = 4,
        noise_window: int = 4,
    ) -> None:
        noise_window = check_count("noise_window", noise_window, least=0, most=MAX_INDEX)
        n_noise = check_count("n_noise", n_noise, least=0, hint="noise documents per verification")
        if verifier is None or (isinstance(verifier, str) and verifier == VERIFIER_DEFAULT):
            from ..scoring.judge import ExactMatchJudge
            from ..scoring.rag_verifier import RAGVerifier
            from .resources import default_reader

            verifier = RAGVerifier(default_reader(world), ExactMatchJudge(), n_noise=n_noise)
        elif verifier is False or (isinstance(verifier, str) and verifier == VERIFIER_OFF):
            verifier = None
        elif not callable(getattr(verifier, "verify", None)):
            raise InvalidTypeError(
                "verifier must be 'default', 'off' or an object with "
                f"verify(question, answers, materials, noise_pool, rng); got {verifier!r}"
            )
        self.verifier = verifier
        self.filter_config = filter_config_of(filter_config)
        self.recent: deque[list[str]] = deque(maxlen=noise_window)
        self.counts: dict[str, int] = {}
        self.batch: Optional[BatchNoise] = None

    def start(self, traj) -> None:
        """A new Proposer rollout begins: register it with the shared batch, if there is one."""
        if self.batch is not None:
            self.batch.add(traj)

    def noise_pool(self, traj=None) -> list[str]:
        """Noise materials for ``traj``: the batch's other Proposer rollouts when :attr:`batch` is
        set, else the recent proposer trajectories of this env (oldest first)."""
        if self.batch is not None:
            return self.batch.noise_for(traj)
        return [m for mats in self.recent for m in mats]

    def __call__(self, traj, answers, rng) -> ValidationResult:
        """Validate a finished proposer trajectory, then remember its materials as future noise."""
        mats = document_materials(traj)
        result = validate_question(
            traj,
            answers,
            verifier=self.verifier,
            filter_config=self.filter_config,
            noise_pool=self.noise_pool(traj),
            rng=rng,
            materials=mats,
            required_searches=proposer_search_count(traj.task) if traj.task is not None else None,
        )
        key = "valid" if result.valid else str(result.reason)
        self.counts[key] = self.counts.get(key, 0) + 1
        if mats and self.recent.maxlen:
            self.recent.append(mats)
        return result

    def reset(self) -> None:
        """Forget the remembered materials and counts."""
        self.recent.clear()
        self.counts.clear()

    def state_dict(self) -> dict:
        """The noise window and counts (picklable)."""
        return {"recent": [list(m) for m in self.recent], "counts": dict(self.counts)}

    def load_state_dict(self, state: dict) -> None:
        """Inverse of :meth:`state_dict`."""
        self.recent.clear()
        self.recent.extend(list(m) for m in state["recent"])
        self.counts = dict(state["counts"])


class KGProposerEnv(SingleRolloutEnv):
    """One Proposer episode per reset.

    ``tasks``/``pool``/``pool_hops``: as for ``KGSolver-v0`` (answer targets; KG mode needs tasks with a
    subgraph). ``mode``: ``"kg"`` or ``"vanilla"``. ``verifier``, ``filter_config``, ``n_noise``,
    ``noise_window``: see :class:`ProposerValidation`. Observation/action: text, as for the Solver.
    """

    def __init__(
        self,
        world=None,
        tasks: Any = None,
        *,
        pool: Any = None,
        pool_hops: Optional[Sequence[int]] = None,
        mode: str = "kg",
        verifier: VerifierArg = VERIFIER_DEFAULT,
        filter_config: Any = None,
        n_noise: int = 4,
        noise_window: int = 4,
        **kwargs: Any,
    ) -> None:
        check_choice("mode", mode, PROPOSER_MODES)
        super().__init__(world, **kwargs)
        self.mode = mode
        self.tasks = resolve_tasks(self.world, tasks, pool, hops=pool_hops)
        self.validation = ProposerValidation(
            self.world, verifier=verifier, filter_config=filter_config, n_noise=n_noise, noise_window=noise_window
        )
        self.observation_space = text_space()
        self.action_space = text_space()
        self.last_validation: Optional[ValidationResult] = None

    def clone(self) -> "KGProposerEnv":
        """A new env sharing this one's resources, verifier and export file (its own noise window)."""
        v = self.validation
        return KGProposerEnv(
            self.world,
            self.tasks,
            mode=self.mode,
            verifier=verifier_setting_of(v.verifier),
            filter_config=v.filter_config,
            noise_window=v.recent.maxlen or 0,
            **self.shared_kwargs(),
        )

    def state_dict(self) -> dict:
        """Base state plus the noise window and rejection counts."""
        return {**super().state_dict(), "validation": self.validation.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Inverse of :meth:`state_dict`."""
        super().load_state_dict(state)
        self.validation.load_state_dict(state["validation"])

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start a Proposer rollout for a drawn (or given: ``options={"task": task}``) answer target;
        ``options["batch_noise"]`` (a :class:`BatchNoise`): verify with noise from a batch's other Proposer
        rollouts instead of this env's recent ones (for this rollout)."""
        self.last_validation = None
        self.validation.batch = batch_noise(options or {})
        return super().reset(seed=seed, options=options)

    def _new_rollout(self, task: Task) -> Rollout:
        rollout = self._proposer_rollout(task, self.mode)
        self.validation.start(rollout.trajectory)
        return rollout

    def _finish(self, traj) -> list[RewardEvent]:
        """Filter and verify the question; the validity is the reward."""
        self.last_validation = self.validation(traj, traj.task.answers, self._rng)
        traj.metadata["validation"] = self.last_validation.to_dict()  # the rollout carries its verdict
        v = float(self.last_validation.valid)
        traj.reward, traj.reward_components = v, {"valid": v, "outcome": v}
        return [reward_event("proposer", 0, v, traj.reward_components, traj)]

    def _info(self, rollout: Rollout, inserted: str, events: list[RewardEvent]) -> ProposerInfo:
        return {**self._single_info(rollout, inserted, events), "validation": copy.deepcopy(self.last_validation)}
