"""Kind replay: accepted lengths replayed from a measured per-step log."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.acceptance import (
    AcceptanceModel,
    ReplayModel,
    ReplaySession,
    load_acceptance_model,
)
from simulator.acceptance.protocol import RequestTraits
from simulator.errors import InputError
from simulator.validate import validate_file
from simulator.workload.issue_collector import ISSUES_PER_KIND

LOG = """sequence,accepted,category
q1,3,math
q1,0,math
q1,5,math
q2,1,writing
q2,2,writing
q3,4,math
q3,4,math
q3,0,math
q3,2,math
"""


def write_curve(
    folder: Path,
    log: str = LOG,
    *,
    draft_length: int = 5,
    assign: str = "random",
    extra: str = "",
) -> Path:
    (folder / "log.csv").write_text(log, encoding="utf-8")
    curve = folder / "replayed.yaml"
    curve.write_text(
        "method: eagle\nkind: replay\ntopology: {kind: chain}\nsource: a test log\n"
        f"replay: {{file: log.csv, draft_length: {draft_length}, assign: {assign}, "
        "temperature: 0.5}\n" + extra,
        encoding="utf-8",
    )
    return curve


def load(folder: Path, log: str = LOG, **kwargs: object) -> ReplayModel:
    model = load_acceptance_model(write_curve(folder, log, **kwargs))  # type: ignore[arg-type]
    assert isinstance(model, ReplayModel)
    return model


def problems(folder: Path, log: str, draft_length: int = 5) -> list[str]:
    with pytest.raises(InputError) as caught:
        load(folder, log, draft_length=draft_length)
    return [issue.format() for issue in caught.value.issues]


class Counting:
    """A uniform source that counts its draws."""

    def __init__(self) -> None:
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return 0.5


def session(
    model: ReplayModel, request_id: int, category: str = "", q: float = 0.0
) -> ReplaySession:
    found = model.for_request(RequestTraits(request_id, category, q))
    assert isinstance(found, ReplaySession)
    return found


def test_model_describes_itself(tmp_path: Path) -> None:
    model = load(tmp_path)
    assert isinstance(model, AcceptanceModel)
    assert model.name == "replayed" and model.method == "eagle"
    assert model.info.kind == "replay"
    assert model.temperatures == (0.5,)
    assert model.categories == ("math", "writing")
    assert model.max_k == 5
    assert model.step_count == 9
    assert model.log.sequence_ids == ("q1", "q2", "q3")


def test_expected_values_are_the_truncated_means_over_all_steps(tmp_path: Path) -> None:
    model = load(tmp_path)
    steps = [3, 0, 5, 1, 2, 4, 4, 0, 2]
    for k in range(6):
        mean = sum(min(a, k) for a in steps) / len(steps)
        assert model.expected_accepted(k, 123, 0.9) == pytest.approx(mean)
        assert model.expected_tokens_per_verify(k, 0) == pytest.approx(mean + 1)
    with pytest.raises(ValueError, match="draft length 5"):
        model.expected_accepted(6, 0)
    with pytest.raises(ValueError, match=">= 0"):
        model.sample_accepted(-1, 0, Counting())


def test_a_huge_draft_length_loads_without_a_table_of_that_size(tmp_path: Path) -> None:
    """The step histogram is as long as the longest logged step, not the draft length."""
    model = load(tmp_path, draft_length=10**30)
    assert model.max_k == 10**30
    steps = [3, 0, 5, 1, 2, 4, 4, 0, 2]
    assert model.expected_accepted(10**20, 0) == pytest.approx(sum(steps) / len(steps))
    assert model.sequence_expected(0, 10**20) == pytest.approx(8 / 3)


def test_model_samples_the_empirical_distribution_with_one_draw(tmp_path: Path) -> None:
    model = load(tmp_path)
    source = Counting()
    assert model.sample_accepted(5, 0, source) == 2  # step int(0.5 * 9) = 4: q2's 2
    assert source.draws == 1
    rng = np.random.default_rng(7)
    draws = model.sample_accepted_many(3, 0, 20_000, rng)
    steps = np.array([3, 0, 5, 1, 2, 4, 4, 0, 2])
    for value in range(4):
        share = np.mean(np.minimum(steps, 3) == value)
        assert np.mean(draws == value) == pytest.approx(share, abs=0.015)


def test_sample_many_equals_repeated_samples(tmp_path: Path) -> None:
    model = load(tmp_path)
    many = model.sample_accepted_many(4, 0, 500, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    assert many.tolist() == [model.sample_accepted(4, 0, rng) for _ in range(500)]
    first, second = session(model, 0), session(model, 0)
    assert first.sample_accepted_many(2, 0, 11, np.random.default_rng(0)).tolist() == [
        second.sample_accepted(2, 0, np.random.default_rng(0)) for _ in range(11)
    ]
    assert first.cursor == second.cursor == 11 % 3


def test_session_replays_its_sequence_in_order_truncated_and_starting_over(
    tmp_path: Path,
) -> None:
    model = load(tmp_path, assign="in_order")
    replay = session(model, 2)  # in_order: request 2 of 3 sequences -> q3
    assert isinstance(replay, AcceptanceModel)
    assert replay.sequence_id == "q3" and replay.category == "math"
    source = Counting()
    assert [replay.sample_accepted(5, 0, source) for _ in range(9)] == [4, 4, 0, 2, 4, 4, 0, 2, 4]
    assert source.draws == 0
    assert replay.cursor == 1
    assert [replay.sample_accepted(3, 0, source) for _ in range(3)] == [3, 0, 2]
    assert replay.for_request(RequestTraits(9, "", 0.9)) is replay
    assert replay.expected_accepted(5, 0) == pytest.approx(10 / 4)
    assert replay.expected_accepted(3, 0) == pytest.approx(8 / 4)
    assert replay.expected_tokens_per_verify(3, 0) == pytest.approx(3.0)
    assert replay.max_k == 5 and replay.temperatures == (0.5,)
    assert replay.categories == model.categories
    with pytest.raises(ValueError, match="draft length 5"):
        replay.sample_accepted(6, 0, source)


def test_in_order_assignment_uses_the_request_id(tmp_path: Path) -> None:
    model = load(tmp_path, assign="in_order")
    assert [session(model, i).sequence_id for i in range(7)] == [
        "q1",
        "q2",
        "q3",
        "q1",
        "q2",
        "q3",
        "q1",
    ]
    # within a category's pool
    assert [session(model, i, "math").sequence_id for i in range(4)] == ["q1", "q3", "q1", "q3"]


def test_random_assignment_uses_the_quantile(tmp_path: Path) -> None:
    model = load(tmp_path, assign="random")
    picks = [session(model, 5, "", q).sequence_id for q in (0.0, 0.33, 0.34, 0.66, 0.67, 0.999)]
    assert picks == ["q1", "q1", "q2", "q2", "q3", "q3"]
    assert session(model, 5, "math", 0.49).sequence_id == "q1"
    assert session(model, 5, "math", 0.5).sequence_id == "q3"
    assert session(model, 5, "writing", 0.99).sequence_id == "q2"


def test_sessions_are_independent(tmp_path: Path) -> None:
    model = load(tmp_path, assign="in_order")
    first, again = session(model, 0), session(model, 3)
    assert first is not again and first.sequence_id == again.sequence_id == "q1"
    first.sample_accepted(5, 0, Counting())
    assert (first.cursor, again.cursor) == (1, 0)


def test_missing_category_is_refused_with_the_curve_and_its_categories(tmp_path: Path) -> None:
    model = load(tmp_path)
    with pytest.raises(ValueError, match=r"'replayed'.*'code'.*math, writing"):
        model.for_request(RequestTraits(0, "code", 0.5))


def test_log_without_categories_serves_every_category(tmp_path: Path) -> None:
    log = "sequence,accepted\na,1\na,2\nb,0\n"
    model = load(tmp_path, log, assign="in_order")
    assert model.categories == ()
    assert session(model, 1, "math").sequence_id == "b"
    assert session(model, 2, "").sequence_id == "a"


def test_concentration_is_refused(tmp_path: Path) -> None:
    model = load(tmp_path)
    with pytest.raises(ValueError, match="replayed log"):
        model.for_request(RequestTraits(0, "math", 0.5), concentration=10.0)


def test_interleaved_rows_keep_each_sequence_in_step_order(tmp_path: Path) -> None:
    model = load(tmp_path, "sequence,accepted\na,1\nb,2\na,3\n\nb,4\n", assign="in_order")
    assert model.log.steps == ((1, 3), (2, 4))


def test_builtin_and_key_checks_apply(tmp_path: Path) -> None:
    curve = write_curve(tmp_path, extra="bins: [{alpha: 0.5}]\n")
    with pytest.raises(InputError, match="key of another kind"):
        load_acceptance_model(curve)
    curve.write_text(
        "method: eagle\nkind: replay\ntopology: {kind: chain}\nsource: s\nreplay: {file: nowhere.csv, draft_length: 2}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        load_acceptance_model(curve)
    (issue,) = caught.value.issues
    assert issue.key_path == "replay.file" and issue.problem == "not found"


@pytest.mark.parametrize(
    ("log", "where", "problem"),
    [
        ("", "", "empty acceptance replay log"),
        ("sequence,accepted\n", "", "has no data rows"),
        ("sequence,category\na,math\n", "header", "missing required column 'accepted'"),
        ("accepted\n1\n", "header", "missing required column 'sequence'"),
        ("sequence,accepted,acepted\na,1,1\n", "header, column 3", "unknown column"),
        ("sequence,accepted,accepted\na,1,1\n", "header, column 3", "repeated column"),
        ("sequence,accepted\na,1,2\n", "row 1, column (all)", "wrong number of fields"),
        ("sequence,accepted\n,1\n", "row 1, column sequence", "missing value"),
        ("sequence,accepted\na,\n", "row 1, column accepted", "missing value"),
        ("sequence,accepted\na,two\n", "row 1, column accepted", "not a number"),
        ("sequence,accepted\na,inf\n", "row 1, column accepted", "not a number"),
        ("sequence,accepted\na,1.5\n", "row 1, column accepted", "not a whole number"),
        ("sequence,accepted\na,-1\n", "row 1, column accepted", "too small"),
        ("sequence,accepted\na,1\na,6\n", "row 2, column accepted", "too large"),
        ("sequence,accepted,category\na,1,\n", "row 1, column category", "missing value"),
        ("sequence,accepted,category\na,1,Math\n", "row 1, column category", "not a category"),
        (
            "sequence,accepted,category\na,1,math\nb,1,qa\na,2,qa\n",
            "row 3, column category",
            "category changes within a sequence",
        ),
    ],
)
def test_each_log_problem_is_one_message(
    tmp_path: Path, log: str, where: str, problem: str
) -> None:
    (message,) = problems(tmp_path, log)
    assert "log.csv" in message and problem in message
    assert f"log.csv: {where}" in message if where else message.startswith(str(tmp_path))
    assert "allowed:" in message


def test_messages_name_value_and_allowed_range(tmp_path: Path) -> None:
    (message,) = problems(tmp_path, "sequence,accepted\na,7\n", draft_length=6)
    assert (
        "row 1, column accepted: too large (got '7'; allowed: a whole number from 0 to 6" in message
    )
    (change,) = problems(tmp_path, "sequence,accepted,category\na,1,math\na,2,qa\n")
    assert "got 'qa'" in change and "'math', the category of sequence 'a' on row 1" in change


def test_every_problem_is_reported_and_repeats_are_counted(tmp_path: Path) -> None:
    rows = "".join(f"s,{value}\n" for value in ["x"] * (ISSUES_PER_KIND + 3) + ["-2", "9"])
    found = problems(tmp_path, "sequence,accepted\n" + rows)
    assert sum("not a number" in m for m in found) == ISSUES_PER_KIND + 1  # + one summary
    assert any("3 more rows" in m for m in found)
    assert any("too small" in m for m in found) and any("too large" in m for m in found)


def test_non_utf8_and_oversized_logs_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    curve = write_curve(tmp_path)
    (tmp_path / "log.csv").write_bytes(b"sequence,accepted\n\xff\xfe,1\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_acceptance_model(curve)
    (tmp_path / "log.csv").write_text(LOG, encoding="utf-8")
    monkeypatch.setattr("simulator.acceptance.replay_log.MAX_DOCUMENT_BYTES", 16)
    with pytest.raises(InputError, match="file too large"):
        load_acceptance_model(curve)


# --- the converter from Spec-Bench model-answer files -------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location(
    "convert_acceptance_log", ROOT / "scripts" / "convert_acceptance_log.py"
)
assert _SPEC is not None and _SPEC.loader is not None
convert = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = convert  # dataclasses look their module up
_SPEC.loader.exec_module(convert)


def answer(qid: object, category: str | None, lengths: list[object]) -> str:
    """One line of a Spec-Bench answer file, as its evaluation/eval.py writes it."""
    obj: dict[str, object] = {
        "question_id": qid,
        "answer_id": f"a{qid}",
        "model_id": "vicuna-7b-v1.3-eagle-float16-temperature-0.0",
        "choices": [
            {
                "index": 0,
                "turns": ["first", "second"],
                "decoding_steps": [2, len(lengths) - 2],
                "new_tokens": [sum(v for v in lengths if isinstance(v, int))],
                "wall_time": [0.1, 0.1],
                "accept_lengths": lengths,
            }
        ],
        "tstamp": 0.0,
    }
    if category is not None:
        obj["category"] = category
    return json.dumps(obj) + "\n"


def run_converter(folder: Path, text: str, *extra: str) -> tuple[int, Path, Path]:
    answers = folder / "answers.jsonl"
    answers.write_text(text, encoding="utf-8")
    out = folder / "out"
    out.mkdir(exist_ok=True)
    csv_path, curve = out / "steps.csv", out / "curve.yaml"
    argv = [
        str(answers),
        "--csv",
        str(csv_path),
        "--curve",
        str(curve),
        "--method",
        "eagle",
        "--draft-length",
        "5",
        "--source",
        "a test answer file",
        "--target-model",
        "Vicuna-7B-v1.3",
        "--topology",
        "tree",
        "--tree-nodes",
        "26",
        "--temperature",
        "0",
        "--dataset",
        "Spec-Bench",
        "--engine",
        "Spec-Bench",
        *extra,
    ]
    return convert.main(argv), csv_path, curve


def test_converter_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        answer(81, "writing", [4, 1, 6, 2])
        + "\n"
        + answer(7, "math_reasoning", [1, 1, 3])
        + answer("q-3", "writing", [2, 2])
    )
    code, csv_path, curve = run_converter(tmp_path, text, "--assign", "in_order")
    assert code == 0, capsys.readouterr().err
    umask = os.umask(0)
    os.umask(umask)
    assert {p.stat().st_mode & 0o777 for p in (csv_path, curve)} == {0o666 & ~umask}
    assert csv_path.read_text(encoding="utf-8").splitlines()[:3] == [
        "sequence,accepted,category",
        "81,3,multi_turn",
        "81,0,multi_turn",
    ]
    model = load_acceptance_model(curve)
    assert isinstance(model, ReplayModel)
    assert model.log.sequence_ids == ("81", "7", "q-3")
    assert model.log.steps == ((3, 0, 5, 1), (0, 0, 2), (1, 1))
    # Spec-Bench's question categories named by its six tasks (--categories tasks, the default).
    assert model.categories == ("math", "multi_turn")
    assert model.max_k == 5 and model.assign == "in_order" and model.temperatures == (0.0,)
    assert model.info.topology.kind == "tree" and model.info.topology.nodes == 26
    assert model.info.target_model == "Vicuna-7B-v1.3" and model.info.dataset == "Spec-Bench"
    assert "accept_lengths[i] - 1" in model.info.derivation and "9 steps" in model.info.derivation
    assert model.expected_tokens_per_verify(5, 0) == pytest.approx(
        (4 + 1 + 6 + 2 + 1 + 1 + 3 + 2 + 2) / 9
    )
    assert [session(model, 1, "").sample_accepted(5, 0, Counting()) for _ in range(1)] == [0]


def test_converter_keeps_question_categories_or_refuses_unknown_ones(tmp_path: Path) -> None:
    text = answer(81, "writing", [2]) + answer(7, "math_reasoning", [1])
    code, csv_path, _ = run_converter(tmp_path, text, "--categories", "questions")
    assert code == 0
    assert csv_path.read_text(encoding="utf-8").splitlines()[1:] == [
        "81,1,writing",
        "7,0,math_reasoning",
    ]
    (tmp_path / "x").mkdir()
    code, csv_path, _ = run_converter(tmp_path / "x", answer(5, "poetry", [2]))
    assert code == 2 and not csv_path.exists()


def test_converter_without_categories_writes_two_columns(tmp_path: Path) -> None:
    code, csv_path, curve = run_converter(tmp_path, answer(1, None, [1, 2]) + answer(2, None, [3]))
    assert code == 0
    assert csv_path.read_text(encoding="utf-8") == "sequence,accepted\n1,0\n1,1\n2,2\n"
    assert load_acceptance_model(curve).categories == ()


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("", "", "empty answer file"),
        ("{not json\n", "line 1", "not valid JSON"),
        ("[1, 2]\n", "line 1", "not a JSON object"),
        (answer(True, "qa", [1]), "line 1, key question_id", "not a question id"),
        (
            answer(1, "qa", [1]).replace('"question_id": 1, ', ""),
            "line 1, key question_id",
            "missing key",
        ),
        (answer(1, "Q A", [1]), "line 1, key category", "not a category name"),
        (
            answer(1, "qa", [1]).replace('"choices"', '"options"'),
            "line 1, key choices",
            "missing key",
        ),
        (answer(1, "qa", []), "line 1, key choices[0].accept_lengths", "not a non-empty list"),
        (answer(1, "qa", [1, 2.5]), "line 1, key choices[0].accept_lengths", "not a whole number"),
        (answer(1, "qa", [0]), "line 1, key choices[0].accept_lengths", "too small"),
        (
            answer(1, "qa", [7]),
            "line 1, key choices[0].accept_lengths",
            "more tokens than --draft-length allows",
        ),
        (
            answer(1, "qa", [1]) + answer(1, "qa", [2]),
            "line 2, key question_id",
            "repeated question",
        ),
        (answer(1, "qa", [1]) + answer(2, None, [2]), "line 2, key category", "missing key"),
    ],
)
def test_converter_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str, problem: str
) -> None:
    code, csv_path, _ = run_converter(tmp_path, text)
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (message,) = [line for line in err.splitlines() if line.startswith("  - ")]
    assert f"answers.jsonl: {where}" in message if where else "answers.jsonl: " in message
    assert problem in message and "allowed:" in message
    assert sorted(p.name for p in csv_path.parent.iterdir()) == []


def test_converter_lists_a_repeated_problem_once_per_kind_then_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_converter(tmp_path, answer(1, "qa", [9] * (ISSUES_PER_KIND + 4)))
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("more tokens than --draft-length allows") == ISSUES_PER_KIND + 1
    assert "14 times in all" in err


def test_converter_refuses_bad_options_and_missing_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_converter(tmp_path, answer(1, "qa", [1]), "--draft-length", "0")
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        run_converter(tmp_path, answer(1, "qa", [1]), "--topology", "chain")  # with --tree-nodes
    answers = tmp_path / "answers.jsonl"
    code = convert.main(
        [
            str(answers),
            "--csv",
            str(tmp_path / "nowhere" / "a.csv"),
            "--curve",
            str(tmp_path / "a.yaml"),
            "--method",
            "m",
            "--draft-length",
            "3",
            "--source",
            "s",
        ]
    )
    assert code == 2
    assert "output folder not found" in capsys.readouterr().err
    assert not (tmp_path / "a.yaml").exists()


# --- the shipped replay log ---------------------------------------------------------------------

SHIPPED = ROOT / "acceptance" / "replay" / "eagle_vicuna-7b_specbench.yaml"


def test_shipped_log_loads_and_matches_the_spec_bench_leaderboard() -> None:
    model = load_acceptance_model(SHIPPED)
    assert isinstance(model, ReplayModel)
    assert (len(model.log.steps), model.step_count, model.max_k) == (480, 25_525, 5)
    # Spec-Bench's six tasks, as the curves derived from its leaderboard name them.
    assert model.categories == ("math", "multi_turn", "qa", "rag", "summarization", "translation")
    assert model.info.topology.kind == "tree" and model.info.topology.nodes == 26
    leaderboard = ROOT / "acceptance" / "inputs" / "specbench_leaderboard.csv"
    with leaderboard.open(encoding="utf-8") as handle:
        rows = [
            float(row["mean_accepted_tokens"])
            for row in csv.DictReader(handle)
            if row["target_model"] == "Vicuna-7B-v1.3" and row["method"] == "EAGLE"
        ]
    assert rows  # one row per device
    for tokens_per_step in rows:
        assert model.expected_tokens_per_verify(5, 0) == pytest.approx(tokens_per_step, abs=0.02)


def test_shipped_log_is_documented() -> None:
    sources = (ROOT / "acceptance" / "inputs" / "SOURCES.md").read_text(encoding="utf-8")
    readme = (ROOT / "acceptance" / "README.md").read_text(encoding="utf-8")
    for path in (ROOT / "acceptance" / "replay").iterdir():
        assert f"`replay/{path.name}`" in sources, path.name
    assert "replay/eagle_vicuna-7b_specbench.yaml" in readme


def test_a_curve_may_name_a_shipped_log_by_builtin_reference(tmp_path: Path) -> None:
    curve = tmp_path / "mine.yaml"
    curve.write_text(
        "method: eagle\nkind: replay\ntopology: {kind: chain}\nsource: s\nreplay:\n"
        "  file: builtin:acceptance/replay/eagle_vicuna-7b_specbench.csv\n  draft_length: 5\n",
        encoding="utf-8",
    )
    model = load_acceptance_model(curve)
    assert isinstance(model, ReplayModel) and model.step_count == 25_525
    assert session(model, 0, "translation", 0.0).category == "translation"


def test_validate_summarises_a_replayed_curve_within_its_draft_length(tmp_path: Path) -> None:
    log = "sequence,accepted\na,1\na,3\n"
    verdict = validate_file(write_curve(tmp_path, log, draft_length=3))
    assert verdict.ok, verdict.error
    assert "E[tokens/verify] at k=3 and temperature 0.5 is 3.000" in verdict.summary
    assert "(chain, temperature 0.5)" in verdict.summary
