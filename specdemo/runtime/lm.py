"""How specdemo calls a causal LM: token ids in, next-token logits and the grown KV cache out.

Every part (engine, drafters, app, bench) runs models through ``forward``; a cut output head is
a view of the model's own weights. ``Stopwatch`` is the one timer: it synchronises the device, so
on CUDA a lap is the work done, not the time to launch it.
"""

import time

import torch


def input_ids(model, tokens: list[int] | torch.Tensor) -> torch.Tensor:
    """Token ids as the (1, n) batch a causal LM takes, on the model's device."""
    if isinstance(tokens, list):
        tokens = torch.tensor(tokens, dtype=torch.long, device=model.device)
    return tokens.view(1, -1)


def forward(model, tokens: list[int] | torch.Tensor, cache, n_logits: int = 1, head=None):
    """Feed tokens after what `cache` holds; return (logits (n_logits, vocab), cache).

    With `head` (a cut output layer, see ``cut_head``) the model's base runs without its own
    head and `head` maps the last `n_logits` hidden states to logits.
    """
    ids = input_ids(model, tokens)
    if head is None:
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=n_logits)
        return out.logits[0], out.cache
    out = model.base_model(input_ids=ids, cache=cache, use_cache=True)
    return head(out.last_hidden_state[0, -n_logits:]), out.cache


def tree_layout(parents: list[int], device) -> tuple[torch.Tensor, torch.Tensor]:
    """A token tree's rows as a pass sees them: (seen (n, n) bool, row r sees row j: its
    ancestors and itself; depth (n,) long, a row hanging from the prefix at 0). `parents[r]` is
    row r's parent row, -1 for a row hanging from the prefix."""
    n = len(parents)
    depth, seen = [], torch.zeros((n, n), dtype=torch.bool, device=device)
    for r, parent in enumerate(parents):
        if parent >= r:
            raise ValueError("a tree's rows must come after their parents")
        depth.append(0 if parent < 0 else depth[parent] + 1)
        if parent >= 0:
            seen[r] = seen[parent]
        seen[r, r] = True
    return seen, torch.tensor(depth, device=device)


def tree_forward(model, tokens: list[int], parents: list[int], cache):
    """Feed a token tree after what `cache` holds, in one pass: row r (token `tokens[r]`) sits at
    position L + its depth and sees the cached prefix, its ancestors and itself (`parents[r]`
    is its parent row, -1 for a row hanging from the prefix), as EAGLE, Medusa and Sequoia feed
    theirs. Returns (logits (rows, vocab), cache); the cache then holds every row, and
    ``kv.keep_rows`` keeps the accepted ones."""
    n = len(tokens)
    past = cache.get_seq_length() if cache is not None else 0
    seen, depth = tree_layout(parents, model.device)
    visible = torch.cat([seen.new_ones((n, past)), seen], 1)
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(visible.shape, dtype=dtype, device=model.device)
    mask = mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]  # (1, 1, n, L + n)
    positions = (depth + past)[None]
    out = model(
        input_ids=input_ids(model, tokens),
        attention_mask=mask,
        position_ids=positions,
        cache=cache,
        use_cache=True,
        logits_to_keep=n,
    )
    return out.logits[0], out.cache


