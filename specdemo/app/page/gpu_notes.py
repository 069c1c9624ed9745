"""What GPU time on ZeroGPU means for a visitor, in sentences: what a run or a sweep will ask
for before it starts, and ZeroGPU's own refusals, slot waits and aborts once they happen
(``plain``), each saying what to do. The figures come from ``gpu``. Off ZeroGPU the notes said
before a run are empty, and errors pass as they are.
"""

import functools
import inspect
import math

import gradio as gr

from specdemo.app.page import gpu
from specdemo.app.page.gpu import PRO_QUOTA_SECONDS, QUOTA_SECONDS, SIGNED_IN_QUOTA_SECONDS


def sweep_note(calls: int, seconds: int) -> str:
    """What a sweep costs a ZeroGPU visitor, said before it starts ("" off ZeroGPU)."""
    if not gpu.limited():
        return ""
    fits = "within" if seconds <= QUOTA_SECONDS else "more than"
    return (
        f"On this ZeroGPU Space the default sweep is {calls} GPU calls asking for about "
        f"{seconds} s in all, {fits} the {QUOTA_SECONDS // 60} GPU minutes a day that visitors "
        f"who are not signed in share. {admission()} Sign in to Hugging Face for "
        f"{SIGNED_IN_QUOTA_SECONDS // 60} minutes a day of your own (a free account); cells "
        "already measured replay without the GPU."
    )


def admission() -> str:
    """ZeroGPU's admission and charge rule, as a sentence."""
    return (
        f"Each call starts only while the visitor's quota has {gpu.duration_factor():g} times its "
        "ask left, and is charged the seconds it uses."
    )


def ask_note(seconds: int) -> str:
    """What a request of `seconds` will ask a ZeroGPU visitor for, said before it runs ("" off
    ZeroGPU)."""
    if not gpu.limited():
        return ""
    return (
        f"On this ZeroGPU Space this run asks for {seconds} s of GPU time: it starts if your "
        f"daily quota has {math.ceil(seconds * gpu.duration_factor())} s left, and is charged the "
        f"seconds it uses. Visitors who are not signed in share {QUOTA_SECONDS // 60} GPU "
        "minutes a day per IP address, so a room on one Wi-Fi shares them; signed in, a free "
        f"account has {SIGNED_IN_QUOTA_SECONDS // 60} minutes a day of its own, PRO "
        f"{PRO_QUOTA_SECONDS // 60}."
    )


# The titles and messages spaces 0.51.3 gives the gr.Error it raises (zero/client.py,
# zero/wrappers.py).
NO_GPU = "No GPU was available"
ABORTED = "GPU task aborted"


def plain(error: gr.Error, request) -> gr.Error:
    """ZeroGPU's own refusal, wait or abort of `request`'s call as a sentence for the visitor;
    any other error (specdemo's own messages) as it is."""
    title, message = getattr(error, "title", "") or "", str(error.message)
    if not title.startswith("ZeroGPU"):
        return error
    seconds = request.seconds
    if NO_GPU in message:
        said = (
            "No GPU came free for this run within 60 s: every GPU this Space may use is busy "
            "with other visitors' runs. Try again in a minute; a run already measured replays "
            "without a GPU."
        )
    elif title == "ZeroGPU illegal duration":
        said = (
            f"ZeroGPU refused this run: it asks for {seconds} s of GPU time, more than one call "
            f"may have. Lower Max new tokens or K. (ZeroGPU: {message})"
        )
    elif title in ("ZeroGPU quota exceeded", "ZeroGPU pending credits exceeded"):
        said = (
            f"Not enough GPU quota left for this run: it asks for {seconds} s, so it needs "
            f"{math.ceil(seconds * gpu.duration_factor())} s of your daily quota. Visitors who are "
            f"not signed in share {QUOTA_SECONDS // 60} minutes a day per IP address; sign in to "
            f"Hugging Face for {SIGNED_IN_QUOTA_SECONDS // 60} minutes of your own, lower Max "
            f"new tokens, or wait for the quota to refill. (ZeroGPU: {message})"
        )
    elif ABORTED in message:
        said = (
            f"ZeroGPU stopped this run before it finished (it had asked for {seconds} s of GPU "
            "time). Nothing of it was kept; try again, and if it stops again, lower Max new "
            "tokens."
        )
    else:
        said = f"The GPU call for this run failed ({title}: {message}). Try again in a minute."
    return gr.Error(said, title="GPU time on ZeroGPU")


def explained(fn):
    """`fn(request, ...)` with ZeroGPU's errors reaching the caller as ``plain`` sentences."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(request, *args, **kwargs):
            try:
                yield from fn(request, *args, **kwargs)
            except gr.Error as e:
                raise plain(e, request) from None

        return stream

    @functools.wraps(fn)
    def call(request, *args, **kwargs):
        try:
            return fn(request, *args, **kwargs)
        except gr.Error as e:
            raise plain(e, request) from None

    return call
