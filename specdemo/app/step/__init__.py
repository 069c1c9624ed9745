"""The step-through: one speculative round at a time on a growing context, explained.

Open ``stepping.py`` first: ``next_round`` runs one round and ``round_rows`` explains it in a
table, ``lesson`` in words (``round_markdown``). ``microscope`` draws p, q and the residual at
the position the round decided; ``tree_chart`` draws a tree round as a tree. The lesson: how
each draft token is kept with probability min(1, p/q), and where the replacement for the first
rejection comes from.
"""
