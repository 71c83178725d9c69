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
