"""The w2ner component: registration, training, prediction, serialization, edge cases."""
import json
import random
import warnings

import numpy as np
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import registry

from spacy_w2ner import get_entities, set_entities

from ..conftest import SMALL_W2NER_CONFIG, TRAIN_DATA, make_examples, train


def entity_keys(doc, key="w2ner"):
    return [(e.label, e.tokens) for e in get_entities(doc, key)]


def predictions(nlp, texts):
    return [[(e.label, e.tokens, round(e.score, 4)) for e in get_entities(d)] for d in nlp.pipe(texts)]


TEXTS = [text for text, _ in TRAIN_DATA]


def test_registered_through_entry_points():
    from importlib.metadata import entry_points

    groups = {
        "spacy_factories": "w2ner",
        "spacy_architectures": "spacy_w2ner.W2NER.v1",
        "spacy_scorers": "spacy_w2ner.entity_scorer.v1",
        "spacy_misc": "spacy_w2ner.bundled_encoder_path.v1",
        "thinc_layers": "spacy_w2ner.reduce_max.v1",
    }
    for group, name in groups.items():
        assert name in {ep.name for ep in entry_points(group=group)}, group
    assert Language.has_factory("w2ner")
    assert registry.architectures.get("spacy_w2ner.W2NER.v1")
    assert registry.scorers.get("spacy_w2ner.entity_scorer.v1")


