"""Policies named in a scenario: a registered name or a consented plug-in, parameters built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from policies import registry
from policies.plugins import (
    PLUGIN_FAILURES,
    PolicyImportError,
    first_line,
    import_policy,
    is_import_path,
    is_plugin,
)
from simulator.errors import Issue
from simulator.loading import schema_issues
from simulator.scenario.model import PolicyChoice
from simulator.scenario.sections.context import BuildContext


def build_policy(
    ctx: BuildContext,
    family: str,
    name: str,
    params: Mapping[str, Any],
    key: str,
    name_key: str = "policy",
) -> PolicyChoice:
    """Look up a policy class and build its parameters, reporting bad ones.

    ``name`` is a registered name or an import path ``module.path:ClassName``,
    imported (when the user's consent allows its module) and checked here;
    ``name_key`` is its key under ``key``.
    """
    where = {"file": str(ctx.file), "key": f"{key}.{name_key}"}
    if is_import_path(name):
        try:
            cls = import_policy(family, name, ctx.consent)
        except PolicyImportError as exc:
            ctx.issue(f"{key}.{name_key}", name, exc.allowed, exc.problem)
            return PolicyChoice(family=family, name=name, params=None, **where)
        try:
            jsonschema.validators.validator_for(cls.params_schema).check_schema(cls.params_schema)
        except jsonschema.SchemaError as exc:
            ctx.issue(
                f"{key}.{name_key}",
                name,
                "a class whose params_schema is a valid JSON Schema",
                f"invalid params_schema: {exc.message}",
            )
            return PolicyChoice(family=family, name=name, params=None, **where)
    else:
        cls = registry(family).get(name)
    problems = schema_issues(dict(params), cls.params_schema, ctx.file)
    for problem in problems:
        inner = "" if problem.key_path == "(top level)" else "." + problem.key_path
        ctx.issues.append(
            Issue(
                problem.file,
                f"{key}.params{inner}",
                problem.value,
                problem.allowed,
                problem.problem,
            )
        )
    built = None
    if not problems:
        try:
            built = cls.Params(**dict(params))
        except PLUGIN_FAILURES as exc:
            if not is_plugin(family, name):
                raise  # a built-in's bug, not the user's input
            ctx.issue(
                f"{key}.params",
                dict(params),
                "parameters the plug-in's Params accepts",
                f"{cls.__module__}.{cls.__qualname__}.Params failed: {first_line(exc)}",
            )
    return PolicyChoice(family=family, name=name, params=built, **where)
