"""The README's two commands: the main job runs as written, and CI runs the same test command."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The command lines of the README's first bash block (comments dropped)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_set_up_and_test_command():
    setup, test = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci
    for step in setup.split(" && "):
        if "infoflowc" not in step and "venv" not in step:
            assert any(line.replace("--quiet ", "") == step for line in ci), step


def test_the_main_job_compiles_and_checks_a_shipped_example(tmp_path: Path):
    """Command 1's infoflowc steps, run as written from a copy of the root (the model file lands there)."""
    (tmp_path / "compiled_examples").symlink_to(ROOT / "compiled_examples")
    steps = [shlex.split(step) for step in readme_commands()[0].split(" && ") if "infoflowc" in step]
    assert [s[1] for s in steps] == ["compile", "check"]
    for step in steps:
        done = subprocess.run([sys.executable, "-m", "infoflow_dsl.cli.main", *step[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert "within ε" in done.stdout and (tmp_path / "min_pairwise.safetensors").exists()


def export_blocks() -> list[str]:
    """The Python blocks of the README's Export section, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Export", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_export_sections_loaders_and_targets_run_as_written(tmp_path: Path):
    """transformers, the TransformerLens bridge and nnsight, then the self-contained GPT-2, tl-native and
    hf-llama: one script, from a copy of the root."""
    blocks = export_blocks()
    assert len(blocks) == 6
    assert "AutoModelForCausalLM" in blocks[0] and "build_bridge_from_module" in blocks[1] and "NNsight" in blocks[2]
    assert "self_contained=True" in blocks[3] and "tl-native" in blocks[4] and "hf-llama" in blocks[5]
    (tmp_path / "compiled_examples").symlink_to(ROOT / "compiled_examples")
    done = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "blocks.0.hook_resid_post" in done.stdout and (tmp_path / "min_pairwise_gpt2" / "infoflow.json").exists()
    for folder in ("min_pairwise_sc", "min_pairwise_tl", "min_pairwise_llama"):
        assert (tmp_path / folder / "infoflow.json").exists()
def test_the_tokens_section_runs_as_written():
    """The README's "Tokens" block: sort's tokens in, decoded sorted tokens out, exact without a margin."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Tokens \(language v3\).*?```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    lines = block.group(1).replace('"compiled_examples/', f'"{ROOT}/compiled_examples/').splitlines()
    namespace: dict = {}
    exec("\n".join(lines[:3]), namespace)
    assert eval(lines[3].split("#")[0], namespace) == [[1, 1, 2, 3]]
    assert eval(lines[4].split("#")[0], namespace)["exact"] is True


def test_the_tokens_section_shows_what_run_prints(tmp_path: Path, monkeypatch) -> None:
    """The README's sort block: compile, then `infoflowc run` prints exactly the lines shown."""
    from cli_runner import run_cli

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\$ infoflowc compile (\S+) -o (\S+)\n\$ infoflowc run (.*?)\n(.*?)```", text, re.DOTALL)
    assert block is not None
    source, output, run_line, shown = block.groups()
    monkeypatch.chdir(tmp_path)
    assert run_cli(["compile", str(ROOT / source), "-o", output, "--samples", "0"])[0] == 0
    code, out, _ = run_cli(["run", *shlex.split(run_line)])
    assert code == 0 and out == shown


def test_the_rasp_section_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """The README's RASP block: Tracr's reverse, imported from infoflow_dsl, compiled, run against
    RASP's own evaluator and exported."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## RASP in: .*?```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    lines = block.group(1).splitlines()
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    decoded = next(i for i, line in enumerate(lines) if line.startswith("ifl.decode"))
    exec("\n".join(lines[:decoded]), namespace)
    assert eval(lines[decoded].split("#")[0], namespace) == [["c", "b", "a"]]
    assert eval(lines[decoded + 1].split("#")[0], namespace) == ["c", "b", "a"]
    exec(lines[decoded + 2].split("#")[0], namespace)
    assert (tmp_path / "reverse_gpt2" / "infoflow.json").exists()


def test_the_ground_truth_section_runs_as_written(capsys, monkeypatch) -> None:
    """The README's ground-truth block, from the project's root (it reads a shipped model)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    monkeypatch.chdir(ROOT)
    block = re.search(r"## Ground truth for circuit discovery.*?```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "('input->a1.h0<v>', 'a1.h0->output<out>')" and printed[1] == "['a', 'b']"


def test_the_discovery_section_runs_as_written(capsys, monkeypatch) -> None:
    """The README's circuit-discovery block (EAP's AUROC on reverse printed as the text says)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    monkeypatch.chdir(ROOT)
    block = re.search(r"### Circuit discovery scored against the truth.*?```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["0.643"]



def test_the_docs_say_how_to_try_benchmark_on_the_quick_corpus():
    """The way to try ``infoflowc benchmark`` (issue 54: it was undocumented): the small corpus
    (test_bench builds it: 10 models), named in the README and shown in docs/ground-truth.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`python bench/circuit_corpus.py corpus --quick`" in readme
    guide = (ROOT / "docs" / "ground-truth.md").read_text(encoding="utf-8")
    block = guide[guide.index("**`--quick` builds 10"):][:400]
    assert "python bench/circuit_corpus.py corpus --quick\ninfoflowc benchmark corpus " in block
    script = (ROOT / "bench" / "circuit_corpus.py").read_text(encoding="utf-8")
    assert 'parser.add_argument("--quick"' in script
