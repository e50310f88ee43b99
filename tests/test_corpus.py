"""core.representations.corpus: the sample corpus, and parsing of .txt, .csv, .parquet and pasted corpora."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest

from core.representations.corpus import (
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENTS,
    MAX_UPLOAD_BYTES,
    CorpusError,
    Document,
    documents_from_table,
    documents_from_text,
    documents_from_txt,
    guess_text_column,
    guess_title_column,
    read_table,
    sample_corpus,
    text_columns,
)

DATA = Path(__file__).parent / "data"


def test_sample_corpus_is_large_titled_and_in_several_genres():
    corpus = sample_corpus()
    assert len(corpus) >= 60
    assert all(isinstance(doc, Document) and doc.title and doc.text for doc in corpus)
    assert len({doc.title for doc in corpus}) == len(corpus)
    genres = pd.Series([doc.genre for doc in corpus]).value_counts()
    assert 4 <= len(genres) <= 6 and genres.min() >= 10
    for doc in corpus:
        sentences = len(re.findall(r"[.!?](\s|$)", doc.text))
        assert 1 <= sentences <= 6, doc.title  # poems are one or two long sentences
        assert 80 <= len(doc.text) <= 600, doc.title


def test_sample_corpus_is_a_fresh_list():
    corpus = sample_corpus()
    corpus.clear()
    assert len(sample_corpus()) >= 60


def test_txt_blocks_split_on_blank_lines():
    docs = documents_from_txt((DATA / "drift_upload.txt").read_bytes(), "drift_upload.txt")
    assert [d.text for d in docs] == [
        "The first document is here.\nIt has two lines.",
        "The second one.",
        "A third, after CRLF line ends.",
    ]
    assert docs[0].title == "1. The first document is here. It…"
    assert docs[1].title == "2. The second one."


def test_pasted_text_with_a_utf8_bom_and_spaces():
    docs = documents_from_txt("\ufeffOne.\n\n\n  Two words  \n".encode("utf-8"), "x.txt")
    assert [d.text for d in docs] == ["One.", "Two words"]


def test_csv_with_title_and_text_columns():
    table = read_table((DATA / "drift_upload.csv").read_bytes(), "drift_upload.csv")
    assert text_columns(table) == ["title", "author", "text"]
    assert guess_text_column(table) == "text"
    assert guess_title_column(table) == "title"
    docs = documents_from_table(table, "text", "title")
    assert len(docs) == 5  # the row with empty text is skipped
    assert docs[0] == Document("Morning ferry", docs[0].text)
    assert docs[0].text.startswith("The ferry leaves at six, and the gulls")
    assert docs[2].title == "Tomato soup <b>bold</b>"  # kept verbatim; escaping is the figure's job


def test_csv_without_title_column_uses_first_words():
    table = pd.DataFrame({"body": ["alpha beta gamma delta epsilon zeta eta", "short"]})
    docs = documents_from_table(read_table(table.to_csv(index=False).encode(), "t.csv"), "body")
    assert [d.title for d in docs] == ["1. alpha beta gamma delta epsilon zeta…", "2. short"]


def test_guess_text_column_picks_the_longest_entries():
    table = pd.DataFrame({"name": ["a", "b"], "poem": ["a long line of verse", "another long line"]})
    assert guess_text_column(table) == "poem"
    assert guess_title_column(table) == "name"


def test_parquet_round_trip():
    frame = pd.DataFrame({"title": ["P1", "P2"], "text": ["Rain on the roof.", "Sun on the sea."], "n": [1, 2]})
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    table = read_table(buffer.getvalue(), "poems.parquet")
    assert text_columns(table) == ["title", "text"]
    assert documents_from_table(table, "text", "title") == [
        Document("P1", "Rain on the roof."),
        Document("P2", "Sun on the sea."),
    ]


@pytest.mark.parametrize(
    "data, filename, message",
    [
        (b"", "empty.txt", "is empty"),
        (b"\n\n  \n", "blank.txt", "has no text"),
        ((DATA / "drift_binary.csv").read_bytes(), "drift_binary.csv", "binary"),
        ("café".encode("latin-1"), "latin.txt", "not UTF-8"),
        (b"PAR1 this is not parquet", "broken.parquet", "not a readable parquet"),
        (b"a,b\n1,2\n3,4\n", "numbers.csv", "no column of text"),
        (b"title,text\n", "header-only.csv", "no rows"),
        (b'a,b\n"unclosed,2\n', "quote.csv", "not a readable csv"),
        (b"x" * (MAX_UPLOAD_BYTES + 1), "huge.txt", "limit"),
    ],
)
def test_malformed_files_raise_a_sentence(data, filename, message):
    with pytest.raises(CorpusError, match=message) as info:
        if filename.endswith(".txt"):
            documents_from_txt(data, filename)
        else:
            read_table(data, filename)
    assert isinstance(info.value, ValueError)
    assert filename in str(info.value) or "text" in str(info.value)


def test_wrong_extension_is_refused():
    with pytest.raises(CorpusError, match=r"not a \.txt, \.csv or \.parquet"):
        read_table(b"a,b\n", "notes.docx")


def test_caps_on_documents_and_characters():
    with pytest.raises(CorpusError, match=f"limit is {MAX_DOCUMENTS}"):
        documents_from_text("\n\n".join(["doc"] * (MAX_DOCUMENTS + 1)))
    with pytest.raises(CorpusError, match="characters"):
        documents_from_text("word " * (MAX_DOCUMENT_CHARS // 4))
    assert len(documents_from_text("\n\n".join(["doc"] * MAX_DOCUMENTS))) == MAX_DOCUMENTS


def test_table_column_that_does_not_exist():
    table = pd.DataFrame({"text": ["a"]})
    with pytest.raises(CorpusError, match="no column called body"):
        documents_from_table(table, "body")
    with pytest.raises(CorpusError, match="has no text"):
        documents_from_table(pd.DataFrame({"text": ["", "  "]}), "text")
