"""Issue 50 item 7: a small probability or share is written by the app's rule for small numbers in every sentence
(``core.maths.numbers.probability``: two significant digits, "less than 0.0001%" below 1e-6), never "0.00%"."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

from viz.effects import knockout_target_sentence

ROOT = Path(__file__).resolve().parents[1]


def test_a_tenfold_rise_of_a_small_probability_reads_as_one():
    """The review's case: the target's probability rose from 1.1e-6 to 1.2e-5 with the knock-out."""
    sentence = knockout_target_sentence("·bank", 5, math.log(1.1e-6), math.log(1.2e-5))
    shown = re.search(r"probability (\S+) → (\S+)\)", sentence).groups()
    assert shown == ("0.00011%", "0.0012%")
    assert "0.00%" not in sentence
    assert "more likely" in sentence  # log p rose: the drop is negative


def _percent_formats(path: Path) -> list[str]:
    """Every ``{value:.N%}`` in an f-string of ``path`` whose value is not a named constant (DEPTHS, GAP_THRESHOLD):
    those values are data, and data can be small."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = "".join(v.value for v in node.format_spec.values if isinstance(v, ast.Constant))
            if spec.endswith("%"):
                value = ast.unparse(node.value)
                if not re.fullmatch(r"[A-Z_]+|d|SMALLEST", value.split("[")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {{{value}:{spec}}}")
    return found


def test_sentences_format_percentages_by_the_rule():
    """No page, widget or figure text formats a measured fraction with a bare ``:.1%`` (which writes 1e-5 as
    "0.0%"); they go through ``core.maths.numbers.percent`` or ``probability``. Core's count fractions (about.py: a
    share of tokens) and the retrieval depths (constants the user picks) are left out."""
    files = [p for folder in ("core", "ui", "viz", "app_pages") for p in sorted((ROOT / folder).rglob("*.py"))
             if p.name != "numbers.py"]
    bare = [f for p in files for f in _percent_formats(p)]
    allowed = {"completeness_gap",  # effects.py writes it only when above GAP_THRESHOLD (5%): never small
               "grid.depths"}  # the needle depths the page offers (0%, 25% …): settings, not measurements
    assert [f for f in bare if not any(a in f for a in allowed)] == []
