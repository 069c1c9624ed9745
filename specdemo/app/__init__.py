"""The Gradio app, in modules that each import only those listed before them: ``config``
(validation), ``race``, ``session``, ``exactness`` and ``stepping`` (runs and their Markdown, no
Gradio), ``charts`` (Plotly figures), ``handlers`` (the plain functions behind each event) and
``ui`` (layout and wiring). ``app.py`` at the repository root loads a pair and serves ``ui.build``.
"""
