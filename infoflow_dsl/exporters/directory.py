"""``ifl.export``: a compiled model as a Hugging Face GPT-2 directory, and that directory read back.

    DIR/config.json         a stock GPT2Config (no remote code): n_embd, n_head, n_inner, n_layer,
                            n_positions = T + 2, activation "relu", layer_norm_epsilon, eager attention
                            (``is_causal: false`` for a self-contained export that needs it: :mod:`.penalty`)
    DIR/model.safetensors   the GPT2LMHeadModel weights (:mod:`.weights`)
    DIR/infoflow.json       the program, ε, the a-priori bound, the input spec, the embedding
                            (W_x, cls_x), every slot's mask, head -> (layer, slot), the position map
                            and the circuit map at the exported model's hooks and modules

``to="hf-llama"`` writes a LlamaConfig and LlamaForCausalLM weights instead (:mod:`.llama`; the
position embedding joins the embedding in infoflow.json), ``to="tl-native"`` ``tl_config.json``
and the TransformerLens bridge's state dict (:mod:`.native`); infoflow.json is the same for all.

The directory is written to a temporary sibling and renamed into place, so a failed export
leaves nothing behind; an existing non-empty DIR is replaced only with ``force``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..errors import ExportError
from ..files import umask_mode
from ..language.declarations import MAX_LENGTH
from ..measure.vectors import ModelSize
from ..transformer.card import ExportCard
from ..transformer.model import CompiledTransformer
from .hf import forward_in_batches, gpt2_config, load_export_model
from .info import FORMAT, export_info
from .inputs import ExportIO
from .layout import ExportLayout, plan
from .native import NativeLayout
from .weights import EXACT_LN_EPS, EXACT_LN_GAIN, gpt2_state_dict

if TYPE_CHECKING:
    from ..transformer.arguments import ModelSource

TARGETS = ("hf-gpt2", "hf-llama", "tl-native")
LAYERNORMS = ("exact", "active")
INFO_FILE = "infoflow.json"


def vector_view(model: CompiledTransformer) -> CompiledTransformer:
    """A token model (language v3) as the model over vectors that computes the same thing on
    one-hot inputs: its table W_E [V, D] (each row holding the constant direction) becomes the
    linear embedding [e_id; 1] W_E' with W_E' = [W_E; 0] (V + 1 rows, no ReLU block), so
    [e_id; 1] W_E' = W_E[id] exactly. Every export target then builds its weights from the view;
    the export's inputs are ids, read as one-hot rows (``ExportIO.vectors``). Other models as
    they are."""
    if not model.token_input:
        return model
    state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
    table = state["embed.W_E"]  # (V, D)
    size, width = table.shape
    state["embed.W_E"] = torch.cat([table, table.new_zeros(1, width)])  # (V + 1, D)
    state["embed.W_E1"] = table.new_zeros(size + 1, 0)
    card = dataclasses.replace(model.card.without("input", "vocabulary", "token_output"), token_view=size)
    return CompiledTransformer(card, state, device=model.device, dtype=model.dtype)


def _check_target(directory: Path, to: str, layernorm: str, force: bool) -> None:
    if to not in TARGETS:
        raise ExportError(f"unknown export target {to!r} (expected one of {', '.join(TARGETS)})")
    if layernorm not in LAYERNORMS:
        raise ExportError(f"unknown LayerNorm mode {layernorm!r} (expected one of {', '.join(LAYERNORMS)})")
    if directory.exists() and not directory.is_dir():
        raise ExportError(f"{directory}: exists and is not a folder")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise ExportError(f"{directory}: the folder exists and is not empty (use --force to replace it)")
    if not directory.resolve().parent.is_dir() or not directory.absolute().parent.is_dir():
        raise ExportError(f"{directory}: the folder {directory.parent} does not exist")
    if Path.cwd().resolve().is_relative_to(directory.resolve()):
        raise ExportError(f"{directory}: is the current folder or holds it; an export replaces its folder whole")


def _check_stored_program(model: CompiledTransformer) -> None:
    """ExportError unless a compiled model's weights are its stored program's (a trained model
    has no program's weights to match): the export's circuit map is read off that program."""
    if model.card.trained is not None or model.card.disguised is not None:  # no circuit of the program's to match
        return
    from ..errors import StoredProgramError
    from ..pipeline.reading import relower
    from ..verify.sites import check_weights

    try:
        if model.card.superposition is not None:  # its weights are the plain circuit's, superposed
            from ..verify.superposed import check_superposed

            check_superposed(model)
            return
        check_weights(model, relower(model))
    except StoredProgramError as error:
        raise ExportError(str(error)) from None


def _check_options(to: str, layernorm: str, self_contained: bool) -> None:
    """The options each target takes: --layernorm active and --self-contained are GPT-2's."""
    if to != "hf-gpt2" and self_contained:
        raise ExportError(f"--self-contained is for --to hf-gpt2 ({to} takes its masks as the attention mask)")
    if to == "tl-native" and layernorm != "exact":
        raise ExportError("--layernorm is for the norms of hf-gpt2 and hf-llama: tl-native has none")
    if to == "hf-llama" and layernorm != "exact":
        raise ExportError("--layernorm active is for hf-gpt2: hf-llama's RMSNorm is exported exact (ε 2^80, gain 2^40)")


@dataclass(frozen=True)
class Built:
    """One export's files before they are written: the config writer, the weights, infoflow.json."""

    write_config: Callable[[Path], None]
    tensors: dict[str, torch.Tensor]
    info: dict[str, Any]


def _compiled_bound(model: CompiledTransformer) -> float | None:
    return None if model.card.trained is not None else model.card.a_priori_bound


def _built(model: CompiledTransformer, layout: ExportLayout | NativeLayout, io: ExportIO, ln: dict[str, Any],
           to: str, bound: float | None, write_config: Callable[[Path], None],
           tensors: dict[str, torch.Tensor]) -> Built:
    from .circuit import exported_circuit

    info = export_info(model, layout, io, ln, to, exported_circuit(model, layout, to))
    info["a_priori_bound"], info["compiled_bound"] = bound, _compiled_bound(model)
    penalties = getattr(layout, "penalties", None)
    info["self_contained"] = None if penalties is None else penalties.json()
    return Built(write_config, tensors, info)


def _gpt2(model: CompiledTransformer, dtype: torch.dtype, layernorm: str, ln_eps: float | None,
          ln_constant: float | None, self_contained: bool) -> Built:
    """The hf-gpt2 export (:mod:`.weights`; :mod:`.active`, :mod:`.penalty`)."""
    from .penalty import PenaltyError

    try:
        layout = plan(model, self_contained, dtype)
    except PenaltyError as error:
        raise ExportError(str(error)) from None
    bound = _compiled_bound(model)
    if layernorm == "active":
        from .active import STANDARD_LN_EPS, choose

        try:
            active = choose(model, layout, STANDARD_LN_EPS if ln_eps is None else ln_eps, ln_constant)
        except ValueError as error:
            raise ExportError(str(error)) from None
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, 1.0, active.constant, active.reader_scale)
        ln, ln_eps = active.json(), active.eps
        bound = None if bound is None else bound + active.share
    else:
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, EXACT_LN_GAIN)
        ln, ln_eps = {"mode": "exact", "eps": EXACT_LN_EPS, "gain": EXACT_LN_GAIN, "constant": 1.0}, EXACT_LN_EPS
    io = ExportIO.of(model, layout.slot_masks, w_x, cls, self_contained)
    config = gpt2_config(layout, dtype, ln_eps)
    return _built(model, layout, io, ln, "hf-gpt2", bound, config.save_pretrained, tensors)


