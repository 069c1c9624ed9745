"""The app in headless Chromium: coloured panes, struck-through rejections, plots, Stop, and
charts that stay readable on a phone.

Also runs scripts/screenshot.py, which retakes the README's screenshots, on the tiny pair.
"""

import itertools
import os
import shutil
import statistics
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT
from test_app_client import serve_app

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which("chromium") is None,
        reason="needs a chromium binary on PATH (apt-get install chromium)",
    ),
]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
PAIR = os.environ.get("SPECDEMO_PAIR", "tiny")
DESKTOP = {"width": 1440, "height": 900}
# A page's wait budget, in tiny-pair target steps as timed here when the module starts: the
# longest wait (a sweep of 6 cells) takes a few thousand steps, so a busy machine, whose steps
# are slower, gets a budget as much larger. Never under a minute; the real pair sweeps slowly.
BUDGET_STEPS = 40_000
MIN_BUDGET_MS = 60_000
REAL_PAIR_BUDGET_MS = 900_000
# The cost note once a run has finished: the app's own signal that the run is recorded. Which of
# the two it says depends on the step profile, which a busy machine can disturb (app.costs).
NOTE_DONE = (
    "['Why the two curves differ', 'The step profile is disturbed']"
    ".some(s => document.querySelector('#cost-note').innerText.includes(s))"
)
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser():
    """Chromium against `python app.py` on PAIR, for every page of a test module."""
    if shutil.which("chromium") is None:  # also for modules that only import this fixture
        pytest.skip("needs a chromium binary on PATH (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with serve_app(PAIR) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        browser.url, browser.budget_ms = url, budget_ms()
        yield browser
        browser.close()


@torch.inference_mode()
def budget_ms() -> float:
    """BUDGET_STEPS tiny-pair target steps as timed now (median of 9 after a warm-up), at
    least MIN_BUDGET_MS; the real pair gets REAL_PAIR_BUDGET_MS."""
    if PAIR != "tiny":
        return REAL_PAIR_BUDGET_MS
    from specdemo.models import load_pair
    from specdemo.runtime.lm import forward

    target = load_pair("tiny", precision="fp32", device="cpu").target
    _, cache = forward(target, list(range(64)), None)
    times = []
    for _ in range(10):
        start = time.perf_counter()
        forward(target, [1], cache)
        times.append(time.perf_counter() - start)
        cache.crop(-1)
    return max(MIN_BUDGET_MS, BUDGET_STEPS * statistics.median(times[1:]) * 1000)


def open_page(browser, viewport: dict):
    page = browser.new_page(viewport=viewport)
    page.budget_ms = browser.budget_ms
    page.set_default_timeout(page.budget_ms)
    page.goto(browser.url)
    page.wait_for_selector("#generate")
    return page


@pytest.fixture
def page(browser):
    page = open_page(browser, DESKTOP)
    yield page
    page.close()


@pytest.fixture
def phone(browser):
    page = open_page(browser, PHONE)
    yield page
    page.close()


def tokens(page, pane: str, label: str | None = None) -> int:
    selector = f"#{pane} .tok-text .tok" + (f".{label}" if label else "")
    return page.locator(selector).count()


def open_more_charts(page) -> None:
    """Open the "More charts" accordion, where the charts beyond the first three wait."""
    page.get_by_role("button", name="More charts").click()
    page.wait_for_selector("#kept-plot .js-plotly-plot")


def set_slider(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def test_generation_colours_both_panes_and_plots_the_session(page, tmp_path):
    page.click("#generate")
    page.wait_for_function(
        "document.querySelector('#comparison').innerText.includes('agree')"
        " || document.querySelector('#comparison').innerText.includes('identical')"
    )
    assert tokens(page, "spec-pane", "accepted") > 0
    assert tokens(page, "target-pane", "target") > 0
    # The plots are outputs of their own: Plotly may draw them a moment after the table.
    open_more_charts(page)
    page.wait_for_selector("#kept-plot .js-plotly-plot .scatterlayer .point")
    assert page.locator("#rounds-plot .js-plotly-plot").count() == 1

    rejected = page.locator("#spec-pane .tok-text .tok.rejected")
    if PAIR == "tiny":
        assert rejected.count() > 0
    for decoration in rejected.evaluate_all(
        "els => els.map(e => getComputedStyle(e).textDecorationLine)"
    ):
        assert "line-through" in decoration
    page.get_by_role("button", name="More settings").click()
    page.get_by_label("Show rejected drafts").uncheck()
    page.wait_for_function("!document.querySelector('#spec-pane .tok-text .tok.rejected')")
    page.get_by_label("Show rejected drafts").check()
    page.wait_for_selector("#spec-pane .tok-text .tok.rejected")

    page.click("#sweep")  # fills the K x temperature chart for the screenshot
    page.wait_for_function(
        "document.querySelector('#sweep-progress').innerText.includes('Sweep done')"
    )
    # K = 1, 2, 4 at two temperatures, and three auto-K stars: the sweep's two and the run's.
    page.wait_for_function(
        "document.querySelectorAll('#kept-plot .scatterlayer .point').length >= 9"
    )
    settled_plots(page)  # no progress overlay, and every chart drawn, for the screenshot
    shot = tmp_path / "screenshot.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_stop_cancels_a_run_mid_way(page):
    page.get_by_role("button", name="More settings").click()
    set_slider(page, "max-new-tokens", 1024)
    page.get_by_label("Auto K", exact=False).uncheck()
    set_slider(page, "k", 1)
    set_slider(page, "temperature", 0)
    # On the tiny pair the whole race lasts a few seconds: a poll from here could miss it on a
    # busy machine, so the page itself presses Stop on the first update that shows a token.
    page.evaluate(STOP_AT_FIRST_TOKEN)
    page.click("#generate")
    try:
        page.wait_for_function("window.stoppedAt !== undefined")
    except Exception as e:  # what the page showed instead, for the report
        comparison = page.inner_text("#comparison")
        pytest.fail(f"Stop was never pressed mid-run ({e}); the comparison read: {comparison!r}")
    # The update in flight may still arrive, later on a busy machine: read once it has.
    shown = steady(page, lambda: (tokens(page, "spec-pane"), tokens(page, "target-pane")))
    time.sleep(3)
    # Nothing more streams in, in whichever phase of the race Stop landed, and the unfinished
    # race is neither summed up nor recorded in the session.
    assert (tokens(page, "spec-pane"), tokens(page, "target-pane")) == shown
    assert shown[0] >= page.evaluate("window.stoppedAt") and shown[1] < 1024
    comparison = page.inner_text("#comparison")
    assert "identical" not in comparison and "agree" not in comparison
    assert page.locator("#kept-plot .js-plotly-plot .scatterlayer .point").count() == 0


# Presses Stop from inside the page on the first DOM change that shows a speculative token while
# the comparison still waits ("…"), and records how many tokens were on show then.
STOP_AT_FIRST_TOKEN = """() => {
  const shown = () => document.querySelectorAll('#spec-pane .tok-text .tok').length;
  new MutationObserver((_, observer) => {
    if (shown() > 0 && document.querySelector('#comparison').innerText.includes('…')) {
      observer.disconnect();
      window.stoppedAt = shown();
      document.querySelector('#stop').click();
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def step_until_rejected(page) -> str:
    """On the Step-through tab, step until a round ends in a rejection; its microscope note, once
    both of its plots are drawn."""
    # Each step's note starts with its round number; the note and the charts of one round come
    # in one update, so once the note names the round, the charts on their way are that round's.
    note = "document.querySelector('#microscope-note').innerText"
    for n in range(1, 21):
        page.click("#step")
        page.wait_for_function(f"{note}.includes('Round {n}:')")
        text = page.inner_text("#microscope-note")
        if "Σ min(p, q)" in text:
            break
    # The note and the charts are separate outputs: Plotly may draw a chart a moment later.
    page.wait_for_function(
        "(document.querySelector('#microscope-p-q .js-plotly-plot') || {}).textContent"
        "?.includes('p with q drawn over it')"
        " && (document.querySelector('#microscope-residual .js-plotly-plot') || {}).textContent"
        "?.includes('came from')"
    )
    return text


def test_step_through_zooms_in_on_the_rejected_guess(page):
    """Step until a round ends in a rejection; p and q at that guess are drawn and explained."""
    page.get_by_role("tab", name="Step through").click()
    text = step_until_rejected(page)
    assert "the chance a draft token is kept here" in text and "was drawn from" in text
    assert page.locator("#microscope .js-plotly-plot").count() == 2
    assert page.locator("#microscope-p-q .barlayer .point").count() > 0
    assert page.locator("#microscope-residual .barlayer .point").count() > 0
    svg = page.locator("#microscope-p-q .js-plotly-plot").text_content()
    assert "p with q drawn over it" in svg and "Σ = " in svg and "guess ✗" in svg
    residual = page.locator("#microscope-residual .js-plotly-plot").text_content()
    assert "max(0, p − q) / Σ" in residual and "drawn" in residual


def test_a_run_explains_its_speedup_with_measured_costs(page):
    page.click("#generate")
    page.wait_for_function(NOTE_DONE)
    open_more_charts(page)
    note = page.inner_text("#cost-note")
    if "The step profile is disturbed" in note:  # the load changed while the profile was timed
        assert "plain steps, which no pass can cost" in note and "restart the app" in note
    else:
        assert "target steps on this machine" in note and "textbook" in note
    speedup = page.locator("#speedup-plot .js-plotly-plot").text_content()
    assert "predicted from measured costs" in speedup and "verify = 1 step" in speedup
    page.wait_for_selector("#time-plot .barlayer .point")
    assert "Where the time goes" in page.locator("#time-plot .js-plotly-plot").text_content()
    assert page.locator("#time-plot .barlayer .point").count() >= 3
    positions = page.locator("#positions-plot .js-plotly-plot").text_content()
    assert "Drafts kept, by position" in positions and "i.i.d. formula" in positions


# Each visible plot's box, and the boxes of its title, legend, axis titles and notes.
LABELS = ".gtitle, .legend, .xtitle, .ytitle, .y2title, .annotation"
PLOT_BOXES = """labels => [...document.querySelectorAll('.js-plotly-plot')]
  .filter(plot => plot.getClientRects().length)
  .map(plot => {
    const box = e => {
      const r = e.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom];
    };
    const parts = [...plot.querySelectorAll(labels)]
      .filter(e => e.getBoundingClientRect().width > 0)
      .map(e => [`${e.getAttribute('class')} "${e.textContent.slice(0, 30)}"`, box(e)]);
    return {id: plot.closest('[id]')?.id, box: box(plot), parts};
  })"""
SIDE_BY_SIDE = [("speedup-plot", "time-plot"), ("kept-plot", "positions-plot")]


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def clashes(plots: list[dict]) -> list[str]:
    """Each title, legend, axis title or note (PLOT_BOXES) that meets another of its plot or
    leaves its plot's width, and each two plots that overlap."""
    found = []
    for plot in plots:
        left, _, right, _ = plot["box"]
        for (name, box), (other, box2) in itertools.combinations(plot["parts"], 2):
            if overlap(box, box2):
                found.append(f"{plot['id']}: {name} meets {other}")
        found += [
            f"{plot['id']}: {name} leaves the plot's width {left:.0f}-{right:.0f}: {box}"
            for name, box in plot["parts"]
            if box[0] < left - 0.5 or box[2] > right + 0.5
        ]
    for a, b in itertools.combinations(plots, 2):
        if overlap(a["box"], b["box"]):
            found.append(f"{a['id']} overlaps {b['id']}")
    return found


def steady(page, read, every: float = 0.5):
    """`read()` once two reads `every` seconds apart agree, within the page's wait budget."""
    deadline = time.monotonic() + page.budget_ms / 1000
    value = read()
    while time.monotonic() < deadline:
        time.sleep(every)
        value, before = read(), value
        if value == before:
            return value
    pytest.fail(f"still changing after {page.budget_ms / 1000:.0f} s: {value}")


def settled_plots(page) -> dict[str, dict]:
    """The visible plots by id, once no output is busy and Plotly has drawn at this width: every
    plot's boxes the same in two reads (Plotly redraws each plot after a resize or a new
    figure)."""
    page.wait_for_function("!document.querySelector('.progress-level, .eta-bar')")
    plots = steady(page, lambda: page.evaluate(PLOT_BOXES, LABELS), every=1.0)
    return {plot["id"]: plot for plot in plots}


def test_on_a_phone_the_charts_stack_and_no_label_meets_another(phone, tmp_path):
    """At 390 px each panel is a plot of its own, the two of a row stacked, and no title,
    legend, axis title or note meets another or leaves its plot; at 1440 px the panels sit side
    by side, as clear."""
    phone.click("#generate")
    phone.wait_for_function(NOTE_DONE)
    open_more_charts(phone)
    phone.wait_for_selector("#positions-plot .scatterlayer .point")
    plots = settled_plots(phone)
    assert {"rounds-plot", *itertools.chain(*SIDE_BY_SIDE)} <= set(plots)
    assert clashes(list(plots.values())) == []
    for upper, lower in SIDE_BY_SIDE:
        assert plots[upper]["box"][3] <= plots[lower]["box"][1]
    shot = tmp_path / "phone.png"
    phone.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    phone.set_viewport_size(DESKTOP)
    plots = settled_plots(phone)
    assert clashes(list(plots.values())) == []
    for left, right in SIDE_BY_SIDE:
        assert plots[left]["box"][2] <= plots[right]["box"][0]
        assert plots[left]["box"][1] == plots[right]["box"][1]


def test_on_a_phone_the_microscope_stacks_and_no_label_meets_another(phone, tmp_path):
    """At 390 px the microscope's two panels stack, and after a rejected round no title,
    legend, axis title or note of theirs meets another or leaves its plot."""
    tab = phone.get_by_role("tab", name="Step through")
    if not tab.count():  # a phone's tab bar moves the tabs that do not fit into a menu
        phone.get_by_role("button", name="More tabs").click()
        tab = phone.locator(".overflow-dropdown").get_by_role("button", name="Step through")
    tab.click()
    step_until_rejected(phone)
    plots = settled_plots(phone)
    scope, residual = plots["microscope-p-q"], plots["microscope-residual"]
    assert clashes([scope, residual]) == []
    assert scope["box"][3] <= residual["box"][1]
    shot = tmp_path / "phone-step.png"
    phone.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_the_screenshot_script_retakes_the_readmes_shots(tmp_path):
    """scripts/screenshot.py on the tiny pair: a finished race at desktop width, full page, and
    on a phone down to the race's chart, both PNGs of those widths."""
    script = ROOT / "scripts" / "screenshot.py"
    done = subprocess.run(
        [sys.executable, str(script), "--pair", "tiny", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "SPECDEMO_PRECISION": "fp32"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name, viewport in (("screenshot.png", DESKTOP), ("screenshot-phone.png", PHONE)):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = (int.from_bytes(png[i : i + 4], "big") for i in (16, 20))
        assert width == viewport["width"] and height > viewport["height"] // 2
