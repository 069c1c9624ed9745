"""The step-through: one speculative round at a time on a growing context, explained.

Open ``stepping.py`` first: ``next_round`` runs one round and ``round_table`` explains it in a
table, ``lesson`` in words (``round_markdown``). ``microscope`` draws p, q and the residual at
the position the round decided; ``tree_chart`` draws a tree round as a tree. The lesson: how
each draft token is kept with probability min(1, p/q), and where the replacement for the first
rejection comes from; judged as a whole block, how a running weight w and a stopping chance h
per guess keep up to the last guess that passed, and what token by token would have kept.
"""
