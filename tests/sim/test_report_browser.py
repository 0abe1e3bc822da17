"""The report as a reader sees it, in a real browser (headless Chromium over the DevTools protocol).

On a laptop screen (1366 × 768) the verdict is visible without scrolling, no element runs off the right edge, and
every image loads; the same holds when the page is printed (print CSS). Without Chromium the tests are skipped with
one line saying so (``make test`` installs it as root); under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tools.browser import Browser, BrowserError, find_chromium
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.demo import run_demo
from kubeflux.sim.records import FinalState, JobRecord, RunRecord
from kubeflux.sim.report import write_report
from tests.shared import unavailable

WIDTH, HEIGHT = 1366, 768
REPO = Path(__file__).resolve().parents[2]

READER = """(() => {
  const width = document.documentElement.clientWidth;
  const verdict = document.getElementById('verdict');
  const box = verdict.getBoundingClientRect();
  const style = getComputedStyle(verdict);
  const overflowing = [...document.querySelectorAll('body *')]
    .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 0.5; })
    .map(e => `${e.tagName.toLowerCase()}.${e.className} right=${Math.round(e.getBoundingClientRect().right)}`);
  return {
    width, height: window.innerHeight, scrollWidth: document.documentElement.scrollWidth,
    verdict: {top: box.top, bottom: box.bottom, height: box.height, text: verdict.innerText,
              shown: style.visibility === 'visible' && style.display !== 'none'},
    overflowing,
    images: [...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete,
                                            naturalWidth: i.naturalWidth})),
  };
})()"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if find_chromium() is None:
        unavailable("Chromium is not installed (make test installs it as root: apt-get install chromium)")
    try:
        with Browser(WIDTH, HEIGHT) as opened:
            yield opened
    except BrowserError as exc:
        unavailable(f"headless Chromium did not start: {exc}")


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_demo(tmp_path_factory.mktemp("demo") / "out")


def many_runs() -> list[RunRecord]:
    """Seven schedulers with long names, one of which left a job unfinished: the widest page a comparison makes."""
    runs = []
    for number in range(7):
        jobs = [
            JobRecord(f"j{i}", "w", 10.0 * i, 2, 60.0, FinalState.COMPLETED_SUCCESSFULLY, 10.0 * i + number,
                      10.0 * i + number + 30 + i, 10.0 * i, 10.0 * i, [2 * (i % 4), 2 * (i % 4) + 1])
            for i in range(40)
        ]  # fmt: skip
        if number == 3:
            jobs[-1].finish_time, jobs[-1].final_state = None, FinalState.NOT_FINISHED
        name = f"kubeflux-conservative-variant-{number}"
        runs.append(RunRecord(name, "w", jobs, total_cores=8, wall_seconds=0.1 * (number + 1), pods_bound=40, events=1))
    return runs


def read(browser: Browser, page: Path, media: str = "screen") -> dict[str, Any]:
    browser.call("Emulation.setEmulatedMedia", session=True, media=media)
    browser.open(page)
    seen: dict[str, Any] = browser.evaluate(READER)
    return seen


def check(seen: dict[str, Any]) -> None:
    assert (seen["width"], seen["height"]) == (WIDTH, HEIGHT)
    verdict = seen["verdict"]
    assert verdict["shown"] and verdict["height"] > 0, verdict
    assert verdict["top"] >= 0 and verdict["bottom"] <= HEIGHT, f"the verdict is not on the first screen: {verdict}"
    assert seen["overflowing"] == [] and seen["scrollWidth"] <= WIDTH, seen["overflowing"]
    assert len(seen["images"]) >= 5
    broken = [image["src"] for image in seen["images"] if not image["complete"] or image["naturalWidth"] <= 0]
    assert broken == [], f"images that did not load: {broken}"


def test_the_demo_report_reads_on_a_laptop_screen(browser: Browser, demo_page: Path) -> None:
    seen = read(browser, demo_page)
    check(seen)
    assert "kubeflux vs kube-default: mean wait" in seen["verdict"]["text"]
    assert browser.evaluate("document.querySelectorAll('td.best').length") > 0  # the best of each row is marked


