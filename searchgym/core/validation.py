"""The verdict on a proposed question (rule filters, then RAG verification), and how verification is chosen.

:class:`ValidationResult` is ``info["validation"]`` of ``KGProposer-v0`` and ``KGSelfPlay-v0`` and the
``validation`` of an export line (:meth:`ValidationResult.to_dict`, the same keys the dict of earlier versions
had). :data:`VerifierSetting` names the two verifier choices that are not a verifier object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional

from .mapping_reads import MappingReads

__all__ = ["ValidationResult", "ValidationStage", "VerifierSetting", "VERIFIER_DEFAULT", "VERIFIER_OFF"]

#: where a question was stopped: the rollout itself was invalid, a rule filter, or the RAG verifier
ValidationStage = Literal["rollout", "filters", "verifier"]

#: ``"default"``: the offline RAG verifier (extractive reader + exact match); ``"off"``: rule filters only
VerifierSetting = Literal["default", "off"]
VERIFIER_DEFAULT: VerifierSetting = "default"
VERIFIER_OFF: VerifierSetting = "off"


@dataclass
class ValidationResult(MappingReads):
    """Whether a proposed question is valid, and if not where and why it was rejected.

    ``reason``: a filter reason code, the verifier's reason, or the rollout's invalid reason (``None`` when
    valid without comment); ``stage``: :data:`ValidationStage` or ``None`` (valid); ``details``: the filters'
    measurements; ``prediction`` / ``error``: the RAG verifier's answer and failure (a failure makes the
    question invalid: verification fails closed). Reading by key works as for the dict of earlier versions.
    """

    valid: bool = False
    reason: Optional[str] = None
    stage: Optional[ValidationStage] = None
    details: dict[str, Any] = field(default_factory=dict)
    prediction: Optional[str] = None
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (an export line's ``validation``)."""
        return {
            "valid": bool(self.valid),
            "reason": self.reason,
            "stage": self.stage,
            "details": dict(self.details),
            "prediction": self.prediction,
            "error": self.error,
        }

    def summary(self) -> dict[str, Any]:
        """The JSON form without the filters' details (what a trajectory's metadata keeps)."""
        return {k: v for k, v in self.to_dict().items() if k != "details"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ValidationResult":
        """Inverse of :meth:`to_dict` (missing keys take their defaults)."""
        return cls(
            valid=bool(data.get("valid", False)),
            reason=data.get("reason"),
            stage=data.get("stage"),
            details=dict(data.get("details") or {}),
            prediction=data.get("prediction"),
            error=data.get("error"),
        )