def test_factory_found_without_import(tmp_path):
    """A fresh interpreter finds the factory through the entry point alone."""
    import subprocess
    import sys

    code = (
        "import spacy, sys\n"
        "nlp = spacy.blank('en'); pipe = nlp.add_pipe('w2ner')\n"
        "assert type(pipe).__name__ == 'W2NER'\n"
        "assert 'spacy_w2ner' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_overfits_flat_nested_discontinuous(trained_nlp):
    examples = make_examples(trained_nlp)
    scores = trained_nlp.evaluate(examples)
    assert scores["w2ner_f"] == 1.0
    assert scores["w2ner_discontinuous_f"] == 1.0
    assert scores["w2ner_overlapping_f"] == 1.0
    doc = trained_nlp("She had pain in her knees and ankles .")
    found = get_entities(doc)
    assert [(e.label, e.text, e.fragments) for e in found] == [
        ("SYM", "pain in her knees", ((2, 6),)),
        ("SYM", "pain in her ankles", ((2, 5), (7, 8))),
    ]


def test_doc_spans_contract(trained_nlp):
    doc = trained_nlp("She had pain in her knees and ankles .")
    group = doc.spans["w2ner"]
    # Two entities: one contiguous span, one discontinuous entity in two fragments.
    assert [(s.start, s.end, s.label_) for s in group] == [(2, 6, "SYM"), (2, 5, "SYM"), (7, 8, "SYM")]
    ids = [s.id_ for s in group]
    assert ids[1] == ids[2] != ids[0]
    scores = group.attrs["scores"]
    assert len(scores) == len(group)
    assert scores[1] == scores[2]
    assert all(0.0 < s <= 1.0 for s in scores)


def test_predictions_survive_docbin(trained_nlp):
    docs = list(trained_nlp.pipe(TEXTS))
    docbin = DocBin(docs=docs)
    restored = list(DocBin().from_bytes(docbin.to_bytes()).get_docs(trained_nlp.vocab))
    for before, after in zip(docs, restored):
        assert get_entities(after) == get_entities(before)
        assert np.array_equal(after.spans["w2ner"].attrs["scores"], before.spans["w2ner"].attrs["scores"])


def test_save_load_and_bytes_round_trip(trained_nlp, tmp_path):
    expected = predictions(trained_nlp, TEXTS)
    trained_nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("w2ner").labels == trained_nlp.get_pipe("w2ner").labels
    assert predictions(loaded, TEXTS) == expected
    config = trained_nlp.config
    from_bytes = spacy.util.load_model_from_config(config, auto_fill=True)
    from_bytes.from_bytes(trained_nlp.to_bytes())
    assert predictions(from_bytes, TEXTS) == expected
    # The component alone, through its own bytes.
    pipe = trained_nlp.get_pipe("w2ner")
    fresh = spacy.blank("en")
    fresh.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    fresh.get_pipe("w2ner").from_bytes(pipe.to_bytes())
    fresh.vocab.from_bytes(trained_nlp.vocab.to_bytes())
    assert predictions(fresh, TEXTS) == expected


def test_grid_dims_are_kept_in_cfg(trained_nlp, tmp_path):
    """The torch module is rebuilt from the cfg's dims before the inherited loading."""
    pipe = trained_nlp.get_pipe("w2ner")
    grid_scorer = pipe.model.get_ref("grid_scorer")
    assert pipe.cfg["nI"] == grid_scorer.get_dim("nI") == 64  # the small tok2vec's width
    assert pipe.cfg["nO"] == grid_scorer.get_dim("nO") == 2 + len(pipe.labels)
    pipe.to_disk(tmp_path / "w2ner", exclude=["vocab"])
    saved = json.loads((tmp_path / "w2ner" / "cfg").read_text())
    assert (saved["nI"], saved["nO"], saved["labels"]) == (64, 2 + len(pipe.labels), list(pipe.labels))
    fresh = spacy.blank("en").add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    assert not fresh.model.get_ref("grid_scorer").layers  # not built yet
    fresh.from_disk(tmp_path / "w2ner", exclude=["vocab"])
    assert fresh.model.get_ref("grid_scorer").get_dim("nI") == 64


def test_pipe_equals_call(trained_nlp):
    texts = TEXTS * 3
    one_by_one = [entity_keys(trained_nlp(t)) for t in texts]
    assert [entity_keys(d) for d in trained_nlp.pipe(texts, batch_size=5)] == one_by_one
    assert [entity_keys(d) for d in trained_nlp.pipe(texts, n_process=2, batch_size=2)] == one_by_one


@pytest.mark.parametrize("text", ["", " ", "   \n\n  ", ". , ! ?", "\t", "!!! ... ???"])
def test_degenerate_docs(trained_nlp, text):
    doc = trained_nlp(text)
    assert "w2ner" in doc.spans
    for entity in get_entities(doc):
        assert all(0 <= i < len(doc) for i in entity.tokens)


def test_long_doc_without_sentences_is_windowed_not_truncated(trained_nlp):
    rng = random.Random(0)
    pieces = [rng.choice(TEXTS) for _ in range(700)]
    words = " ".join(pieces).split()
    doc = Doc(trained_nlp.vocab, words=words)
    assert len(doc) > 5000 and not doc.has_annotation("SENT_START")
    doc = trained_nlp(doc)
    found = get_entities(doc)
    keys = [(e.label, e.tokens) for e in found]
    assert len(keys) == len(set(keys)), "an entity was reported twice"
    # Entities are found in the last window too: nothing is cut off.
    assert max(e.tokens[-1] for e in found) > len(doc) - 15
    # Every predicted entity lies inside the doc and within one window's reach.
    assert all(e.tokens[-1] - e.tokens[0] < 256 for e in found)
    assert len(found) > 500


def test_sentences_are_gridded_separately(trained_nlp):
    words = "She had pain in her knees and ankles . New York University is in New York .".split()
    sent_starts = [True] + [False] * 8 + [True] + [False] * 7
    doc = trained_nlp(Doc(trained_nlp.vocab, words=words, sent_starts=sent_starts))
    keys = entity_keys(doc)
    assert ("ORG", (9, 10, 11)) in keys
    assert ("SYM", (2, 3, 4, 7)) in keys


def test_initialize_without_labels_or_examples_is_a_clear_error():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    with pytest.raises(ValueError, match="no labels"):
        nlp.initialize(lambda: [])


def test_initialize_with_labels_and_no_examples():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.config["initialize"]["components"]["w2ner"] = {"labels": ["A", "B"]}
    nlp.initialize()
    pipe = nlp.get_pipe("w2ner")
    assert pipe.labels == ("A", "B")
    assert pipe.cfg["nO"] == 4  # NONE, NNW and one THW relation per label
    doc = nlp("some text")
    assert "w2ner" in doc.spans and {label for label, _ in entity_keys(doc)} <= {"A", "B"}


def test_initialize_streams_the_examples():
    """A corpus is read as a stream: initialize holds a handful of examples at a time, not all
    of them, and still finds a label that only the last example has."""
    class CountedExample(Example):
        alive = peak = 0

        def __init__(self, *args):
            super().__init__(*args)
            CountedExample.alive += 1
            CountedExample.peak = max(CountedExample.peak, CountedExample.alive)

        def __del__(self):
            CountedExample.alive -= 1

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    n_examples = 20_000

    def get_examples():
        for i in range(n_examples):
            reference = nlp.make_doc("Pain in knees .")
            set_entities(reference, [("RARE" if i == n_examples - 1 else "SYM", (0,), None)])
            yield CountedExample(nlp.make_doc("Pain in knees ."), reference)

    nlp.initialize(get_examples)
    assert nlp.get_pipe("w2ner").labels == ("SYM", "RARE")
    assert CountedExample.peak <= 12  # the model's sample of ten, and the one being read


def test_label_data_and_add_label_after_init(trained_nlp):
    pipe = trained_nlp.get_pipe("w2ner")
    assert sorted(pipe.label_data) == ["DRUG", "LOC", "ORG", "SYM"]
    with pytest.raises(ValueError, match="already initialized"):
        pipe.add_label("NEW")
    assert pipe.add_label("SYM") == 0


def test_initializing_again_starts_over_with_fresh_weights_and_new_labels(trained_nlp):
    """As spaCy's components: ``nlp.initialize`` again gives fresh weights (the grid network's too,
    not the trained one beside a fresh tok2vec), and may read labels the first corpus lacked."""
    import torch

    from spacy_w2ner.nn.shim import torch_module

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.from_bytes(trained_nlp.to_bytes())
    pipe = nlp.get_pipe("w2ner")

    def grid_weights():
        return {k: v.clone() for k, v in torch_module(pipe._grid_scorer.layers[0].shims[0]).state_dict().items()}

    trained = grid_weights()
    nlp.initialize(lambda: make_examples(nlp))
    fresh = grid_weights()
    assert not any(torch.equal(trained[k], fresh[k]) for k in trained if k.endswith("weight"))
    new_data = [("Zocor made me dizzy .", [("DRUG", (0,)), ("DIZZY", (3,))])]
    nlp.initialize(lambda: make_examples(nlp, new_data))
    assert sorted(pipe.labels) == ["DIZZY", "DRUG", "LOC", "ORG", "SYM"] and pipe.labels[-1] == "DIZZY"
    assert pipe._grid_scorer.get_dim("nO") == 2 + 5  # NONE, NNW and a THW relation a label
    nlp("Zocor made me dizzy .")  # the fresh network predicts for the five labels


def test_an_initialize_that_fails_leaves_the_trained_pipe_as_it_was(trained_nlp):
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.from_bytes(trained_nlp.to_bytes())
    before = predictions(nlp, TEXTS)
    new_label = [("Zocor made me dizzy .", [("DRUG", (0,)), ("DIZZY", (3,))])]
    with pytest.raises(AttributeError):  # docs where examples belong: fails after the new label was read
        nlp.initialize(lambda: make_examples(nlp, new_label) + [nlp.make_doc("not an example")])
    assert nlp.get_pipe("w2ner").labels == trained_nlp.get_pipe("w2ner").labels
    assert predictions(nlp, TEXTS) == before


def test_score_reads_a_generator_of_examples_as_a_list(trained_nlp):
    examples = make_examples(trained_nlp)
    for example in examples:
        example.predicted = trained_nlp(example.predicted)
    pipe = trained_nlp.get_pipe("w2ner")
    assert pipe.score(example for example in examples) == pipe.score(examples)
    assert pipe.score(examples)["w2ner_f"] > 0


def test_unknown_gold_label_is_an_error():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.config["initialize"]["components"]["w2ner"] = {"labels": ["SYM"]}
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    with pytest.raises(ValueError, match="not one of the component's labels"):
        nlp.update(examples, sgd=optimizer)


def test_set_ents_writes_flat_entities(trained_nlp):
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "set_ents": True})
    nlp.from_bytes(trained_nlp.to_bytes())
    doc = nlp("New York University is in New York .")
    assert [(e.text, e.label_) for e in doc.ents] == [("New York University", "ORG"), ("New York", "LOC")]
    doc = nlp("She had pain in her knees and ankles .")
    # The discontinuous entity cannot go to doc.ents; the contiguous one does.
    assert [(e.text, e.label_) for e in doc.ents] == [("pain in her knees", "SYM")]


