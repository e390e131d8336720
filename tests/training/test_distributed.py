"""The pieces of data-parallel training: shares of a batch, the loss's denominator that makes the
processes' gradients add up to one process's, and the collectives in two real gloo processes
(gradients summed in buckets, a process with nothing in a step, batches, weights and errors
compared). Whole runs under torchrun and Ray are in test_distributed_runs.py (slow)."""
import json
import os
import re
from pathlib import Path
from typing import Optional

import numpy
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from spacy import util
from spacy.training.initialize import init_nlp
from spacy.training.loop import subdivide_batch
from thinc.api import Linear, PyTorchWrapper, chain, fix_random_seed

from spacy_w2ner.nn.shim import grad_scaler, mark_overflow
from spacy_w2ner.training import distributed
from spacy_w2ner.training.checkpoints import Checkpoint, TRAINER
from spacy_w2ner.training.distributed import (
    Cluster,
    DataParallelLanguage,
    DistributedError,
    all_reduce_buckets,
    check_same_python_random,
    check_world_size,
    loss_denominators,
    share,
)
from spacy_w2ner.training.state import walk_parameters

from .helpers import CONFIG


class Doc:
    def __init__(self, text):
        self.text = text

    def __len__(self):
        return len(self.text.split())


class Example:
    """What the distributed pieces read of spaCy's Example: the predicted doc's length, the text."""

    def __init__(self, text):
        self.predicted = self.reference = Doc(text)


def test_the_shares_partition_a_batch_in_its_order_balanced_by_grid_cells():
    batch = [Example(" ".join(["w"] * n)) for n in (9, 1, 1, 4, 3, 1, 2, 8)]
    shares = [share(batch, rank, 3) for rank in range(3)]
    assert sorted(id(e) for s in shares for e in s) == sorted(id(e) for e in batch)
    for chosen in shares:
        assert [batch.index(e) for e in chosen] == sorted(batch.index(e) for e in chosen)
    cells = [sum(len(e.predicted) ** 2 for e in s) for s in shares]
    assert cells == [81, 64, 32]  # the longest first, each to the lightest share
    assert [len(share(batch[:1], rank, 3)) for rank in range(3)] == [1, 0, 0]  # processes with nothing


NO_DROPOUT = {"training.dropout": 0.0, "components.w2ner.model.input_dropout": 0.0,
              "components.w2ner.model.conv_dropout": 0.0, "components.w2ner.model.output_dropout": 0.0}  # fmt: skip


def _gradients(nlp) -> dict:
    """Every gradient, taken and cleared."""
    found = {}
    for parameter in walk_parameters(nlp):
        if parameter.tensor is not None and parameter.tensor.grad is not None:
            found[parameter.name] = parameter.tensor.grad.numpy().copy()
            parameter.tensor.grad = None
        elif parameter.tensor is None and parameter.node.has_grad(parameter.param_name):
            gradient = parameter.node.get_grad(parameter.param_name)
            found[parameter.name] = numpy.array(gradient)
            gradient.fill(0)
    return found


def test_the_shares_gradients_add_up_to_the_whole_batchs(corpus):
    """w2ner's loss is the mean over the batch's grid cells: each share divided by the whole
    batch's cells (its loss_denominator) gives gradients whose sum is the batch's, for the grid
    network, the listener's tok2vec and the CNN's Thinc layers alike."""
    small = {"components.w2ner.model.lstm_size": 32, "components.w2ner.model.conv_size": 16,
             "components.w2ner.model.biaffine_size": 32, "components.w2ner.model.ffnn_size": 32,
             "components.tok2vec.model.embed.width": 32, "components.tok2vec.model.encode.width": 32,
             "components.tok2vec.model.encode.depth": 1, "corpora.train.limit": 16}  # fmt: skip
    overrides = {"paths.train": str(corpus["train"]), "paths.dev": str(corpus["dev"]), **small, **NO_DROPOUT}
    nlp = init_nlp(util.load_config(CONFIG, overrides=overrides, interpolate=False))
    train = util.resolve_dot_names(nlp.config.interpolate(), ["corpora.train"])[0]
    batch = next(subdivide_batch(list(train(nlp)), 1))
    nlp.update(batch, sgd=False, losses={})
    whole = _gradients(nlp)
    parts = []
    for rank in range(3):
        mine = share(batch, rank, 3)
        nlp.update(mine, sgd=False, losses={}, component_cfg=loss_denominators(nlp, batch, []))
        parts.append(_gradients(nlp))
    assert len(whole) > 20 and all(set(part) == set(whole) for part in parts)
    for name, gradient in whole.items():
        total = sum(part[name] for part in parts)
        assert numpy.abs(total - gradient).max() <= 1e-5 * max(numpy.abs(gradient).max(), 1e-6), name
    w2ner = nlp.get_pipe("w2ner")
    assert w2ner.loss_denominator(batch) == sum(w2ner.loss_denominator(share(batch, r, 3)) for r in range(3))


