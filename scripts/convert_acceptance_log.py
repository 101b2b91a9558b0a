r"""Convert a Spec-Bench model-answer file into a replayed acceptance curve (kind ``replay``).

Usage::

    python scripts/convert_acceptance_log.py ANSWERS.jsonl --csv LOG.csv --curve CURVE.yaml \
        --method eagle --draft-length 5 --source "..." [--target-model ...] [--draft-model ...]
        [--topology chain|tree] [--tree-nodes N] [--tree-width N] [--temperature 0]
        [--dataset ...] [--engine ...] [--assign random|in_order] [--name ...] [--notes ...]

Source format: the answer file Spec-Bench's ``evaluation/eval.py`` writes
(``data/spec_bench/model_answer/<model-id>.jsonl`` in hemingkx/Spec-Bench),
one JSON object per line::

    {"question_id": 81, "category": "writing", "answer_id": "...", "model_id": "...",
     "choices": [{"index": 0, "turns": [...], "decoding_steps": [...], "new_tokens": [...],
                  "wall_time": [...], "accept_lengths": [4, 2, 4, ...]}],
     "tstamp": ...}

``accept_lengths`` holds, per decoding step, the number of tokens the step
added to the output: the accepted draft tokens *plus* the target's own token
(Spec-Bench's ``inference_*.py`` append ``input_ids.shape[1] - cur_length``
per step; its plain decoding logs ``[1] * new_token``). Spec-Bench already
concatenates the turns of a question in order (``cur_accept_lengths_tree``
extends over the turns). The step that ends a turn is shortened by the tokens
after the end-of-sequence token, which Spec-Bench removes from it.

Conversion:

* one sequence per question, id ``question_id``: the steps of ``choices[0]``
  (the first choice, as Spec-Bench's ``evaluation/speed.py`` reads), its turns
  in order;
* ``accepted = accept_lengths[i] - 1`` (the target's token removed), so each
  entry must be a whole number from 1 to ``--draft-length + 1``;
* ``category`` when the lines carry one (every line must then): with
  ``--categories tasks`` (the default) Spec-Bench's question categories are
  named by the leaderboard's six tasks, as the shipped curves' categories are
  (MT-Bench's eight, writing to humanities, are ``multi_turn``;
  ``math_reasoning`` is ``math``; ``translation``, ``summarization``, ``qa``
  and ``rag`` keep their names; any other category is refused); with
  ``--categories questions`` they are copied as they are.

Writes the CSV log (columns ``sequence``, ``accepted`` and ``category``) and
the curve YAML naming it (``replay.file`` relative to the YAML). Both are
checked, then written to temporary files and renamed into place, so on any
problem nothing is written. Bad input is reported one message per problem
(file, line, key, value, what is allowed) and exits with status 2.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulator.acceptance.loader import SCHEMA_NAME  # noqa: E402
from simulator.acceptance.replay_log import (  # noqa: E402
    CATEGORY_ALLOWED,
    CATEGORY_PATTERN,
    parse_replay_log,
)
from simulator.errors import EXIT_INPUT_ERROR, InputError, Issue, make_issue  # noqa: E402
from simulator.input_files import MAX_DOCUMENT_BYTES, read_bounded  # noqa: E402
from simulator.loading import load_packaged_schema, schema_issues  # noqa: E402
from simulator.workload.issue_collector import ISSUES_PER_KIND  # noqa: E402

STEPS_KEY = "choices[0].accept_lengths"


@dataclass
class Problems:
    """Problems of one input file, at most ``ISSUES_PER_KIND`` listed per kind (key, problem)."""

    file: Path
    issues: list[Issue] = field(default_factory=list)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, line: int, key: str, value: object, allowed: str, problem: str) -> None:
        """Record a problem at ``line`` (from 1) and ``key`` of that line's object."""
        self.counts[(key, problem)] += 1
        if self.counts[(key, problem)] <= ISSUES_PER_KIND:
            where = f"line {line}, key {key}" if key else f"line {line}"
            self.issues.append(make_issue(self.file, where, value, allowed, problem))

    def all(self) -> list[Issue]:
        """Return the listed problems and one count per kind with more."""
        out = list(self.issues)
        for (key, problem), count in self.counts.items():
            if count > ISSUES_PER_KIND:
                out.append(
                    make_issue(
                        self.file,
                        f"key {key}",
                        f"{count - ISSUES_PER_KIND} more",
                        "see the listed problems",
                        f"{problem} ({count} times in all; the first {ISSUES_PER_KIND} listed)",
                    )
                )
        return out


