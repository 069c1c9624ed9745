"""The built app as its page and its API see it (``Blocks.config``, ``get_api_info``): named
endpoints with the handlers' parameters and outputs, and a bounded queue. That model work runs
one call at a time is checked on the served app (``test_app_client``)."""

import inspect

import gradio as gr
import pytest

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
