"""``python -m spacy_w2ner adapt-encoder ENCODER TEXTS --output DIR``: an encoder's masked-LM
training continued on a domain's raw text, resumed exactly after a kill.

A clinical team has far more unlabelled notes than annotated ones; an encoder that has read
them (as TriG-NER's BioBERT read CADEC's training sentences) gives the grid model better word
vectors. This package continues an encoder's masked-language-model training on raw texts
(whole words masked, sequences packed as the w2ner training packs them) and writes DIR, an
encoder folder a w2ner config's ``name`` points at (and ``transformers``' ``AutoModel`` loads).

* ``options``: the settings (the defaults: TriG-NER's recipe) and the run's plan in steps;
* ``corpus``: texts -> held-out part, wordpiece sequences, each step's batch;
* ``masking``: whole-word masking and packing: a step's model inputs;
* ``masked_lm``: the encoder as ``AutoModelForMaskedLM``, its head, the loss, the saved folder;
* ``loop``: the steps, evaluations on the held-out texts, checkpoints, the exact resume;
* ``directory``: DIR's record (``adapt.json``), checkpoints and the encoder installed at the end.

Sentence encoders ship no masked-LM head: the head then starts untrained (its output layer tied
to the word embeddings) and trains alone first (``head_steps``), so that the encoder's first
updates do not come from a random head.
"""
import sys
from pathlib import Path
from typing import IO, Dict, Optional, Sequence

from ..loop import Outcome, info_line
from ..run import RunDirectory
from .directory import adaptation_directory, install_encoder, prepare_adaptation
from .options import AdaptError, AdaptFinished, AdaptOptions, Plan

# transformers and spacy-transformers (seconds to import) are imported when a run starts.


def adapt_encoder(
    encoder: str, texts: Sequence[str], output: Path, options: Optional[AdaptOptions] = None, *, resume: bool = False,
    source: Optional[Dict[str, object]] = None, command: Optional[str] = None, progress: bool = True,
    stdout: Optional[IO] = None, stderr: Optional[IO] = None,
) -> Outcome:  # fmt: skip
    """Continue ``encoder``'s masked-LM training on ``texts`` into ``output`` (from its newest
    good checkpoint with ``resume``); ``source`` (where the texts came from) and ``command`` go
    into the record. AdaptError when it cannot start, AdaptFinished when the run to resume has
    finished; an Outcome that is not ``finished`` when a signal stopped it."""
    from ...encoders.assets import AssetError, encoder_folder
    from .corpus import texts_sha256
    from .masked_lm import save_encoder

    options, stdout = options or AdaptOptions(), stdout or sys.stdout
    options.check()
    try:
        folder = encoder_folder(encoder)
    except AssetError as err:
        raise AdaptError(str(err)) from None
    directory = adaptation_directory(output)
    identity = {"encoder": str(folder), "texts_sha256": texts_sha256(texts), **options.settings()}
    say = lambda line: print(info_line(line), file=stdout, flush=True)  # noqa: E731
    try:
        checkpoint = prepare_adaptation(directory, identity, resume, say)
        adaptation = start_adaptation(folder, texts, directory, checkpoint, options, stdout, stderr)
        record = adaptation.record
        if checkpoint is None:
            record.update(command=command, identity=identity, texts={**(source or {}), **adaptation.corpus.facts}, resumes=0)
        else:
            record["resumes"] = record.get("resumes", 0) + 1
            adaptation.resume_from(checkpoint)
        adaptation.write_record(finished=False)
        outcome = adaptation.run(progress)
        if outcome.finished:
            names = install_encoder(directory, lambda path: save_encoder(adaptation.lm, adaptation.tokenizer, folder, path))
            adaptation.write_record(finished=True, files=names)
            directory.remove_checkpoints()
            say(f"the adapted encoder is in {directory.path}: a config's transformer name (or AutoModel.from_pretrained) takes it")
        return outcome
    finally:
        directory.release()


