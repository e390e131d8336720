"""``model-card``: the README that ``spacy package`` puts in a pipeline's wheel."""
import json
import shutil

from spacy.tokens import DocBin

from ..conftest import NLP, cli, make_examples


def test_model_card_has_per_label_scores_the_data_use_and_limits(saved_model, trained_nlp, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    scores = trained_nlp.evaluate(make_examples(trained_nlp))
    (tmp_path / "metrics.json").write_text(json.dumps(scores))
    DocBin(docs=[eg.reference for eg in make_examples(NLP)]).to_disk(tmp_path / "train.spacy")
    result = cli("model-card", model, tmp_path / "metrics.json", "--train", tmp_path / "train.spacy",
                 "--evaluated-on", "the training sentences", "--name", "w2ner_demo", "--version", "0.1.0")  # fmt: skip
    card = (model / "README.md").read_text(encoding="utf8")
    assert result.stdout.strip() == str(model / "README.md")
    for label in ("DRUG", "LOC", "ORG", "SYM"):
        score = scores["w2ner_per_type"][label]
        assert f"| `{label}` | {100 * score['p']:.2f} | {100 * score['r']:.2f} | {100 * score['f']:.2f} |" in card
    assert f"| **all** | {100 * scores['w2ner_p']:.2f} |" in card
    assert f"Discontinuous entities (with a gap), F: {100 * scores['w2ner_discontinuous_f']:.2f}" in card
    assert "on `the training sentences`" in card
    assert "4 documents, 33 tokens, 11 entities" in card and "3 discontinuous and 8 overlapping" in card
    assert "w2ner's own tok2vec" in card and "Not measured" in card
    assert card.startswith("# en_w2ner_demo 0.1.0\n")  # the name and version spacy package is given
    assert "annotate en_w2ner_demo notes/ out.jsonl --doc-per-file" in card  # its examples run: tests/docs
    assert 'spacy.load("en_w2ner_demo")' in card and "python -m spacy_w2ner serve en_w2ner_demo" in card
    assert "windows of 256 tokens" in card
    speed = {"corpus": "corpora/notes/test.json", "documents": 40, "threads": 2, "rounds": 3, "cpu": "x86_64",
             "cpu_model": "AMD EPYC", "speed": {"float32 annotate": {"docs_per_s": 12.5, "peak_rss_mb": 900.0}}}  # bench/optimize.py's
    (tmp_path / "speed.json").write_text(json.dumps(speed))
    cli("model-card", model, tmp_path / "metrics.json", "--speed", tmp_path / "speed.json")
    card = (model / "README.md").read_text(encoding="utf8")
    assert "`test.json`'s sentences (40), 2 CPU threads (AMD EPYC)" in card and "| float32 annotate | 12.5 | 900.0 |" in card
    cli("model-card", model, tmp_path / "metrics.json")
    meta = json.loads((model / "meta.json").read_text(encoding="utf8"))
    assert (model / "README.md").read_text(encoding="utf8").startswith(f"# en_{meta['name']} {meta['version']}\n")


def test_model_card_names_a_bad_evaluation_file(saved_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    (tmp_path / "metrics.json").write_text("not json")
    result = cli("model-card", model, tmp_path / "metrics.json", code=1)
    assert str(tmp_path / "metrics.json") in result.stderr
    assert not (model / "README.md").exists()


def test_model_card_refuses_scores_that_are_not_the_pipelines_and_a_directory_that_is_no_pipeline(saved_model, tmp_path):
    """Each a one-line error, nothing written: the card said "n/a" for every score (exit 0), or a
    list was an AttributeError, a directory without a pipeline an OSError traceback."""
    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    for name, content, says in [("empty.json", {}, "no w2ner_f (its spans_key is 'w2ner'; found: no _f scores)"),
                                ("other-key.json", {"sc_f": 0.5, "sc_p": 0.5}, "no w2ner_f (its spans_key is 'w2ner'; found: sc_f)"),
                                ("list.json", [1, 2], "no w2ner_f (its spans_key is 'w2ner'; found: not an object)")]:  # fmt: skip
        (tmp_path / name).write_text(json.dumps(content))
        result = cli("model-card", model, tmp_path / name, code=1)
        assert result.stderr.strip() == f"error: {tmp_path / name}: not 'spacy evaluate --output' scores of this pipeline's entities: {says}"
        assert not (model / "README.md").exists()
    (tmp_path / "empty").mkdir()
    result = cli("model-card", tmp_path / "empty", tmp_path / "empty.json", code=1)
    assert result.stderr.startswith("error: [E053]") and len(result.stderr.strip().splitlines()) == 1


def test_project_package_commands_give_the_card_the_wheels_name_and_version():
    """project.yml's ``package`` commands: the card is titled with what ``spacy package`` builds
    (the demo wheel's card once said 0.0.0 while the wheel was 0.1.0)."""
    import shlex
    from pathlib import Path

    import srsly

    project = srsly.read_yaml(Path(__file__).resolve().parents[2] / "project.yml")
    commands = {command["name"]: command["script"] for command in project["commands"]}
    for name in ("package", "package-int8"):
        card, package = (shlex.split(line) for line in commands[name])
        assert card[:4] == ["python", "-m", "spacy_w2ner", "model-card"] and package[:4] == ["python", "-m", "spacy", "package"]
        for option in ("--name", "--version"):
            value = package[package.index(option) + 1]
            assert card[card.index(option) + 1] == value, (name, option)


def _card_inputs(saved_model, trained_nlp, tmp_path, seed=2, seeds=(1, 2, 3)):
    model = tmp_path / "model"
    shutil.copytree(saved_model, model)
    scores = {**trained_nlp.evaluate(make_examples(trained_nlp)), "seed": seed}
    (tmp_path / "metrics.json").write_text(json.dumps(scores))
    summary = {"name": "demo-recipe", "seeds": list(seeds),
               "w2ner_f": {"mean": 71.5, "std": 0.25, "min": 71.25, "max": 71.75, "per_seed": [71.25, 71.5, 71.75]},
               "w2ner_discontinuous_f": {"mean": 40.0, "std": 2.0, "min": 38.0, "max": 42.0, "per_seed": [38.0, 40.0, 42.0]}}  # fmt: skip
    (tmp_path / "seeds.json").write_text(json.dumps(summary))
    return model, scores


def test_model_card_sets_its_f_beside_its_seeds_and_published_figures(saved_model, trained_nlp, tmp_path):
    model, scores = _card_inputs(saved_model, trained_nlp, tmp_path)
    cli("model-card", model, tmp_path / "metrics.json", "--seeds", tmp_path / "seeds.json",
        "--published", "TriG-NER (WWW 2025)=73.43/48.55", "--published", "W2NER, the paper=73.21")  # fmt: skip
    card = (model / "README.md").read_text(encoding="utf8")
    this = f"| this pipeline (seed 2) | {100 * scores['w2ner_f']:.2f} | {100 * scores['w2ner_discontinuous_f']:.2f} |"
    rows = [this, "| its 3 seeds (`demo-recipe`), mean ± std | 71.50 ± 0.25 (71.25-71.75) | 40.00 ± 2.00 (38.00-42.00) |",
            "| TriG-NER (WWW 2025) | 73.43 | 48.55 |", "| W2NER, the paper | 73.21 |  |"]  # fmt: skip
    assert "\n".join(rows) in card
    assert "one of 3 runs of the same command with seeds 1, 2, 3" in card
    # The section sits between the scores and the training data; without the options it is absent.
    assert card.index("## Accuracy") < card.index("## Against other runs") < card.index("## Training data")
    cli("model-card", model, tmp_path / "metrics.json")
    assert "## Against other runs" not in (model / "README.md").read_text(encoding="utf8")
    # A summary of this seed alone has no mean to set beside it.
    (tmp_path / "seeds.json").write_text(json.dumps({"name": "demo-recipe", "seeds": [2], "w2ner_f": {"mean": 71.5}}))
    cli("model-card", model, tmp_path / "metrics.json", "--seeds", tmp_path / "seeds.json")
    card = (model / "README.md").read_text(encoding="utf8")
    assert "the only run of its command so far (`demo-recipe`)" in card and "mean ± std" not in card and this in card


def test_model_card_names_a_published_figure_or_seed_that_does_not_fit(saved_model, trained_nlp, tmp_path):
    model, _ = _card_inputs(saved_model, trained_nlp, tmp_path, seed=4)
    result = cli("model-card", model, tmp_path / "metrics.json", "--seeds", tmp_path / "seeds.json", code=1)
    assert str(tmp_path / "seeds.json") in result.stderr and "seed 4 is not among its seeds [1, 2, 3]" in result.stderr
    for figure in ("TriG-NER=73,43", "TriG-NER=734.3", "=73.43", "TriG-NER=73.43/48.55/1"):
        result = cli("model-card", model, tmp_path / "metrics.json", "--published", figure, code=1)
        assert f"published figure {figure!r}" in result.stderr
    (tmp_path / "seeds.json").write_text(json.dumps({"w2ner_f": {}}))
    result = cli("model-card", model, tmp_path / "metrics.json", "--seeds", tmp_path / "seeds.json", code=1)
    assert "not a scripts/seeds.py summary" in result.stderr
    assert not (model / "README.md").exists()
