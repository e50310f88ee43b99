"""The sentences a learner reads first: facts about the loaded model, the guided tour's numbers, example sentences.
Pages: Home, Guided tour, the sidebar."""
