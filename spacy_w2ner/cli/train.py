"""Training: train (spacy train with checkpoints, resumed exactly with --resume)."""
from pathlib import Path
from typing import Optional

import typer

from ._util import _fail, app

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
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU id, or -1 for the CPU"),
):
    """spacy train with checkpoints: resumes exactly after a kill (--resume), stops cleanly on
    SIGINT/SIGTERM with a checkpoint. Config overrides as spacy train takes them (--paths.train ...).

    Exit code 0 when the run has finished; 128 + the signal's number when a signal stopped it
    (continue with --resume); 1 when the run cannot start or go on (the line says why).
    """
    from spacy.cli._util import import_code, parse_config_overrides

    from ..training import RESUME_ERRORS, RunFinished
    from ..training import train as train_run

    if checkpoint_every < 0:
        raise typer.BadParameter(f"--checkpoint-every must be 0 or more, got {checkpoint_every}")
    import_code(code)
    try:
        outcome = train_run(
            config_path, output, overrides=parse_config_overrides(ctx.args), use_gpu=gpu_id, resume=resume,
            force_resume=force_resume, checkpoint_every=checkpoint_every, keep=keep,
        )  # fmt: skip
    except RunFinished as finished:
        typer.echo(str(finished))
        return
    except RESUME_ERRORS as err:
        _fail(str(err))
    if not outcome.finished:
        typer.echo(f"stopped after step {outcome.steps}: continue with --resume", err=True)
        raise typer.Exit(128 + outcome.signal_number)
