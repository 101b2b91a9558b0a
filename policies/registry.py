"""Strict, named registries of policy classes.

Every decision the engine delegates (routing, batching, the draft length k,
admission, the per-request mode in hybrid serving) is made by a small policy
class looked up by name in the registry of its *family*. A registry rejects a
second class under a name already taken and, on lookup, an unknown name with
the list of valid ones. The scenario schema's ``enum`` for each ``policy`` key
is generated from these registries, so the two can never disagree.

Besides the built-ins, a registry holds the plug-ins of installed
distributions (entry point group ``specdec_sim.policies``, loaded by
:mod:`policies.plugins` the first time the registries are asked for with
plug-ins) and remembers the classes a scenario named by import path
(``module.path:ClassName``), which resolve by that path but are not listed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from policies.base import capability_defaults


class PolicyRegistryError(Exception):
    """A programming error in registering policies (not a user input error)."""


class UnknownPolicyError(KeyError):
    """A policy name that no class was registered under."""

    def __init__(self, family: str, name: str, known: tuple[str, ...]) -> None:
        self.family = family
        self.name = name
        self.known = known
        super().__init__(f"unknown {family} policy {name!r}; valid: {', '.join(known)}")


P = TypeVar("P", bound=type[Any])

BUILTIN = "built-in"
"""The origin of the policies that ship with the package."""

IMPORT_PATH = "import path"
"""The origin of a class a scenario named as ``module.path:ClassName``."""


class PolicyRegistry(Generic[P]):
    """Name → class mapping for one family of policies."""

    def __init__(self, family: str, description: str) -> None:
        self.family = family
        self.description = description
        self._classes: dict[str, P] = {}
        self._origins: dict[str, str] = {}
        self._imported: dict[str, P] = {}
        self.capabilities: Mapping[str, Any] = {}
        """The capabilities the family's protocol declares, with their defaults."""

    def declare_protocol(self, protocol: type[Any]) -> None:
        """Name the family's protocol; its capabilities become :attr:`capabilities`."""
        self.capabilities = capability_defaults(protocol)

    def register(self, cls: P) -> P:
        """Class decorator: register ``cls`` under ``cls.name``.

        Raises:
            PolicyRegistryError: The name is empty, already taken, or the
                class lacks ``Params``/``params_schema``.
        """
        name = getattr(cls, "name", "")
        if not isinstance(name, str) or not name:
            raise PolicyRegistryError(f"{cls!r} has no policy name")
        if name in self._classes:
            raise PolicyRegistryError(
                f"{self.family} policy {name!r} registered twice: "
                f"{self._classes[name].__qualname__} and {cls.__qualname__}"
            )
        params = getattr(cls, "Params", None)
        if params is None or not dataclasses.is_dataclass(params):
            raise PolicyRegistryError(f"{cls.__qualname__}.Params must be a dataclass")
        if not isinstance(getattr(cls, "params_schema", None), Mapping):
            raise PolicyRegistryError(f"{cls.__qualname__}.params_schema must be a mapping")
        self._classes[name] = cls
        self._origins[name] = BUILTIN
        return cls

    def add_plugin(self, cls: P, origin: str) -> None:
        """Register a plug-in class (already checked) under ``cls.name``.

        Args:
            cls: The policy class.
            origin: Where it comes from, e.g. ``entry point routing.sticky of
                distribution demo 1.0``; shown by ``simulate policies``.

        Raises:
            PolicyRegistryError: The name is taken; the message names both.
        """
        name = cls.name
        if name in self._classes:
            raise PolicyRegistryError(
                f"{self.family} policy {name!r} of {origin} clashes with {self._describe(name)}"
            )
        self._classes[name] = cls
        self._origins[name] = origin

    def add_imported(self, path: str, cls: P) -> None:
        """Remember the class a scenario named by import path (not listed by :meth:`names`)."""
        self._imported[path] = cls

    def _describe(self, name: str) -> str:
        cls = self._classes[name]
        origin = self._origins[name]
        where = "the built-in" if origin == BUILTIN else origin
        return f"{where} {cls.__module__}.{cls.__qualname__}"

    def get(self, name: str) -> P:
        """Return the class registered under ``name``.

        Raises:
            UnknownPolicyError: No such name; the message lists the valid ones.
        """
        found = self._classes.get(name)
        if found is None:
            found = self._imported.get(name)
        if found is None:
            raise UnknownPolicyError(self.family, name, self.names())
        return found

    def names(self) -> tuple[str, ...]:
        """Return the registered names (built-ins and plug-ins), sorted."""
        return tuple(sorted(self._classes))

    def builtin_names(self) -> tuple[str, ...]:
        """Return the names of the built-in policies only, sorted."""
        return tuple(sorted(n for n, o in self._origins.items() if o == BUILTIN))

    def origin(self, name: str) -> str:
        """Return where the policy registered under ``name`` comes from (``built-in`` or a plug-in)."""
        self.get(name)
        return self._origins.get(name, IMPORT_PATH)

    def __contains__(self, name: object) -> bool:
        return name in self._classes


_FAMILIES: dict[str, PolicyRegistry[Any]] = {}


def new_family(family: str, description: str) -> PolicyRegistry[Any]:
    """Create and remember the registry of a policy family.

    Raises:
        PolicyRegistryError: The family already exists.
    """
    if family in _FAMILIES:
        raise PolicyRegistryError(f"policy family {family!r} defined twice")
    registry: PolicyRegistry[Any] = PolicyRegistry(family, description)
    _FAMILIES[family] = registry
    return registry


def families(plugins: bool = True) -> Mapping[str, PolicyRegistry[Any]]:
    """Return every policy family's registry, by family name.

    Args:
        plugins: Also load the entry-point plug-ins first (once per process);
            ``False`` only guarantees the built-ins are registered.
    """
    _load_builtin_policies()
    if plugins:
        _load_plugins()
    return dict(_FAMILIES)


def registry(family: str) -> PolicyRegistry[Any]:
    """Return the registry of ``family`` (entry-point plug-ins loaded).

    Raises:
        KeyError: No such family; the message lists the known ones.
    """
    _load_builtin_policies()
    _load_plugins()
    try:
        return _FAMILIES[family]
    except KeyError:
        raise KeyError(f"unknown policy family {family!r}; known: {', '.join(_FAMILIES)}") from None


def policy_enums(plugins: bool = True) -> dict[str, list[str]]:
    """Return, per family, the valid policy names (for the scenario schema).

    Args:
        plugins: Include the entry-point plug-ins; ``False`` gives the
            built-ins only (for the shipped documentation).
    """
    return {
        family: list(reg.names() if plugins else reg.builtin_names())
        for family, reg in families(plugins).items()
    }


def build_params(cls: Any, params: Mapping[str, Any]) -> Any:
    """Instantiate ``cls.Params`` from an already schema-validated mapping."""
    builder: Callable[..., Any] = cls.Params
    return builder(**dict(params))


def _load_builtin_policies() -> None:
    """Import the modules that register the built-in policies (idempotent)."""
    from policies import builtin  # noqa: F401  (import registers the classes)


def _load_plugins() -> None:
    """Register the entry-point plug-ins (idempotent; problems are kept, see :mod:`policies.plugins`)."""
    from policies.plugins import load_entry_points

    load_entry_points()
