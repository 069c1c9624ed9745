"""The race: speculative decoding against the target alone on one prompt, and what it costs.

Open ``race.py`` first: ``run_speculative`` and ``run_target`` stream the two runs round by
round; ``cadence`` passes both on at one pace in seconds of compute, so the page's drawing loads
them alike, and ``loads`` measures the load each ran under. ``run_record`` keeps a finished race
as one row of figures, ``comparison`` writes the race's table and coloured tokens (with the two
loads where they are uneven), ``costs`` turns the machine's measured step costs into the
predicted speedup curves and the cost note, and ``session_charts`` draws a session's runs
against K (``speedup_curves`` adds the formulas' curves, each named at its end). The lesson:
the target checks K guesses in one pass, so the same text comes out while the target runs once
per several tokens, and whether that pays depends on measured costs.
"""
