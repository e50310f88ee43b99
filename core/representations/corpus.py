"""Corpora of short documents: the built-in sample corpus and parsing of uploads.

Everything here is pure (no Streamlit): bytes or text in, ``list[Document]`` out.
A file that cannot be read raises ``CorpusError`` with a sentence for the user.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from core.errors import UserFacingError
from core.model.models import first_line

SAMPLE_CORPUS_PATH = Path(__file__).parent.parent / "data" / "sample_corpus.csv"

MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_DOCUMENTS = 500
MAX_DOCUMENT_CHARS = 5_000
MAX_TITLE_CHARS = 120
UPLOAD_TYPES = ("txt", "csv", "parquet")

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LETTER = re.compile(r"[^\W\d_]")


class CorpusError(UserFacingError, ValueError):
    """An uploaded or pasted corpus cannot be used. The message is a sentence meant for the user."""


@dataclass(frozen=True)
class Document:
    """One document of a corpus: a title to show, the text the model reads, and an optional genre."""

    title: str
    text: str
    genre: str = ""


@lru_cache(maxsize=1)
def _sample_rows() -> tuple[Document, ...]:
    with SAMPLE_CORPUS_PATH.open(encoding="utf-8", newline="") as handle:
        return tuple(Document(row["title"], row["text"], row["genre"]) for row in csv.DictReader(handle))


def sample_corpus() -> list[Document]:
    """The built-in corpus: short original documents in six genres, each with a title."""
    return list(_sample_rows())


QUOTED_CHARS = 40  # a title or a document's start quoted in a sentence: at most this many characters, then "…"


def first_words(text: str, words: int = 6, chars: int = QUOTED_CHARS) -> str:
    """The first ``words`` words of ``text``, cut to ``chars`` characters, with "…" when anything is left out."""
    split = text.split()
    head = " ".join(split[:words])
    cut = head[:chars].rstrip()
    return cut + ("…" if len(split) > words or len(cut) < len(head) else "")


def _default_title(index: int, text: str) -> str:
    return f"{index + 1}. {first_words(text)}"


def _check_documents(documents: list[Document], source: str) -> list[Document]:
    if not documents:
        raise CorpusError(f"{source} has no text: it needs at least one document.")
    if len(documents) > MAX_DOCUMENTS:
        raise CorpusError(
            f"{source} has {len(documents):,} documents; the limit is {MAX_DOCUMENTS:,}. Use a smaller corpus."
        )
    for i, doc in enumerate(documents):
        if len(doc.text) > MAX_DOCUMENT_CHARS:
            # one sentence whatever the document: a few of its words quoted, the source in lower case mid-sentence
            raise CorpusError(
                f"Document {i + 1} of {source[:1].lower() + source[1:]} (“{first_words(doc.text)}”) has "
                f"{len(doc.text):,} characters, more than the {MAX_DOCUMENT_CHARS:,} a document may have: split it "
                "into shorter documents."
            )
    return documents


def documents_from_text(text: str, *, source: str = "The pasted text") -> list[Document]:
    """One document per block of lines separated by a blank line; titles are the first words."""
    blocks = [block.strip() for block in _BLANK_LINE.split(text.replace("\r\n", "\n").replace("\r", "\n"))]
    blocks = [block for block in blocks if block]
    return _check_documents([Document(_default_title(i, b), b) for i, b in enumerate(blocks)], source)


def _check_size(data: bytes, filename: str) -> None:
    if not data:
        raise CorpusError(f"The file {filename} is empty.")
    if len(data) > MAX_UPLOAD_BYTES:
        raise CorpusError(
            f"The file {filename} has {len(data) / 1e6:.1f} MB; the limit is {MAX_UPLOAD_BYTES / 1e6:.1f} MB."
        )


def _decode(data: bytes, filename: str) -> str:
    if b"\x00" in data:
        raise CorpusError(f"The file {filename} looks like a binary file, not text. Upload a UTF-8 .txt or .csv file.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"The file {filename} is not UTF-8 text (byte {err.start + 1} cannot be read). "
            "Save it as UTF-8 and upload it again."
        ) from err


def file_kind(filename: str) -> str:
    """``txt``, ``csv`` or ``parquet`` from the file name; anything else raises ``CorpusError``."""
    kind = Path(filename).suffix.lower().lstrip(".")
    if kind not in UPLOAD_TYPES:
        raise CorpusError(f"The file {filename} is not a .txt, .csv or .parquet file.")
    return kind


def documents_from_txt(data: bytes, filename: str = "the file") -> list[Document]:
    """A .txt upload: one document per blank-line-separated block."""
    _check_size(data, filename)
    return documents_from_text(_decode(data, filename), source=f"The file {filename}")


CSV_DELIMITERS = ",;\t"
_DELIMITER_NAMES = {",": "commas", ";": "semicolons", "\t": "tabs"}


def _delimiter(text: str) -> str:
    """The delimiter of a CSV text: the one of , ; tab that splits the header and the first rows into the
    same number of fields (``csv.Sniffer``); a comma when none does (a table of one column)."""
    sample = "\n".join(text.splitlines()[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS).delimiter
    except csv.Error:
        return ","


def read_csv_text(text: str, source: str) -> pd.DataFrame:
    """A CSV text as a table of strings, delimiter detected; raises ``CorpusError`` naming the problem.

    Every row must have as many fields as the header: a row with more (a comma inside an unquoted
    field) would otherwise shift its fields or turn its first field into the index.
    """
    delimiter = _delimiter(text)
    named = f"{source[:1].upper()}{source[1:]}"
    try:
        rows = [row for row in csv.reader(io.StringIO(text), delimiter=delimiter, strict=True) if any(f.strip() for f in row)]
    except csv.Error as err:  # an unclosed quote, a stray quote inside a field
        raise CorpusError(f"{named} is not a readable csv table ({err}).") from err
    if not rows:
        raise CorpusError(f"{named} has no rows.")
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise CorpusError(
                f"Row {number} of {source} has {len(row)} fields but its header has {width} (separated by "
                f"{_DELIMITER_NAMES[delimiter]}). A field that contains the separator must be in double quotes, "
                f'for example "The bank, of the river.",river.'
            )
    table = pd.read_csv(io.StringIO(text), sep=delimiter, dtype=str, keep_default_na=False, index_col=False)
    table.columns = [str(c).strip() for c in table.columns]
    return table


def require_text_column(table: pd.DataFrame, name: str, source: str) -> None:
    """Raise ``CorpusError`` if the column ``name`` (any case) exists but holds no words (numbers, empty)."""
    for column in table.columns:
        if str(column).strip().lower() == name and str(column) not in text_columns(table):
            raise CorpusError(
                f"The column `{column}` of {source} holds no words (only numbers or empty cells). "
                f"Put the text in the `{column}` column, or rename the columns."
            )


def read_table(data: bytes, filename: str) -> pd.DataFrame:
    """A .csv or .parquet upload as a table of strings (the caller picks the text column)."""
    _check_size(data, filename)
    kind = file_kind(filename)
    try:
        if kind == "csv":
            table = read_csv_text(_decode(data, filename), f"the file {filename}")
        elif kind == "parquet":
            table = pd.read_parquet(io.BytesIO(data))
        else:
            raise CorpusError(f"The file {filename} is a text file, not a table.")
    except CorpusError:
        raise
    except Exception as err:  # pandas and pyarrow raise many types for a malformed file
        raise CorpusError(f"The file {filename} is not a readable {kind} table ({first_line(str(err) or type(err).__name__)}).") from err
    if table.empty or not len(table.columns):
        raise CorpusError(f"The file {filename} has no rows.")
    if not text_columns(table):
        raise CorpusError(f"The file {filename} has no column of text.")
    require_text_column(table, "text", f"the file {filename}")
    return table



def text_columns(table: pd.DataFrame) -> list[str]:
    """Names of the columns that hold text (strings, some with letters: not numbers), in table order."""
    columns = []
    for name in table.columns:
        values = table[name].dropna()
        if len(values) and values.map(lambda v: isinstance(v, str)).all() and values.str.contains(_LETTER).any():
            columns.append(str(name))
    return columns


def guess_text_column(table: pd.DataFrame) -> str:
    """``text`` when there is such a column, else the text column with the longest entries."""
    columns = text_columns(table)
    for name in columns:
        if name.strip().lower() == "text":
            return name
    return max(columns, key=lambda name: table[name].fillna("").str.len().mean())


def guess_title_column(table: pd.DataFrame) -> str | None:
    """``title`` (or ``name``) when there is such a column, else None."""
    lowered = {name.strip().lower(): name for name in text_columns(table)}
    return lowered.get("title") or lowered.get("name")


def documents_from_table(
    table: pd.DataFrame, text_column: str, title_column: str | None = None, *, source: str = "The table"
) -> list[Document]:
    """One document per row with non-empty text; rows with empty text are skipped."""
    if text_column not in table.columns:
        raise CorpusError(f"{source} has no column called {text_column}.")
    if title_column is not None and title_column not in table.columns:
        raise CorpusError(f"{source} has no column called {title_column}.")
    documents = []
    for row, value in enumerate(table[text_column]):
        text = value.strip() if isinstance(value, str) else ""
        if not text:
            continue
        title = table[title_column].iloc[row] if title_column else None
        title = " ".join(str(title).split())[:MAX_TITLE_CHARS] if isinstance(title, str) and title.strip() else ""
        documents.append(Document(title or _default_title(row, text), text))
    return _check_documents(documents, source)
