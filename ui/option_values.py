"""What ``ui.page_state.option`` keeps of a widget, without Streamlit: its kind, default and allowed values
(``OptionSpec``), a value checked against them (``valid_value``), and a value read from and written to a URL."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SELECTIONS = {"selectbox", "radio", "segmented_control", "pills", "select_slider"}
BOOLEANS = {"toggle", "checkbox"}
NUMBERS = {"slider", "number_input"}
TEXTS = {"text_area", "text_input"}
# The arguments that set a widget's starting value; ``option`` replaces them with the value it keeps
# (``starting_value_argument``) and sets that value through session state as well.
DEFAULT_ARGUMENTS = ("index", "value", "default")

MISSING = object()

@dataclass
class OptionSpec:
    kind: str
    default: Any
    options: list | None = None
    labels: list[str] | None = None
    low: float | None = None
    high: float | None = None
    max_chars: int | None = None
    open_options: bool = False  # selectbox(accept_new_options=True)


def option_spec(name: str, arguments: dict) -> OptionSpec:
    if name in SELECTIONS:
        options = list(arguments.get("options") or [])
        format_func = arguments.get("format_func")
        labels = [str(format_func(o)) for o in options] if format_func else [str(o) for o in options]
        if name in ("selectbox", "radio"):
            index = arguments.get("index", 0)
            default = options[index] if index is not None and options else None
        elif name == "select_slider":
            default = arguments.get("value", options[0] if options else None)
        else:
            if arguments.get("selection_mode", "single") != "single":
                raise TypeError("option() supports single-choice widgets only")
            default = arguments.get("default")
        return OptionSpec("choice", default, options, labels, open_options=bool(arguments.get("accept_new_options")))
    if name in BOOLEANS:
        return OptionSpec("bool", bool(arguments.get("value", False)))
    if name in NUMBERS:
        low, high = arguments.get("min_value"), arguments.get("max_value")
        default = arguments.get("value", low if low is not None else 0)
        return OptionSpec("number", default, low=low, high=high)
    if name in TEXTS:
        return OptionSpec("text", arguments.get("value") or "", max_chars=arguments.get("max_chars"))
    raise TypeError(f"option() does not know how to keep the state of st.{name}")


def starting_value_argument(name: str, spec: OptionSpec, value: Any) -> dict[str, Any]:
    """The argument that makes ``value`` the widget ``st.<name>``'s default: {} when it cannot (an entry typed into
    a selectbox that accepts new options, which no ``index`` names).

    The browser falls back to a widget's default when it draws the widget without the value session state sent: when
    a rerun started before the widget's code had loaded in a new tab, its value came only with the run before.
    """
    if name in ("selectbox", "radio"):
        index = next((i for i, option in enumerate(spec.options) if option == value), None)
        return {} if index is None else {"index": index}
    if name in ("segmented_control", "pills"):
        return {"default": value}
    return {"value": value}


def valid_value(spec: OptionSpec, value: Any) -> Any:
    """``value`` if the widget can show it, clamped into range when it is a number, else the default."""
    if value is MISSING or value is None:
        return spec.default
    if spec.kind == "choice":
        if value in spec.options or (spec.open_options and isinstance(value, str) and value.strip()):
            return value
        numbers = [o for o in spec.options if isinstance(o, int) and not isinstance(o, bool)]
        if numbers and len(numbers) == len(spec.options) and isinstance(value, int) and not isinstance(value, bool):
            return min(max(value, min(numbers)), max(numbers))
        return spec.default
    if spec.kind == "bool":
        return value if isinstance(value, bool) else spec.default
    if spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
            return spec.default
        if spec.low is not None:
            value = max(value, spec.low)
        if spec.high is not None:
            value = min(value, spec.high)
        return type(spec.default)(value) if isinstance(spec.default, (int, float)) else value
    if not isinstance(value, str):
        return spec.default
    return value[: spec.max_chars] if spec.max_chars else value


def value_from_url(spec: OptionSpec, raw: str) -> Any:
    if spec.kind == "choice":
        for option_value, _label in zip(spec.options, spec.labels):
            if str(option_value) == raw:
                return option_value
        for option_value, label in zip(spec.options, spec.labels):
            if label == raw:  # links written when the URL held the label
                return option_value
        return raw if spec.open_options else MISSING
    if spec.kind == "bool":
        return {"true": True, "1": True, "false": False, "0": False}.get(raw.strip().lower(), MISSING)
    if spec.kind == "number":
        try:
            number = float(raw)
        except ValueError:
            return MISSING
        if isinstance(spec.default, int) and number.is_integer():
            return int(number)
        return number if not isinstance(spec.default, int) else MISSING
    return raw


def value_to_url(spec: OptionSpec, value: Any) -> str:
    if spec.kind == "bool":
        return "true" if value else "false"
    if spec.kind == "number" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