def test_the_demo_report_prints(browser: Browser, demo_page: Path) -> None:
    check(read(browser, demo_page, media="print"))


def test_seven_long_named_schedulers_still_fit(browser: Browser, tmp_path: Path) -> None:
    seen = read(browser, write_report(many_runs(), tmp_path))
    check(seen)
    assert seen["verdict"]["text"].count(" vs ") == 6


def test_a_single_run_has_a_one_line_verdict(browser: Browser, tmp_path: Path) -> None:
    seen = read(browser, write_report(many_runs()[:1], tmp_path))
    check(seen)
    assert seen["verdict"]["text"].startswith("kubeflux-conservative-variant-0: 40 of 40 jobs finished; mean wait")


def test_the_sweep_page_reads_on_a_laptop_screen(browser: Browser, tmp_path: Path) -> None:
    """The examples' grid (three workloads, two clusters, four schedulers), one seed to keep it short."""
    folder = REPO / "examples" / "sweep"
    grid = yaml.safe_load((folder / "grid.yaml").read_text(encoding="utf-8"))
    grid["workloads"] = [str((folder / path).resolve()) for path in grid["workloads"]]
    grid["clusters"] = [
        c if "file" not in c else {"file": str((folder / c["file"]).resolve())} for c in grid["clusters"]
    ]
    grid["seeds"] = [0]
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(tmp_path / "grid.yaml"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    seen = read(browser, out / "index.html")
    check(seen)
    assert "kubeflux (lonode) vs kubeflux-fcfs (lonode): mean wait" in seen["verdict"]["text"]


def test_every_scheduler_on_the_example_trace_fits_a_laptop_screen(browser: Browser, tmp_path: Path) -> None:
    """``simulate --scheduler all`` on ``examples/workloads/small.swf``: eight columns, jobs rejected and failed (each
    a row of its own, not words widening the cells), no ★ for a run with failures."""
    out = tmp_path / "out"
    args = ["simulate", "-w", str(REPO / "examples" / "workloads" / "small.swf"), "--scheduler", "all", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 3), result.output
    seen = read(browser, out / "index.html")
    check(seen)
    assert seen["verdict"]["text"].count(" vs ") == 7
    table = browser.evaluate("document.querySelector('table.compact').getBoundingClientRect().right")
    assert table <= WIDTH, table
    rows = browser.evaluate("[...document.querySelectorAll('table.compact tbody th')].map(e => e.innerText)")
    assert any(row.startswith("failed") for row in rows), rows


def test_a_page_where_every_job_was_rejected_says_so_on_the_first_screen(browser: Browser, tmp_path: Path) -> None:
    runs = [
        RunRecord(name, "w", [JobRecord(str(i), "w", float(i), 64, -1.0, FinalState.REJECTED) for i in range(5)],
                  total_cores=4, wall_seconds=0.01, pods_bound=0, events=5)
        for name in ("kubeflux", "kube-default")
    ]  # fmt: skip
    seen = read(browser, write_report(runs, tmp_path))
    check(seen)
    assert seen["verdict"]["text"].startswith("Nothing ran: all 5 jobs were rejected under every scheduler")
    colour = browser.evaluate("getComputedStyle(document.querySelector('#verdict p')).color")
    assert colour == "rgb(164, 54, 28)", colour  # said as a warning, not as a verdict


@pytest.mark.skipif(os.environ.get("KUBEFLUX_SCREENSHOT") is None, reason="set KUBEFLUX_SCREENSHOT=PATH to save one")
def test_save_the_first_screen(browser: Browser, demo_page: Path) -> None:
    """``KUBEFLUX_SCREENSHOT=docs/report.png pytest -k first_screen`` refreshes the README's picture."""
    read(browser, demo_page)
    path = browser.screenshot(Path(os.environ["KUBEFLUX_SCREENSHOT"]))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
