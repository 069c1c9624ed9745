"""A tree round drawn as a tree: each node where it hangs and what happened to it."""

from dataclasses import replace
from itertools import pairwise

from specdemo.app.step import tree_chart
from specdemo.decode.rounds import Round
from specdemo.judge.tree import Trial


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
    # root -> 10 -> 22 -> 30: three thick edges, the middle one turning down halfway
    assert [p for p in zip(path.x, path.y, strict=True) if p != (None, None)] == [
        (0, 0), (1, 0), (1, 0), (1.5, 0), (1.5, -2), (2, -2), (2, -2), (3, -2),
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


def test_a_bonus_after_a_kept_sibling_takes_a_row_of_its_own_at_its_depth():
    """Every depth holds its siblings: the bonus after the sibling kept at (2, -2) goes below
    position 3's two siblings, so no two nodes (nor their labels) share a place."""
    r = replace(tree_round(sibling_kept=True), siblings=((20, 24), (21, 22), (23, 25)))
    nodes = placed(r)
    assert len(nodes) == len(tree_chart.nodes(r))  # each in a place of its own
    assert nodes[3, -2][:2] == (25, "unjudged") and nodes[3, -3] == (30, "bonus", (2, -2))


# A narrow desktop's plot: the figure's height less its title and foot (axis and legend).
PLOT_WIDTH, MARGINS, FONT = 700, 190, 15


def boxes(fig):
    """Pixel boxes (left, bottom, right, top; y up) of each node's label and marker, and each
    edge segment's, at PLOT_WIDTH; a label's width is 0.62 em a character, its height 1.25 em,
    a line, its foot at the marker's top (plotly's "top center")."""
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    sx, sy = PLOT_WIDTH / (x1 - x0), (fig.layout.height - MARGINS) / (y1 - y0)

    def px(x, y):
        return (x - x0) * sx, (y - y0) * sy

    labels, markers, edges = [], [], []
    for t in fig.data:
        if t.mode == "lines":
            corners = list(zip(t.x, t.y, strict=True))
            for a, b in pairwise(corners):
                if None not in (*a, *b):
                    (ax, ay), (bx, by), w = px(*a), px(*b), t.line.width / 2
                    edges.append(
                        (min(ax, bx) - w, min(ay, by) - w, max(ax, bx) + w, max(ay, by) + w)
                    )
            continue
        assert t.textposition == "top center"
        r = t.marker.size / 2
        for x, y, text in zip(t.x, t.y, t.text, strict=True):
            cx, cy = px(x, y)
            markers.append((cx - r, cy - r, cx + r, cy + r))
            lines = text.split("<br>")
            half = 0.62 * FONT * max(map(len, lines)) / 2
            foot, head = cy + r, cy + r + 1.25 * FONT * len(lines)
            labels.append((text, (cx - half, foot, cx + half, head)))
    return labels, markers, edges


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_each_label_sits_above_its_node_clear_of_every_edge_node_and_label():
    """Edges run along the rows and turn down halfway between positions, so the space above a
    node holds no edge: no label box meets an edge, a marker or another label."""
    r = replace(tree_round(sibling_kept=True), siblings=((20, 24), (21, 22), (23, 25)))
    fig = tree_chart.tree_chart(r, lambda ids: [f" a long token {t}" for t in ids])
    labels, markers, edges = boxes(fig)
    assert len(labels) == len(tree_chart.nodes(r)) == len(markers)
    for i, (text, box) in enumerate(labels):
        assert not any(overlap(box, edge) for edge in edges), text
        assert not any(overlap(box, marker) for marker in markers), text
        assert not any(overlap(box, other) for _, other in labels[i + 1 :]), text


def test_a_long_token_is_cut_in_its_label_and_whole_in_its_hover():
    r = tree_round(sibling_kept=True)
    fig = tree_chart.tree_chart(r, lambda ids: [f"a_long_identifier_{t}" for t in ids])
    kept = next(t for t in fig.data if t.name == "kept")
    assert list(kept.text) == ["✓ a_long_id…", "✓ a_long_id…"]
    assert kept.customdata[0].startswith("✓ a_long_identifier_10<br>q = ")
