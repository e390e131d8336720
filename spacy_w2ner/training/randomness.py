"""The random generators a training step draws from, as JSON values a new process can set
back, and their seeds in a data-parallel run.

Python's ``random`` orders the data (spaCy shuffles the corpus with it, augmenters draw from it):
in a data-parallel run it is the same in every process, so every process reads the same batches.
numpy's, torch's and CuPy's generators draw the dropout masks: each process seeds them its own
way (``seed_process_generators``), so the processes' shares of a batch get masks of their own,
and each saves its states in a checkpoint of its own (``checkpoints.random_states_file``).
"""
import base64
import random

import numpy


def seed_process_generators(seed: int, rank: int) -> None:
    """Seed numpy's, torch's and CuPy's generators for process ``rank`` from the config's
    ``seed`` (process 0 keeps the seed itself: a run of one process is ``spacy train``'s), and
    leave Python's as it was (the same in every process)."""
    from thinc.api import fix_random_seed

    python_state = random.getstate()
    process_seed = seed if rank == 0 else int(numpy.random.SeedSequence([seed, rank]).generate_state(1)[0])
    fix_random_seed(process_seed)
    random.setstate(python_state)


def capture_random_states() -> dict:
    """Python's, numpy's and torch's (CPU and CUDA) random states, as JSON values."""
    import torch

    version, internal, gauss = random.getstate()
    name, keys, position, has_gauss, cached = numpy.random.get_state()
    states = {
        "python": [version, list(internal), gauss],
        "numpy": [name, keys.tolist(), position, has_gauss, cached],
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = [_b64(state) for state in torch.cuda.get_rng_state_all()]
    return states


def restore_random_states(states: dict) -> None:
    """Set the generators to ``capture_random_states``' values."""
    import torch

    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, position, has_gauss, cached = states["numpy"]
    numpy.random.set_state((name, numpy.asarray(keys, dtype=numpy.uint32), position, has_gauss, cached))
    torch.set_rng_state(_tensor(states["torch"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_tensor(state) for state in states["cuda"]])


def python_random_state() -> list:
    """Python's random state alone, as a JSON value (``stream.py`` keeps one an epoch)."""
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def set_python_random_state(state: list) -> None:
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


def _b64(tensor) -> str:
    return base64.b64encode(tensor.numpy().tobytes()).decode("ascii")


def _tensor(text: str):
    import torch

    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)
