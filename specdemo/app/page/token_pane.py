"""The answer as labelled tokens: ``render``'s spans, ``(text, kind)`` pairs, drawn by a
``gr.HTML`` template of our own, so each token carries its kind as a class (style.CSS gives each
kind its colour and a cue without colour) and a screen reader hears a rejected draft named as
one. The API returns the spans as ``[text, kind]`` pairs.
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
TEMPLATE = (
    '<div class="tok-legend">{{#each kinds}}<span class="tok {{this}}">{{this}}</span> {{/each}}'
    '</div><div class="tok-text">{{#each value}}' + TOKEN + "{{/each}}</div>"
)


def token_pane(label: str, kinds: list[str], elem_id: str) -> gr.HTML:
    """A pane of spans under a legend of `kinds`."""
    return gr.HTML(
        [],
        html_template=TEMPLATE,
        js_on_load=None,
        label=label,
        show_label=True,
        container=True,
        padding=True,
        elem_id=elem_id,
        elem_classes="token-pane",
        kinds=list(kinds),
        announced=ANNOUNCED,
    )
