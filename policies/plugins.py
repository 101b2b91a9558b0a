"""Policies from outside the package: import paths and entry points.

A scenario may name a policy class by import path, ``module.path:ClassName``
(the module must be importable in the environment: installed, or on
``PYTHONPATH``; the scenario's folder is not added to ``sys.path``), or by
the name an installed distribution registers through the entry point group
``specdec_sim.policies``. An entry point is named ``<family>.<policy name>``
and points at the class (``module:ClassName``); the class's ``name`` must be
that policy name.

Either way the class must look like a built-in of its family: a non-empty
``name``, a dataclass ``Params``, a mapping ``params_schema`` (written by
hand, or derived from ``Params`` by subclassing the family's protocol, as
the built-ins do: :mod:`policies.params`), every public method the family's
built-in policies all have (the family protocol's, e.g. ``route`` for
routing), and a constructor taking the same positional arguments as theirs
(``(params)``, ``(k, params)`` for k controllers, ``(limits, params)`` for
the batching lanes). A capability the family's protocol declares
(``reads_kv``, ``signal_window``, ``random_stream``, ...) and the class
leaves out is given to it at its default once it passes these checks, so
the engine reads every capability directly.

Importing a module runs its code, so a scenario file never decides alone
that a module is imported: an import path is honoured only when its module
is in the user's :class:`PluginConsent` (``--allow-plugins MODULE[,MODULE]``
on the command line, or the ``SPECDEC_ALLOW_PLUGINS`` environment variable
that the command line sets for its worker processes), and is checked against
it before anything is imported. Allowing a module allows the modules inside
it (``mypkg`` allows ``mypkg.routing``). Installing a distribution is consent
to its entry points. Whatever a plug-in raises while it is imported or
constructed, ``SystemExit`` and ``KeyboardInterrupt`` included, becomes a
:class:`PolicyImportError` (or, in the engine, an input error).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from policies.base import fill_capabilities
from policies.registry import BUILTIN, PolicyRegistryError, UnknownPolicyError, families
from simulator.suggest import did_you_mean

ENTRY_POINT_GROUP = "specdec_sim.policies"
"""The entry point group plug-in distributions register their policy classes in."""

IMPORT_PATH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
"""What a ``policy`` value naming a class by import path looks like."""

_IMPORT_PATH = re.compile(IMPORT_PATH_PATTERN)

ALLOW_PLUGINS_ENV = "SPECDEC_ALLOW_PLUGINS"
"""The environment variable naming the modules a scenario may import (comma-separated)."""

ALLOW_PLUGINS_OPTION = "--allow-plugins"
"""The command-line option that gives the same consent (and sets :data:`ALLOW_PLUGINS_ENV`)."""

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def is_import_path(value: str) -> bool:
    """Return whether ``value`` has the form ``module.path:ClassName``."""
    return _IMPORT_PATH.match(value) is not None


def split_module_list(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split ``MODULE[,MODULE...]`` into its module names and the parts that are not one.

    Blanks around names and empty parts are ignored.
    """
    parts = [part.strip() for part in text.split(",") if part.strip()]
    good = tuple(part for part in parts if _MODULE_NAME.match(part))
    bad = tuple(part for part in parts if not _MODULE_NAME.match(part))
    return good, bad


@dataclass(frozen=True)
class PluginConsent:
    """The modules the user allows a scenario to import, given outside the scenario.

    Attributes:
        modules: Dotted module names; each also allows the modules inside it.
    """

    modules: frozenset[str] = frozenset()

    @classmethod
    def from_environment(cls, extra: Iterable[str] = ()) -> PluginConsent:
        """The modules :data:`ALLOW_PLUGINS_ENV` names, with ``extra`` added.

        Parts of the variable that are not module names are skipped
        (:func:`environment_problems` reports them).
        """
        named, _ = split_module_list(os.environ.get(ALLOW_PLUGINS_ENV, ""))
        return cls(frozenset(named) | frozenset(extra))

    def allows(self, module: str) -> bool:
        """Whether ``module`` (or a package holding it) was allowed."""
        return any(module == m or module.startswith(m + ".") for m in self.modules)


def environment_problems() -> tuple[str, ...]:
    """The parts of :data:`ALLOW_PLUGINS_ENV` that are not module names."""
    return split_module_list(os.environ.get(ALLOW_PLUGINS_ENV, ""))[1]


def how_to_allow(module: str) -> str:
    """The ``allowed`` text of a refused module: how the user gives consent."""
    return (
        f"a registered policy name, or the import path once the module is allowed: "
        f"{ALLOW_PLUGINS_OPTION} {module} on the command line (or {ALLOW_PLUGINS_ENV}={module} "
        "in the environment; a scenario file cannot allow it)"
    )


