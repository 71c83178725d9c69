"""The whole compiler as a fixed chain of named stages, each a pure function of the one before,
and the reading of a compiled model back.

:func:`~.compiling.compile_program` (``ifl.compile``) runs::

    program  = program_argument(...)       1 load       language/load.py      text -> typed program
    tree     = build_tree(program)         2 tree       analysis/tree.py      -> comparison tree
    schedule = build_schedule(tree, ...)   3 schedule   analysis/schedule.py  -> heads and layers
    route    = choose_route(...)              (tokens, efficient or gather: lowering.choose_route)
    lowering = LOWERINGS[route](...)       4 lower      compiler/vectors/, compiler/tokens/ -> circuit IR
    model    = assemble_model(...)         5 assemble   compiler/assemble.py  -> tensors, the model
    packed   = superposed_weights(...)     6 superpose  compiler/superposition/ (with --residual only)
    measured = measure_model(...)          7 measure    measure/measurement.py -> its error, stored

The modules, by what they do:

- :mod:`.lowering`: stages 2-4 (``build_circuit``, ``certified_lowering``), the routes;
- :mod:`.compiling`: the chain, stages 5-7, and the refusal of an uncertified model;
- :mod:`.scheduling`: the schedule ``compile`` builds, which ``analyze`` reports;
- :mod:`.analyzing`: ``ifl.analyze``;
- :mod:`.reading`: a compiled model read back (its stored program, its circuit relowered);
- :mod:`.devices`: dtype and device.

Nothing is imported here: ``analyze`` of a program over vectors stays light (no torch).
"""
