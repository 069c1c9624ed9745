"""The answer as labelled tokens: ``spans``' ``(text, kind, source)`` triples, drawn by a
``gr.HTML`` template of our own, so each token carries its kind as a class (style.CSS gives each
kind its colour and a cue without colour) and a guess its source, copied or drafted, as a class
(a copied guess has a bar above it) and a tooltip; a screen reader hears a rejected draft named
as one, and a rejected copy as a copy. The API returns the spans as ``[text, kind, source]``.

One key per answer (``token_key``) stands above its panes, outside any pane's label, so no label
hides it and the panes it serves draw each kind alike.
"""

import gradio as gr

# What a screen reader says before a token of the kind, by the guess's source (the kind's class
# hides it from view).
ANNOUNCED = {"rejected": {"drafted": "rejected draft: ", "copied": "rejected copy: "}}
# A guess's source in words: its tooltip, and after its name in the key.
SOURCE_WORDS = {
    "copied": "copied from earlier in the text: no model ran",
    "drafted": "drafted by the draft model",
}
KEY_SOURCES = {
    "copied": "a guess copied from earlier in the text, no model: a bar above it",
    "drafted": "a guess the draft model made",
}
# One token: an announced kind is a deletion with its words first; any other carries its kind as
# a class; a guess also its source, as a class and a tooltip. Handlebars escapes the text. On
# one line: the template's own whitespace would show.
CLASSES = (
    'class="tok {{this.[1]}}{{#if this.[2]}} {{this.[2]}}{{/if}}"'
    '{{#if this.[2]}} title="{{lookup @root.sources this.[2]}}"{{/if}}'
)
TOKEN = (
    "{{#if (lookup @root.announced this.[1])}}<del "
    + CLASSES
    + '><span class="sr-only">{{lookup (lookup @root.announced this.[1]) this.[2]}}</span>'
    + "{{this.[0]}}</del>{{else}}<span "
    + CLASSES
    + ">{{this.[0]}}</span>{{/if}}"
)
TEMPLATE = '<div class="tok-text">{{#each value}}' + TOKEN + "{{/each}}</div>"
# The key: each kind drawn as in the text, then what it means; then each source of a guess.
ENTRY = (
    '<span class="key-entry"><span class="tok {{this.[0]}}">{{this.[1]}}</span> {{this.[2]}}'
    "</span> "
)
KEY_TEMPLATE = (
    '<div class="tok-legend"><span class="key-title">Key:</span> {{#each value}}'
    + ENTRY
    + '{{/each}}<span class="key-title">Guesses:</span> {{#each guesses}}'
    + ENTRY
    + "{{/each}}</div>"
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
        sources=SOURCE_WORDS,
    )


def token_key(kinds: list[str], elem_id: str) -> gr.HTML:
    """The key to `kinds`, each drawn as the panes draw it, with what it means; then where a
    guess came from, each source drawn on a guess the target kept."""
    return gr.HTML(
        key_entries(kinds),
        html_template=KEY_TEMPLATE,
        js_on_load=None,
        show_label=False,
        container=False,
        padding=False,
        elem_id=elem_id,
        elem_classes="token-pane token-key",
        guesses=source_entries(),
    )


def key_entries(kinds: list[str]) -> list[list[str]]:
    """The key's entries for `kinds`: [classes, name, meaning]."""
    return [[kind, kind, MEANING[kind]] for kind in kinds]


def source_entries() -> list[list[str]]:
    """The key's entries for a guess's sources (KEY_SOURCES), each drawn on a kept guess."""
    return [[f"accepted {source}", source, words] for source, words in KEY_SOURCES.items()]
