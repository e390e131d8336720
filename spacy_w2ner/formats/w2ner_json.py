"""W2NER JSON (the format of the reference code and most public benchmarks).

A JSON array of ``{"sentence": [tokens], "ner": [{"index": [token ids], "type": label}]}``.
Each record becomes one Doc whose entities are written with ``set_entities``.
Malformed input raises ``FormatError`` naming the file, the record and the problem.
Other keys of a record (such as the ``word`` segmentation of some Chinese corpora) are
kept in ``doc.user_data["w2ner_extra"]`` and written back by the exporter.
"""
import json
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import get_entities, set_entities
from ..files import move_into_place
from ..messages import json_type, lone_surrogate
from .base import NAME_KEY, FormatError, read_text

EXTRA_KEY = "w2ner_extra"  # doc.user_data: the record's other keys


def read_w2ner_json(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner") -> Iterator[Doc]:
    """Docs from a W2NER JSON file, one per record, named ``{file stem}-record{i}``."""
    path = Path(path)
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise FormatError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(records, list):
        raise FormatError(f"{path}: expected a JSON array of records, got {json_type(records)}")
    for i, record in enumerate(records):
        doc = w2ner_record_to_doc(record, vocab, spans_key, where=f"{path}: record {i}")
        doc.user_data[NAME_KEY] = f"{path.stem}-record{i}"
        yield doc


def w2ner_record_to_doc(record: dict, vocab: Vocab, spans_key: str, where: str) -> Doc:
    """The Doc of one record; FormatError naming ``where`` and what is wrong."""
    if not isinstance(record, dict) or not isinstance(record.get("sentence"), list):
        raise FormatError(f"{where}: expected an object with a 'sentence' list of tokens")
    words = record["sentence"]
    for k, word in enumerate(words):
        if not isinstance(word, str) or not word.strip():
            raise FormatError(f"{where}: token {k} ({word!r}) must be a string that is not empty or whitespace")
        _check_text(word, f"{where}: token {k}")
    doc = Doc(vocab, words=words)
    mentions = record.get("ner", [])
    if not isinstance(mentions, list):
        raise FormatError(f"{where}: 'ner' must be a list of entities, got {json_type(mentions)}")
    entities = []
    for j, entity in enumerate(mentions):
        if not isinstance(entity, dict) or "index" not in entity or "type" not in entity:
            raise FormatError(f"{where}: entity {j} needs 'index' and 'type'")
        index, label = entity["index"], entity["type"]
        if not isinstance(label, str) or not label:
            raise FormatError(f"{where}: entity {j} has an empty or non-string type {label!r}")
        _check_text(label, f"{where}: entity {j}'s type")
        entities.append((label, _token_indices(index, len(words), f"{where}: entity {j} ({label})"), None))
    set_entities(doc, entities, spans_key)
    extra = {key: value for key, value in record.items() if key not in ("sentence", "ner")}
    if extra:
        doc.user_data[EXTRA_KEY] = extra
    return doc


def _token_indices(index, n_words: int, where: str) -> List[int]:
    """The sorted token indices of an entity's ``index``; FormatError for a wrong type or value."""
    if not isinstance(index, list) or not index:
        raise FormatError(f"{where}: 'index' must be a non-empty list of token indices, got {json_type(index)} {index!r}")
    for t in index:
        if isinstance(t, bool) or not isinstance(t, int):
            raise FormatError(f"{where}: token index {t!r} is {json_type(t)}, not an integer")
        if not 0 <= t < n_words:
            raise FormatError(f"{where}: token index {t} is outside the sentence of {n_words} tokens")
    if len(set(index)) != len(index):
        raise FormatError(f"{where}: repeats a token index: {index}")
    return sorted(index)


def _check_text(text: str, where: str) -> None:
    """FormatError for a string that is not valid Unicode text (a lone surrogate from a \\ud800 escape)."""
    surrogate = lone_surrogate(text)
    if surrogate is not None:
        raise FormatError(f"{where} ({text!r}) {surrogate}")


def docs_to_w2ner_json(
    docs: Iterable[Doc], spans_key: str = "w2ner", problems: Optional[List[str]] = None
) -> List[dict]:
    """W2NER JSON records for docs (gold or predicted), entities in position order (``w2ner_records``)."""
    return list(w2ner_records(docs, spans_key, problems))


def w2ner_records(docs: Iterable[Doc], spans_key: str = "w2ner", problems: Optional[List[str]] = None) -> Iterator[dict]:
    """The W2NER JSON record of each doc, one at a time.

    W2NER tokens are not whitespace, so whitespace tokens (the line breaks and runs of
    spaces that spaCy's tokenizer keeps, e.g. in docs read from brat) are left out of
    ``sentence`` and of the entities, whose indices are renumbered: "stomach \\n pain"
    becomes the two adjacent tokens "stomach", "pain". Other whitespace tokens (an ideographic
    space or a no-break space a CoNLL or BMES file gave as a token) are left out too, and
    reported in ``problems``: an entity that holds them is written without them, one of
    whitespace tokens only is left out. Without ``problems`` either raises ValueError.
    """
    for doc_index, doc in enumerate(docs):
        kept, other_spaces = [], []  # one pass over the tokens: the words, and whitespace not a tokenizer's
        for token in doc:
            if not token.is_space:
                kept.append(token.i)
            elif not token.text.isascii():
                other_spaces.append(token.i)
        new_index = {old: new for new, old in enumerate(kept)}
        ner, held = [], set()
        for entity in get_entities(doc, spans_key):
            held.update(entity.tokens)
            index = [new_index[t] for t in entity.tokens if t in new_index]
            spaces = [doc[t].text for t in entity.tokens if t not in new_index and not doc[t].text.isascii()]
            if not index or spaces:  # line breaks and runs of spaces (a tokenizer's) go silently
                what = "is only whitespace" if not index else f"holds whitespace tokens {spaces}"
                _problem(problems, f"doc {doc_index} ({_name(doc)}): the {entity.label} entity {entity.text!r} "
                                   f"(tokens {list(entity.tokens)}) {what}, which W2NER JSON cannot hold",
                         "; left out" if not index else "; written without them")  # fmt: skip
                if not index:
                    continue
            ner.append({"index": index, "type": entity.label})
        others = [i for i in other_spaces if i not in held]
        if others:
            _problem(problems, f"doc {doc_index} ({_name(doc)}): whitespace tokens {[doc[i].text for i in others]} "
                               f"(tokens {others}), which W2NER JSON cannot hold", "; left out of its sentence")  # fmt: skip
        yield {"sentence": [doc[i].text for i in kept], "ner": ner, **doc.user_data.get(EXTRA_KEY, {})}


def _problem(problems: Optional[List[str]], message: str, done: str) -> None:
    """``message`` with what was done added to ``problems``; ValueError without them."""
    if problems is None:
        raise ValueError(message)
    problems.append(message + done)


def _name(doc: Doc) -> str:
    return repr(doc.user_data.get(NAME_KEY) or doc.text[:40])


def write_w2ner_json(
    docs: Iterable[Doc], path: Union[str, Path], spans_key: str = "w2ner", problems: Optional[List[str]] = None
) -> int:
    """Write docs as a W2NER JSON file (one array on one line), a record at a time under a
    temporary name, renamed when whole (an error leaves the file that was there); returns the
    number of records. What cannot be written goes to ``problems`` (see ``w2ner_records``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial, count = path.with_name(f".{path.name}.partial"), 0
    try:
        with partial.open("w", encoding="utf8") as out:
            out.write("[")
            for count, record in enumerate(w2ner_records(docs, spans_key, problems), 1):
                out.write((", " if count > 1 else "") + json.dumps(record, ensure_ascii=False))
            out.write("]")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    move_into_place(partial, path)
    return count
