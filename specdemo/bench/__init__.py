"""``python -m specdemo bench``: the grid, its runners, busy processes beside them, the machine a
figure ran on, the dispatch measurement, and the report (``grid``, ``runs``, ``busy``,
``machine``, ``dispatch_measure``, ``report``)."""
