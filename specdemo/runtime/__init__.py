"""How the models run: forward passes, the draft's and the target's step objects (eager, static,
graph) with the one chooser of their mode, KV-cache surgery and the threads torch computes with
(``lm``, ``steps``, ``modes``, ``kv``, ``threads``)."""
