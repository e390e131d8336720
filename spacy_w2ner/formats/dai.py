"""Dai et al. (2020)'s inline format for discontinuous NER (CADEC, ShARe 13/14).

Three lines per sentence::

    I did take my blood pressure today though , and it was slightly elevated from the norm .
    4,5,12,13 ADR|6,6 DATE
    <blank>

1. the tokens, separated by spaces (or tabs);
2. the mentions, separated by ``|``, each ``start,end[,start,end...] TYPE`` with
   INCLUSIVE 0-based token ranges; an entity with several ranges is
   discontinuous. The line is empty when the sentence has no mention;
3. a blank line.

Ranges may come in any order; ranges of one mention that share a token are an
error, adjacent ranges simply make a contiguous entity. Blank lines at the end
of the file, and a file ending after a line of tokens or mentions, are tolerated; anything else that
does not fit raises ``FormatError`` naming ``file:line``.
"""
import re
from pathlib import Path
from typing import Iterator, List, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..entities import set_entities
from .base import NAME_KEY, FormatError, read_text

_TOKEN_SEPARATOR = re.compile(r"[ \t]+")


def read_dai_text(path: Union[str, Path], vocab: Vocab, spans_key: str = "w2ner") -> Iterator[Doc]:
    """Docs (one per sentence) from a file in Dai et al.'s inline format."""
    path = Path(path)
    lines = read_text(path).split("\n")
    i = 0
    while i < len(lines):
        token_line = lines[i]
        if _blank(token_line):
            if all(_blank(line) for line in lines[i:]):
                return  # blank lines at the end of the file
            raise FormatError(f"{path}:{i + 1}: expected a line of tokens, got a blank line")
        words = _TOKEN_SEPARATOR.split(token_line.strip(" \t"))
        mention_line = lines[i + 1] if i + 1 < len(lines) else ""  # the file may end here
        entities = parse_dai_mentions(mention_line, len(words), f"{path}:{i + 2}")
        if i + 2 < len(lines) and not _blank(lines[i + 2]):
            raise FormatError(
                f"{path}:{i + 3}: expected a blank line after the mentions of line {i + 2}, "
                f"got {_excerpt(lines[i + 2])}"
            )
        doc = Doc(vocab, words=words)
        set_entities(doc, [(label, tokens, None) for label, tokens in entities], spans_key)
        doc.user_data[NAME_KEY] = f"{path.stem}-line{i + 1}"
        yield doc
        i += 3


def parse_dai_mentions(line: str, n_tokens: int, where: str) -> List[Tuple[str, List[int]]]:
    """(label, token indices) for each mention of a Dai mention line."""
    line = line.strip(" \t")
    if not line:
        return []
    entities = []
    for k, mention in enumerate(line.split("|")):
        parts = _TOKEN_SEPARATOR.split(mention.strip(" \t"))
        if len(parts) != 2:
            raise FormatError(
                f"{where}: mention {k + 1} {mention!r} is not 'start,end[,start,end...] TYPE'"
            )
        offsets, label = parts
        try:
            numbers = [int(n) for n in offsets.split(",")]
        except ValueError:
            raise FormatError(f"{where}: mention {k + 1} {mention!r} has a non-integer offset") from None
        if len(numbers) % 2:
            raise FormatError(
                f"{where}: mention {k + 1} {mention!r} has an odd number of offsets; "
                "expected start,end pairs"
            )
        tokens: List[int] = []
        for start, end in zip(numbers[::2], numbers[1::2]):
            if not 0 <= start <= end < n_tokens:
                raise FormatError(
                    f"{where}: mention {k + 1} {mention!r} has the range {start},{end}, not an "
                    f"inclusive token range within the sentence of {n_tokens} tokens"
                )
            tokens.extend(range(start, end + 1))
        if len(set(tokens)) != len(tokens):
            raise FormatError(f"{where}: mention {k + 1} {mention!r} has ranges that share a token")
        entities.append((label, sorted(tokens)))
    return entities


def _blank(line: str) -> bool:
    """A line of spaces and tabs at most: other whitespace (a no-break space, U+0085) is a token."""
    return not line.strip(" \t")


def _excerpt(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")
