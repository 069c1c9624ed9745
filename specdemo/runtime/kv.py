"""KV-cache surgery: forgetting the last tokens after a chain's rejection (``drop_last``), and
keeping a tree pass's kept path in place as if its tokens had been fed one after another
(``keep_rows``), on a dynamic or a static cache."""

import torch


def drop_last(cache, n: int) -> None:
    """Remove the last `n` tokens' keys and values from a KV cache."""
    if n > 0:
        cache.crop(-n)


SLIDING_REFUSED = (
    "a token tree needs a KV cache that holds every row, and this model has sliding-window "
    "layers: a tree pass's rejected rows push prefix rows out of the window, and no gather "
    "brings them back. Verify a chain (tree_width=1)."
)


@torch.inference_mode()
def sliding(cache) -> bool:
    """Whether any layer of `cache` keeps only a sliding window of the latest tokens."""
    return any(getattr(layer, "is_sliding", False) for layer in getattr(cache, "layers", ()))


def keep_rows(cache, rows: list[int]) -> None:
    """Keep only the cache's `rows` (ascending), in every layer: after a tree pass, the prefix
    and the kept path, as if those tokens had been fed one after another.

    Rows already where they belong stay put: the prefix, and a kept chain, whose rows follow it
    in order. Only the rows after the first gap move, written into place, and the tail is
    cropped (a view of a dynamic layer; a length moved in a static one). A fishbone moves at
    most one row per layer, a kept sibling: one token's keys and values, against the 1 + K·w
    rows the pass itself wrote and the whole cache it read. A cache with sliding-window layers
    is refused (ValueError, ``SLIDING_REFUSED``): such a layer keeps only its window's tail,
    from which the pass's rejected rows have already pushed prefix rows, and counts its length
    itself.
    """
    if hasattr(cache, "keep_rows"):  # a cache of its own kind (the tests' toys)
        cache.keep_rows(rows)
        return
    if sliding(cache):
        raise ValueError(SLIDING_REFUSED)
    start = next((i for i, r in enumerate(rows) if r != i), len(rows))  # rows[:start] in place
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True):  # a layer sharing another's cache
            continue
        if start < len(rows):
            index = torch.tensor(rows[start:], device=layer.keys.device)
            for held in (layer.keys, layer.values):  # (batch, kv_heads, length, head_dim)
                held[..., start : len(rows), :] = held.index_select(-2, index)
        layer.crop(len(rows) - int(layer.get_seq_length()))
