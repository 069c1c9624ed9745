"""Every seat in the room: a phone's narrow screen, colour-blind eyes, the back row, API users.

The browser tests drive `python app.py` in headless Chromium like test_browser.py; the API test
builds the app on the tiny pair.
"""

import re
import time

import pytest
from test_browser import PAIR, browser  # noqa: F401 (browser: the shared fixture)

from specdemo.app.page import ui

SPEC_LABELS = ("accepted", "resampled", "bonus", "rejected", "target")
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(browser):  # noqa: F811 (the fixture imported from test_browser)
    page = browser.new_page(viewport=PHONE)
    page.set_default_timeout(60_000 if PAIR == "tiny" else 900_000)
    page.goto(browser.url)
    page.wait_for_selector("#generate")
    yield page
    page.close()


def race(page) -> None:
    """One generation, until the comparison table holds its numbers."""
    page.click("#generate")
    page.wait_for_function(
        "document.querySelector('#comparison').innerText.includes('agree')"
        " || document.querySelector('#comparison').innerText.includes('identical')"
    )
    time.sleep(0.5)  # let the last chart settle


# Words broken across lines, in each cell of the comparison table.
BROKEN_WORDS = """() => [...document.querySelectorAll('#comparison th, #comparison td')]
.flatMap(cell => {
  const broken = [], walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode()); ) {
    for (const word of node.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      if (range.getClientRects().length > 1) broken.push(word[0]);
    }
  }
  return broken;
})"""
# Shown elements reaching past the viewport's right edge, other than the insides of a box the
# reader can scroll sideways (a dataframe) or an SVG drawing (a plot clips its own).
OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = e => {
    for (let a = e.parentElement; a; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  return [...document.querySelectorAll('body *')]
    .filter(e => !(e instanceof SVGElement) && !e.closest('[aria-hidden="true"]'))
    .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > width + 1)
    .filter(e => !scrolls(e))
    .map(e => `${e.tagName}#${e.id}.${e.className}`);
}"""


@pytest.mark.browser
def test_on_a_phone_the_race_table_reads_and_nothing_overflows(phone):
    race(phone)
    phone.get_by_role("button", name="More charts").click()  # its charts too
    phone.get_by_role("button", name="More settings").click()  # and every setting
    phone.wait_for_selector("#kept-plot .js-plotly-plot")
    assert phone.evaluate(BROKEN_WORDS) == []
    cells = phone.locator("#comparison th, #comparison td").evaluate_all(
        "els => els.map(e => [e.innerText, e.scrollWidth, e.clientWidth])"
    )
    assert len(cells) >= 9 and any(re.search(r"\d", text) for text, _, _ in cells)
    assert all(scroll <= client for _, scroll, client in cells)
    table, block = (
        phone.locator(selector).evaluate("e => e.getBoundingClientRect().right")
        for selector in ("#comparison table", "#comparison")
    )
    assert table <= block + 1  # the table fits its box: no sideways scrolling to read it
    # The table takes the screen's width instead of sharing a row with its caption.
    assert phone.locator("#comparison").evaluate("e => e.getBoundingClientRect().width") > 300
    assert phone.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"] + 2
    assert phone.evaluate(OVERFLOWING) == []
    for plot in ("#rounds-plot", "#kept-plot", "#speedup-plot", "#time-plot", "#positions-plot"):
        right = phone.locator(f"{plot} .js-plotly-plot").evaluate(
            "e => e.getBoundingClientRect().right"
        )
        assert right <= PHONE["width"]


# A token's paint and its look apart from colour: decoration line and style, and a box.
CUE = """e => {
  const look = getComputedStyle(e);
  return [look.backgroundColor, look.textDecorationLine, look.textDecorationStyle,
          look.outlineStyle !== 'none' && look.outlineWidth !== '0px'];
}"""


def cues(locator) -> list[tuple]:
    return [tuple(cue) for cue in locator.evaluate_all(f"els => els.map({CUE})")]


@pytest.mark.browser
def test_the_labels_differ_without_colour_in_the_text_and_its_legend(phone):
    """Each kind's cue hangs on the page's own classes (token_pane), not on a framework's inline
    paint, the key above the panes draws each kind as the text does, the target's own tokens look
    alike in both panes, and a rejected draft is a deletion a screen reader announces by name."""
    race(phone)
    legend = phone.locator("#race-key .tok-legend .tok")
    assert legend.all_inner_texts() == [*SPEC_LABELS, *SOURCES]
    legend = dict(zip(SPEC_LABELS, cues(legend)[: len(SPEC_LABELS)], strict=True))
    look = {label: cue[1:] for label, cue in legend.items()}
    assert len(set(look.values())) == len(SPEC_LABELS)
    assert look == {
        "accepted": ("none", "solid", False),
        "resampled": ("underline", "wavy", False),
        "bonus": ("none", "solid", True),
        "rejected": ("line-through", "solid", False),
        "target": ("underline", "dotted", False),
    }
    # Each token in the text looks as its label's legend entry does.
    by_paint = {cue[0]: cue[1:] for cue in legend.values()}
    tokens = cues(phone.locator("#spec-pane .tok-text .tok"))
    assert tokens and all(cue[1:] == by_paint[cue[0]] for cue in tokens)
    alone = cues(phone.locator("#target-pane .tok-text .tok"))
    assert alone and set(alone) == {legend["target"]}
    rejected = phone.locator("#spec-pane .tok-text del.tok.rejected")
    if PAIR == "tiny":
        assert rejected.count() > 0
    for source, said in zip(sources(rejected), rejected.all_text_contents(), strict=True):
        assert said.startswith(SOURCES[source][0])
    if rejected.count():
        said = SOURCES[sources(rejected)[0]][0]
        assert said in phone.locator("#spec-pane .tok-text").aria_snapshot()
    guesses_say_where_they_came_from(phone)


# A guess's source: what a screen reader hears before a rejected one, and its tooltip's words.
SOURCES = {
    "copied": ("rejected copy: ", "copied from earlier in the text"),
    "drafted": ("rejected draft: ", "drafted by the draft model"),
}
# A token's source (its class), the bar above it (an inset shadow) and its tooltip.
SOURCE_LOOK = """e => [['copied', 'drafted'].find(s => e.classList.contains(s)) || '',
  getComputedStyle(e).boxShadow !== 'none', e.title]"""


def sources(locator) -> list[str]:
    return [look[0] for look in locator.evaluate_all(f"els => els.map({SOURCE_LOOK})")]


def guesses_say_where_they_came_from(page) -> None:
    """Each kept or rejected guess, in the text and in the key, is copied (a bar above it) or
    drafted (none), with its source's words as its tooltip; no other token has either."""
    key = page.locator("#race-key .tok-legend .tok.copied, #race-key .tok-legend .tok.drafted")
    look = [tuple(x) for x in key.evaluate_all(f"els => els.map({SOURCE_LOOK})")]
    assert [(source, bar) for source, bar, _ in look] == [("copied", True), ("drafted", False)]
    for tokens in ("accepted", "rejected"), ("resampled", "bonus", "target"):
        found = page.locator(", ".join(f"#spec-pane .tok-text .tok.{kind}" for kind in tokens))
        for source, bar, title in found.evaluate_all(f"els => els.map({SOURCE_LOOK})"):
            if "accepted" in tokens:
                assert bar == (source == "copied") and SOURCES[source][1] in title
            else:
                assert (source, bar, title) == ("", False, "")


