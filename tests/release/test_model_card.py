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
