"""The draft: who proposes each round's guesses, a draft model, a copy from the context or both,
and the draft model's head and vocabulary (``drafters``, ``suffix``, ``proposal``,
``draft_vocab``)."""
