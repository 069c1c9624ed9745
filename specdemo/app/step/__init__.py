"""The step-through: one speculative round at a time on a growing context, explained.

Open ``stepping.py`` first: ``next_round`` runs one round and ``round_markdown`` and
``round_rows`` explain it in words and a table. ``microscope`` draws p, q and the residual at
the position the round decided. The lesson: how each draft token is kept with probability
min(1, p/q), and where the replacement for the first rejection comes from.
"""