def _llama(model: CompiledTransformer, dtype: torch.dtype) -> Built:
    """The hf-llama export (:mod:`.llama`): GPT-2's tensors on Llama's modules, exact RMSNorm."""
    from .llama import llama_config, llama_state_dict

    layout = plan(model)
    gpt2, w_x, cls = gpt2_state_dict(model, layout, dtype, EXACT_LN_GAIN)
    io = ExportIO.of(model, layout.slot_masks, w_x, cls, positions=gpt2["transformer.wpe.weight"])
    ln = {"mode": "exact", "norm": "RMSNorm", "eps": EXACT_LN_EPS, "gain": EXACT_LN_GAIN, "constant": 1.0,
          "computed_in": "float32"}
    config = llama_config(layout, dtype, EXACT_LN_EPS)
    return _built(model, layout, io, ln, "hf-llama", _compiled_bound(model), config.save_pretrained,
                  llama_state_dict(gpt2, layout, 1.0))


def _native(model: CompiledTransformer, dtype: torch.dtype) -> Built:
    """The tl-native export (:mod:`.native`)."""
    from .native import CONFIG_FILE, native_config, native_plan, native_state_dict

    layout = native_plan(model)
    tensors, w_x, cls = native_state_dict(model, layout, dtype)
    io = ExportIO.of(model, layout.slot_masks, w_x, cls, sink=False)
    config = native_config(layout, dtype)

    def write_config(folder: Path) -> None:
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")

    return _built(model, layout, io, {"mode": "none"}, "tl-native", _compiled_bound(model), write_config, tensors)


