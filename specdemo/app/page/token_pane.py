"""The answer as labelled tokens: ``render``'s spans, ``(text, kind)`` pairs, drawn by a
``gr.HTML`` template of our own, so each token carries its kind as a class (style.CSS gives each
kind its colour and a cue without colour) and a screen reader hears a rejected draft named as
one. The API returns the spans as ``[text, kind]`` pairs.

One key per answer (``token_key``) stands above its panes, outside any pane's label, so no label
hides it and the panes it serves draw each kind alike.
"""

import gradio as gr

# What a screen reader says before a token of the kind (the kind's class hides it from view).
ANNOUNCED = {"rejected": "rejected draft: "}
# One token: an announced kind is a deletion with its words first; any other carries its kind as
# a class. Handlebars escapes the text. On one line: the template's own whitespace would show.
TOKEN = (
    "{{#if (lookup @root.announced this.[1])}}"
    '<del class="tok {{this.[1]}}"><span class="sr-only">{{lookup @root.announced this.[1]}}'
    "</span>{{this.[0]}}</del>"
    '{{else}}<span class="tok {{this.[1]}}">{{this.[0]}}</span>{{/if}}'
)
TEMPLATE = '<div class="tok-text">{{#each value}}' + TOKEN + "{{/each}}</div>"
# The key: each kind drawn as in the text, then what it means.
KEY_TEMPLATE = (
    '<div class="tok-legend"><span class="key-title">Key:</span> {{#each value}}'
    '<span class="key-entry"><span class="tok {{this.[0]}}">{{this.[0]}}</span> {{this.[1]}}'
    "</span> {{/each}}</div>"
)
# What each kind means, after its name in the key.
MEANING = {
    "accepted": "a guess the target kept",
    "resampled": "drawn by the target where it rejected a guess",
    "bonus": "the target's extra token after every guess was kept",
    "rejected": "a guess the target turned down",
    "target": "the target's own step, no guess",
}


def token_pane(label: str, elem_id: str) -> gr.HTML:
    """A pane of spans, its label named to the API only: on the page a header and
    ``token_key`` stand above it, where no label chip covers the text."""
    return gr.HTML(
        [],
        html_template=TEMPLATE,
        js_on_load=None,
        label=label,
        show_label=False,
        container=True,
        padding=True,
        elem_id=elem_id,
        elem_classes="token-pane",
        announced=ANNOUNCED,
    )


def token_key(kinds: list[str], elem_id: str) -> gr.HTML:
    """The key to `kinds`: each drawn as the panes draw it, with what it means."""
    return gr.HTML(
        [[kind, MEANING[kind]] for kind in kinds],
        html_template=KEY_TEMPLATE,
        js_on_load=None,
        show_label=False,
        container=False,
        padding=False,
        elem_id=elem_id,
        elem_classes="token-pane token-key",
    )
