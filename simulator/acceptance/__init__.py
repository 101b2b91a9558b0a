"""Acceptance models: how many drafted tokens the target accepts per verify round.

Curves live in ``acceptance/*.yaml`` and are loaded with
:func:`load_acceptance_model`. Four kinds are built in: ``iid`` (one
per-token probability, Leviathan et al.), ``per_k`` (accepted fraction
tabulated by draft length), ``positional`` (conditional rate per draft
position) and ``replay`` (accepted lengths replayed from a measured per-step
log). All of them implement :class:`AcceptanceModel`.
"""

from __future__ import annotations

from simulator.acceptance.binned import BinnedModel
from simulator.acceptance.iid import (
    IidBin,
    IidModel,
    iid_expected_accepted,
    iid_expected_tokens,
)
from simulator.acceptance.info import CurveInfo
from simulator.acceptance.loader import build_acceptance_model, load_acceptance_model
from simulator.acceptance.per_k import PerKBin, PerKModel, solve_alpha
from simulator.acceptance.positional import (
    PositionalBin,
    PositionalModel,
    unconditional_to_conditional,
)
from simulator.acceptance.protocol import AcceptanceModel
from simulator.acceptance.registry import builder_for, kinds, register_kind
from simulator.acceptance.replay import ReplayModel, ReplaySession
from simulator.acceptance.replay_log import ReplayLog, read_replay_log

__all__ = [
    "AcceptanceModel",
    "BinnedModel",
    "CurveInfo",
    "IidBin",
    "IidModel",
    "PerKBin",
    "PerKModel",
    "PositionalBin",
    "PositionalModel",
    "ReplayLog",
    "ReplayModel",
    "ReplaySession",
    "build_acceptance_model",
    "builder_for",
    "iid_expected_accepted",
    "iid_expected_tokens",
    "kinds",
    "load_acceptance_model",
    "read_replay_log",
    "register_kind",
    "solve_alpha",
    "unconditional_to_conditional",
]
