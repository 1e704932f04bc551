"""Reading a serialised Vega-Lite spec in tests."""


def spec_nodes(node):
    """Every dict in a spec (layers, concatenations, encodings …), depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from spec_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from spec_nodes(value)
