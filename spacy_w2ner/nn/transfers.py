"""Copies from the host to a GPU that do not wait for it (``to_device``).

A blocking copy from host memory to a CUDA device (``tensor.to(device)``, ``torch.as_tensor(...,
device=...)``) returns only once the device has run every kernel queued before it and the copy.
When predicting, the host launches a pass and then copies the next one's inputs (the encoder's
word pieces, the rows its output goes to, the grid network's lengths): each such copy makes the
host idle while the device runs the pass, and the device idle while the host prepares the next,
the more so once a pass is one CUDA graph replay. A copy from pinned memory that does not block
lets the two overlap. The pinned block comes from torch's caching host allocator, which keeps it
from being reused until the copy is done, so the caller's array may change right after. CuPy's
own copies of numpy arrays (Thinc's ``ops.asarray``) already go so.
"""
import numpy
import torch


def to_device(array, device: torch.device) -> torch.Tensor:
    """``array`` (numpy, a host tensor, or a device array: CuPy, torch) as a tensor on ``device``:
    from the host to a GPU through pinned memory, without waiting for the device. A CuPy array is
    shared through DLPack, as Thinc's ``xp2torch`` shares it."""
    if isinstance(array, numpy.ndarray):
        array = torch.from_numpy(numpy.ascontiguousarray(array))
    elif not isinstance(array, torch.Tensor):
        return torch.from_dlpack(array).to(device)
    if array.device.type == "cpu" and torch.device(device).type == "cuda":
        return array.pin_memory().to(device, non_blocking=True)
    return array.to(device)
