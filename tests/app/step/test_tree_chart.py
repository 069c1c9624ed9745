"""A tree round drawn as a tree: each node where it hangs and what happened to it."""

from dataclasses import replace

from specdemo.app.step import tree_chart
from specdemo.rounds import Round
from specdemo.tree import Trial


def tree_round(sibling_kept: bool) -> Round:
    """Chain 10 11 12 with siblings (20), (21, 22), (23): 10 kept, 11 rejected, then 21 rejected
    and 22 kept or rejected; 12 and 23 never judged, nor 20 (its chain node was kept)."""
    tried = (Trial(21, 0.2, 0.3, 0.66, 0.9, False), Trial(22, 0.5, 0.4, 1.0, 0.1, sibling_kept))
    return Round(
        draft=[10, 11, 12], n_accepted=1, next_token=30, p_x=[0.5, 0.1, 0.2], q_x=[0.4, 0.6, 0.3],
        accept_prob=[1.0, 0.17, 0.67], u=[0.3, 0.8, 0.0], residual_top=[],
        tokens=[10, 22, 30] if sibling_kept else [10, 30], draft_time=0.0, verify_time=0.0,
        draft_steps=3, finished=False, k_asked=3, sibling=22 if sibling_kept else None,
        siblings_tried=((), tried), width=3, siblings=((20,), (21, 22), (23,)),
    )  # fmt: skip


def placed(r: Round) -> dict:
    return {(n.x, n.y): (n.token, n.state, n.parent) for n in tree_chart.nodes(r)}


def test_each_node_hangs_from_its_parent_in_the_order_tried_with_what_happened_to_it():
    nodes = placed(tree_round(sibling_kept=True))
    assert nodes == {
        (0, 0): (None, "root", None),
        (1, 0): (10, "kept", (0, 0)),
        (1, -1): (20, "unjudged", (0, 0)),
        (2, 0): (11, "rejected", (1, 0)),
        (2, -1): (21, "rejected", (1, 0)),
        (2, -2): (22, "kept", (1, 0)),
        (3, 0): (12, "unjudged", (2, 0)),
        (3, -1): (23, "unjudged", (2, 0)),
        (3, -2): (30, "bonus", (2, -2)),  # below the kept sibling, from its own row
    }
    rejected = placed(tree_round(sibling_kept=False))
    assert rejected[2, -2][1] == "rejected"
    assert rejected[2, -3] == (30, "resampled", (1, 0))  # the replacement, below the last tried


def test_the_chart_reads_without_colour_and_draws_the_kept_path_thick():
    r = tree_round(sibling_kept=True)
    fig = tree_chart.tree_chart(r, lambda ids: [f"t{t}" for t in ids])
    by_name = {trace.name: trace for trace in fig.data}
    assert by_name["kept"].marker.symbol == "circle" and by_name["rejected"].marker.symbol == "x"
    assert list(by_name["kept"].text) == ["✓ t10", "✓ t22"]
    assert list(by_name["rejected"].text) == ["✗ t11", "✗ t21"]
    assert sorted(by_name["never judged (after a rejection or a kept sibling)"].text) == [
        "· t12", "· t20", "· t23",
    ]  # fmt: skip
    path = by_name["kept path"]
    assert path.line.width > by_name["tried or drawn"].line.width
    # root -> 10 -> 22 -> 30: three thick edges
    assert [p for p in zip(path.x, path.y, strict=True) if p != (None, None)] == [
        (0, 0), (1, 0), (1, 0), (2, -2), (2, -2), (3, -2),
    ]  # fmt: skip
    assert fig.layout.title.text.startswith("The round as a tree")


def test_a_tree_walked_leaf_to_root_marks_every_guess_below_the_kept_ones_tried():
    """Judged as a block (traversal verification) the walk starts at the deepest guess, so the
    chain's guesses and siblings below the kept sibling were tried and not kept, while those
    above it never were; each chain guess hovers its w, h and u."""
    walked = tree_round(sibling_kept=True)
    deepest = (Trial(23, 0.1, 0.2, 0.3, 0.9, False),)  # tried before 11 and its siblings
    r = replace(walked, judge="block", weights=[1.0, 0.17, 0.11], stop_chance=[1.0, 0.2, 0.11],
                siblings_tried=(*walked.siblings_tried, deepest), token_kept=None)  # fmt: skip
    nodes = placed(r)
    assert nodes[3, 0] == (12, "rejected", (2, 0)) and nodes[3, -1][1] == "rejected"
    assert nodes[2, 0][1] == "rejected" and nodes[2, -2][1] == "kept"
    assert nodes[1, -1][1] == "unjudged"  # 20, beside the kept 10: never reached
    hover = next(n.hover for n in tree_chart.nodes(r) if n.token == 12)
    assert hover == "q = 0.3, p = 0.2, w = 0.11, h = 0.11, u = 0"
    assert "h = 0.3" in next(n.hover for n in tree_chart.nodes(r) if n.token == 23)
