"""Is it exact? The acceptance rule's output checked against the target's own distribution.

Open ``exactness.py`` first: ``measure`` draws the first token many times with speculative
decoding and from p, and runs a χ² test and the greedy check; ``joint`` does the same for the
first two tokens together, batched; ``chi_square`` holds the statistics both rest on (the χ²
bins and p-values, the check's power, each rule's exact distribution); ``pair_law`` computes
what a mistaken rule does to the first two tokens; ``verdicts`` says what they found, in one
marked line first (✓, ✗, ? or –, always with words), then why; ``histograms`` draws the bars
and their residuals. The lesson: exact acceptance sampling
reproduces p, and a broken rule fails the same test.
"""
