"""The adaptive limit's simulation (adaptive_simulation.py) held to its targets, and its table
to docs/adaptive.md's (write it anew with ADAPTIVE_WRITE_TABLE=1); the per-process CUBIC baseline
held to AWS's published vectors."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import adaptive_simulation as sim
import pytest
from servers import Server

DOCS = Path(__file__).parents[3] / "docs/adaptive.md"
TABLE = re.compile(r"(<!-- simulation: start -->\n)(.*?)(<!-- simulation: end -->)", re.S)


@pytest.fixture(scope="module")
def results() -> Iterator[dict[tuple[str, int, str], sim.Figures]]:
    server = Server(module=True, stood_clock=True)
    try:
        yield sim.run_all(server)
    finally:
        server.close()


def test_the_docs_show_this_table(results: dict[tuple[str, int, str], sim.Figures]) -> None:
    text = DOCS.read_text()
    made = sim.table(results) + "\n"
    if os.environ.get("ADAPTIVE_WRITE_TABLE"):
        DOCS.write_text(TABLE.sub(lambda m: m.group(1) + made + m.group(3), text))
    found = TABLE.search(DOCS.read_text())
    assert found and found.group(2) == made, "docs/adaptive.md's table is not this run's: ADAPTIVE_WRITE_TABLE=1"


@pytest.mark.parametrize("strategy", ["ours", "ours, loss only"])
def test_the_targets_hold(results: dict[tuple[str, int, str], sim.Figures], strategy: str) -> None:
    headers = strategy == "ours"
    for (scenario, processes, name), f in results.items():
        if name != strategy:
            continue
        where = f"{scenario}, {processes} processes, {name}: {f}"
        backoff = results[(scenario, processes, "backoff")]
        # Few 429s in the steady minutes; in all, loss only, also the probes past the first
        # minute's capacity that the provider's stored minute hides. The capacity used.
        assert f.throttled_share <= (0.02 if headers else 0.03), where
        assert f.steady_throttled <= 0.02, where
        assert f.steady_use >= 0.9, where
        assert f.throttled_share <= backoff.throttled_share / 10, where
        if f.epochs_under is not None:
            assert f.epochs_under <= 2, where
        # 90% of a tripled capacity within CUBIC's recovery (4 epochs) and one more; loss only,
        # where nothing states the new capacity, the curve's probing takes longer.
        if f.to_90_s is not None:
            assert f.to_90_s <= (50 if headers else 150), where
        if f.after_hold is not None:
            assert f.after_hold <= 1.0, where
        assert f.jain >= 0.9, where


def test_the_cubic_baseline_follows_awss_vectors() -> None:
    cubic = sim.AwsCubic()
    assert sim.AwsCubic.k(10) == pytest.approx(1.9574338205844317, abs=1e-12)
    # A throttle at t = 5 s with a measured rate of 10: cut to 7, then back along the curve
    # (the SDKs' shared vectors, to the digits they give).
    cubic.measured, cubic.bucket = 10.0, 5.0
    cubic.heard(5_000, throttled=True)
    assert (cubic.fill_rate, cubic.last_max_rate, cubic.last_throttle) == (7.0, 10.0, 5.0)
    rates = [cubic.cubic(t) for t in range(6, 12)]
    assert rates == pytest.approx([9.649, 10.00003, 10.45, 13.41, 21.27, 36.43], abs=0.005)
