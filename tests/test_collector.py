"""The collector's threshold while compiling and analysing (infoflow_dsl/collector.py): raised
inside, the caller's restored after, a higher one kept, nested calls left alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.collector import FIRST_GENERATION, fewer_collections


@pytest.fixture
def default_threshold() -> Iterator[tuple[int, int, int]]:
    """Python's default thresholds for the test (conftest raises them for the whole suite)."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_the_threshold_is_raised_inside_and_restored_after_even_on_an_error(default_threshold) -> None:
    seen = []

    @fewer_collections()
    def build(fail: bool) -> None:
        seen.append(gc.get_threshold())
        if fail:
            raise ValueError("refused")

    build(False)
    with pytest.raises(ValueError, match="refused"):
        build(True)
    assert seen == [(FIRST_GENERATION, 10, 10)] * 2
    assert gc.get_threshold() == default_threshold


def test_a_nested_call_leaves_the_outer_setting_and_a_higher_one_is_kept(default_threshold) -> None:
    with fewer_collections():
        with fewer_collections():
            pass
        assert gc.get_threshold()[0] == FIRST_GENERATION  # the inner exit did not restore 700
    gc.set_threshold(50_000, 5, 5)
    with fewer_collections():
        assert gc.get_threshold() == (50_000, 5, 5)
    assert gc.get_threshold() == (50_000, 5, 5)


def test_compile_analyze_and_relower_run_with_the_raised_threshold(default_threshold, monkeypatch) -> None:
    from infoflow_dsl.pipeline import analyzing, lowering, reading

    seen: list[int] = []

    def spy(module: object, name: str) -> None:
        original = getattr(module, name)

        def spying(*args, **kwargs):
            seen.append(gc.get_threshold()[0])
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, spying)

    spy(lowering, "build_circuit")  # compile's lowering
    spy(reading, "build_circuit")  # relower's
    spy(analyzing, "schedule_program")  # analyze's
    source = EXAMPLES_DIR / "min_pairwise.iflow"
    reading.relower(ifl.compile(source, samples=0))
    assert ifl.analyze(source).verdict == "efficient"
    assert seen == [FIRST_GENERATION] * 3
    assert gc.get_threshold() == default_threshold
