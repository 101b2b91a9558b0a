"""The model to profile: a ``models.yaml`` id, or a Hugging Face ``config.json``.

Only Llama-architecture decoders are accepted (gated SiLU MLP, RMSNorm, rotary
embeddings, grouped-query attention, no biases): ``model_type`` ``llama`` in a
``config.json``, or a ``models.yaml`` entry with ``gated_mlp: true``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from lut_population.inputs import load_models
from lut_population.shapes import ModelShape
from simulator.errors import InputError, Issue, make_issue
from simulator.suggest import did_you_mean

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""Model and hardware ids the profiler writes (no commas, spaces or path separators)."""

ID_ALLOWED = "letters, digits, '.', '_', '+', '-', starting with a letter or digit"

_CONFIG_INTS = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "vocab_size": "vocab_size",
    "max_context": "max_position_embeddings",
}


def check_id(value: str, option: str) -> str:
    """Return ``value`` if it is a usable id, else raise an :class:`InputError` naming ``option``."""
    if ID_PATTERN.fullmatch(value) is None or "__" in value:
        raise InputError(
            [make_issue("command line", option, value, f"{ID_ALLOWED}; no '__'", "bad id")]
        )
    return value


def resolve_model(spec: str, model_id: str | None = None) -> ModelShape:
    """The shape named by ``--model``: a path to ``config.json`` or a ``models.yaml`` id.

    Args:
        spec: A ``models.yaml`` id (e.g. ``llama-3-8b``) or the path of a Hugging Face
            ``config.json`` (any path ending in ``.json``, or an existing file).
        model_id: The model id to write (``--model-id``); default the ``models.yaml`` id, or
            the lower-cased name of the folder holding the ``config.json``.

    Raises:
        InputError: Unknown id (with a "did you mean"), unreadable or non-Llama config, bad id.
    """
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        default_id = path.resolve().parent.name.lower() or "model"
        shape = shape_from_config(path, model_id or default_id)
    else:
        shape = _shape_from_catalogue(spec, model_id)
    check_id(shape.model_id, "--model-id" if model_id else "--model")
    return shape


def _shape_from_catalogue(model: str, model_id: str | None) -> ModelShape:
    models = load_models()
    if model not in models:
        known = ", ".join(sorted(models))
        raise InputError(
            [
                make_issue(
                    "--model",
                    "",
                    model,
                    f"a model id of lut_population/inputs/models.yaml ({known}) or the path of "
                    "a Hugging Face config.json",
                    "unknown model" + did_you_mean(model, models),
                )
            ]
        )
    shape = models[model]
    if not shape.gated_mlp:
        raise InputError(
            [
                make_issue(
                    "lut_population/inputs/models.yaml",
                    f"models.{model}.gated_mlp",
                    False,
                    "a Llama-architecture model (gated SiLU MLP)",
                    "the profiler builds Llama-architecture decoders only",
                )
            ]
        )
    if model_id is None:
        return shape
    return replace(shape, model_id=model_id)


def _positive_int(raw: dict[str, Any], key: str, file: Path, issues: list[Issue]) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        issues.append(make_issue(file, key, value, "a positive integer"))
        return 1
    return value


def shape_from_config(path: Path, model_id: str) -> ModelShape:
    """Read a Hugging Face Llama ``config.json`` into a :class:`ModelShape`.

    Fields: ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads`` (default: the attention heads), ``head_dim`` (default
    ``hidden_size / num_attention_heads``), ``intermediate_size``, ``vocab_size``,
    ``max_position_embeddings``, ``tie_word_embeddings`` (default false).

    Raises:
        InputError: The file is missing or not JSON, ``model_type`` is not ``llama``,
            ``hidden_act`` is not ``silu``, or a field is missing or not a positive integer.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(
            [make_issue(path, "", type(error).__name__, "a readable JSON file", str(error))]
        ) from None
    if not isinstance(raw, dict):
        raise InputError([make_issue(path, "", raw, "a JSON object", "not a config.json")])
    issues: list[Issue] = []
    if raw.get("model_type") != "llama":
        issues.append(
            make_issue(
                path,
                "model_type",
                raw.get("model_type"),
                "'llama' (the profiler builds Llama-architecture decoders only)",
            )
        )
    if raw.get("hidden_act", "silu") != "silu":
        issues.append(make_issue(path, "hidden_act", raw.get("hidden_act"), "'silu'"))
    ints = {name: _positive_int(raw, key, path, issues) for name, key in _CONFIG_INTS.items()}
    kv_heads = ints["num_heads"]
    if raw.get("num_key_value_heads") is not None:
        kv_heads = _positive_int(raw, "num_key_value_heads", path, issues)
    if raw.get("head_dim") is not None:
        head_dim = _positive_int(raw, "head_dim", path, issues)
    else:
        head_dim = ints["hidden_size"] // ints["num_heads"]
    if ints["num_heads"] % kv_heads:
        issues.append(
            make_issue(
                path,
                "num_key_value_heads",
                kv_heads,
                f"a divisor of num_attention_heads ({ints['num_heads']})",
            )
        )
    tied = raw.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        issues.append(make_issue(path, "tie_word_embeddings", tied, "true or false"))
    if issues:
        raise InputError(issues)
    return ModelShape(
        model_id=model_id,
        name=str(raw.get("_name_or_path") or path.as_posix()),
        num_layers=ints["num_layers"],
        hidden_size=ints["hidden_size"],
        num_heads=ints["num_heads"],
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ints["intermediate_size"],
        vocab_size=ints["vocab_size"],
        gated_mlp=True,
        tied_embeddings=bool(tied),
        max_context=ints["max_context"],
        source=path.as_posix(),
    )
