"""The Gradio app, one folder per lesson and one for the page that serves them.

Open the folder of the lesson you want to change; each folder's docstring names the file to
read first. Imports only run downwards, in this order:

- ``specdemo.app`` itself: what every lesson shares. ``settings`` (defaults and limits),
  ``config`` (widget values checked and parsed), ``numbers`` (how figures are written),
  ``charts`` (Plotly helpers and the round chart), ``errors`` (bad input as a message),
  ``spans`` (an answer's tokens as the panes draw them, each guess copied or drafted).
- ``generate/``: the race. Speculative decoding against the target alone, and what it costs.
- ``step/``: the step-through. One round at a time, and the microscope on one position.
- ``exact/``: is it exact? The χ² check of the first two tokens and the greedy check; it runs
  its races with ``generate``.
- ``page/``: the page. Layout and wiring, the handlers behind each event, each request's GPU
  budget on ZeroGPU, the GPU functions, replay and the visitor's session.

No lesson imports another lesson's folder except ``exact`` from ``generate``, and nothing below
``page`` imports it. ``app.py`` at the repository root serves ``page.ui.build`` at once and
loads the pair behind it.
"""
