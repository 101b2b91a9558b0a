"""Pluggable decision policies of specdec-sim, found by name in strict registries."""

from __future__ import annotations

from policies.registry import (
    PolicyRegistryError,
    UnknownPolicyError,
    families,
    policy_enums,
    registry,
)

__all__ = [
    "PolicyRegistryError",
    "UnknownPolicyError",
    "families",
    "policy_enums",
    "registry",
]
