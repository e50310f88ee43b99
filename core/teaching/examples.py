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

# Clean and corrupted prompts of the same token length (on SmolLM2 and GPT-2), with the answer and the wrong token:
# offered on the Patching page; the first is the guided tour's patching step.
PATCHING_PRESETS: dict[str, tuple[str, str, str, str]] = {
    "Who gets the drink (names)": ("When Mary and John went to the store, John gave a drink to",
                                   "When Mary and John went to the store, Mary gave a drink to", " Mary", " John"),
    "Capital cities": ("The capital of France is the city of", "The capital of Italy is the city of", " Paris",
                       " Rome"),
}