def first_line(exc: BaseException) -> str:
    """``ExceptionType: first line of its message``."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


PLUGIN_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)
"""What a plug-in may raise while imported or constructed that is reported, not propagated."""


class PolicyImportError(Exception):
    """A policy class that cannot be used: the problem and what would be allowed."""

    def __init__(self, problem: str, allowed: str) -> None:
        self.problem = problem
        self.allowed = allowed
        super().__init__(f"{problem} (allowed: {allowed})")


@dataclass(frozen=True)
class PluginProblem:
    """A broken entry point of the ``specdec_sim.policies`` group.

    Attributes:
        distribution: The distribution declaring it (name and version).
        entry_point: The entry point's name.
        value: Its value, ``module:ClassName``.
        problem: What is wrong.
        allowed: What would have been accepted.
    """

    distribution: str
    entry_point: str
    value: str
    problem: str
    allowed: str


def _required_methods(family: str) -> tuple[str, ...]:
    """Return the public methods every built-in policy of ``family`` has (its protocol)."""
    reg = families(plugins=False)[family]
    common: set[str] | None = None
    for name in reg.builtin_names():
        cls = reg.get(name)
        methods = {
            attr
            for attr in dir(cls)
            if not attr.startswith("_")
            and callable(getattr(cls, attr))
            and not inspect.isclass(getattr(cls, attr))
        }
        common = methods if common is None else common & methods
    return tuple(sorted(common or ()))


def _positional(cls: type[Any]) -> tuple[str, ...] | None:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in signature.parameters.values() if p.kind in kinds)


def _constructor_arguments(family: str) -> tuple[str, ...] | None:
    """Return the positional arguments the engine passes to a policy of ``family``.

    ``None`` when the built-ins do not agree on a count (nothing is checked then).
    """
    reg = families(plugins=False)[family]
    found = {_positional(reg.get(name)) for name in reg.builtin_names()}
    counts = {len(args) for args in found if args is not None}
    if len(counts) != 1 or None in found:
        return None
    return min(args for args in found if args is not None)


def interface_problem(family: str, cls: object) -> str | None:
    """Return why ``cls`` cannot serve as a ``family`` policy, or ``None`` if it can."""
    if family not in families(plugins=False):
        known = ", ".join(families(plugins=False))
        return f"{family!r} is not a policy family (known: {known})"
    if not inspect.isclass(cls):
        return f"{cls!r} is not a class"
    label = f"{cls.__module__}.{cls.__qualname__}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        return f"{label} has no policy name (a non-empty class attribute 'name')"
    params = getattr(cls, "Params", None)
    if not (inspect.isclass(params) and dataclasses.is_dataclass(params)):
        return f"{label}.Params is not a dataclass"
    try:
        schema = getattr(cls, "params_schema", None)
    except TypeError as exc:  # derived from Params, whose field types have no JSON type
        return f"{label}.params_schema cannot be derived from its Params: {exc}"
    if not isinstance(schema, Mapping):
        return f"{label}.params_schema is not a mapping (a JSON Schema object)"
    missing = [m for m in _required_methods(family) if not callable(getattr(cls, m, None))]
    if missing:
        lacks = ", ".join(f"{m}()" for m in missing)
        return f"{label} is not a policy of family {family}: it lacks {lacks}"
    arguments = _constructor_arguments(family)
    if arguments is not None:
        try:
            inspect.signature(cls).bind(*arguments)
        except (TypeError, ValueError):
            return (
                f"{label}'s constructor does not take the {family} arguments "
                f"({', '.join(arguments)})"
            )
    return None


def _family_requirements(family: str) -> str:
    methods = ", ".join(f"{m}()" for m in _required_methods(family))
    arguments = _constructor_arguments(family)
    ctor = f"a constructor ({', '.join(arguments)}), " if arguments is not None else ""
    return (
        f"a {family} policy class: name, a dataclass Params, a params_schema mapping, "
        f"{ctor}{methods or 'the family methods'}"
    )


def import_policy(family: str, path: str, consent: PluginConsent) -> type[Any]:
    """Import the class ``module.path:ClassName`` and check it is a ``family`` policy.

    The module must be allowed by ``consent``; this is checked before
    anything is imported. The class is remembered by the family registry
    under ``path``, so the engine finds it exactly as it finds a built-in.

    Raises:
        PolicyImportError: Bad form, module not allowed, not importable
            (whatever it raised, ``SystemExit`` included), no such attribute,
            or not a policy class of this family.
    """
    if not is_import_path(path):
        raise PolicyImportError("not an import path", "module.path:ClassName")
    module_name, _, attribute = path.partition(":")
    if not consent.allows(module_name):
        raise PolicyImportError(
            f"module {module_name!r} is not allowed to be imported (importing runs its code)",
            how_to_allow(module_name),
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PolicyImportError(
            f"module {exc.name or module_name!r} not found",
            "a module importable in this environment (installed, or on PYTHONPATH; "
            "neither the working folder nor the scenario's folder is searched)",
        ) from None
    except PLUGIN_FAILURES as exc:  # the user's module failed while importing
        raise PolicyImportError(
            f"importing module {module_name!r} failed: {first_line(exc)}",
            "a module that imports without error",
        ) from None
    cls = getattr(module, attribute, None)
    if cls is None:
        policies = _family_classes(family, module)
        raise PolicyImportError(
            f"module {module_name!r} has no attribute {attribute!r}"
            + did_you_mean(attribute, policies),
            f"a {family} policy class of that module"
            + (f": {', '.join(policies)}" if policies else " (it has none)"),
        )
    problem = interface_problem(family, cls)
    if problem is not None:
        raise PolicyImportError(problem, _family_requirements(family))
    reg = families(plugins=False)[family]
    fill_capabilities(cls, reg.capabilities)
    reg.add_imported(path, cls)
    found: type[Any] = cls
    return found


def _family_classes(family: str, module: object) -> list[str]:
    """The public names of ``module`` bound to classes that can serve as ``family`` policies."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isclass(value)
        and interface_problem(family, value) is None
    )


