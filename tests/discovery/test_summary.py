"""discovery/summary.py: the tables the summary writes, from rows made by hand."""

from __future__ import annotations

from typing import Any

from infoflow_dsl.discovery.summary import FIELD_EDGE_LISTS, acdc_tasks, field_edge_lists


def _row(model: str, method: str, ablation: str, **fields: Any) -> dict[str, Any]:
    return {"model": model, "tier": "plain", "method": method, "ablation": ablation, **fields}


def test_the_fields_edge_lists_stand_beside_the_edges_the_truth_needs() -> None:
    rows = [_row("tracr_reverse", "exact", "zero", necessary=7, edges=7),
            _row("tracr_reverse", "exact", "resample", necessary=2, edges=7),
            _row("tracr_reverse", "eap", "resample", necessary=2, edges=7)]  # not exact's: not read
    table = field_edge_lists(rows)
    assert len(table) == 2 + len(FIELD_EDGE_LISTS)
    assert table[2].startswith("| tracr_reverse | zero | embedding → A0") and table[2].endswith("| 10 | 7 of 7 |")
    assert table[3] == "| tracr_reverse | resample | embedding → A3 V; A3 → output | 2 | 2 of 7 |"
    assert table[4].endswith("| 5 | – |")  # no row for frac_prevs: nothing to set beside


def test_the_acdc_tasks_table_lists_acdc_and_eap_under_zero_and_resample() -> None:
    rows = [_row(task, method, ablation, auroc=0.5, auroc_fixed=0.25)
            for task in ("tracr_reverse", "tracr_frac_prevs") for method in ("acdc", "eap", "exact")
            for ablation in ("zero", "mean", "resample")]
    table = acdc_tasks(rows)
    assert len(table) == 2 + 2 * 2 * 2  # two tasks × (acdc, eap) × (zero, resample)
    assert "| tracr_reverse | acdc | zero | 0.500 | 0.250 |" in table


def test_a_value_that_rounds_to_zero_is_shown_without_a_minus_sign() -> None:
    from infoflow_dsl.discovery.summary import fixed

    assert [fixed(v) for v in (-1e-6, -0.0, 1e-6, -0.0004, -0.0005001, -0.25, 1.0)] == [
        "0.000", "0.000", "0.000", "0.000", "-0.001", "-0.250", "1.000"]


def test_the_discover_report_prints_a_faithfulness_of_minus_a_millionth_as_zero() -> None:
    """Seen: ``k=1 -0.000``."""
    from types import SimpleNamespace

    from infoflow_dsl.cli.discover import summary_text

    point = SimpleNamespace(k=1, faithfulness=-1e-6, certified=False)
    result = SimpleNamespace(necessary=(), scores={}, graph_edges=(), auroc=None, auroc_graph=-1e-7, node_auroc=None,
                             faithful=[point], cost={"forwards": 1, "backwards": 0, "seconds": 0.0}, method="random",
                             ablation="zero", metric="kl")
    text = summary_text("m", result)
    assert "k=1 0.000" in text and "-0.000" not in text


def test_the_mib_table_sets_cpr_and_cmd_beside_each_method_and_ablation() -> None:
    from infoflow_dsl.discovery.summary import mib_table

    curve = [{"k": 1, "faithfulness": 0.0}, {"k": 10, "faithfulness": 1.0}]
    rows = [{**_row("m", method, ablation, candidates=10, faithfulness=curve), "tier": "trained"}
            for method in ("exact", "eap") for ablation in ("zero", "resample")]
    table = mib_table(rows, "trained")
    assert table[0] == "| method | CPR, zero | CMD, zero | CPR, resample | CMD, resample |"
    assert table[2] == "| exact | 0.450 | 0.450 | 0.450 | 0.450 |" and len(table) == 4
