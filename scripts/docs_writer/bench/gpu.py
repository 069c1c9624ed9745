"""docs/bench/gpu.md's block: the architectures the dispatch model prices, from the inputs
measured in dispatch.json (BENCHMARKS shows the pairs and trees it predicts)."""

from docs_writer.cells import nth_table
from docs_writer.core import load
from specdemo.bench import dispatch_measure
from specdemo.cost import dispatch


def dispatch_archs() -> str:
    report = dispatch.report_from_measured(load("dispatch.json"))
    return nth_table(dispatch_measure.markdown(report), 0)


BLOCKS = {"dispatch-archs": dispatch_archs}