def policy_class(family: str, name: str, consent: PluginConsent | None = None) -> type[Any]:
    """The class of policy ``name``: registered, or an import path imported now.

    A worker process that did not load the scenario itself (a spawned pool
    worker, a Ray worker) imports an import path here, under ``consent``
    (default: the modules :data:`ALLOW_PLUGINS_ENV` names).

    Raises:
        UnknownPolicyError: ``name`` is neither registered nor an import path.
        PolicyImportError: The import path cannot be used (see :func:`import_policy`).
    """
    reg = families()[family]
    try:
        found: type[Any] = reg.get(name)
    except UnknownPolicyError:
        if not is_import_path(name):
            raise
        return import_policy(family, name, consent or PluginConsent.from_environment())
    return found


def is_plugin(family: str, name: str) -> bool:
    """Whether policy ``name`` of ``family`` comes from outside the package."""
    return families()[family].origin(name) != BUILTIN


_loaded: list[PluginProblem] | None = None


def load_entry_points() -> tuple[PluginProblem, ...]:
    """Register every policy of the ``specdec_sim.policies`` entry points (once per process).

    Entry points are taken in order of (name, distribution, value), so which
    of two clashing plug-ins registers is the same on every run. A broken
    entry point is not registered: its problem is returned (every call
    returns the same problems), and the scenario loader and ``simulate
    policies`` refuse to go on while there is one.
    """
    global _loaded
    if _loaded is not None:
        return tuple(_loaded)
    _loaded = []
    seen: set[tuple[str, str, str]] = set()
    found = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        dist_label = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "unknown"
        marker = (ep.name, dist_label, ep.value)
        if marker not in seen:
            seen.add(marker)
            found.append((marker, ep))
    for (ep_name, dist_label, value), ep in sorted(found, key=lambda item: item[0]):
        failure = _register_entry_point(ep, ep_name, dist_label)
        if failure is not None:
            _loaded.append(PluginProblem(dist_label, ep_name, value, *failure))
    return tuple(_loaded)


def _register_entry_point(
    ep: metadata.EntryPoint, ep_name: str, dist_label: str
) -> tuple[str, str] | None:
    """Load, check and register one entry point; return ``(problem, allowed)`` if it is broken."""
    regs = families(plugins=False)
    family, dot, policy_name = ep_name.partition(".")
    if not dot or family not in regs or not policy_name:
        return (
            "entry point name is not <family>.<policy name>",
            "a family among " + ", ".join(regs),
        )
    try:
        cls = ep.load()
    except PLUGIN_FAILURES as exc:  # the plug-in failed while importing
        return f"loading failed: {first_line(exc)}", "an importable module:ClassName"
    problem = interface_problem(family, cls)
    if problem is not None:
        return problem, _family_requirements(family)
    if cls.name != policy_name:
        return (
            f"the class's name is {cls.name!r}, not the entry point's {policy_name!r}",
            f"an entry point named {family}.{cls.name}",
        )
    fill_capabilities(cls, regs[family].capabilities)
    try:
        regs[family].add_plugin(cls, f"entry point {ep_name} of distribution {dist_label}")
    except PolicyRegistryError as exc:
        return str(exc), "a name no other policy of the family has"
    return None
