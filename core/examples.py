"""Example sentences offered in the sidebar."""

BANK_RIVER = "I will hike along the bank of a river."
BANK_MONEY = "I will open a new account at my bank and deposit some money."

EXAMPLE_SENTENCES: dict[str, str] = {
    "bank (river)": BANK_RIVER,
    "bank (money)": BANK_MONEY,
    "coreference": "The trophy did not fit in the suitcase because it was too big.",
    "agreement": "The keys to the old cabinet in the hallway are missing.",
    "garden path": "The old man the boats while the young sleep.",
    "two sentences": "The cat sat on the mat. It was happy to be home.",
}

# Offered in the model picker. Only the bundled one works offline; the others need the hub.
SUGGESTED_MODELS: list[str] = [
    "all-MiniLM-L6-v2",
    "bert-base-uncased",
    "distilbert-base-cased",
    "roberta-base",
    "gpt2",
]
