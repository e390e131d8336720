"""Copies from the host to a GPU that do not wait for it (``nn/transfers.py``)."""
import numpy
import pytest
import torch

from spacy_w2ner.nn.transfers import to_device


def test_on_the_cpu_an_array_becomes_a_tensor_of_its_values_and_dtype():
    rows = numpy.array([3, 0, 2], dtype=numpy.int64)
    tensor = to_device(rows, torch.device("cpu"))
    assert tensor.dtype == torch.int64 and tensor.tolist() == [3, 0, 2]
    strided = numpy.arange(10, dtype=numpy.int32)[::3]  # not contiguous
    assert to_device(strided, torch.device("cpu")).tolist() == [0, 3, 6, 9]
    host = torch.tensor([1.5, 2.5])
    assert to_device(host, torch.device("cpu")) is host


def test_a_device_array_of_another_library_is_shared_through_dlpack():
    class Foreign:  # stands in for a CuPy array: neither numpy nor torch, with DLPack
        def __init__(self, tensor):
            self._tensor = tensor

        def __dlpack__(self, **kwargs):
            return self._tensor.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._tensor.__dlpack_device__()

    source = torch.arange(4.0)
    shared = to_device(Foreign(source), torch.device("cpu"))
    source[0] = 9.0
    assert shared.tolist() == [9.0, 1.0, 2.0, 3.0]  # the same memory, not a copy


@pytest.mark.gpu
def test_a_copy_to_the_gpu_holds_the_values_the_array_had_when_asked():
    # The copy does not wait for the device, yet the caller may change its array at once: the
    # values go through pinned memory taken at the call.
    device = torch.device("cuda")
    busy = torch.randn(4096, 4096, device=device)
    for _ in range(20):  # queued work, so the copy would still be waiting if it read the array late
        busy = busy @ busy / 64
    rows = numpy.arange(100_000, dtype=numpy.int64)
    tensor = to_device(rows, device)
    rows[:] = -1
    assert tensor.device.type == "cuda" and torch.equal(tensor.cpu(), torch.arange(100_000))
    assert torch.equal(to_device(torch.tensor([7, 8]), device).cpu(), torch.tensor([7, 8]))
