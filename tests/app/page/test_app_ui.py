"""The built app as its page and its API see it (``Blocks.config``, ``get_api_info``): named
endpoints with the handlers' parameters and outputs, and a bounded queue. That model work runs
one call at a time is checked on the served app (``test_app_client``)."""

import inspect
import re

import gradio as gr
import pytest
from conftest import ROOT

from specdemo.app.page import handlers, ui
from specdemo.defaults import DEFAULTS

HANDLERS = {
    "generate": (handlers.generate, handlers.GENERATE_OUTPUTS),
    "sweep": (handlers.sweep, handlers.SWEEP_OUTPUTS),
    "exactness": (handlers.exactness, handlers.EXACTNESS_OUTPUTS),
    "step": (handlers.step, handlers.STEP_OUTPUTS),
}


@pytest.fixture(scope="module")
def app(pair):
    return ui.build(pair)


def dependencies(app) -> dict:
    """The page's events by API name, as the browser receives them."""
    return {d["api_name"]: d for d in app.config["dependencies"] if d["api_name"]}


def test_each_endpoint_takes_its_handlers_parameters_and_fills_its_outputs(app):
    found, api = dependencies(app), app.get_api_info()["named_endpoints"]
    for name, (handler, outputs) in HANDLERS.items():
        widgets = list(inspect.signature(handler).parameters)[1:]  # after the pair
        shown = [w for w in widgets if w not in ("session", "state", "progress")]
        assert [p["parameter_name"] for p in api[f"/{name}"]["parameters"]] == shown, name
        assert len(found[name]["outputs"]) == len(outputs), name
    assert len(found["reset_step"]["outputs"]) == len(handlers.STEP_OUTPUTS)
    rule = next(x for x in api["/exactness"]["parameters"] if x["parameter_name"] == "rule")
    assert rule["label"] == "Acceptance rule" and rule["parameter_default"] == "exact"


def test_every_tab_that_judges_guesses_offers_the_judge(app):
    """The Judge reaches each endpoint whose rounds it judges as its own parameter, with the
    library's default (a name no output of the tab shares: Step through has a "verify" note)."""
    api = app.get_api_info()["named_endpoints"]
    for name in ("/generate", "/sweep", "/exactness", "/step"):
        judge = next(x for x in api[name]["parameters"] if x["parameter_name"] == "judge")
        assert judge["label"] == "Judge" and judge["parameter_default"] == DEFAULTS["verify"]


def test_a_sweeps_further_cells_are_events_of_their_own(app):
    """Each cell after the first is queued by the change its predecessor leaves on a hidden
    tick, so a run asked for meanwhile takes the model between two cells."""
    cell = dependencies(app)["sweep_next"]
    assert [event for _, event in cell["targets"]] == ["change"]
    assert len(cell["outputs"]) == len(handlers.SWEEP_OUTPUTS)


def test_the_queue_is_bounded(pair, monkeypatch):
    asked = []
    real = gr.Blocks.queue

    def queue(self, *args, **kwargs):
        asked.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(gr.Blocks, "queue", queue)
    ui.build(pair)
    assert asked and asked[-1]["max_size"] == ui.QUEUE_SIZE


# ---------------------------------------------------------------- the lesson plan and the page

# What the page shows a room without being a control: text, tables, state.
NOT_NAMED = ("Markdown", "HTML", "State", "Dataframe", "JSON", "Timer", "File")


def page_names(app) -> tuple[set[str], set[str]]:
    """(every control's name, every chart's name) as the page shows them: a button's text, a
    tab's, an accordion's, an input's label, a chart's label."""
    controls, plots = set(), set()
    for block in app.blocks.values():
        kind = type(block).__name__
        if kind == "Plot":
            plots.add(block.label)
        elif kind == "Button":
            controls.add(block.value)
        elif kind not in NOT_NAMED and getattr(block, "label", None):
            controls.add(block.label)
    return controls, plots


def plan_names(text: str) -> set[str]:
    """The names in bold in the lesson plan (docs/WORKSHOP.md from "A 45-minute lesson plan" to
    its end), but the bold openings of its paragraphs (a sentence ending in a full stop)."""
    plan = text[text.index("## A 45-minute lesson plan") :]
    return {name for name in re.findall(r"\*\*(.+?)\*\*", plan) if not name.endswith(".")}


def test_the_lesson_plan_and_the_page_name_the_same_controls(app):
    """Every bold name in the plan is a tab, control or chart of the page, and every control of
    the page is named in the plan: a renamed, added or removed control fails here until
    docs/WORKSHOP.md follows."""
    controls, plots = page_names(app)
    named = plan_names((ROOT / "docs" / "WORKSHOP.md").read_text())
    assert named - controls - plots == set(), "the plan names what the page lacks"
    assert controls - named == set(), "the page has controls the plan never names"
    assert {"Generate", "Step through", "Is it exact?", "Tree width", "Drafter"} <= named


def test_the_plan_check_catches_a_name_the_page_lacks(app):
    """The check above can fail: a plan naming a session chart the page never had, or leaving
    out the tree width."""
    controls, plots = page_names(app)
    text = (ROOT / "docs" / "WORKSHOP.md").read_text()
    assert "session chart" in plan_names(text + "Read the **session chart**.") - controls - plots
    assert "Tree width" in controls - plan_names(text.replace("**Tree width**", "Tree width"))
