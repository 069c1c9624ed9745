"""The page a room reads, in headless Chromium at a projector's 1280 × 720, a desktop's
1440 × 900 and a phone's 390 × 844: the prompt and Generate on the first screen, the tabs in the
lesson's order, one key per answer that nothing covers, no label over another's text, each
table's deciding column in view on a phone, and a verdict that opens with ✓ or ✗.
"""

import re
import shutil

import pytest
from test_browser import (  # noqa: F401 (browser: the shared fixture)
    LABELS,
    PLOT_BOXES,
    browser,
    clashes,
    open_page,
    set_slider,
    steady,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which("chromium") is None,
        reason="needs a chromium binary on PATH (apt-get install chromium)",
    ),
]
PROJECTOR = {"width": 1280, "height": 720}
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
# The race summed up in its table (comparison.py): the answers agree, or are identical.
RACE_DONE = (
    "['agree', 'identical'].some(s => document.querySelector('#comparison').innerText.includes(s))"
)
BOX = """s => { const r = document.querySelector(s).getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom]; }"""
# Each shown label chip (a block's label) that meets text not its own: a token, a paragraph, a
# table cell, a heading, an input.
COVERED = """() => {
  const shown = e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
  const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom
    && b.top < a.bottom;
  const chips = [...document.querySelectorAll('[data-testid="block-label"]')].filter(shown);
  const texts = [...document.querySelectorAll('.tok, p, td, th, li, h1, h2, h3, input, textarea')]
    .filter(shown);
  const found = [];
  for (const chip of chips) {
    const a = chip.getBoundingClientRect();
    for (const t of texts) {
      if (chip.contains(t) || t.contains(chip)) continue;
      if (meets(a, t.getBoundingClientRect()))
        found.push(`"${chip.textContent.trim()}" meets "${t.textContent.trim().slice(0, 30)}"`);
    }
  }
  return found;
}"""
# Each key entry whose middle shows something other than itself (a label or a pane over it).
HIDDEN_KEYS = """key => [...document.querySelectorAll(`#${key} .tok`)].filter(e => {
  e.scrollIntoView({block: 'center'});
  const r = e.getBoundingClientRect();
  const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
  return !(top && (e === top || e.contains(top)));
}).map(e => e.textContent)"""


@pytest.fixture(params=[PROJECTOR, DESKTOP, PHONE], ids=["projector", "desktop", "phone"])
def screen(browser, request):  # noqa: F811
    page = open_page(browser, request.param)
    page.viewport = request.param
    yield page
    page.close()


def box(page, selector: str) -> list[float]:
    return page.evaluate(BOX, selector)


def tab(page, name: str) -> None:
    """Open tab `name`, from the menu a phone's tab bar moves it into if it does not fit."""
    found = page.get_by_role("tab", name=name)
    if not found.count():
        page.get_by_role("button", name="More tabs").click()
        found = page.locator(".overflow-dropdown").get_by_role("button", name=name)
    found.click()


def test_the_prompt_and_generate_come_first_and_the_settings_wait(screen):
    """On a projector and a desktop the prompt, the example prompts and Generate are above the
    fold; K, temperature and Auto K are in view, the rest under "More settings". With Large text
    on, and on a phone, Generate comes before the settings beyond K and temperature."""
    page = screen
    if page.viewport is not PHONE:
        assert box(page, "#generate")[3] <= page.viewport["height"]
    for elem_id in ("k", "temperature", "auto-k"):
        assert page.locator(f"#{elem_id}").is_visible(), elem_id
    settings = page.locator("#race-settings")
    later = ("Top-p", "Seed", "Drafter", "Judge", "Tree width", "System prompt", "Fresh run")
    for label in later:
        assert not settings.get_by_text(label, exact=True).first.is_visible(), label
    page.get_by_role("button", name="More settings").click()
    for label in later:
        settings.get_by_text(label, exact=True).first.wait_for()
    page.get_by_label("Large text").check()
    page.wait_for_function("document.documentElement.classList.contains('large-text')")
    assert box(page, "#generate")[1] < box(page, "#more-settings")[1]


def test_the_tabs_run_in_the_lessons_order(browser):  # noqa: F811
    page = open_page(browser, DESKTOP)
    assert page.get_by_role("tab").all_inner_texts() == ["Generate", "Step through", "Is it exact?"]
    page.close()


def test_one_key_above_the_panes_and_nothing_covers_a_label_or_a_key(screen):
    """After a race, each kind's key entry stands above both panes in full view, and no label
    chip meets another block's text; the same on Step through after a round."""
    page = screen
    page.click("#generate")
    page.wait_for_function(RACE_DONE)
    key = box(page, "#race-key")
    assert key[3] <= min(box(page, "#spec-pane")[1], box(page, "#target-pane")[1])
    assert page.evaluate(HIDDEN_KEYS, "race-key") == []
    assert page.locator("#race-key .tok").all_inner_texts() == [
        "accepted", "resampled", "bonus", "rejected", "target", "copied", "drafted"
    ]  # fmt: skip
    assert page.evaluate(COVERED) == []
    # The answer in a monospace font with its spaces kept, so code keeps its indentation.
    look = page.locator("#spec-pane .tok-text").evaluate(
        "e => [getComputedStyle(e).fontFamily, getComputedStyle(e).whiteSpace]"
    )
    assert "mono" in look[0].lower() and look[1] == "pre-wrap", look
    tab(page, "Step through")
    page.click("#step")
    page.wait_for_selector("#step-pane .tok-text .tok")
    assert box(page, "#step-key")[3] <= box(page, "#step-pane")[1]
    assert page.evaluate(HIDDEN_KEYS, "step-key") == []
    assert page.evaluate(COVERED) == []


# The right edge of table `#id`'s header cell `name`, once the table has rows.
HEADER_RIGHT = """([id, name]) => {
  const cells = [...document.querySelectorAll(`#${id} th`)];
  const cell = cells.find(e => e.innerText.trim() === name);
  return cell && document.querySelector(`#${id} td`) ? cell.getBoundingClientRect().right : null;
}"""


def test_on_a_phone_each_tables_deciding_column_is_in_view(browser):  # noqa: F811
    """At 390 px the session table's speedup and the step table's verdict are in view without
    scrolling the table sideways."""
    page = open_page(browser, PHONE)
    page.click("#generate")
    right = page.wait_for_function(HEADER_RIGHT, arg=["results", "speedup"]).json_value()
    assert right <= PHONE["width"]
    tab(page, "Step through")
    page.click("#step")
    right = page.wait_for_function(HEADER_RIGHT, arg=["step-table", "verdict"]).json_value()
    assert right <= PHONE["width"]
    page.close()


def test_the_verdict_opens_with_a_tick_or_a_cross(browser):  # noqa: F811
    page = open_page(browser, DESKTOP)
    tab(page, "Is it exact?")
    set_slider(page, "exact-n", 1000)
    page.click("#check")
    page.wait_for_function("/[✓✗]/.test(document.querySelector('#exact-summary').innerText)")
    first = page.inner_text("#exact-summary").strip().splitlines()[0]
    assert re.match(r"^[✓✗] \w", first), first
    # The histograms' tick labels, legends and titles meet nowhere, on a desktop or a phone.
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.wait_for_function("!document.querySelector('.progress-level, .eta-bar')")
        boxes = steady(page, lambda: page.evaluate(PLOT_BOXES, f"{LABELS}, .xtick"), every=1.0)
        plots = {plot["id"]: plot for plot in boxes}
        assert {"exact-first", "exact-two"} <= set(plots)
        assert clashes([plots["exact-first"], plots["exact-two"]]) == [], viewport
    page.close()
