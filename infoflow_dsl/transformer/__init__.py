"""The compiled model: its module, hooks, file format and fast paths.

:func:`save` is here, light (no torch until it is called), so that the package face can bind
``ifl.save`` when it is imported (see ``infoflow_dsl/__init__.py``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: mypy reads the name
if TYPE_CHECKING:
    import os

    from .model import CompiledTransformer


def save(model: CompiledTransformer, path: str | os.PathLike[str], dense: bool = False) -> None:
    """Write a model to one ``.safetensors`` file (:func:`infoflow_dsl.transformer.io.save`).

    Args:
        model: the compiled (or trained, or disguised) model.
        path: the file to write; written atomically (complete or left as it was).
        dense: store every tensor dense (default: tensors under 10% nonzero in the sparse layout).

    Raises:
        OSError: the file cannot be written.
    """
    from .io import save as save_file

    save_file(model, path, dense)
