from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.lut import (
    AXIS_COLUMNS,
    KEY_COLUMNS,
    VALUE_COLUMNS,
    LutKey,
    choices_of,
    clear_load_cache,
    column_names,
    load_lut,
    table_from_frame,
)
from tests.lut_factory import COLUMNS, grid_rows, write_lut

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = ROOT / "simulator" / "schemas" / "lut.schema.json"
COPY = ROOT / "lut" / "lut_schema.json"


def _schema() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(PACKAGED.read_text(encoding="utf-8"))
    return loaded


def test_repository_copy_is_identical() -> None:
    assert COPY.read_bytes() == PACKAGED.read_bytes()


def test_schema_is_valid_and_matches_column_roles() -> None:
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    required = set(schema["required"])  # type: ignore[call-overload]
    assert required == set(KEY_COLUMNS) | set(AXIS_COLUMNS) | set(VALUE_COLUMNS)
    assert column_names() == COLUMNS
    assert choices_of("phase") == ("prefill", "draft_decode", "verify", "fused_decode")
    assert choices_of("dtype") == ("fp16", "bf16", "fp8")
    for name, spec in schema["properties"].items():  # type: ignore[attr-defined]
        assert spec.get("description"), name
        if name not in required:
            assert "default" in spec, name


def test_factory_rows_satisfy_the_row_schema() -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    for row in grid_rows(phases=("prefill", "verify")):
        validator.validate(row)
    bad = {**grid_rows()[0], "latency_ms": -1.0}
    assert not validator.is_valid(bad)


def test_load_cache_is_keyed_by_content(tmp_path: Path) -> None:
    clear_load_cache()
    path = write_lut(tmp_path / "c.csv")
    first = load_lut(path)
    assert load_lut(path) is first
    assert load_lut(path, use_cache=False) is not first
    write_lut(path, context_lens=(128, 4096))
    changed = load_lut(path)
    assert changed is not first
    key = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
    assert changed.grid(key).context_len == (128, 4096)
    assert changed.digest != first.digest


def test_table_from_frame_checks_like_a_file() -> None:
    frame = pd.DataFrame(grid_rows())
    table = table_from_frame(frame, "candidate.csv")
    assert len(table.keys()) == 1
    frame.loc[0, "microbatch"] = None
    with pytest.raises(InputError) as info:
        table_from_frame(frame, "candidate.csv")
    (issue,) = info.value.issues
    assert (issue.file, issue.key_path, issue.problem) == (
        "candidate.csv",
        "row 2, column microbatch",
        "missing value",
    )
