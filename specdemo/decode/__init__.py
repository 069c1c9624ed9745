"""The loop: a round's passes from the draft's guesses to the judged tokens, the run record, and
the text each token became (``engine``, ``verify_pass``, ``rounds``, ``render``)."""