def test_custom_spans_key_renames_scores():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "spans_key": "ents_all"})
    examples = make_examples(nlp, spans_key="ents_all")
    with pytest.warns(UserWarning, match=r"'w2ner': \[training.score_weights\] weighs w2ner_f, but this component .*"
                                         r"spacy train's score would stay 0. Set \[training.score_weights\] ents_all_f = 1.0"):
        train(nlp, examples, 3)
    nlp.config["training"]["score_weights"] = {"ents_all_f": 1.0, "w2ner_f": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.initialize(lambda: examples)
    # beside a w2ner component on "w2ner", w2ner_f is that one's score: spacy train's score is not 0
    two = spacy.blank("en")
    two.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    two.add_pipe("w2ner", name="drugs", config={**SMALL_W2NER_CONFIG, "spans_key": "drugs"})
    examples = make_examples(two)
    for example in examples:
        example.reference.spans["drugs"] = list(example.reference.spans["w2ner"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        two.initialize(lambda: examples)
    scores = nlp.evaluate(examples)
    assert "ents_all_f" in scores and "ents_all_discontinuous_f" in scores
    assert "ents_all" in nlp("New York .").spans


def test_decoder_cap_warns_once_with_a_running_count(trained_nlp, monkeypatch):
    from spacy_w2ner.model.types import GridBatch
    from spacy_w2ner.grid.segments import Segment

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "max_paths_per_edge": 3})
    nlp.from_bytes(trained_nlp.to_bytes())
    pipe = nlp.get_pipe("w2ner")
    n, n_classes = 6, 2 + len(pipe.labels)
    logits = np.full((1, n, n, n_classes), -5.0, dtype="float32")
    logits[0][np.triu_indices(n, 1)] = [-5, 5] + [-5] * (n_classes - 2)  # all NNW
    logits[0, n - 1, 0, 2] = 10.0  # one THW edge spanning the sentence: 16 paths

    class DegenerateModel:  # the trained model's ops, a grid with 16 paths on one THW cell
        ops = pipe.model.ops
        attrs = pipe.model.attrs

        def predict(self, docs):
            return [GridBatch([Segment(0, 0, n, 0, n)], logits)]

    monkeypatch.setattr(pipe, "model", DegenerateModel())
    with pytest.warns(UserWarning, match="max_paths_per_edge") as caught:
        docs = [nlp("a b c d e f") for _ in range(3)]
    assert len([w for w in caught if "max_paths_per_edge" in str(w.message)]) == 1
    assert "warning_counts['truncated']" in str(caught[0].message)
    assert pipe.warning_counts["truncated"] == 3
    assert all(len(doc.spans["w2ner"]) > 0 for doc in docs)
    assert len(get_entities(docs[0])) == 3


def test_gold_across_sentences_joins_them_for_training():
    """An entity across a sentence boundary is trained whole: the two sentences become one grid
    (counted and warned about once), never an unlearnable entity."""
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    words = "pain in knees . and ankles".split()
    from spacy.training import Example

    from spacy_w2ner import set_entities

    predicted = Doc(nlp.vocab, words=words, sent_starts=[True, False, False, False, True, False])
    reference = Doc(nlp.vocab, words=words)
    set_entities(reference, [("SYM", (0, 1, 5), None)])
    example = Example(predicted, reference)
    optimizer = nlp.initialize(lambda: [example])
    with pytest.warns(UserWarning, match="sentence boundaries fell inside gold entities"):
        nlp.update([example], sgd=optimizer)
    counts = nlp.get_pipe("w2ner").warning_counts
    assert counts["joined_sentences"] == 1 and counts["unlearnable"] == 0


def test_learn_rate_scale_applies_to_grid_network_only():
    """One Adam step from the same start: the head moves `scale` times further, tok2vec alike."""
    from thinc.api import Adam

    def one_step(scale):
        spacy.util.fix_random_seed(0)
        nlp = spacy.blank("en")
        nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "learn_rate_scale": scale})
        examples = make_examples(nlp)
        nlp.initialize(lambda: examples)
        pipe = nlp.get_pipe("w2ner")
        module = pipe.model.get_ref("grid_scorer").layers[0].shims[0]._model
        tok2vec = pipe.model.get_ref("tok2vec")
        head_before = module.co_predictor.cell_output.weight.detach().clone()
        embed = next(n for n in tok2vec.walk() if n.has_param("E"))
        embed_before = embed.get_param("E").copy()
        nlp.update(examples, sgd=Adam(1e-3, grad_clip=0.0, L2=0.0, use_averages=False))
        head_step = (module.co_predictor.cell_output.weight.detach() - head_before).abs().max().item()
        embed_step = float(np.abs(embed.get_param("E") - embed_before).max())
        return head_step, embed_step

    head_1, embed_1 = one_step(1.0)
    head_10, embed_10 = one_step(10.0)
    assert head_10 == pytest.approx(10 * head_1, rel=1e-3)
    assert embed_10 == pytest.approx(embed_1, rel=1e-3)


