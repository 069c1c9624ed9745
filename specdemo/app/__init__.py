"""The Gradio app, in modules that each import only those listed before them: ``config``
(validation), ``costs`` (the cost model's numbers for a session), ``race``, ``session``,
``exactness``, ``joint`` and ``stepping`` (runs and their Markdown, no Gradio), ``charts``,
``session_charts`` and ``microscope`` (Plotly figures), ``handlers`` (the plain functions behind each event) and
``ui`` (layout and wiring). ``app.py`` at the repository root loads a pair and serves ``ui.build``.
"""
