"""Where a measurement ran: the facts every recorded figure carries (CPU model and its vector
capability, threads, torch, GPU, date), for the bench's JSON and the scripts that write
docs/bench/.
"""

import datetime
import os
import platform
from pathlib import Path

import torch

from specdemo.runtime import threads


def machine(device) -> dict:
    """Where a run ran: CPU model and its vector capability, cores, torch, GPU, date."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        "cpu_limit": threads.limit().sentence,  # the CPUs and quota this process may use
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": gpu_name(device),
        "date": datetime.date.today().isoformat(),
    }


def cpu_model() -> str:
    """The CPU's model name as Linux reports it; platform's processor string elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def gpu_name(device) -> str | None:
    """The CUDA device's name and compute capability; None on a CPU."""
    if torch.device(device).type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor})"
