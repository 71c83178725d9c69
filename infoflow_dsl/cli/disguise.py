"""``infoflowc disguise``: a compiled model made to look trained, computing the same function,
its edge graph carried with it (:mod:`infoflow_dsl.circuits.disguise`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .common import (
    EXIT_OK,
    Command,
    add_model_argument,
    add_output_flag,
    add_seed_flag,
    nonnegative_int,
    positive_int,
    with_compiled_model,
)


def disguise_model(arguments: argparse.Namespace, model: Any) -> None:
    """Write the disguised model and say what it computes and how far it moved."""
    import torch

    from ..circuits.disguise import disguise
    from ..files import check_writable
    from ..measure.vectors import model_inputs
    from ..oracle.tokens import random_ids
    from ..pipeline.reading import program_of
    from ..transformer.io import save

    check_writable(arguments.output, arguments.model)
    try:
        disguised = disguise(model, merge=[_loaded(path, "--merge") for path in arguments.merge],
                             distract=arguments.distract, compress=arguments.compress,
                             split_heads=arguments.split_heads,
                             split_neurons=arguments.split_neurons,
                             shuffle=arguments.shuffle, rotate=arguments.rotate, seed=arguments.seed)
    except ValueError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    program = program_of(model)
    x = random_ids(program, 256, seed=arguments.seed) if program.over_tokens else model_inputs(
        program, 256, seed=arguments.seed).to(model.dtype)
    with torch.no_grad():
        moved = float((disguised(x).double() - model(x).double()).abs().max())
    trained = _loaded(arguments.beside, "--beside") if arguments.stats and arguments.beside else None
    save(disguised, arguments.output)
    print(f"{arguments.output}: {disguised.nonzero_parameter_count():,} nonzero parameters (the model: "
          f"{model.nonzero_parameter_count():,}); the output moved by at most {moved:.3g} on 256 random inputs "
          f"(rounding; ε {model.card.eps:g}); its edge graph: infoflowc circuit {arguments.output} --edges")
    compression = None if disguised.card.disguised is None else disguised.card.disguised.compression
    if compression is not None:
        print(f"residual: {compression['features']} features in {compression['dimensions']} dimensions "
              f"({compression['erased']} erased after their last reader)")
    if arguments.stats:
        from ..circuits.statistics import statistics_table, weight_statistics

        rows = {"compiled": weight_statistics(model, x), "disguised": weight_statistics(disguised, x)}
        if trained is not None:
            rows["trained"] = weight_statistics(trained, x if trained.T >= x.shape[1] else x[:, :trained.T])
        print(statistics_table(rows))


def _loaded(path: Path, flag: str) -> Any:
    """The model a flag names, loaded (a bad file: UsageError naming the flag)."""
    from ..errors import ModelFileError
    from ..transformer.io import load

    try:
        return load(path, device="cpu")
    except ModelFileError as error:
        raise UsageError(f"{flag}: {error}") from None


def command_disguise(arguments: argparse.Namespace) -> int:
    with_compiled_model(arguments.model, lambda model: disguise_model(arguments, model), "disguise")
    return EXIT_OK


def _disguise_arguments(parser: argparse.ArgumentParser) -> None:
    """``disguise MODEL [--merge OTHER] [--distract N] [--compress] [--split-heads [K]] [--split-neurons K]
    [--shuffle] [--rotate] [--stats [--beside TRAINED]] -o OUT``."""
    add_model_argument(parser)
    parser.add_argument("--merge", type=Path, action="append", default=[], metavar="OTHER",
                        help="another compiled model (the same input) whose program joins the model's, its "
                             "output read by nothing (repeatable)")
    parser.add_argument("--distract", type=nonnegative_int, default=0, metavar="N",
                        help="N distractor directions, a distractor head a layer and N distractor units an FFN: "
                             "active on every input, read by nothing the output needs")
    parser.add_argument("--compress", action="store_true",
                        help="the residual below its number of features: each dimension carries several features "
                             "one after another over the depth, an eraser freeing it after a feature's last reader")
    parser.add_argument("--split-heads", type=positive_int, nargs="?", const=2, default=1, metavar="K",
                        help="each head into K heads of the same pattern (K = 2 if not given)")
    parser.add_argument("--split-neurons", type=positive_int, default=1, metavar="K",
                        help="each ReLU unit into K units (ReLU is positively homogeneous)")
    parser.add_argument("--shuffle", action="store_true", help="the heads of each layer and the units of each "
                                                               "FFN in a random order")
    parser.add_argument("--rotate", action="store_true", help="the residual stream by a random orthogonal matrix")
    add_seed_flag(parser, "the passes' seed (0)")
    parser.add_argument("--stats", action="store_true", help="print weight and activation statistics of the model "
                                                             "and its disguise (zeros, distinct values, kurtosis, "
                                                             "stable rank, active units)")
    parser.add_argument("--beside", type=Path, metavar="TRAINED", help="with --stats: a trained model's statistics "
                                                                       "too (infoflowc train)")
    add_output_flag(parser, "the disguised model (.safetensors)", required=True)


DISGUISE = Command("disguise", "make a compiled model look trained, computing the same function, its edge graph "
                   "carried with it", _disguise_arguments, command_disguise)
