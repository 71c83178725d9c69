"""The document: sections in order, the JSON blocks read back exactly, nothing fetched."""

from __future__ import annotations

import re

from pages import page_block

from infoflow_dsl.page.html import ANALYSIS_SECTIONS, SECTIONS, json_block, render_page


def test_a_json_block_cannot_end_its_script_element():
    value = {"source": "a </script><script>alert(1)</script> b", "x": [1.5, None, "é"]}
    block = json_block("ifl-data", value)
    assert block.count("</script>") == 1 and block.endswith("</script>")
    assert page_block(block, "ifl-data") == value


def _analysis_data() -> dict:
    return {"title": "t<1>", "kind": "analysis", "program": {"name": "t.iflow", "source": "target x(1) < 2"},
            "analysis": {"T": 4, "d": 1, "order": 1, "dimension": 1, "verdict": "efficient", "cost_law": "O(1)",
                         "independent_of_T": True, "reason": None, "comparisons": "T", "comparisons_at_T": 4,
                         "layers": 1, "heads": [1], "output": "readout", "defined_at": "readout", "causal": False,
                         "notes": []},
            "graph": [], "schedule": {"T": 4, "heads": [], "info_sets": [{"layer": 0, "token": ["t"],
                                                                         "readout": ["T+1"]}],
                                      "flow": {"columns": ["1", "T+1"], "layers": 0, "heads": []}}}


def test_an_analysis_page_has_its_four_sections_in_order_and_fetches_nothing():
    page = render_page(_analysis_data())
    ids = re.findall(r'<section id="([a-z]+)">', page)
    assert ids == [key for key, _ in ANALYSIS_SECTIONS] and len(SECTIONS) == 9
    assert page_block(page, "ifl-measured") is None and page_block(page, "ifl-data") == _analysis_data()
    assert not re.search(r'(src|href)="(https?:)?//', page) and "@import" not in page and "url(http" not in page
    assert "<title>t&lt;1&gt;: infoflow analysis</title>" in page and "target x(1) &lt; 2" in page
    assert render_page(_analysis_data()) == page


def test_the_analysis_table_says_in_words_what_its_flags_mean():
    """Read by a person: no Python ``True``/``False`` in a cell."""
    page = render_page(_analysis_data())
    assert "<td>parameters against T</td><td>independent of T</td>" in page
    assert "readout (readout), not causal" in page
    assert not re.search(r"<td>(True|False)</td>|: (True|False)<", page)
    growing = _analysis_data()
    growing["analysis"] |= {"independent_of_T": False, "causal": True}
    page = render_page(growing)
    assert "<td>grow with T (the cost law)</td>" in page and "readout (readout), causal" in page


def test_a_models_page_draws_its_edge_graph() -> None:
    """The "Edge graph" section: one line per edge of ``ifl.circuit_graph`` and a row naming it."""
    from html import escape

    from programs import EXAMPLES_DIR

    import infoflow_dsl as ifl

    page = (EXAMPLES_DIR / "min_pairwise.html").read_text(encoding="utf-8")
    section = page.split('<section id="edges">')[1].split("</section>")[0]
    graph = ifl.circuit_graph(EXAMPLES_DIR / "min_pairwise.safetensors")
    assert section.count("<line ") == len(graph.edges) > 0
    for edge in graph.edges:
        assert f"<td>{escape(edge.name)}</td>" in section