class DraftHead(torch.nn.Module):
    """An output layer over some of the vocabulary: logits for the token ids it holds only.

    A draft using it gives q = 0 to every other token. The acceptance rule stays exact (a token
    with q = 0 is never proposed and keeps all its p in the residual); only alpha can drop, when
    the target wants a token the head lacks. It holds fixed rows for the token ids `ids` (shared
    between heads, ``with_context``) and, when made with `spare` rows, up to that many more
    that ``learn`` fills with the tokens of the text so far: a word of the prompt is the likeliest
    word to come again. Unfilled spare rows score -inf (q = 0) and keep the shapes fixed, as a
    captured CUDA graph needs. ``tokens`` maps a logit's index to its token id, ``spread`` a
    row of probabilities onto the whole vocabulary, ``covers`` says whether an id is held.
    """

    def __init__(self, weight, ids, source, spare: int = 0, member=None, order=None):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)  # (rows, hidden)
        self.ids = ids  # (rows,) the token id of each row, on the weight's device
        self.source = source  # (vocab, hidden): the model's own output layer, read by `learn`
        self.order = order  # (vocab,) the row of `source` holding each id (``order_rows``), or None
        self.vocab = source.shape[0]
        if member is None:
            member = torch.zeros(self.vocab, dtype=torch.bool, device=ids.device)
            member[ids] = True
        self.member = member  # (vocab,) which ids the head holds
        self.spare, self.learned = spare, 0
        shape = (spare, weight.shape[1])
        self.extra_weight = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.extra_bias = torch.full((spare,), -torch.inf, dtype=weight.dtype, device=weight.device)
        self.all_ids = torch.cat([ids, torch.zeros(spare, dtype=ids.dtype, device=ids.device)])
        # The first ids of the vocabulary in id order, nothing spare: a logit's index is its id.
        self.prefix = not spare and torch.equal(ids, torch.arange(len(ids), device=ids.device))

    @property
    def rows(self) -> int:
        """The fixed rows (the spare ones cost a small extra matmul, filled or not)."""
        return self.weight.shape[0]

    def with_context(self, spare: int) -> "DraftHead":
        """A head with the same fixed rows (shared, not copied) and `spare` rows of its own."""
        member = self.member.clone()
        return DraftHead(self.weight.data, self.ids, self.source, spare, member, self.order)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = torch.nn.functional.linear(hidden, self.weight)
        if not self.spare:
            return logits
        extra = torch.nn.functional.linear(hidden, self.extra_weight, self.extra_bias)
        return torch.cat([logits, extra], -1)

    @torch.inference_mode()
    def learn(self, tokens: list[int]) -> None:
        """Hold the ids of `tokens` too, in spare rows, while any are left."""
        free = self.spare - self.learned
        if free <= 0 or not tokens:
            return
        new = torch.tensor(tokens, dtype=torch.long, device=self.ids.device).unique()
        new = new[(new < self.vocab) & (new >= 0)]
        new = new[~self.member[new]][:free]
        n = len(new)
        if not n:
            return
        slots = slice(self.learned, self.learned + n)
        self.extra_weight[slots] = self.source[new if self.order is None else self.order[new]]
        self.extra_bias[slots] = 0.0
        self.all_ids[self.rows + self.learned : self.rows + self.learned + n] = new
        self.member[new] = True
        self.learned += n

    def tokens(self, index: torch.Tensor) -> torch.Tensor:
        """Token ids of logit indices; a -1 (``sampling.sample``'s row with no mass) stays -1."""
        if self.prefix:
            return index
        return torch.where(index >= 0, self.all_ids[index.clamp_min(0)], index)

    def spread(self, probs: torch.Tensor) -> torch.Tensor:
        """(n, rows + spare) probabilities -> (n, vocab), zero at every id the head lacks (an
        unfilled spare row adds its 0 to id 0)."""
        out = probs.new_zeros((*probs.shape[:-1], self.vocab))
        return out.index_add_(-1, self.all_ids, probs)

    def covers(self, token: int) -> bool:
        """Whether the draft can propose `token` at all."""
        return 0 <= token < self.vocab and bool(self.member[token])


def head_over(model, ids: torch.Tensor) -> DraftHead:
    """The model's output layer cut to the rows of token ids `ids` (any order given; kept in the
    order of the layer's rows). Ids that fill the layer's first rows (the first ids, or the ids
    ``order_rows`` moved there) are a view of the model's weights; any other set is a copy."""
    layer = model.get_output_embeddings()
    weight, order = layer.weight.detach(), getattr(layer, "order", None)
    ids = ids.to(device=weight.device, dtype=torch.long)
    at = torch.sort(ids if order is None else order[ids]).values  # the layer's rows
    ids = at if order is None else order[at]
    if bool(at[-1] == len(at) - 1):
        rows = weight[: len(at)]  # (rows, hidden), a view
    else:
        rows = weight.index_select(0, at)  # (rows, hidden), a copy
    return DraftHead(rows, ids, weight, order=order)


