"""The page that serves the lessons: layout, events, GPU time and the visitor's session.

Open ``ui.py`` first: ``build`` lays out the page (``tabs``, ``style``, and
``token_pane`` for the answers, each token marked by what happened to it) and wires each button to
a handler. ``handlers`` are plain functions from widget values to outputs; each parses a
request (``jobs``), prices it for ZeroGPU (``gpu``), answers it from stored runs where it
can (``replay``) and hands the rest to a GPU function (``work``, run under ``spaces.GPU`` by
``gpu_calls``); ``gpu_notes`` tells the visitor what a run asks ZeroGPU for and what ZeroGPU
said when it refuses. ``session`` keeps a visitor's runs; ``preparing`` shows the page while the
pair loads.
"""