def test_the_loss_denominator_counts_the_grids_training_makes_of_documents():
    """Documents train per gold sentence (the predicted Doc has none), sentences an entity
    crosses joined: the denominator counts those grids' cells, as update divides by them."""
    import spacy
    from spacy.tokens import Doc as SpacyDoc
    from spacy.training import Example as SpacyExample

    from spacy_w2ner import set_entities

    from ..conftest import SMALL_W2NER_CONFIG

    nlp = spacy.blank("en")
    w2ner = nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    words = "She had pain in her knees . It hurts .".split()
    starts = [i in (0, 7) for i in range(len(words))]
    examples = []
    for entity in [(2, 3, 4, 5), (5, 6, 7)]:  # in the first sentence; across both
        reference = SpacyDoc(nlp.vocab, words=words, sent_starts=starts)
        set_entities(reference, [("SYM", entity, None)])
        examples.append(SpacyExample(SpacyDoc(nlp.vocab, words=words), reference))
    nlp.initialize(lambda: examples)
    assert w2ner.loss_denominator(examples[:1]) == 7 * 7 + 3 * 3
    assert w2ner.loss_denominator(examples[1:]) == 10 * 10
    fix_random_seed(0)  # the grid network's dropout
    given = w2ner.update(examples, sgd=None, losses={}, loss_denominator=w2ner.loss_denominator(examples))
    fix_random_seed(0)
    assert given["w2ner"] == w2ner.update(examples, sgd=None, losses={})["w2ner"]
    fix_random_seed(0)
    halved = w2ner.update(examples, sgd=None, losses={}, loss_denominator=2 * w2ner.loss_denominator(examples))
    assert halved["w2ner"] == pytest.approx(given["w2ner"] / 2)


def test_a_resume_with_another_number_of_processes_is_refused_naming_both(tmp_path):
    (tmp_path / TRAINER).write_text(json.dumps({"world_size": 2}))
    checkpoint = Checkpoint(tmp_path)
    with pytest.raises(DistributedError, match=f"{tmp_path} was written by a run of 2 processes, this one has 1: resume it with 2"):
        check_world_size(checkpoint, 1, False, print)
    said = []
    check_world_size(checkpoint, 1, True, said.append)
    assert said and "(--force-resume)" in said[0]
    check_world_size(checkpoint, 2, False, said.append)
    (tmp_path / TRAINER).write_text("{}")  # written before runs recorded it: one process
    check_world_size(Checkpoint(tmp_path), 1, False, said.append)
    assert len(said) == 1


def test_python_random_must_be_the_same_in_every_process():
    check_same_python_random([{"python": [3, [1, 2], None]}] * 2)
    with pytest.raises(DistributedError, match="differs between process 0 and process 1"):
        check_same_python_random([{"python": [3, [1, 2], None]}, {"python": [3, [1, 3], None]}])


