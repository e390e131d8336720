"""``annotate``: one function over the engines, each in a module of its own that imports no other
(``local``: this process; ``ray``: Ray Data, imported only when asked for)."""
from typing import Callable, Optional, Union

from spacy.language import Language

from ..common import PathLike
from .inputs import Item
from .local import annotate_locally
from .options import AnnotateOptions
from .outputs import Summary


def annotate(
    model: Union[PathLike, Language],
    input_path: PathLike,
    output: PathLike,
    options: Optional[AnnotateOptions] = None,
    *,
    on_problem: Optional[Callable[[Item], None]] = None,
    **overrides,
) -> Summary:
    """Annotate ``input_path`` with ``model`` into ``output`` (the ``annotate`` command's work).

    Options come as ``AnnotateOptions`` and/or keywords (``annotate(model, inp, out,
    batch_size=32)``); ``engine`` picks where it runs. Returns the summary; raises
    ``AnnotationError`` when the run cannot start, or, with ``strict``, at the first input that
    is not a document (the partial output stays, so the run can be continued with ``resume``
    once the input is fixed).
    """
    options = AnnotateOptions.of(options, **overrides)
    if options.engine == "ray":
        from .ray import annotate_with_ray

        return annotate_with_ray(model, input_path, output, options, on_problem=on_problem)
    return annotate_locally(model, input_path, output, options, on_problem=on_problem)