def test_threshold_drops_only_entities_scoring_below_it(trained_nlp):
    # A sentence whose entities have different scores.
    text = next(t for t, _ in TRAIN_DATA if len({e.score for e in get_entities(trained_nlp(t))}) > 1)
    all_entities = get_entities(trained_nlp(text))
    cut = max(e.score for e in all_entities)  # only the strongest entity (or a tie) stays
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "threshold": cut})
    nlp.from_bytes(trained_nlp.to_bytes())
    kept = get_entities(nlp(text))
    assert [e.key for e in kept] == [e.key for e in all_entities if e.score >= cut]
    assert 1 <= len(kept) < len(all_entities)
    assert all(e.score >= cut for e in kept)
    with pytest.raises(ValueError, match="threshold must be between 0 and 1"):
        nlp.add_pipe("w2ner", name="bad", config={**SMALL_W2NER_CONFIG, "threshold": 1.5})


def test_thw_conflicts_are_warned_once_and_counted():
    """Two gold entities with the same first and last word but other labels: one reaches the loss."""
    from spacy.training import Example

    from spacy_w2ner import set_entities

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    reference = nlp.make_doc("New York University is in New York .")
    set_entities(reference, [("ORG", (0, 1, 2)), ("LOC", (0, 2)), ("LOC", (5, 6))])
    examples = [Example(nlp.make_doc(reference.text), reference)]
    optimizer = nlp.initialize(lambda: examples)
    with pytest.warns(UserWarning, match="share their first and last word") as caught:
        for _ in range(3):
            nlp.update(examples, sgd=optimizer)
    assert len([w for w in caught if "first and last word" in str(w.message)]) == 1
    assert nlp.get_pipe("w2ner").warning_counts["thw_conflict"] == 3


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("lstm_size", 15, "lstm_size must be even"),
        ("lstm_size", 0, "lstm_size must be a positive int"),
        ("conv_size", -3, "conv_size must be a positive int"),
        ("biaffine_size", 2.5, "biaffine_size"),  # confection checks the type
        ("dilations", [], "dilations must be a non-empty list"),
        ("dilations", [1, 0], "dilations must be a non-empty list"),
        ("input_dropout", 1.0, r"input_dropout must be a number in \[0, 1\)"),
        ("output_dropout", -0.1, r"output_dropout must be a number in \[0, 1\)"),
        ("max_window", 0, "max_window must be at least 1"),
        ("window_overlap", 256, "window_overlap must be in"),
        ("max_grid_cells", 0, "max_grid_cells must be a positive int"),
        ("max_grid_padding", 0.5, "max_grid_padding must be null or a number of at least 1"),
    ],
)
def test_bad_model_settings_fail_when_the_pipe_is_created(setting, value, message):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=message):
        nlp.add_pipe("w2ner", config={"model": {setting: value}})


