"""The panes and their key say where each guess came from, copied or drafted, in a shape, in
words and to a screen reader, not in colour alone (the browser tests in test_seats.py draw it)."""

import re

from specdemo.app.page import style, token_pane
from specdemo.app.page.style import SPEC_KINDS


def test_the_key_names_each_kind_then_each_source_of_a_guess_drawn_on_a_kept_guess():
    key = token_pane.token_key(SPEC_KINDS, "key")
    assert [name for _, name, _ in key.value] == list(SPEC_KINDS)
    guesses = key.props["guesses"]
    assert [(classes, name) for classes, name, _ in guesses] == [
        ("accepted copied", "copied"),
        ("accepted drafted", "drafted"),
    ]
    copied, drafted = (words for _, _, words in guesses)
    assert "copied from earlier in the text" in copied and "bar above" in copied
    assert "draft model" in drafted
    assert "{{#each guesses}}" in token_pane.KEY_TEMPLATE  # drawn after the kinds


def test_a_guess_carries_its_source_as_a_class_and_a_tooltip_and_a_rejected_copy_is_named():
    pane = token_pane.token_pane("Speculative", "pane")
    # The template draws span[2] (the source) as a class beside the kind, and its words as the
    # token's title, in both branches: a kept guess and a rejected one (a <del>).
    classes = 'class="tok {{this.[1]}}{{#if this.[2]}} {{this.[2]}}{{/if}}"'
    title = 'title="{{lookup @root.sources this.[2]}}"'
    assert token_pane.TEMPLATE.count(classes) == token_pane.TEMPLATE.count(title) == 2
    assert pane.props["sources"] == {
        "copied": "copied from earlier in the text: no model ran",
        "drafted": "drafted by the draft model",
    }
    said = pane.props["announced"]["rejected"]
    assert said == {"drafted": "rejected draft: ", "copied": "rejected copy: "}
    assert "{{lookup (lookup @root.announced this.[1]) this.[2]}}" in token_pane.TEMPLATE


def test_a_copied_guess_has_a_shape_of_its_own_that_no_kind_uses():
    """The bar above a copied guess is a shadow: no kind's cue (decoration, outline) uses one,
    so it adds to a kept or rejected guess's own look without hiding it."""
    rule = re.search(r"\.token-pane \.tok\.copied \{([^}]*)\}", style.CSS)
    assert rule and "box-shadow: inset 0 3px 0" in rule.group(1)
    assert "background" not in rule.group(1) and "color:" not in rule.group(1)  # no paint
    kinds = re.findall(r"\.tok\.(\w+)[^{]*\{([^}]*)\}", style.CSS)
    assert not [kind for kind, look in kinds if kind != "copied" and "box-shadow" in look]
