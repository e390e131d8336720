"""Resident memory of this process from /proc/self/status (Linux).

``ru_maxrss`` is not used: a child started by a large parent can inherit the
parent's high-water mark, while VmHWM belongs to this process image alone.
"""


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
