"""Every ``# noqa`` in the project's Python names the rules it silences and carries its reason on the same line
(``E402 - after OMP_NUM_THREADS is set`` after the directive's colon), tests included. ruff checks that a ``# noqa`` is needed (RUF100)
but not that it says why, so this test reads every comment of every tracked file."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)
# The directive with its rule codes (CODE[, CODE]) then a separator (``-``, ``–``, ``—``, ``:``, ``(``, ``;``) and a reason with a word in it.
WITH_REASON = re.compile(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s*[-–—:;(].*[A-Za-z]{2,}")


def unexplained_noqa(source: str) -> list[tuple[int, str]]:
    """``(line, comment)`` for every comment holding a ``# noqa`` without rule codes or without a reason."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and NOQA.search(token.string):
            comment = token.string[NOQA.search(token.string).start():]
            if not WITH_REASON.match(comment):
                found.append((token.start[0], token.string))
    return found


def tracked_python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.mark.parametrize(("line", "explained"), [
    ("x = 1  # noqa: E731 - a lambda read as a formula", True),
    ("import a  # noqa: F401 (fixtures: used by name)", True),
    ("import a  # noqa: F401, PLC0415 - optional dependency", True),
    ("x = 1  # noqa: E731", False),  # a rule but no reason
    ("x = 1  # noqa: E731 -", False),  # a separator but no reason
    ("x = 1  # noqa", False),  # a blanket noqa: neither rule nor reason
    ("x = 1  # noqa - because", False),  # a reason but no rule
    ("s = '# noqa'  # a string, not a comment", True),
])
def test_the_check_tells_a_reason_from_none(line, explained):
    assert (unexplained_noqa(line + "\n") == []) == explained


def test_every_noqa_in_the_project_carries_its_reason():
    files = tracked_python_files()
    assert any(f.name == "conftest.py" for f in files) and len(files) > 100, "git ls-files found too few files"
    missing = [f"{path.relative_to(ROOT)}:{line}: {comment}" for path in files
               for line, comment in unexplained_noqa(path.read_text(encoding="utf-8"))]
    assert not missing, "a # noqa without its rule and reason on the same line:\n" + "\n".join(missing)
