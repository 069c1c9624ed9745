"""Imported by Python at start-up under `scripts/as_laptop.sh`: bitsandbytes sees a CPU without
AVX512-BF16, as on most laptops, so it registers no fused 4-bit CPU kernel.

bitsandbytes asks its native library (`has_avx512bf16`, in `bitsandbytes.functional`) and
registers the fused kernel only when it answers yes (`backends/cpu/ops.py`). The answer is
replaced right after that module runs, before anything imports it from there.
"""

import importlib.abc
import importlib.machinery
import sys


class _NoAvx512Bf16(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "bitsandbytes.functional":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.has_avx512bf16 = lambda: False

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NoAvx512Bf16())
