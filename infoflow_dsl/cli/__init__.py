"""The command line only (``infoflowc``): :mod:`.console` is the entry point, :mod:`.main` the
parser and dispatch, :mod:`.common` the exit codes and flag types, one module per command."""