def export(model: ModelSource, directory: str | os.PathLike[str], to: str = "hf-gpt2",
           layernorm: str = "exact", dtype: torch.dtype | None = None, force: bool = False,
           ln_eps: float | None = None, ln_constant: float | None = None, self_contained: bool = False) -> Path:
    """Write ``model`` as a Hugging Face GPT-2 (or Llama, or TransformerLens-native) directory
    (module docstring); returns its path.

    ``dtype`` is the exported weights' (default: the model's). ``layernorm``: ``exact``
    (ε_LN = 2^80, gain 2^40: LayerNorm(h) = h) or ``active`` (ε_LN = ``ln_eps``, default 1e-5,
    gain 1, a ±C pair, C from the share of ε the compiled bound leaves or ``ln_constant``:
    :mod:`.active`; the stored bound adds the LayerNorm's share). ``self_contained``: the
    structural masks as score penalties in the weights (:mod:`.penalty`): no attention mask is
    passed, inputs have exactly T tokens. ``to="hf-llama"`` (:mod:`.llama`) and ``"tl-native"``
    (:mod:`.native`) take neither. Raises :class:`ExportError` for a bad target, LayerNorm mode
    or option, penalties that cannot be exact, or an existing non-empty ``directory`` without
    ``force``. ``model`` may be the path of its file.

    Args:
        model: a compiled model, or the path of its file.
        directory: the folder to write.
        to: ``hf-gpt2``, ``hf-llama`` or ``tl-native``.
        layernorm: ``exact`` or ``active``.
        dtype: the exported weights' dtype (default the model's).
        force: replace an existing non-empty ``directory``.
        ln_eps: the active LayerNorm's ε.
        ln_constant: the active LayerNorm's constant C.
        self_contained: the structural masks as score penalties in the weights.

    Returns:
        The directory's path.

    Raises:
        ExportError: a bad target, LayerNorm mode or option, penalties that cannot be exact, or
            an existing non-empty directory without ``force``.
    """
    from ..transformer.arguments import model_argument

    model = model_argument(model, "export")
    _check_stored_program(model)
    model = vector_view(model)
    directory = Path(directory)
    _check_target(directory, to, layernorm, force)
    _check_options(to, layernorm, self_contained)
    dtype = model.dtype if dtype is None else dtype
    if to == "tl-native":
        built = _native(model, dtype)
    elif to == "hf-llama":
        built = _llama(model, dtype)
    else:
        built = _gpt2(model, dtype, layernorm, ln_eps, ln_constant, self_contained)
    _write(directory, built, force)
    return directory


