"""Assertions on what a message says, not how: a few words or numbers each, so a reworded sentence keeps its test."""


def says(message, *facts):
    """``message`` contains every one of ``facts`` (a location like "row 2", a number like "50,000 tokens", a key
    word); the words around them may change."""
    missing = [fact for fact in facts if fact not in message]
    assert not missing, f"{message!r} does not say {missing}"
    return True