SPEC_BENCH_TASKS: dict[str, str] = {
    **dict.fromkeys(
        ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"),
        "multi_turn",
    ),
    "translation": "translation",
    "summarization": "summarization",
    "qa": "qa",
    "math_reasoning": "math",
    "rag": "rag",
}
"""Spec-Bench question category -> the leaderboard task it belongs to (MT-Bench's
eight categories make up the multi-turn conversation task)."""


@dataclass(frozen=True)
class Question:
    """One question's steps."""

    line: int
    sequence_id: str
    category: str | None
    accepted: tuple[int, ...]


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _question(
    obj: dict[str, Any], line: int, draft_length: int, found: Problems
) -> Question | None:
    good = True
    qid = obj.get("question_id")
    qid_allowed = "a whole number or non-empty text identifying the question"
    if "question_id" not in obj:
        found.add(line, "question_id", "(missing)", qid_allowed, "missing key")
        good = False
    elif not (_is_whole(qid) or (isinstance(qid, str) and qid.strip())):
        found.add(line, "question_id", qid, qid_allowed, "not a question id")
        good = False
    category = obj.get("category")
    if category is not None and not (
        isinstance(category, str) and CATEGORY_PATTERN.match(category)
    ):
        found.add(line, "category", category, CATEGORY_ALLOWED, "not a category name")
        good = False
    choices = obj.get("choices")
    steps: list[int] = []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        found.add(
            line,
            "choices",
            "(missing)" if choices is None else choices,
            "a non-empty list of answer objects (Spec-Bench's choices)",
            "missing key" if choices is None else "not a list of answer objects",
        )
        return None
    lengths = choices[0].get("accept_lengths")
    allowed = (
        f"a whole number from 1 to {draft_length + 1}: tokens the step added, the target's "
        f"own token included (--draft-length {draft_length} + 1 at most)"
    )
    if not isinstance(lengths, list) or not lengths:
        found.add(
            line,
            STEPS_KEY,
            "(missing)" if lengths is None else lengths,
            "a non-empty list of tokens per decoding step",
            "missing key" if lengths is None else "not a non-empty list",
        )
        return None
    for position, value in enumerate(lengths):
        shown = f"{value!r} (entry {position})"
        if not _is_whole(value):
            found.add(line, STEPS_KEY, shown, allowed, "not a whole number")
        elif value < 1:
            found.add(line, STEPS_KEY, shown, allowed, "too small")
        elif value > draft_length + 1:
            found.add(line, STEPS_KEY, shown, allowed, "more tokens than --draft-length allows")
        else:
            steps.append(value - 1)
            continue
        good = False
    if not good:
        return None
    return Question(line, str(qid).strip(), category, tuple(steps))