def cut_head(model, rows: int) -> DraftHead:
    """The model's output layer cut to the first `rows` token ids."""
    weight = model.get_output_embeddings().weight
    return head_over(model, torch.arange(rows, device=weight.device))


class InIdOrder(torch.nn.Module):
    """An embedding or output layer whose rows ``order_rows`` moved, called by token id as
    before: an embedding looks each id up at its row, an output layer puts each row's logit back
    at its id. `order` (vocab,) maps an id to its row and a row to its id (a set of swaps)."""

    def __init__(self, layer: torch.nn.Module, order: torch.Tensor, output: bool):
        super().__init__()
        self.layer, self.output = layer, output
        self.register_buffer("order", order, persistent=False)

    @property
    def weight(self) -> torch.nn.Parameter:
        return self.layer.weight

    def __setattr__(self, name, value) -> None:
        if name == "weight":  # transformers' tie_weights sets it
            self.layer.weight = value
        else:
            super().__setattr__(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.output:
            return self.layer(x).index_select(-1, self.order)
        return self.layer(self.order[x])


@torch.no_grad()
def order_rows(model, ids: torch.Tensor, chunk: int = 4096) -> bool:
    """Move the output layer's rows of token ids `ids` to its first len(ids) rows, in place, so
    that a head over them (``head_over``) is a view, as the first ids are: each kept id found
    further down swaps rows with an id that is not kept. The output layer (and an input
    embedding tied to it) then answer by token id through ``InIdOrder``, so the model computes
    what it did before. Swaps go `chunk` rows at a time: the memory this needs while it runs is
    2 × `chunk` rows, none after. Returns False, changing nothing, where the rows cannot move
    (already moved, or a weight stored packed, as bitsandbytes' 4-bit)."""
    layer = model.get_output_embeddings()
    weight = getattr(layer, "weight", None)
    if isinstance(layer, InIdOrder) or weight is None or not weight.is_floating_point():
        return False
    embedding = model.get_input_embeddings()
    tied = embedding is not None and embedding.weight.data_ptr() == weight.data_ptr()
    ids = ids.to(device=weight.device, dtype=torch.long).unique()
    n, vocab = len(ids), weight.shape[0]
    kept = torch.zeros(vocab, dtype=torch.bool, device=weight.device)
    kept[ids] = True
    below, above = (~kept[:n]).nonzero().flatten(), ids[ids >= n]  # as many of each
    order = torch.arange(vocab, device=weight.device)
    order[below], order[above] = above, below
    for start in range(0, len(above), chunk):
        a, b = above[start : start + chunk], below[start : start + chunk]
        rows = weight[a]  # a copy
        weight[a] = weight[b]
        weight[b] = rows
    model.set_output_embeddings(InIdOrder(layer, order, output=True))
    if tied:
        model.set_input_embeddings(InIdOrder(embedding, order, output=False))
    return True


def eos_ids(model) -> set[int]:
    """Every EOS id of the model's generation config (an int or a list there)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        return set()
    return {eos} if isinstance(eos, int) else set(eos)


class Stopwatch:
    """Lap times on `device`, synchronised so that queued GPU work (CUDA, or Apple's MPS) is
    counted where it ran."""

    def __init__(self, device):
        kind = torch.device(device).type
        self.cuda, self.mps = kind == "cuda", kind == "mps"
        self.device = device
        self.last = self.start = self.now()

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        elif self.mps:
            torch.mps.synchronize()
        return time.perf_counter()

    def lap(self) -> float:
        """Seconds since the previous lap (or the start)."""
        now = self.now()
        elapsed, self.last = now - self.last, now
        return elapsed

    def total(self) -> float:
        """Seconds since the start."""
        return self.now() - self.start


def vocab_size(model) -> int:
    """Token ids the model scores: rows of its output layer, else `config.vocab_size`. Loading
    checks that a pair shares a vocabulary by it; the engine, drafters and profile size their
    distributions and synthetic contexts by it."""
    head = model.get_output_embeddings()
    if head is None:
        return model.config.vocab_size
    state = getattr(head.weight, "quant_state", None)  # a bnb 4-bit weight is stored packed
    return state.shape[0] if state is not None else head.weight.shape[0]
