"""Every message a user reads comes from a ``UserFacingError`` (issue 49 item 3): the sentences core raises for a
user's input, and ui shows ``str(err)`` only of errors of that kind (a programmer's ``ValueError`` goes to the error
boundary, which logs it and shows a plain sentence instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.attention_heads.induction import induction_scores
from core.causal.logit_attribution import direct_logit_attribution
from core.causal.patching import patch_heads, patch_residual
from core.errors import UserFacingError
from core.outputs.causal_lm import encode
from tests.lm_factory import tiny_lm  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
CLEAN = "When Mary and John went to the store, John gave a drink to"


def test_an_answer_of_several_tokens_is_a_sentence(tiny_lm):
    with pytest.raises(UserFacingError, match="not one; choose a single token"):
        patch_heads(tiny_lm, CLEAN, CLEAN, " hippopotamus", " John")
    with pytest.raises(UserFacingError, match="not one; choose a single token"):
        direct_logit_attribution(tiny_lm, CLEAN, " hippopotamus")


def test_two_prompts_the_model_prefers_alike_are_a_sentence(tiny_lm):
    answer = tiny_lm.tokenizer.decode(encode(tiny_lm, CLEAN)[-1:])  # a single token of this very tokenizer
    with pytest.raises(UserFacingError, match="no difference for patching to restore"):
        patch_residual(tiny_lm, CLEAN, CLEAN, answer, answer)


@pytest.mark.parametrize(("length", "says"), [(40, "more than the model's 64"), (10_000, "ordinary tokens")])
def test_an_induction_length_the_model_cannot_read_is_a_sentence(tiny_lm, length, says):
    assert tiny_lm.max_tokens == 64  # two copies of 40 tokens do not fit
    with pytest.raises(UserFacingError, match=says):
        induction_scores(tiny_lm, length=length)


def test_a_text_without_tokens_is_a_sentence(tiny_lm):
    tiny_lm_no_special = tiny_lm.tokenizer("", add_special_tokens=True)["input_ids"]
    if tiny_lm_no_special:
        pytest.skip("this tokenizer adds a token to an empty text")
    with pytest.raises(UserFacingError, match="no tokens"):
        encode(tiny_lm, "")


def _shown_messages_of_other_errors(tree: ast.AST) -> list[str]:
    """``except`` clauses that catch ``ValueError`` or ``Exception`` by name and put ``str(err)`` or ``{err}`` of it
    on the page (anything but logging it)."""
    found = []
    for handler in ast.walk(tree):
        if not isinstance(handler, ast.ExceptHandler) or handler.name is None or handler.type is None:
            continue
        caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if not any(isinstance(c, ast.Name) and c.id in {"ValueError", "Exception"} for c in caught):
            continue
        for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
            shown = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"
                     and any(isinstance(a, ast.Name) and a.id == handler.name for a in node.args)) or (
                isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name) and node.value.id == handler.name)
            if shown:
                found.append(f"line {handler.lineno}: except {ast.unparse(handler.type)} shows {handler.name}")
                break
    return found


def test_ui_and_pages_show_the_message_only_of_user_facing_errors():
    files = sorted((ROOT / "ui").glob("*.py")) + sorted((ROOT / "app_pages").glob("*.py")) + [ROOT / "app.py"]
    shown = {str(path.relative_to(ROOT)): found for path in files
             if (found := _shown_messages_of_other_errors(ast.parse(path.read_text(encoding="utf-8"))))}
    assert shown == {}


@pytest.mark.parametrize(("source", "found"), [
    ("try:\n    f()\nexcept ValueError as err:\n    st.warning(str(err))\n", True),
    ("try:\n    f()\nexcept (KeyError, ValueError) as e:\n    st.error(f'{e}')\n", True),
    ("try:\n    f()\nexcept UserFacingError as err:\n    st.warning(str(err))\n", False),
    ("try:\n    f()\nexcept ValueError:\n    pass\n", False),
])
def test_the_shown_message_check_finds_each_kind(source, found):
    assert bool(_shown_messages_of_other_errors(ast.parse(source))) is found
