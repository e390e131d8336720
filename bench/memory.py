"""Resident memory of this process from /proc/self/status, and the machine's CPU pressure from
/proc/pressure/cpu (Linux).

``ru_maxrss`` is not used: a child started by a large parent can inherit the
parent's high-water mark, while VmHWM belongs to this process image alone.
"""
from typing import Optional


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_mb() -> float:
    """Resident set size now."""
    return _status_kb("VmRSS") / 1024


def peak_rss_mb() -> float:
    """Peak resident set size (high-water mark) of this process."""
    return _status_kb("VmHWM") / 1024


def reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so a later peak is the step's own."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def cpu_stall_us() -> Optional[int]:
    """The kernel's total of microseconds some task waited for a CPU (pressure stall information);
    None where the kernel does not count it."""
    try:
        with open("/proc/pressure/cpu") as pressure:
            return int(pressure.readline().split("total=")[1])
    except (OSError, IndexError, ValueError):
        return None