@pytest.mark.browser
def test_large_text_scales_the_page_in_the_browser_alone(phone):
    sizes = """['#comparison .prose', '#generate', '#k [data-testid="block-info"]']
        .map(s => parseFloat(getComputedStyle(document.querySelector(s)).fontSize))"""
    before = phone.evaluate(sizes)
    requests = []
    phone.on("request", lambda request: requests.append(request.url))
    phone.get_by_label("Large text").check()
    # Buttons ease into their new size, so wait for it rather than read it once.
    phone.wait_for_function(f"{sizes}.every((size, i) => size >= 1.2 * {before}[i])")
    phone.get_by_label("Large text").uncheck()
    phone.wait_for_function(f"{sizes}.every((size, i) => size === {before}[i])")
    assert not [url for url in requests if "/gradio_api/" in url]  # no server round trip
    assert phone.evaluate(OVERFLOWING) == []


def test_every_api_parameter_and_output_has_a_label(pair):
    api = ui.build(pair).get_api_info()["named_endpoints"]
    unnamed = re.compile(r"(parameter|value)_\d+")
    names = [
        (endpoint, value)
        for endpoint, info in api.items()
        for part in (*info["parameters"], *info["returns"])
        for value in (part.get("parameter_name"), part.get("label"))
        if value is not None
    ]
    assert names and [name for name in names if unnamed.fullmatch(name[1])] == []
    system = next(p for p in api["/generate"]["parameters"] if p["parameter_name"] == "system")
    assert system["label"] == "System prompt"
