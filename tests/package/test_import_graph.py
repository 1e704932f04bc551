"""No module of toylab/ imports another in a circle, lazy imports inside functions included.

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
