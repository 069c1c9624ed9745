"""The built app: named endpoints on one model queue slot, wired to the handlers' outputs."""

import functools

import pytest

from specdemo.app import handlers, ui

MODEL_ENDPOINTS = {"generate", "sweep", "exactness", "step"}


@pytest.fixture(scope="module")
def app(pair):
    return ui.build(pair)


def endpoints(app) -> dict:
    return {f.api_name: f for f in app.fns.values() if f.api_name}


def test_ui_builds_with_named_endpoints_on_one_model_slot(app):
    found = endpoints(app)
    assert MODEL_ENDPOINTS | {"reset_step"} <= set(found)
    model_work = [found[name] for name in MODEL_ENDPOINTS]
    assert {f.concurrency_id for f in model_work} == {"model"}
    assert all(f.concurrency_limit == 1 and not f.preprocess for f in model_work)
    assert app._queue.max_size == ui.QUEUE_SIZE


def test_each_endpoint_is_its_handler_with_the_pair_bound(app):
    found = endpoints(app)
    for name, handler, outputs in [
        ("generate", handlers.generate, handlers.GENERATE_OUTPUTS),
        ("sweep", handlers.sweep, handlers.SWEEP_OUTPUTS),
        ("exactness", handlers.exactness, handlers.EXACTNESS_OUTPUTS),
        ("step", handlers.step, handlers.STEP_OUTPUTS),
    ]:
        fn = found[name].fn
        assert isinstance(fn, functools.partial) and fn.func is handler
        assert len(found[name].outputs) == len(outputs)
    assert len(found["reset_step"].outputs) == len(handlers.STEP_OUTPUTS)
    api = app.get_api_info()["named_endpoints"]
    assert [p["parameter_name"] for p in api["/exactness"]["parameters"]] == [
        "prompt",
        "temperature",
        "top_p",
        "k",
        "n",
        "seed",
        "rule",
    ]
    rule = api["/exactness"]["parameters"][-1]
    assert rule["label"] == "Acceptance rule" and rule["parameter_default"] == "exact"
