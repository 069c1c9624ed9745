"""What a round costs and what it buys: the cost model, step costs measured here, automatic K,
and the dispatch model that predicts a GPU (``theory``, ``profile``, ``policy``, ``dispatch``,
``dispatch_trees``)."""
