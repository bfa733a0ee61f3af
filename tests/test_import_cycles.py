"""No import cycles in lumaxlike, counting every import statement: at module level, inside
functions, in ``try`` blocks (only ``if TYPE_CHECKING:`` blocks, which never run, are left
out).

The modules' imports are read with `ast`, not by importing them: the graph is the one
the source draws. An edge ``a -> b`` means a module of ``a`` imports one of ``b``;
importing ``lumaxlike._io.read.raster`` also runs ``lumaxlike._io``'s ``__init__``, so it counts
as importing that package too (from outside it). The graph between the package's
top-level parts (``_io``, ``_model``, ``_provenance``, ...: each subpackage one node) is
checked, and so is the graph between single modules (a package's ``__init__`` one node,
its modules others); a failure names each cycle and the import lines that make it.
"""

import ast
import functools
from collections import defaultdict
from pathlib import Path

import lumaxlike

ROOT = Path(lumaxlike.__file__).parent
PACKAGE = "lumaxlike"


def module_files() -> dict[str, Path]:
    """{dotted module name: file} for every module of the package (``__init__`` files
    under their package's name)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _import_nodes(tree: ast.AST):
    """Every Import / ImportFrom in the tree, at any depth, except under TYPE_CHECKING."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not _type_checking_only(node):
            stack.extend(ast.iter_child_nodes(node))


def imported_modules(name: str, path: Path, modules: dict) -> dict[str, int]:
    """{module of the package imported by module ``name``: first line number}."""
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in _import_nodes(ast.parse(path.read_text(), filename=str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:  # `from x import y`: module x.y if there is one, else x
                targets.append(
                    f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                )
        for target in targets:
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            while target not in modules:  # `import lumaxlike._io.read.raster.x`: an attribute
                target = target.rpartition(".")[0]
            # importing a.b.c runs a's and a.b's __init__ first (those not enclosing `name`)
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                ancestor = ".".join(parts[:depth])
                if ancestor != name and not (name + ".").startswith(ancestor + "."):
                    found.setdefault(ancestor, node.lineno)
    return found


@functools.cache  # read once for the three tests (they do not change it)
def import_graph() -> tuple[dict, dict]:
    """(module graph, top-level graph): {node: {node: "file:line" of an import}}."""
    modules = module_files()
    graph: dict = defaultdict(dict)
    parts: dict = defaultdict(dict)
    for name, path in modules.items():
        graph[name]
        for target, line in imported_modules(name, path, modules).items():
            where = f"{path.relative_to(ROOT.parent)}:{line}"
            graph[name][target] = where
            source_part, target_part = top_level(name), top_level(target)
            if source_part != target_part:
                parts[source_part].setdefault(target_part, where)
    return dict(graph), dict(parts)


def top_level(module: str) -> str:
    """``lumaxlike._io.read.raster`` -> ``lumaxlike._io``; ``lumaxlike`` itself stays."""
    return ".".join(module.split(".")[:2])


def cycles(graph: dict) -> list[list[str]]:
    """One cycle (a closed path, first node repeated last) per strongly connected
    component of more than one node, or a node importing itself (Tarjan's algorithm)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    components = []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                components.append(set(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_closed_path(graph, component) for component in components]


def _closed_path(graph: dict, component: set) -> list[str]:
    """A shortest cycle through the component's first node (breadth-first)."""
    start = min(component)
    previous = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node]):
            if target == start:
                path = [node]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if target in component and target not in previous:
                previous[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def describe(graph: dict, cycle: list[str]) -> str:
    """The cycle's import lines, then every other import between the modules it joins
    (where there are more cycles among them, all are to be broken)."""
    steps = [f"    {a} -> {b}  ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    component = _component(graph, cycle[0])
    also = sorted(
        f"    also {a} -> {b}  ({graph[a][b]})"
        for a in component
        for b in graph[a]
        if b in component and (a, b) not in set(zip(cycle, cycle[1:]))
    )
    return " <-> ".join(cycle[:-1]) + ":\n" + "\n".join(steps + also)


def _component(graph: dict, node: str) -> set:
    """The nodes both reachable from ``node`` and reaching it."""

    def reach(edges, start):
        seen, todo = {start}, [start]
        while todo:
            for target in edges.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    reverse: dict = defaultdict(set)
    for a, targets in graph.items():
        for b in targets:
            reverse[b].add(a)
    return reach(graph, node) & reach(reverse, node)


def test_the_graph_sees_function_local_and_package_imports():
    modules = module_files()
    graph, parts = import_graph()
    assert len(modules) > 50 and "lumaxlike._io.read.raster" in graph
    # _files.fit imports `.._inverse.fit.fit` at module level: the module and its packages
    assert {"lumaxlike._inverse.fit.fit", "lumaxlike._inverse.fit", "lumaxlike._inverse"} <= set(
        graph["lumaxlike._files.fit"]
    )
    # the xarray accessor imports its front ends only inside its methods
    assert "lumaxlike._xarray.invert" in graph["lumaxlike._xarray_accessor"]
    assert "lumaxlike._inverse" in parts["lumaxlike._files"]
    # and the cycle finder finds a cycle, naming its import lines
    toy = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3"}, "d": {"a": "d.py:4"}}
    assert cycles(toy) == [["a", "b", "c", "a"]]
    assert "c -> a  (c.py:3)" in describe(toy, cycles(toy)[0])


def test_no_import_cycles_between_the_package_s_parts():
    _, parts = import_graph()
    found = [describe(parts, cycle) for cycle in cycles(parts)]
    assert not found, "import cycles between lumaxlike's parts:\n" + "\n".join(found)


def test_no_import_cycles_between_modules():
    graph, _ = import_graph()
    found = [describe(graph, cycle) for cycle in cycles(graph)]
    assert not found, "import cycles between lumaxlike's modules:\n" + "\n".join(found)


def test_status_and_result_fields_sit_at_the_bottom_layer():
    """`Status` and the maps' field names (`lumaxlike._status`) import nothing of the
    package, and the writers (`_io`) name them without importing the solvers."""
    graph, parts = import_graph()
    assert graph["lumaxlike._status"] == {}
    assert "lumaxlike._status" in parts["lumaxlike._io"]
    assert "lumaxlike._inverse" not in parts["lumaxlike._io"]


def test_inverse_features_import_only_the_ones_before_them():
    """`_inverse`'s subpackages by feature, in order: the shared modules at its top, then
    `albedo` (`invert`), `fit`, `joint`; a module imports only its own feature and the
    ones before it. `fit.fit`, the front of every fit, hands joint, regional and
    restarted fits to `joint` (function-local imports): the one exception."""
    order = {"albedo": 1, "fit": 2, "joint": 3}

    def rank(module: str) -> int | None:
        parts = module.split(".")
        if parts[:2] != ["lumaxlike", "_inverse"] or len(parts) < 3:
            return None
        return order.get(parts[2], 0)

    graph, _ = import_graph()
    upward = sorted(
        f"{a} -> {b}  ({where})"
        for a, targets in graph.items()
        for b, where in targets.items()
        if rank(a) is not None
        and rank(b) is not None
        and rank(b) > rank(a)
        and a != "lumaxlike._inverse.fit.fit"
    )
    assert not upward, "an _inverse module imports a later feature:\n" + "\n".join(upward)
    assert rank("lumaxlike._inverse.joint.joint") == 3 and rank("lumaxlike._inverse.lm_rules") == 0
