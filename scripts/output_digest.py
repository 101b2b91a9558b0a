"""Check that a change to the engine leaves every output byte-identical.

Usage::

    python scripts/output_digest.py            # compare with scripts/output_digests.json
    python scripts/output_digest.py --save     # store the digests as the reference

Runs every example scenario at its test size (the golden tests' overrides)
with two seeds, the benchmark scenarios and the planner benchmark's
pre-filtered run and the disaggregated example runs, writes each run's results as ``simulate run`` does and
hashes every file whose content depends only on the scenario and seed
(``summary.json``, ``requests.csv``, ``timeseries.csv``, ``planner_log.csv``;
not ``run.json``, which holds wall time and versions). Exit status 1 when a
digest differs from the stored one, naming the run and file. Speed work
(``scripts/bench.py``) must keep every digest: a faster engine that changes
an output is a different engine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.golden.runs import EXAMPLES, TEST_SIZE  # noqa: E402

DIGEST_FILE = Path(__file__).with_name("output_digests.json")
BENCH = ROOT / "scenarios" / "bench"
DISAGGREGATION = ROOT / "scenarios" / "disaggregation"
HASHED = ("summary.json", "requests.csv", "timeseries.csv", "planner_log.csv")
SEEDS = (0, 1)


def runs() -> dict[str, tuple[Path, list[str]]]:
    """Every run the digest covers: name -> (scenario file, overrides)."""
    table: dict[str, tuple[Path, list[str]]] = {}
    for name, overrides in TEST_SIZE.items():
        for seed in SEEDS:
            table[f"{name}/seed{seed}"] = (EXAMPLES / f"{name}.yaml", [*overrides, f"seed={seed}"])
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import PLANNER_VARIANTS, WORKLOADS

    for name, workload in WORKLOADS.items():
        if name != "none_synthetic_100k":  # 14 s; its code paths are none_azure_conv_10k's
            table[f"bench/{name}"] = (BENCH / workload["scenario"], list(workload["overrides"]))
    table["bench/planner_prefilter"] = (
        BENCH / "distributed_rounds.yaml",
        PLANNER_VARIANTS["prefilter"],
    )
    table["prefix_cache/sessions_cache_aware"] = (
        ROOT / "scenarios" / "prefix_cache" / "sessions_llama31_8b_h100.yaml",
        ["scheduler.kv.prefix_cache.enabled=true", "scheduler.routing.policy=cache_aware"],
    )
    for name in (
        "disaggregated",
        "disaggregated_fused",
        "disaggregated_distributed",
        "disaggregated_planner",
    ):
        table[f"disaggregation/{name}"] = (DISAGGREGATION / f"{name}.yaml", [])
    return table


def digests(only: list[str] | None = None) -> dict[str, dict[str, str]]:
    """Run every run (or the named ones) and return run -> file -> SHA-256."""
    from simulator import load_scenario, run
    from simulator.outputs import write_results

    found: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (file, overrides) in runs().items():
            if only and name not in only:
                continue
            out = Path(tmp) / name.replace("/", "_")
            write_results(run(load_scenario(file, overrides=overrides)), out)
            found[name] = {
                entry: hashlib.sha256((out / entry).read_bytes()).hexdigest()
                for entry in HASHED
                if (out / entry).exists()
            }
            print(f"{name}: {len(found[name])} files", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    """Compare the outputs' digests with the stored ones, or store them with ``--save``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--save",
        action="store_true",
        help="store the digests as the reference (with --only: of those runs)",
    )
    parser.add_argument("--only", nargs="+", default=None, help="run only these runs")
    args = parser.parse_args(argv)
    found = digests(args.only)
    if args.save:
        # With --only, the other runs' stored digests stay as they are.
        kept = json.loads(DIGEST_FILE.read_text()) if args.only and DIGEST_FILE.exists() else {}
        DIGEST_FILE.write_text(json.dumps({**kept, **found}, indent=2, sort_keys=True) + "\n")
        print(f"stored {len(found)} runs in {DIGEST_FILE.relative_to(ROOT)}")
        return 0
    stored = json.loads(DIGEST_FILE.read_text())
    differ = [
        f"{name}/{entry}"
        for name, files in found.items()
        for entry, digest in files.items()
        if stored.get(name, {}).get(entry) != digest
    ]
    for item in differ:
        print(f"DIFFERS: {item}")
    print(f"{len(found)} runs, {len(differ)} files differ from {DIGEST_FILE.name}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