def parse_answers(path: Path, data: bytes, draft_length: int) -> list[Question]:
    """Parse and check the bytes of a Spec-Bench answer file.

    Raises:
        InputError: With every problem found.
    """
    found = Problems(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            [
                make_issue(
                    path,
                    f"byte {exc.start}",
                    data[exc.start : exc.start + 8],
                    "UTF-8 text",
                    "not UTF-8",
                )
            ]
        ) from None
    sequences: list[Question] = []
    first_line: dict[str, int] = {}
    lines = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        lines += 1
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            found.add(line, "", raw[:40], "one JSON object per line", f"not valid JSON ({exc.msg})")
            continue
        if not isinstance(obj, dict):
            found.add(line, "", obj, "one JSON object per line", "not a JSON object")
            continue
        sequence = _question(obj, line, draft_length, found)
        if sequence is None:
            continue
        earlier = first_line.setdefault(sequence.sequence_id, line)
        if earlier != line:
            found.add(
                line,
                "question_id",
                obj["question_id"],
                f"each question once (first on line {earlier}; Spec-Bench's reorg_answer_file "
                "keeps the last answer of each question)",
                "repeated question",
            )
            continue
        sequences.append(sequence)
    if lines == 0:
        raise InputError(
            [
                make_issue(
                    path,
                    "",
                    "(empty)",
                    "one JSON object per line, one per question",
                    "empty answer file",
                )
            ]
        )
    with_category = [s for s in sequences if s.category is not None]
    if with_category and len(with_category) != len(sequences):
        example = with_category[0]
        for sequence in sequences:
            if sequence.category is None:
                found.add(
                    sequence.line,
                    "category",
                    "(missing)",
                    f"a category on every line, as on line {example.line} ({example.category!r})",
                    "missing key",
                )
    issues = found.all()
    if issues:
        raise InputError(issues)
    return sequences


def as_tasks(path: Path, sequences: list[Question]) -> list[Question]:
    """Rename every question category to its Spec-Bench task (:data:`SPEC_BENCH_TASKS`).

    Raises:
        InputError: A category that is none of Spec-Bench's (first line naming it).
    """
    issues = []
    seen: set[str] = set()
    out: list[Question] = []
    for sequence in sequences:
        category = sequence.category
        if category is None:
            out.append(sequence)
            continue
        task = SPEC_BENCH_TASKS.get(category)
        if task is None:
            if category not in seen:
                seen.add(category)
                issues.append(
                    make_issue(
                        path,
                        f"line {sequence.line}, key category",
                        category,
                        "a Spec-Bench question category ("
                        + ", ".join(sorted(SPEC_BENCH_TASKS))
                        + "), or --categories questions to keep the file's names",
                        "not a Spec-Bench category",
                    )
                )
            continue
        out.append(dataclasses.replace(sequence, category=task))
    if issues:
        raise InputError(issues)
    return out


def log_csv(sequences: list[Question]) -> str:
    """Return the replay log CSV of the sequences."""
    with_category = bool(sequences) and sequences[0].category is not None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["sequence", "accepted", "category"] if with_category else ["sequence", "accepted"]
    )
    for sequence in sequences:
        for accepted in sequence.accepted:
            if with_category:
                writer.writerow([sequence.sequence_id, accepted, sequence.category])
            else:
                writer.writerow([sequence.sequence_id, accepted])
    return out.getvalue()


def curve_document(
    args: argparse.Namespace, sequences: list[Question], digest: str
) -> dict[str, Any]:
    """Return the curve document naming the CSV (relative to the curve's folder)."""
    topology: dict[str, Any] = {"kind": args.topology}
    if args.tree_width is not None:
        topology["width"] = args.tree_width
    if args.tree_nodes is not None:
        topology["nodes"] = args.tree_nodes
    steps = sum(len(s.accepted) for s in sequences)
    mean = math.fsum(a for s in sequences for a in s.accepted) / steps
    relative = os.path.relpath(args.csv.resolve(), args.curve.resolve().parent)
    document: dict[str, Any] = {
        "name": args.name or args.curve.stem,
        "method": args.method,
        "kind": "replay",
        "target_model": args.target_model,
        "draft_model": args.draft_model,
        "topology": topology,
        "dataset": args.dataset,
        "engine": args.engine,
        "replay": {
            "file": Path(relative).as_posix(),
            "draft_length": args.draft_length,
            "assign": args.assign,
            "temperature": args.temperature,
        },
        "source": args.source,
        "derivation": (
            f"{args.answers.name} (Spec-Bench model-answer JSONL, SHA-256 {digest}) converted by "
            "scripts/convert_acceptance_log.py: one sequence per question_id, the steps of "
            "choices[0] with its turns in order; accepted = accept_lengths[i] - 1 (Spec-Bench "
            f"counts the target's own token). {len(sequences)} sequences, {steps} steps, mean "
            f"accepted {mean:.4f} per step at draft length {args.draft_length}."
            + (
                " Categories named by Spec-Bench's six tasks (MT-Bench's eight categories: "
                "multi_turn; math_reasoning: math; the others as they are)."
                if args.categories == "tasks" and any(s.category for s in sequences)
                else ""
            )
        ),
        "notes": args.notes,
    }
    return document