def test_defaults_live_in_the_factory_config_only():
    import inspect

    from spacy_w2ner.model.architecture import build_w2ner_model
    from spacy_w2ner.nn.network import GridNetwork

    for function in (build_w2ner_model, GridNetwork.__init__):
        sizes = {"lstm_size", "conv_size", "biaffine_size", "ffnn_size", "dilations", "input_dropout", "max_window"}
        parameters = inspect.signature(function).parameters
        assert all(parameters[name].default is inspect.Parameter.empty for name in sizes & set(parameters))
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("w2ner")
    model = nlp.config["components"]["w2ner"]["model"]
    assert model["lstm_size"] == 512 and model["tok2vec"]["encode"]["width"] == model["tok2vec"]["embed"]["width"]
    assert pipe.model.attrs["max_window"] == 256


def test_no_entity_starts_or_ends_on_whitespace():
    """An untrained model predicts entities everywhere, whitespace tokens included: none is written
    starting or ending (in any fragment) on a whitespace token."""
    from spacy_w2ner.model.predictions import segment_grids
    from spacy_w2ner.grid.segments import decode_segments

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.initialize(lambda: make_examples(nlp))
    text = "Fatima had\n\nstomach \n pain  and \n\n nausea .\n  Then   headaches \n" * 3
    pipe = nlp.get_pipe("w2ner")
    doc = nlp.make_doc(text)
    raw, _ = decode_segments(segment_grids(pipe.model.predict([doc])), 1, 64)
    def edges_on_space(entity):
        return any(doc[s].is_space or doc[e - 1].is_space for s, e in entity.fragments)
    assert any(edges_on_space(e) for e in raw[0]), "the check below would prove nothing"
    doc = nlp(text)
    found = get_entities(doc)
    assert found and not any(edges_on_space(e) for e in found)
    assert all(not span.text[0].isspace() and not span.text[-1].isspace() for span in doc.spans["w2ner"])


def test_long_doc_without_sentences_warns_once():
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    nlp.initialize(lambda: make_examples(nlp))
    words = ("She had pain in her knees and ankles .".split()) * 40  # 360 tokens > max_window 256
    with pytest.warns(UserWarning, match="longer than max_window=256 tokens have no sentence boundaries") as caught:
        for _ in range(2):
            nlp(Doc(nlp.vocab, words=words))
    assert len([w for w in caught if "no sentence boundaries" in str(w.message)]) == 1
    assert nlp.get_pipe("w2ner").warning_counts["no_sentences"] == 2
    nlp.add_pipe("sentencizer", before="w2ner")
    nlp(Doc(nlp.vocab, words=words))
    assert nlp.get_pipe("w2ner").warning_counts["no_sentences"] == 2  # sentences: no new count


def test_the_w2ner_class_stays_a_thin_pipe():
    """bars/12 and bars/31: the component is wiring, at most 240 lines; the training objective,
    the training plan, the batches and the weights' loading live in model/ and memory/."""
    import inspect

    from spacy_w2ner.component import W2NER

    assert len(inspect.getsource(W2NER).splitlines()) <= 240
