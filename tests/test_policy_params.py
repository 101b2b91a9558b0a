"""Policy parameters are declared once, and every policy has its family's capabilities."""

from __future__ import annotations

import dataclasses
import sys
import textwrap

import pytest

from policies.admission import AdmitAll, MaxInFlight
from policies.arbitration import Baseline, PrefillFirst
from policies.base import Policy, capability_defaults, promised_by_method
from policies.k_control import KController, StaticK
from policies.params import DerivedParamsSchema, param, params_schema_of
from policies.plugins import PluginConsent, PolicyImportError, import_policy, interface_problem
from policies.registry import families

BUILTINS = [
    (family, name, reg.get(name))
    for family, reg in families(plugins=False).items()
    for name in reg.builtin_names()
]


@pytest.mark.parametrize(
    ("family", "name", "cls"), BUILTINS, ids=[f"{f}.{n}" for f, n, _ in BUILTINS]
)
def test_builtin_params_schema_is_derived_from_params_only(family, name, cls):
    assert cls.params_schema == params_schema_of(cls.Params)
    for klass in cls.__mro__:
        if klass is not Policy:
            assert "params_schema" not in vars(klass), f"{klass.__qualname__} writes params_schema"
    assert isinstance(vars(Policy)["params_schema"], DerivedParamsSchema)


@pytest.mark.parametrize(
    ("family", "name", "cls"), BUILTINS, ids=[f"{f}.{n}" for f, n, _ in BUILTINS]
)
def test_builtin_has_every_capability_of_its_family(family, name, cls):
    capabilities = families(plugins=False)[family].capabilities
    assert "random_stream" in capabilities
    for attr, default in capabilities.items():
        assert hasattr(cls, attr)
        assert type(getattr(cls, attr)) is type(default) or default is None


def test_capabilities_and_their_defaults_per_family():
    caps = {family: dict(reg.capabilities) for family, reg in families(plugins=False).items()}
    assert caps["routing"] == {
        "random_stream": None,
        "reads_replica_detail": False,
        "reads_prefix": False,
        "reads_kv_transfer": False,
    }
    assert caps["verify_batching"] == {
        "random_stream": None,
        "predicts_ttft": False,
        "reads_kv": False,
        "takes_lone_item": False,
        "orders_by_arrival": False,
    }
    assert caps["k_control"] == {
        "random_stream": None,
        "signal_window": 0,
        "predicts_iteration": False,
        "fixed_k": False,
    }
    assert caps["admission"] == {
        "random_stream": None,
        "predicts_ttft": False,
        "admits_all": False,
    }
    assert caps["hybrid_mode"] == {"random_stream": None, "predicts_latency": False}
    assert caps["arbitration"] == {
        "random_stream": None,
        "splits_rounds": False,
        "verify_lane": False,
        "idle_when_empty": False,
    }
    assert caps["draft_selection"] == {"random_stream": None}
    assert capability_defaults(KController) == caps["k_control"]


def test_a_method_capability_holds_only_in_the_class_whose_method_runs():
    """idle_when_empty and admits_all promise what choose and decide do: an override is asked."""

    class Asks(PrefillFirst):
        name = "asks"

        def choose(self, lanes):
            return None, 1.0

    class Inherits(PrefillFirst):
        name = "inherits"

    class Redeclares(PrefillFirst):
        name = "redeclares"
        idle_when_empty = True

        def choose(self, lanes):
            return super().choose(lanes)

    assert promised_by_method(PrefillFirst, "idle_when_empty", "choose")
    assert promised_by_method(Inherits, "idle_when_empty", "choose")
    assert not promised_by_method(Asks, "idle_when_empty", "choose")
    assert Asks.idle_when_empty is True  # inherited, and not honoured
    assert promised_by_method(Redeclares, "idle_when_empty", "choose")
    assert not promised_by_method(Baseline, "idle_when_empty", "choose")
    assert promised_by_method(StaticK, "fixed_k", "next_k")
    assert not promised_by_method(KController, "fixed_k", "next_k")
    assert promised_by_method(AdmitAll, "admits_all", "decide")
    assert not promised_by_method(MaxInFlight, "admits_all", "decide")
    assert not promised_by_method(object, "admits_all", "decide")


def test_schema_derivation_rules():
    @dataclasses.dataclass(frozen=True)
    class Example:
        needed: float = param(exclusive_minimum=0)
        count: int = param(3, minimum=1, maximum=9, description="How many.")
        choice: str = param("a", enum=("a", "b"))
        label: str = param("x", min_length=1)
        margin: int | None = param(None, minimum=0)
        plain: bool = False

    assert params_schema_of(Example) == {
        "type": "object",
        "additionalProperties": False,
        "required": ["needed"],
        "properties": {
            "needed": {"type": "number", "exclusiveMinimum": 0},
            "count": {
                "type": "integer",
                "minimum": 1,
                "maximum": 9,
                "default": 3,
                "description": "How many.",
            },
            "choice": {"enum": ["a", "b"], "default": "a"},
            "label": {"type": "string", "minLength": 1, "default": "x"},
            "margin": {"type": ["integer", "null"], "minimum": 0, "default": None},
            "plain": {"type": "boolean", "default": False},
        },
    }


PLUGIN = textwrap.dedent(
    '''
    from dataclasses import dataclass
    from typing import Any, ClassVar

    from policies.params import param
    from policies.routing import RoutingPolicy


    class Bare:
        """A router declaring no capability and writing its params_schema by hand."""

        name: ClassVar[str] = "bare"

        @dataclass(frozen=True)
        class Params:
            pass

        params_schema: ClassVar[dict[str, Any]] = {"type": "object"}

        def __init__(self, params: Any) -> None:
            self.params = params

        def route(self, query: Any, replicas: Any) -> int:
            return 0


    @dataclass(frozen=True)
    class SampleParams:
        sample: int = param(2, minimum=1, description="Replicas compared.")


    class Derived(RoutingPolicy):
        """A router whose params_schema is derived from its Params."""

        name: ClassVar[str] = "derived"
        Params = SampleParams

        def __init__(self, params: Any) -> None:
            self.params = params

        def route(self, query: Any, replicas: Any) -> int:
            return 0


    @dataclass(frozen=True)
    class ListParams:
        sizes: list = param(default=())


    class BadParams(Derived):
        name: ClassVar[str] = "bad_params"
        Params = ListParams
    '''
)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    name = "params_plugin_pkg"
    (tmp_path / f"{name}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_plugin_without_capabilities_gets_the_defaults(plugin):
    cls = import_policy("routing", f"{plugin}:Bare", PluginConsent(frozenset({plugin})))
    assert cls.reads_replica_detail is False
    assert cls.random_stream is None
    assert cls.params_schema == {"type": "object"}


def test_plugin_may_derive_its_params_schema(plugin):
    cls = import_policy("routing", f"{plugin}:Derived", PluginConsent(frozenset({plugin})))
    assert cls.params_schema["properties"]["sample"] == {
        "type": "integer",
        "minimum": 1,
        "default": 2,
        "description": "Replicas compared.",
    }


def test_plugin_params_without_a_json_type_is_refused(plugin):
    with pytest.raises(PolicyImportError, match="cannot be derived from its Params"):
        import_policy("routing", f"{plugin}:BadParams", PluginConsent(frozenset({plugin})))
    module = sys.modules[plugin]
    assert interface_problem("routing", module.BadParams) is not None
