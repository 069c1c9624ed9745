"""One streaming cadence for both halves of a race, in seconds of compute, not in tokens.

Every update the page draws costs the machine time while the next pass computes (the browser
lays out an ever-longer pane beside the models), so a half that sent an update per token would
run under more load than one that sends an update per round, and the speedup would carry the
difference. ``Cadence.frames`` passes on a growing run once per frame of the run's own
engine-timed seconds (``run.seconds``), and its last state always; the half that follows is paced
at the interval the first one reached, so both send the same number of updates per second of
compute whatever their passes cost.
"""

from collections.abc import Iterable, Iterator

FRAME = 0.25  # seconds of compute between updates, at least (a slower round makes it longer)


class Cadence:
    """The frame both halves of one race stream at: FRAME, or the interval between the first
    half's updates where its passes were longer than a frame."""

    def __init__(self, frame: float = FRAME):
        self.frame = frame

    def frames(self, runs: Iterable) -> Iterator[tuple[object, bool]]:
        """(run, is_last) pairs: the first run, then the first one in each later frame of
        `self.frame` seconds of compute, then the last, which always comes with True. Afterwards
        the frame is the interval this half's updates reached, if that is longer."""
        run, due, sent = None, 0.0, 0
        for run in runs:
            if run.seconds >= due:
                # On a fixed grid, not `frame` after the last update: each frame holds one update
                # when passes are shorter than a frame, however they fall.
                due = (run.seconds // self.frame + 1) * self.frame
                sent += 1
                yield run, False
        if run is None:
            return
        yield run, True
        self.frame = max(self.frame, run.seconds / sent)