def _longest_sequence(folder: Path, tokenizer) -> Optional[int]:
    """The most wordpieces the encoder takes a sequence of: its tokenizer's ``model_max_length``, or
    where that is unset (a huge number), its config's ``max_position_embeddings`` (None if neither)."""
    from transformers import AutoConfig

    if tokenizer.model_max_length < 1_000_000:
        return int(tokenizer.model_max_length)
    return getattr(AutoConfig.from_pretrained(str(folder)), "max_position_embeddings", None)


def start_adaptation(folder: Path, texts: Sequence[str], directory: RunDirectory, checkpoint, options: AdaptOptions,
                     stdout: Optional[IO] = None, stderr: Optional[IO] = None):  # fmt: skip
    """The ``loop.Adaptation``: the masked LM (a fresh one from ``folder``, or the checkpoint's),
    the corpus and the plan."""
    import torch
    from transformers import AutoTokenizer

    from .corpus import build_corpus
    from .loop import MODEL, Adaptation
    from .masked_lm import load_masked_lm

    device = torch.device(f"cuda:{options.gpu_id}" if options.gpu_id >= 0 else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    if not tokenizer.is_fast:
        raise AdaptError(f"{folder}'s tokenizer has no fast version (tokenizer.json): whole-word masking needs its word ids")
    longest = _longest_sequence(folder, tokenizer)
    if longest is not None and options.max_length > longest:
        raise AdaptError(f"--max-length {options.max_length} is over the {longest} wordpieces {folder.name} takes a sequence of")
    corpus = build_corpus(texts, tokenizer, options.max_length, options.held_out)
    record = directory.record if checkpoint is not None else {}
    lm, head_is_new = load_masked_lm(checkpoint.path / MODEL if checkpoint else folder, options.seed)
    head_is_new = record["head"]["new"] if checkpoint is not None else head_is_new
    plan = Plan.of(options, len(corpus.train), head_is_new)
    record.update(encoder=str(folder), head={"new": head_is_new, "steps": plan.head_steps}, plan={
        "head_steps": plan.head_steps, "encoder_steps": plan.encoder_steps, "total_steps": plan.total,
        "steps_per_epoch": plan.steps_per_epoch, "checkpoint_every": plan.checkpoint_every,
    })  # fmt: skip
    lm.model.to(device).train()
    adaptation = Adaptation(lm, tokenizer, corpus, plan, options, directory, record, device, stdout, stderr)
    _say_plan(adaptation, folder, head_is_new)
    return adaptation


def _say_plan(adaptation, folder: Path, head_is_new: bool) -> None:
    facts, plan, options = adaptation.corpus.facts, adaptation.plan, adaptation.options
    adaptation.say(f"adapting {folder} on {facts['training_texts']} texts ({facts['training_sequences']} sequences, "
                   f"{facts['training_wordpieces']} wordpieces), {facts['held_out_texts']} held out")  # fmt: skip
    if plan.head_steps:
        new = "starts untrained (the encoder ships none; its output layer is tied to the word embeddings) and " if head_is_new else ""
        adaptation.say(f"the masked-LM head {new}trains alone for {plan.head_steps} steps at {options.head_learning_rate}")
    elif head_is_new:
        adaptation.say("the masked-LM head starts untrained (the encoder ships none) and trains with the encoder from the first step")
    adaptation.say(f"then the encoder and the head train for {plan.encoder_steps} steps "
                   f"({plan.encoder_steps / plan.steps_per_epoch:.2f} epochs of {plan.steps_per_epoch} steps) at {options.learning_rate}")  # fmt: skip
    packing = "packed into rows" if adaptation.offset is not None else "padded (the encoder does not pack)"
    adaptation.say(f"sequences of at most {options.max_length} wordpieces in batches of {options.batch_size}, {packing}")
    if options.training_dtype == "bfloat16":
        from ...nn.bfloat16 import without_bfloat16_instructions
        from ...nn.cpu import bfloat16_instructions, cpu_model

        instructions = bfloat16_instructions()
        adaptation.say("each step's passes on a bfloat16 copy of the float32 weights, "
                       + (f"with {', '.join(instructions)}" if instructions else f"though {without_bfloat16_instructions(cpu_model())}"))  # fmt: skip


__all__ = ["AdaptError", "AdaptFinished", "AdaptOptions", "adapt_encoder"]
