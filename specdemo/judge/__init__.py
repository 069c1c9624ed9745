"""The judge: logits into p and q, and the exact rules that keep or replace each guess, token by
token, as a block, over a tree and leaf to root (``sampling``, ``verify``, ``tree``,
``traversal``), all on one arithmetic (``residual``)."""
