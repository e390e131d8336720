"""What a request may hold, checked with a message that names the problem.

``POST /annotate`` takes one document (``{"text": ..., "id": ..., "meta": {...}}``) or a list
of them. ``Document`` is the request's schema for the OpenAPI page; ``read_documents`` checks
a body by hand so that each problem is named where it is ("document 3: no 'text' ..."), with
the same rule for a text as ``annotate`` (``annotate.inputs.text_problem``), and the status
code that fits it: 400 for a body that is not JSON or not UTF-8, 413 for more than the limits
allow, 415 for another content type, 422 for JSON of the wrong shape.
"""
import json
from typing import Any, Dict, List, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field

from ..annotate.inputs import loads_json, text_problem
from ..messages import json_type, not_utf8
from .options import ServeOptions

DOCUMENT_KEYS = ("text", "id", "meta")


class Document(BaseModel):
    """One document to annotate."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="the document's text (not empty)", min_length=1)
    id: Any = Field(None, description="any JSON value; echoed in the record (default: the document's index in the request)")
    meta: Dict[str, Any] = Field(default_factory=dict, description="any JSON object; echoed in the record")


AnnotateBody = Union[Document, List[Document]]


class RequestProblem(Exception):
    """A request the service will not answer: its status code and what is wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def check_content_type(content_type: Optional[str]) -> None:
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise RequestProblem(415, f"send JSON with Content-Type: application/json, not {content_type or 'no content type'!r}")


def read_documents(body: bytes, options: ServeOptions) -> Tuple[List[Dict[str, Any]], bool]:
    """The documents of a request body (``text``, ``id``, ``meta`` each), and whether it held a
    list (the answer is then a list too)."""
    try:
        text = body.decode("utf8")
    except UnicodeDecodeError as err:
        raise RequestProblem(400, f"the body is {not_utf8(err)}") from None
    try:
        value = loads_json(text)
    except json.JSONDecodeError as err:
        raise RequestProblem(400, f"the body is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except ValueError as err:
        raise RequestProblem(400, f"the body is not valid JSON ({err})") from None
    if isinstance(value, dict):
        return [_document(value, 0, None, options)], False
    if not isinstance(value, list):
        raise RequestProblem(422, f"expected a document (a JSON object) or a list of them, got {json_type(value)}")
    if not value:
        raise RequestProblem(422, "an empty list: send at least one document")
    if len(value) > options.max_documents:
        raise RequestProblem(413, f"{len(value)} documents, more than the limit of {options.max_documents} per request")
    return [_document(item, k, f"document {k}", options) for k, item in enumerate(value)], True


def _document(value: Any, index: int, where: Optional[str], options: ServeOptions) -> Dict[str, Any]:
    prefix = f"{where}: " if where else ""
    if not isinstance(value, dict):
        raise RequestProblem(422, f"{prefix}expected a JSON object with a 'text', got {json_type(value)}")
    unknown = sorted(set(value) - set(DOCUMENT_KEYS))
    if unknown:
        raise RequestProblem(422, f"{prefix}unknown field(s) {', '.join(map(repr, unknown))}; a document has 'text', 'id' and 'meta'")
    problem = text_problem(value.get("text"))
    if problem is not None:
        raise RequestProblem(422, prefix + problem)
    if len(value["text"]) > options.max_text_chars:
        raise RequestProblem(
            413, f"{prefix}{len(value['text'])} characters, more than the limit of {options.max_text_chars} per document"
        )
    meta = value.get("meta", {})
    if not isinstance(meta, dict):
        raise RequestProblem(422, f"{prefix}'meta' must be a JSON object, got {json_type(meta)}")
    return {"text": value["text"], "id": value.get("id", index), "meta": meta}


def read_threshold(raw: Optional[str], options: ServeOptions) -> float:
    """The request's threshold (the ``threshold`` query parameter), within the server's limits."""
    if raw is None:
        return options.min_threshold
    try:
        threshold = float(raw)
    except ValueError:
        raise RequestProblem(422, f"threshold must be a number, got {raw!r}") from None
    if not options.min_threshold <= threshold <= 1.0:
        raise RequestProblem(422, f"threshold must be between {options.min_threshold} (this server's) and 1, got {threshold}")
    return threshold
