"""The one fact about a model that both loading and the engine need: how many token ids it scores.

Loading checks that a pair shares a vocabulary with it; the engine, drafters and profile size
their distributions and synthetic contexts by it. Neither knows the other through it.
"""


def vocab_size(model) -> int:
    """Token ids the model scores: rows of its output layer, else `config.vocab_size`."""
    head = model.get_output_embeddings()
    if head is None:
        return model.config.vocab_size
    state = getattr(head.weight, "quant_state", None)  # a bnb 4-bit weight is stored packed
    return state.shape[0] if state is not None else head.weight.shape[0]
