"""What every policy class has, and the capabilities a family protocol declares.

Each family's protocol (``RoutingPolicy``, ``BatchingPolicy``, ``KController``,
...) extends :class:`Policy` and declares, besides its decision method, the
*capabilities* of its policies: class attributes with a default that tell
the engine which extra work a policy asks for (``reads_kv``,
``predicts_ttft``, ``signal_window``, ...). The built-in policies subclass
their family's protocol, so they have every capability at its default unless
they set it; a plug-in that leaves one out gets the default when it is
checked (:func:`fill_capabilities`). The engine can therefore read
``policy.reads_kv`` directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from policies.params import DerivedParamsSchema, NoParams

_NOT_CAPABILITIES = frozenset({"name", "Params", "params_schema"})


class Policy(Protocol):
    """The class attributes every policy has.

    Attributes:
        name: The registered name, as written in scenarios.
        Params: A frozen dataclass of the policy's parameters (may have no
            fields), declared with :func:`policies.params.param`.
        params_schema: JSON Schema of the ``params`` mapping a scenario may
            give the policy; derived from ``Params`` (a plug-in may write
            its own mapping instead).
        random_stream: The random stream the policy draws from (one of
            ``simulator/rng.py``'s ``STREAM_NAMES``); the engine then passes
            the stream's generator to its constructor as ``rng=``. ``None``:
            it draws no random numbers.
    """

    name: ClassVar[str]
    Params: ClassVar[type[Any]] = NoParams
    params_schema: ClassVar[DerivedParamsSchema] = DerivedParamsSchema()
    random_stream: ClassVar[str | None] = None


def capability_defaults(protocol: type[Any]) -> dict[str, Any]:
    """The capabilities ``protocol`` declares (its own and its bases'), with their defaults.

    A capability is a public attribute annotated and given a value in a
    protocol's class body, other than ``name``, ``Params`` and ``params_schema``.
    """
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        own = vars(klass)
        for attr in own.get("__annotations__", {}):
            if attr in own and not attr.startswith("_") and attr not in _NOT_CAPABILITIES:
                found[attr] = own[attr]
    return found


def fill_capabilities(cls: type[Any], defaults: Mapping[str, Any]) -> None:
    """Give ``cls`` each capability of ``defaults`` it lacks, at its default."""
    for attr, default in defaults.items():
        if not hasattr(cls, attr):
            setattr(cls, attr, default)


def promised_by_method(cls: type[Any], capability: str, method: str) -> bool:
    """Whether ``cls`` promises ``capability`` of the ``method`` it runs.

    A capability that promises what a method does (``idle_when_empty`` of
    ``choose``, ``admits_all`` of ``decide``, ``fixed_k`` of ``next_k``), so
    that the engine may skip calling it, holds only when it is declared
    true in the body of the class whose ``method`` runs: a subclass that
    overrides the method, without declaring the capability again, is asked
    as any policy is, whatever its base promised.
    """
    owner = next((klass for klass in cls.__mro__ if method in vars(klass)), None)
    return owner is not None and vars(owner).get(capability) is True
