"""Memory a new allocation can still get, on a GPU or on the host (a container's limit included):
what the training plan is checked against before training starts (``model.training_plan``)."""
from typing import Optional


def available_memory_bytes(device=None) -> Optional[float]:
    """Memory a new allocation can still get: on a CUDA device its free memory; on the host the
    kernel's MemAvailable, or what is left under this process's cgroup limit if that is less
    (a container's). None where it cannot be read."""
    if device is not None and getattr(device, "type", "cpu") == "cuda":
        import torch

        return float(torch.cuda.mem_get_info(device)[0])
    available = _meminfo_available()
    left = _cgroup_left()
    found = [value for value in (available, left) if value is not None]
    return min(found) if found else None


def _meminfo_available() -> Optional[float]:
    try:
        with open("/proc/meminfo") as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_left() -> Optional[float]:
    """cgroup v2's memory.max less memory.current, for this process's group."""
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit == "max":
            return None
        return float(limit) - float(open("/sys/fs/cgroup/memory.current").read())
    except (OSError, ValueError):
        return None