LEAVE_THE_RUN = """
import os, sys
from spacy_w2ner.training.distributed import Cluster

cluster = Cluster.start(-1)
cluster.barrier()
import spacy_transformers  # as building a transformer pipeline imports it, after the group is made
cluster.close()
print(sorted(name for name in (open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task"))
             if "gloo" in name))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process's threads from /proc")
def test_a_process_that_leaves_its_run_has_no_gloo_thread_left(tmp_path):
    """Cluster.close ends the process group's threads, even where torch modules imported after
    the group was made keep a reference to it (torch.distributed.nn.functional's defaults): a
    gloo thread alive while Python shuts down now and then aborts the process (SIGABRT)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    done = subprocess.run([sys.executable, "-c", LEAVE_THE_RUN], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------- two gloo processes


class Pipe:
    def __init__(self, model):
        self.model = model


class FakeLanguage:
    """A pipeline of one component, a Thinc layer and a torch module, whose update adds to
    each parameter's gradient each example's length (and the loss)."""

    def __init__(self):
        fix_random_seed(0)
        model = chain(Linear(3, 2), PyTorchWrapper(torch.nn.Linear(3, 4)))
        model.initialize()
        self.pipeline = self.components = [("pipe", Pipe(model))]
        self.pipe_names = ["pipe"]
        self.updated = []

    def update(self, examples, *, losses, component_cfg, **kwargs):
        self.updated.append([e.reference.text for e in examples])
        lengths = float(sum(len(e.predicted) for e in examples))
        for parameter in walk_parameters(self):
            if parameter.tensor is not None:
                added = torch.full_like(parameter.tensor, lengths)
                parameter.tensor.grad = added if parameter.tensor.grad is None else parameter.tensor.grad + added
            else:
                shape = parameter.node.get_param(parameter.param_name).shape
                parameter.node.inc_grad(parameter.param_name, numpy.full(shape, lengths, dtype="f"))
        losses["pipe"] = losses.get("pipe", 0.0) + lengths


def _parameters(nlp):
    return {p.name: p for p in walk_parameters(nlp)}


def _gradient_values(nlp):
    values = {}
    for name, parameter in _parameters(nlp).items():
        if parameter.tensor is not None:
            values[name] = None if parameter.tensor.grad is None else set(parameter.tensor.grad.flatten().tolist())
        else:
            has = parameter.node.has_grad(parameter.param_name)
            values[name] = set(parameter.node.get_grad(parameter.param_name).flatten().tolist()) if has else None
    return values


def _in_two_processes(rank: int, results: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=2)
    cluster = Cluster(rank, 2, dist.group.WORLD, dist.group.WORLD, owns_group=True)
    try:
        found = {"buckets": _buckets_summed(rank, cluster)}
        nlp = FakeLanguage()
        nlp.results = results
        language = DataParallelLanguage(nlp, cluster, [], 1, stop_requested=lambda: rank == 1)
        losses = {}
        scaler = grad_scaler(nlp.components[0][1].model.layers[1].shims[0])
        if rank == 1:
            mark_overflow(scaler)  # a float16 gradient overflowed in process 1
        language.update([Example("a b c"), Example("d"), Example("e f")], losses=losses)  # 3 words and 1 + 2
        found["step 1"] = {"updated": list(nlp.updated), "gradients": _gradient_values(nlp), "losses": dict(losses),
                           "stop": language.stop_agreed, "overflow": scaler.found_inf}  # fmt: skip
        scaler.update()  # the step's end clears the overflow
        nlp.updated = []
        for parameter in _parameters(nlp).values():  # after an optimizer step: Thinc's zeroed, torch's None
            if parameter.tensor is not None:
                parameter.tensor.grad = None
        for name in ("W", "b"):
            nlp.components[0][1].model.layers[0].get_grad(name).fill(0)
        language.update([Example("g h")], losses=losses)  # process 1 has nothing
        found["step 2"] = {"updated": list(nlp.updated), "gradients": _gradient_values(nlp), "losses": losses}
        found["accumulated"] = _step_of_two_sub_batches(rank, cluster, nlp)
        found["errors"] = _errors(rank, cluster, nlp, language)
        cluster.barrier()
    finally:
        # Not dist.destroy_process_group() alone: with the cluster still holding the group, gloo's
        # threads outlived it and now and then aborted process 1 as Python shut down ("terminate
        # called without an active exception", twice in the suite, never alone).
        cluster.close()
    found["gloo threads"] = _gloo_threads()
    Path(results, f"{rank}.json").write_text(json.dumps(found, default=sorted))


def _step_of_two_sub_batches(rank: int, cluster: Cluster, nlp) -> dict:
    """A step of ``accumulate_gradient = 2``: spaCy's sub-batches (shortest first), each shared."""
    nlp.updated = []
    for parameter in _parameters(nlp).values():
        if parameter.tensor is not None:
            parameter.tensor.grad = None
    for name in ("W", "b"):
        nlp.components[0][1].model.layers[0].get_grad(name).fill(0)
    language, losses = DataParallelLanguage(nlp, cluster, [], 2, stop_requested=lambda: False), {}
    language.update([Example("a b c d"), Example("e"), Example("f g h"), Example("i j")], losses=losses)
    return {"updated": list(nlp.updated), "gradients": _gradient_values(nlp), "losses": losses}


def _gloo_threads() -> Optional[list]:
    """The names of this process's gloo threads (None where /proc does not list them)."""
    tasks = Path("/proc/self/task")
    if not tasks.exists():
        return None
    return sorted(name for name in ((task / "comm").read_text().strip() for task in tasks.iterdir()) if "gloo" in name)


def _buckets_summed(rank: int, cluster: Cluster) -> list:
    tensors = [torch.full((5,), float(rank + 1)), torch.full((3, 2), 10.0 * (rank + 1)), torch.ones(2, dtype=torch.float64)]
    all_reduce_buckets(tensors, cluster.group, bucket_bytes=24)  # the first two in buckets of their own
    return [t.flatten().tolist() for t in tensors]


def _errors(rank: int, cluster: Cluster, nlp, language) -> dict:
    """The errors each process raises, the same in both."""
    said = {}
    try:  # another batch in process 1
        language.update([Example("same")] if rank == 0 else [Example("other")], losses={})
    except DistributedError as err:
        said["batch"] = str(err)
    parameter = _parameters(nlp)["pipe/2:pytorch/shim0#bias"]
    if rank == 1:
        with torch.no_grad():
            parameter.tensor[0] += 1e-7
    try:
        cluster.check_weights_agree(nlp, "after step 7")
    except DistributedError as err:
        said["weights"] = str(err)
    try:
        cluster.on_main(_refuse)
    except ValueError as err:
        said["on main"] = str(err)
    distributed.SHARED_FILE_ATTEMPTS = 2
    results = Path(nlp.results)
    run_file = results / "run.json" if rank == 0 else results / "elsewhere" / "run.json"  # another machine's disk
    if rank == 0:
        run_file.write_text("{}")
    cluster.barrier()
    try:
        cluster.check_same_run_directory(run_file)
    except DistributedError as err:
        said["run directory"] = str(err)
    return said


def _refuse():
    raise ValueError("the run directory holds another run")


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    mp.spawn(_in_two_processes, args=(str(results),), nprocs=2, join=True)
    return [json.loads((results / f"{rank}.json").read_text()) for rank in range(2)]


def test_the_processes_leave_no_gloo_thread_behind(two_processes):
    # destroy_process_group() alone left three in each (gloo_tcp_loop, pt_gloo_runloop x2)
    assert all(found["gloo threads"] in ([], None) for found in two_processes)


def test_gradients_are_summed_in_buckets_of_one_device_and_dtype(two_processes):
    for found in two_processes:
        assert found["buckets"] == [[3.0] * 5, [30.0] * 6, [2.0, 2.0]]


def test_each_process_updates_on_its_share_and_gets_the_summed_gradients_losses_and_requests(two_processes):
    first, second = (found["step 1"] for found in two_processes)
    assert first["updated"] == [["a b c"]] and second["updated"] == [["d", "e f"]]
    for found in (first, second):
        assert found["gradients"] == {name: [6.0] for name in found["gradients"]} and len(found["gradients"]) == 4
        assert found["losses"] == {"pipe": 6.0}
        assert found["stop"] is True  # process 1 was asked to stop: both stop
        assert found["overflow"] is True  # and both skip the step its float16 gradients overflowed in


def test_a_step_of_several_sub_batches_shares_each_and_sums_them_all(two_processes):
    """accumulate_gradient = 2: spaCy's sub-batches of the step (its ``subdivide_batch``: the
    shortest examples first), each shared between the processes, one sum at the step's end."""
    first, second = (found["accumulated"] for found in two_processes)
    assert first["updated"] == [["i j"], ["a b c d"]] and second["updated"] == [["e"], ["f g h"]]
    for found in (first, second):
        assert found["gradients"] == {name: [10.0] for name in found["gradients"]}
        assert found["losses"] == {"pipe": 10.0}


def test_a_process_with_nothing_in_a_step_takes_part_and_gets_the_gradient(two_processes):
    first, second = (found["step 2"] for found in two_processes)
    assert first["updated"] == [["g h"]] and second["updated"] == []
    for found in (first, second):
        assert found["gradients"] == {name: [2.0] for name in found["gradients"]}
        assert found["losses"] == {"pipe": 8.0}


def test_processes_that_disagree_stop_naming_what_differs(two_processes):
    for found in two_processes:
        errors = found["errors"]
        assert errors["batch"].startswith("process 1 read another batch than process 0 in this step")
        assert errors["weights"].startswith("the processes' weights differ after step 7: pipe/2:pytorch/shim0#bias is not the same in process 1")
        assert errors["on main"] == "the run directory holds another run"
        assert re.fullmatch(
            r"process 1 on \S+ cannot see \S+/run.json as process 0 on \S+ wrote it: --output must be a "
            r"directory every machine of the run reaches \(a shared file system\), given as the same path",
            errors["run directory"],
        )
