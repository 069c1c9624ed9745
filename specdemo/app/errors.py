"""Bad input as a message for the user, wherever it is found: in a handler in the main process,
or in a GPU function, whose exceptions ZeroGPU passes on as they are only when they are
``gr.Error`` (any other becomes a generic "ZeroGPU worker error")."""

import contextlib
from collections.abc import Iterator

import gradio as gr


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Bad input (a ValueError from config or a run) becomes a message for the user."""
    try:
        yield
    except ValueError as e:
        raise gr.Error(str(e)) from None
