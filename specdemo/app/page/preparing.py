"""The pair while the page is already served: a `Preparation` loads and warms it up, records each
stage the loader reports (thread-safe) for the page to poll, and stands in for the pair itself.

Until the pair is ready, reading one of its fields (``target``, ``draft``, ``tokenizer``,
``summary``) through a `Preparation` raises a gr.Error naming the stage under way, so a handler
bound to it answers an early request with a message, never a traceback. SPECDEMO_PREPARE_DELAY
(seconds) is a test hook: the loader waits that long before it starts, so a test can reach the
page and the API while preparation is still under way.
"""

import dataclasses
import os
import threading
import time
import traceback
from collections.abc import Callable

import gradio as gr

from specdemo import models
from specdemo.app.generate import race
from specdemo.app.page import handlers

ENV_DELAY = "SPECDEMO_PREPARE_DELAY"
WARM_UP = "warm up"
PAIR_FIELDS = frozenset(f.name for f in dataclasses.fields(models.LoadedPair))


def load(progress: models.Progress) -> models.LoadedPair:
    """The app's pair, loaded and warmed up (``race.rehearse``) so the first run is timed fairly.

    On ZeroGPU the GPU exists only inside a request, so the warm-up is left to the first one.
    """
    pair = models.load_pair(progress=progress)
    if not models.zero_gpu():
        progress(WARM_UP, 0, 1)
        race.rehearse(pair)
        progress(WARM_UP, 1, 1)
    return pair


class NotReady(gr.Error):
    """A request that came before the pair, or after its load failed. str() is the message
    itself, so re-raising it as ``gr.Error(str(e))`` (as ``handlers.user_errors`` does with a
    ValueError) keeps it readable. Expected while the server starts, so the log gets no
    traceback."""

    def __init__(self, message: str):
        super().__init__(message, print_exception=False)

    def __str__(self) -> str:
        return str(self.message)


@dataclasses.dataclass
class Stage:
    name: str
    done: float
    total: float
    started: float  # time.monotonic()
    inner: bool = False  # started while another stage ran (assembling inside converting)
    seconds: float | None = None  # set when the stage ends


class Preparation:
    """The pair being prepared by `load(progress)`: `start` runs it in a background thread, `run`
    in this one. Each stage also goes to `console` (e.g. ``models.ProgressBars``), with a line
    for the pair, for "ready in N s" and for a failure's traceback."""

    def __init__(
        self,
        load: Callable[[models.Progress], models.LoadedPair] = load,
        console: models.ProgressBars | None = None,
    ):
        self._load, self._console = load, console
        self._lock = threading.Lock()
        self._stages: list[Stage] = []
        self._started = time.monotonic()
        self._pair: models.LoadedPair | None = None
        self._error: str | None = None
        self.seconds: float | None = None  # from start to ready (or to the failure)

    def start(self) -> "Preparation":
        threading.Thread(target=self.run, name="specdemo-prepare", daemon=True).start()
        return self

    def run(self) -> None:
        """Load the pair; a failure is kept (and shown) instead of raised."""
        time.sleep(float(os.environ.get(ENV_DELAY) or 0))
        try:
            pair = self._load(self)
        except Exception as e:
            with self._lock:
                self.seconds = time.monotonic() - self._started
                self._error = f"{type(e).__name__}: {e}"
            if self._console:
                self._console.write(traceback.format_exc().rstrip())
                self._console.write(f"specdemo: the models could not be loaded ({self._error})")
            return
        with self._lock:
            self.seconds = time.monotonic() - self._started
            self._pair = pair
        if self._console:
            self._console.write(
                f"specdemo: {handlers.model_markdown(pair.summary)} · "
                f"{handlers.model_details(pair.summary)}".replace("**", "")
            )
            self._console.write(f"specdemo: ready in {self.seconds:.0f} s")

    def __call__(self, stage: str, done: float, total: float) -> None:
        """The `models.Progress` callback the loader reports to."""
        now = time.monotonic()
        with self._lock:
            current = next((s for s in self._stages if s.name == stage), None)
            if current is None or current.seconds is not None:  # a stage may run again
                inner = any(s.seconds is None for s in self._stages)
                current = Stage(stage, done, total, now, inner)
                self._stages.append(current)
            current.done, current.total = done, total
            if done >= total:
                current.seconds = now - current.started
        if self._console:
            self._console(stage, done, total)

    @property
    def ready(self) -> bool:
        return self._pair is not None

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def pair(self) -> models.LoadedPair:
        """The loaded pair; until then a NotReady error saying what is under way, or what failed."""
        if self._pair is None:
            raise NotReady(self.waiting_message())
        return self._pair

    def __getattr__(self, name: str):
        # Only for names not found on the object: the pair's fields, read through `pair`.
        if name in PAIR_FIELDS:
            return getattr(self.pair, name)
        raise AttributeError(name)

    def waiting_message(self) -> str:
        with self._lock:
            running = [s for s in self._stages if s.seconds is None]  # the last is the innermost
            error, stage = self._error, (running[-1] if running else None)
        if error:
            return f"The models could not be loaded ({error}): the app cannot run."
        now = "starting" if stage is None else _progress(stage, time.monotonic())
        return f"Still preparing the models ({now}): try again in a moment."

    def markdown(self) -> str:
        """The preparation panel: each stage with its progress and time, or the failure."""
        with self._lock:
            stages = [dataclasses.replace(s) for s in self._stages]
            error, seconds = self._error, self.seconds
        now = time.monotonic()
        elapsed = seconds if seconds is not None else now - self._started
        if error:
            head = (
                f"### The models could not be loaded\n**{error}** (after {elapsed:.0f} s; the "
                "server's log has the traceback)."
            )
        else:
            head = (
                f"### Preparing the models ({elapsed:.0f} s so far)\nThe page turns into the app "
                "once the target and the draft are loaded and warmed up: the warm-up runs both "
                "once and measures this machine's step costs, so the first run is timed like "
                "the rest. A first start also builds the converted models, once; later starts "
                "only load them."
            )
        if not stages:
            return head + "\n\nStarting …"
        rows = "\n".join(
            f"| {'↳ ' * s.inner}{s.name} | {_amount(s)} | "
            f"{s.seconds if s.seconds is not None else now - s.started:.1f} s |"
            for s in stages
        )
        return f"{head}\n\n| Stage | Progress | Time |\n|---|---|---|\n{rows}"


def _progress(stage: Stage, now: float) -> str:
    if stage.total > 1:
        return f"{stage.name}, {stage.done / stage.total:.0%}"
    return f"{stage.name}, {now - stage.started:.0f} s so far"


def _amount(stage: Stage) -> str:
    if stage.total <= 1:
        return "done" if stage.seconds is not None else "running"
    if stage.total > 1e5:  # bytes
        return (
            f"{stage.done / 1e9:.2f} of {stage.total / 1e9:.2f} GB ({stage.done / stage.total:.0%})"
        )
    return f"{stage.done:.0f} of {stage.total:.0f} ({stage.done / stage.total:.0%})"