def _write(directory: Path, built: Built, force: bool) -> None:
    """The config, model.safetensors and infoflow.json into a temporary sibling, then renamed."""

    parent = directory.resolve().parent
    temporary = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=parent))
    try:
        os.chmod(temporary, umask_mode(directory=True))  # mkdtemp makes 0700 whatever the umask
        built.write_config(temporary)
        _save_tensors(built.tensors, temporary / "model.safetensors", directory)
        (temporary / INFO_FILE).write_text(json.dumps(built.info, indent=1) + "\n", encoding="utf-8")
        for written in temporary.iterdir():  # safetensors writes 0600 whatever the umask
            os.chmod(written, umask_mode())
        if directory.exists():
            if not force and any(directory.iterdir()):
                raise ExportError(f"{directory}: the folder exists and is not empty (use --force to replace it)")
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".old", dir=parent))
            os.replace(directory, old / "previous")
            os.replace(temporary, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, directory)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _save_tensors(tensors: dict[str, torch.Tensor], path: Path, directory: Path) -> None:
    """``model.safetensors``; safetensors reports a failed write (a full disk) as its own
    SafetensorError: an ExportError naming the export's folder and the reason."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata={"format": "pt"})
    except SafetensorError as error:
        raise ExportError(f"{directory}: cannot write model.safetensors: {error}") from None


# ---------------------------------------------------------------------------- reading back


def read_info(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``infoflow.json`` of an export; ExportError when the folder is not one."""
    path = Path(directory) / INFO_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ExportError(f"{directory}: not an infoflow export ({INFO_FILE} nests too deeply)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"{directory}: not an infoflow export ({INFO_FILE}: {error})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ExportError(f"{directory}: not an infoflow export ({INFO_FILE} has no format {FORMAT!r})")
    return info


def export_io(target: Any) -> ExportIO:
    """The inputs/outputs helper of an export directory, an :class:`ExportedModel`, or a compiled
    model (its export layout, computed on the spot)."""
    if isinstance(target, ExportedModel):
        return target.io
    if isinstance(target, CompiledTransformer):
        target = vector_view(target)
        layout = plan(target)
        from .weights import embedding_of

        w_x, cls = embedding_of(target, layout)
        return ExportIO.of(target, layout.slot_masks, w_x.to(target.dtype), cls.to(target.dtype))
    return ExportIO.from_json(read_info(target))


def export_inputs(target: Any, x: torch.Tensor) -> Mapping[str, torch.Tensor | None]:
    """``hf_model(**export_inputs(DIR, x))``: inputs_embeds (B, T'+2, width) and the attention
    mask (B, n_head, T'+2, T'+2) for x (B, T', d) (:mod:`.inputs`).

    Args:
        target: an export directory (or its :class:`ExportedModel`).
        x: inputs (B, T', d), or token ids (B, T').

    Returns:
        The keyword arguments of the Hugging Face model's forward.

    Raises:
        ExportError: a directory that is not an export.
    """
    return export_io(target).arguments(x)


def export_outputs(target: Any, outputs: Any) -> torch.Tensor:
    """y from the HF model's outputs (or its logits): (B,), (B, K), per token (B, T'), (B, T', K).

    Args:
        target: an export directory (or its :class:`ExportedModel`).
        outputs: the Hugging Face model's outputs, or its logits.

    Returns:
        The compiled model's output y.

    Raises:
        ExportError: a directory that is not an export.
    """
    logits = outputs.logits if hasattr(outputs, "logits") else outputs
    return export_io(target).outputs(logits)


#: the longest input an export is probed with when read (:meth:`ExportedModel._check_runs`)
PROBE_LENGTH = 4096


class ExportedModel(nn.Module):
    """An export read back: ``forward(x)`` = the HF model's output for x, as ``model(x)`` gives
    it; ``card`` (:class:`~infoflow_dsl.transformer.card.ExportCard`) holds the export's ε, bound
    and program (what ``check`` reads)."""

    card: ExportCard

    @property
    def config(self) -> dict[str, Any]:
        """The card as JSON."""
        return self.card.to_json()

    def __init__(self, directory: str | os.PathLike[str], dtype: torch.dtype | None = None) -> None:
        super().__init__()
        info = read_info(directory)
        self.info = info
        try:  # infoflow.json as written by export: anything else is the folder's fault, not a crash
            self.io = ExportIO.from_json(info)
            layout = info["layout"]
            self.shape = (int(layout["n_inner"]), int(layout["n_head"]), int(layout["width"]))
            self.attention = (int(layout["n_layers"]), int(layout["head_dim"]))
            self.T, self.d = self.io.T, self.io.d
            if isinstance(self.T, bool) or not isinstance(self.T, int) or not 1 <= self.T <= MAX_LENGTH:
                raise ValueError(f"input T must be a whole number in 1..{MAX_LENGTH:,}, got {self.T!r}")
            self.d_model = int(layout["width"])
            self.io.check_shapes(self.d_model)
            trained = {} if info.get("trained") is None else {"trained": info["trained"]}
            self.card = ExportCard.from_json({"program": info["program"], "eps": info["eps"],
                                              "a_priori_bound": info["a_priori_bound"], "T": self.T,
                                              "dtype": info["dtype"], **trained})
            to = info["to"]
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError, RecursionError) as error:
            raise ExportError(f"{directory}: its {INFO_FILE} is not an export's ({type(error).__name__}: "
                              f"{str(error)[:200]})") from None
        try:
            self.hf = load_export_model(directory, to, dtype or self.io.w_x.dtype)
        except ExportError:
            raise
        except Exception as error:  # transformers reading the folder's files: whatever it raises is theirs
            raise ExportError(f"{directory}: cannot load the exported model ({type(error).__name__}: "
                              f"{str(error)[:300]})") from None
        self._check_runs(directory)

    def _check_runs(self, directory: str | os.PathLike[str]) -> None:
        """One forward on the shortest input: files that each read well but do not fit together
        (a width in infoflow.json that is not the weights') are refused here, not at first use. An
        export that reads exactly T tokens (self-contained, or so compiled) is probed at T when
        T ≤ PROBE_LENGTH (its attention is quadratic in T), else at first use."""
        exact = self.io.exact_length_only or self.io.self_contained
        if exact and self.T > PROBE_LENGTH:
            return
        shortest = self.T if exact else self.io.min_length
        try:
            probe = (torch.zeros(1, shortest, dtype=torch.int64) if self.token_input
                     else torch.zeros(1, shortest, self.d, dtype=self.dtype))
            with torch.no_grad():
                self(probe)
        except (RuntimeError, ValueError, TypeError, IndexError) as error:
            raise ExportError(f"{directory}: its files do not make one model ({type(error).__name__}: "
                              f"{str(error)[:300]})") from None

    @property
    def token_input(self) -> bool:
        """Whether the export reads token ids (a token model's: :func:`vector_view`)."""
        return self.io.vocabulary > 0

    @property
    def dtype(self) -> torch.dtype:
        return next(self.hf.parameters()).dtype

    def model_size(self) -> ModelSize:
        """What a forward costs (the measurement's estimate): layers × heads of width head_dim."""
        n_inner, n_head, width = self.shape
        layers, head_dim = self.attention
        return ModelSize(parameters=sum(p.numel() for p in self.hf.parameters()),
                         pair_width=layers * n_head * (2 * head_dim + 8), d_model=width, widest_hidden=n_inner,
                         itemsize=torch.empty(0, dtype=self.dtype).element_size())

    @property
    def device(self) -> torch.device:
        return next(self.hf.parameters()).device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y for x (B, T', d) (a token export: ids (B, T')), in batches (:func:`~.hf.forward_in_batches`)."""
        return forward_in_batches(self.hf, self.io, x, shape=self.shape)


def load_exported(directory: str | os.PathLike[str], dtype: torch.dtype | None = None) -> ExportedModel:
    """An export directory read back as an :class:`ExportedModel`.

    Args:
        directory: an export directory.
        dtype: the dtype to load in (default the export's).

    Returns:
        The :class:`ExportedModel`: the Hugging Face model with what ``infoflow.json`` records.

    Raises:
        ExportError: a directory that is not an export, or whose files do not fit together.
    """
    return ExportedModel(directory, dtype)
