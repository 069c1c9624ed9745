"""The Gradio app, in modules that each import only those listed before them: ``config``
(validation), ``costs`` (the cost model's numbers for a session), ``race``, ``replay`` (runs
stored for identical requests, and the sweep's cells), ``session``, ``exactness``, ``joint``
and ``stepping`` (runs and their Markdown, no Gradio), ``charts``, ``session_charts`` and
``microscope`` (Plotly figures), ``handlers`` (the plain functions behind each event), ``gpu``
(ZeroGPU's seconds per request), ``preparing`` (the page while the pair loads), ``style``
(theme, CSS, texts), ``tabs`` (each tab's layout) and ``ui`` (the page and its wiring).
``app.py`` at the repository root serves ``ui.build`` at once and loads the pair behind it.
"""
