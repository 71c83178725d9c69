"""Regenerate the stored outputs under compiled_examples/ from the canonical .iflow programs.

    python scripts/regenerate_examples.py

Writes NAME.analysis.json (what ``infoflowc analyze NAME.iflow --json`` prints). The tests
rebuild these and compare them byte for byte, so run this after changing the analysis.
"""

from __future__ import annotations

from pathlib import Path

import infoflow_dsl as ifl

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"


def main() -> None:
    for source in sorted(EXAMPLES.glob("*.iflow")):
        program = ifl.load_program(source)
        (EXAMPLES / f"{source.stem}.analysis.json").write_text(ifl.analyze(program).to_json(), encoding="utf-8")
        print(f"wrote {source.stem}.analysis.json")


if __name__ == "__main__":
    main()
