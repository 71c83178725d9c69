"""Text -> typed program: grammar, parser, checker, the typed IR and its printers (docs/language.md)."""
