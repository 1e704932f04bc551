"""No module of toylab/ imports another in a circle, lazy imports inside functions included, and each layer imports
only from its own folder or those listed before it in CONTRIBUTING.md's stack.

The graph is built from the source with ``ast``: an edge for every ``import`` and ``from … import`` anywhere in a
module (relative ones resolved), to the module named or, when the imported name is a submodule, to that
submodule. Its strongly connected components (Tarjan's algorithm) must all be single modules.
"""

import ast
from pathlib import Path

import toylab

PACKAGE = Path(toylab.__file__).parent


def module_name(path, package):
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_folder=PACKAGE):
    """{module: the modules of the package it imports}, for every module below ``package_folder``."""
    modules = {module_name(path, package_folder): path for path in package_folder.rglob("*.py")}
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            graph[name] |= {target for target in targets if target in modules and target != name}
    return graph


def strongly_connected_components(graph):
    """Tarjan's algorithm (recursive: the graph is small)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return components


def test_no_module_imports_in_a_circle():
    cycles = [sorted(component) for component in strongly_connected_components(import_graph()) if len(component) > 1]
    assert cycles == []


def test_the_check_finds_a_circle_made_by_a_lazy_relative_import(tmp_path):
    """A circle closed only by an import inside a function, written relatively, is found."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "low.py").write_text("def later():\n    from ..high import value\n    return value\n")
    (package / "high.py").write_text("from pkg.sub import low\nvalue = 1\n")
    (package / "alone.py").write_text("import pkg.high\n")
    components = strongly_connected_components(import_graph(package))
    assert sorted(sorted(c) for c in components if len(c) > 1) == [["pkg.high", "pkg.sub.low"]]


def test_no_module_of_the_library_imports_the_package_itself():
    """``from toylab import …`` inside toylab/ would run the public __init__ from below: a hidden circle."""
    assert [name for name, targets in import_graph().items() if "toylab" in targets and name != "toylab"] == []



LAYERS = ("catalogue", "engine", "analysis", "training", "state", "your_run", "lessons", "presentation", "cli")


def layer(module):
    """The index in LAYERS of the folder a module lives in (None for toylab itself, text and __main__)."""
    folder = module.split(".")[1] if module.count(".") else None
    return LAYERS.index(folder) if folder in LAYERS else None


def upward_imports(graph):
    """(module, target) pairs where a layer imports one listed after it, or text.py imports any layer."""
    return [(module, target) for module, targets in graph.items() for target in targets
            if layer(target) is not None and (layer(module) is None and module == "toylab.text"
                                              or layer(module) is not None and layer(target) > layer(module))]


def test_each_layer_imports_only_from_itself_or_the_layers_before_it():
    """CONTRIBUTING.md's stack: a module imports from its own folder or one listed above it, never below; text.py,
    which every layer may use, imports none of them."""
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    graph = import_graph()
    graph["toylab.engine.toy"] |= {"toylab.presentation.charts"}
    graph["toylab.text"] |= {"toylab.catalogue.weights"}
    assert set(upward_imports(graph)) == {("toylab.engine.toy", "toylab.presentation.charts"),
                                          ("toylab.text", "toylab.catalogue.weights")}
