"""bench/active_learning.py: each round's training moves the learning rate's schedule on, as
spaCy's loop does (round 7's first runs trained at a learning rate of 0: ``nlp.update`` alone
never steps Thinc's schedules, so every model predicted each token as an entity)."""
import importlib.util
import random
from pathlib import Path

import numpy
import pytest

from spacy_w2ner.nn.shim import torch_module

from ..conftest import HAS_MINILM, make_examples

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_active_learning", ROOT / "bench" / "active_learning.py")
active_learning = importlib.util.module_from_spec(spec)
spec.loader.exec_module(active_learning)


@pytest.mark.skipif(not HAS_MINILM, reason="needs the bundled MiniLM encoder")
def test_training_steps_follow_the_recipes_learning_rate_schedule_and_change_the_weights():
    nlp, optimizer, training = active_learning.pipeline_and_optimizer(None, 20)
    examples = [active_learning.example_of(nlp, example.reference) for example in make_examples(nlp)]
    nlp.initialize(lambda: examples, sgd=optimizer)
    weights = {name: numpy.array(value, copy=True) for name, value in grid_weights(nlp).items()}
    assert optimizer.learn_rate == 0.0  # the warm-up's first step
    active_learning.train_steps(nlp, optimizer, examples, 3, training, random.Random(0))
    schedule = nlp.config["training"]["optimizer"]["learn_rate"]
    peak, warmup, total = schedule["initial_rate"], 2, 20  # a tenth of the 20 steps warms up
    assert optimizer.learn_rate == pytest.approx(peak * (1 - (3 - warmup) / (total - warmup)))
    assert any(not numpy.array_equal(weights[name], value) for name, value in grid_weights(nlp).items())


def grid_weights(nlp) -> dict:
    """The grid network's torch weights, by name."""
    module = torch_module(nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0])
    return {name: tensor.detach().numpy() for name, tensor in module.state_dict().items()}