def _check_outputs(args: argparse.Namespace, document: dict[str, Any], table: str) -> None:
    """Check the outputs as the loader will, before anything is written."""
    issues = schema_issues(document, load_packaged_schema(SCHEMA_NAME), args.curve)
    for target in (args.csv, args.curve):
        if not target.parent.is_dir():
            issues.append(
                make_issue(
                    target, "", str(target.parent), "an existing folder", "output folder not found"
                )
            )
    if args.csv.resolve() == args.curve.resolve():
        issues.append(
            make_issue(args.curve, "", str(args.curve), "a file other than --csv", "same file")
        )
    if issues:
        raise InputError(issues)
    parse_replay_log(args.csv, table.encode("utf-8"), args.draft_length)


def _write_all(contents: dict[Path, str]) -> None:
    """Write every file to a temporary file beside it, then rename them all into place."""
    staged: list[tuple[Path, Path]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for target, text in contents.items():
            handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            staged.append((Path(name), target))
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
                stream.write(text)
            Path(name).chmod(0o666 & ~umask)  # as a plain open() would create it
        for temporary, target in staged:
            temporary.replace(target)
    finally:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help="Spec-Bench model-answer JSONL file")
    parser.add_argument("--csv", type=Path, required=True, help="replay log to write (CSV)")
    parser.add_argument("--curve", type=Path, required=True, help="curve file to write (YAML)")
    parser.add_argument("--method", required=True, help="speculation method, e.g. eagle")
    parser.add_argument(
        "--draft-length",
        type=int,
        required=True,
        help="draft length the steps were measured at (most draft tokens one step accepts)",
    )
    parser.add_argument("--source", required=True, help="where the answer file comes from")
    parser.add_argument("--target-model", default="")
    parser.add_argument("--draft-model", default="")
    parser.add_argument("--topology", choices=("chain", "tree"), default="chain")
    parser.add_argument("--tree-width", type=int, help="tree candidates per level (trees only)")
    parser.add_argument("--tree-nodes", type=int, help="tree tokens per round, root included")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--dataset", default="")
    parser.add_argument("--engine", default="")
    parser.add_argument("--assign", choices=("random", "in_order"), default="random")
    parser.add_argument(
        "--categories",
        choices=("tasks", "questions"),
        default="tasks",
        help="tasks: name categories by Spec-Bench's six tasks; questions: keep the file's names",
    )
    parser.add_argument("--name", default="", help="curve name (default: the curve file's stem)")
    parser.add_argument("--notes", default="")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Convert, check and write; return 0, or 2 after printing every problem."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.draft_length < 1:
        parser.error(f"--draft-length must be a whole number >= 1, got {args.draft_length}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        parser.error(f"--temperature must be a finite number >= 0, got {args.temperature}")
    if args.topology == "chain" and (args.tree_width is not None or args.tree_nodes is not None):
        parser.error("--tree-width and --tree-nodes describe trees: use them with --topology tree")
    try:
        data = read_bounded(args.answers, "Spec-Bench answer", MAX_DOCUMENT_BYTES)
        sequences = parse_answers(args.answers, data, args.draft_length)
        if args.categories == "tasks":
            sequences = as_tasks(args.answers, sequences)
        digest = hashlib.sha256(data).hexdigest()
        table = log_csv(sequences)
        document = curve_document(args, sequences, digest)
        _check_outputs(args, document, table)
        curve_text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
        _write_all({args.csv: table, args.curve: curve_text})
    except InputError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except OSError as exc:
        print(f"error: cannot write the outputs: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    steps = sum(len(s.accepted) for s in sequences)
    print(f"wrote {args.csv} ({len(sequences)} sequences, {steps} steps) and {args.curve}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
