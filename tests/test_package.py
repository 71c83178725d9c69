"""``infoflow_dsl/__init__.py``: the public names, and what importing the package costs.

``import infoflow_dsl`` must not import torch (a second of start-up) nor the optional extras:
the names that need them (``compile``, ``load``, ``hooked``, ``CompiledTransformer``, ...)
resolve on first use (PEP 562). Checked in a fresh interpreter, as a test process has long
imported torch itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Modules that ``import infoflow_dsl`` must leave unimported.
HEAVY = ("torch", "matplotlib", "ray", "transformer_lens", "safetensors", "transformers", "nnsight")


def test_import_loads_no_torch_and_every_public_name_resolves_on_use() -> None:
    script = (
        "import json, sys\n"
        "import infoflow_dsl as ifl\n"
        f"heavy = sorted(set({HEAVY!r}) & set(sys.modules))\n"
        "listed = set(dir(ifl)) >= set(ifl.__all__)\n"
        "kinds = {name: type(getattr(ifl, name)).__name__ for name in ifl.__all__}\n"
        "same = (ifl.compile is ifl.compile_program, ifl.circuit.__module__, ifl.evaluate.__module__)\n"
        "optional = sorted({'transformers', 'nnsight'} & set(sys.modules))\n"
        "print(json.dumps({'heavy': heavy, 'listed': listed, 'kinds': kinds, 'same': same, 'optional': optional}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    found = json.loads(result.stdout)
    assert found["heavy"] == []
    assert found["optional"] == []  # resolving ifl.export and friends imports no transformers or nnsight
    assert found["listed"]
    assert found["kinds"]["CompiledTransformer"] == "type" and found["kinds"]["compile"] == "function"
    assert found["same"] == [True, "infoflow_dsl.verify.sites", "infoflow_dsl.oracle.evaluate"]


def test_every_user_facing_exception_is_reachable_from_the_package_and_lives_in_errors() -> None:
    import inspect

    import infoflow_dsl as ifl
    from infoflow_dsl import errors

    faults = {name for name, value in vars(errors).items() if inspect.isclass(value) and issubclass(value, Exception)}
    assert faults == {"ProgramError", "CompileError", "NoConstruction", "ModelFileError", "StoredProgramError",
                      "ExportError", "TrainError", "SweepError", "UsageError", "WorkloadError", "UncertifiedModel"}
    assert all(getattr(ifl, name) is getattr(errors, name) and name in ifl.__all__ for name in faults)


def test_every_public_function_documents_its_arguments_result_and_errors() -> None:
    """Each function the package face exports has ``Args:``, ``Raises:`` and, unless it returns
    nothing, ``Returns:`` sections (Google style, as the docs and ``help()`` show them)."""
    import inspect

    import infoflow_dsl as ifl

    missing = []
    for name in ifl.__all__:
        value = getattr(ifl, name)
        if not inspect.isfunction(value):
            continue
        doc = inspect.getdoc(value) or ""
        wanted = ["Args:", "Raises:"] + ([] if inspect.signature(value).return_annotation in (None, "None")
                                         else ["Returns:"])
        missing += [f"{name}: {section}" for section in wanted if section not in doc]
    assert missing == []
