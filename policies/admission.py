"""Admission control: which arriving requests enter the system."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from policies.batching import NO_PARAMS_SCHEMA, NoParams
from policies.families import ADMISSION
from policies.views import AdmissionDecision, AdmissionQuery


class AdmissionPolicy(Protocol):
    """Admits or rejects an arriving request."""

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Return whether to admit, with a reason when rejecting."""
        ...


@ADMISSION.register
class AdmitAll:
    """Admit every request (queues grow without bound under overload)."""

    name: ClassVar[str] = "admit_all"
    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Admit."""
        return AdmissionDecision(True)
