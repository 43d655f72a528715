"""The package layout shows the architecture, and imports point one way.

Every import between logbroker's own modules, including those under `if TYPE_CHECKING:`
(a dependency in the design even if not at run time) and those inside functions (deferred,
but a dependency all the same: a function-level import must not hide a cycle), forms a
graph that must have no cycle: a newcomer can read the broker, the control plane, the
client and Spark bottom-up. The layers: `common` (config, errors, ACL vocabulary, SASL)
imports neither the control plane nor the broker; `coord` (the control plane) never
imports `broker`. Inside `coord`, `coord.groups` (the coordinators) stands on
`coord.metadata` (the controller, the image, the metadata log) and never the other way
round, and the peer wire directly in `coord` (framing, peer TLS and SASL, the broker
channel) imports neither of them. `cli` (the `logbroker` command) is the top layer: nothing
in logbroker but `__main__` imports it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python"
PKG = ROOT / "logbroker"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out.add(sub if sub in modules else base)
            else:
                visit(ast.iter_child_nodes(node))  # classes, functions, if/try/with bodies

    visit(tree.body)
    return {m for m in out if m in modules and m != me}


def graph() -> dict[str, set[str]]:
    paths = [p for p in PKG.rglob("*.py") if "messages" not in p.parts]
    # The generated codec is one unit; the extension module is a leaf.
    modules = {module_name(p) for p in paths} | {"logbroker.protocol.messages", "logbroker._core"}
    return {module_name(p): runtime_imports(p, modules) for p in paths}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


COORD_SUBPACKAGES = ("logbroker.coord.metadata", "logbroker.coord.groups")


def against_the_layers(m: str, d: str) -> bool:
    shared_coord = within(m, "logbroker.coord") and not any(within(m, p) for p in COORD_SUBPACKAGES)
    return (
        (within(m, "logbroker.coord") and within(d, "logbroker.broker"))
        or (within(m, "logbroker.common") and (within(d, "logbroker.coord") or within(d, "logbroker.broker")))
        or (within(m, "logbroker.coord.metadata") and within(d, "logbroker.coord.groups"))
        or (shared_coord and any(within(d, p) for p in COORD_SUBPACKAGES))
        or (within(d, "logbroker.cli") and not within(m, "logbroker.cli") and m != "logbroker.__main__")
    )


def test_layers_point_one_way():
    g = graph()
    upward = sorted((m, d) for m, deps in g.items() for d in deps if against_the_layers(m, d))
    assert upward == [], (
        "imports against the layers (common <- coord <- coord.metadata <- coord.groups; "
        "coord <- broker; cli on top): " + ", ".join(f"{m} -> {d}" for m, d in upward)
    )


def test_the_layer_rules_catch_what_they_forbid():
    assert against_the_layers("logbroker.coord.metadata.controller", "logbroker.coord.groups.group_coordinator")
    assert against_the_layers("logbroker.coord.framing", "logbroker.coord.metadata.metadata")
    assert against_the_layers("logbroker.coord.peer_security", "logbroker.coord.groups")
    assert against_the_layers("logbroker.coord.groups.state_topic", "logbroker.broker.replica_manager")
    assert against_the_layers("logbroker.common.config", "logbroker.coord.peer_sasl")
    assert not against_the_layers("logbroker.coord.groups.state_topic", "logbroker.coord.metadata.control")
    assert not against_the_layers("logbroker.coord.metadata.quorum_transport", "logbroker.coord.peer_sasl")
    assert not against_the_layers("logbroker.broker.service", "logbroker.coord.groups.group_coordinator")
    assert against_the_layers("logbroker.console.server", "logbroker.cli.produce_consume")
    assert against_the_layers("logbroker.broker.service", "logbroker.cli.main")
    assert not against_the_layers("logbroker.cli.cluster", "logbroker.cli.voter")
    assert not against_the_layers("logbroker.__main__", "logbroker.cli.main")
    assert not against_the_layers("logbroker.cli.topic", "logbroker.admin_views")


def test_the_broker_is_one_package_beside_client_spark_and_coord():
    for pkg in (
        "broker",
        "broker/handlers",
        "client",
        "coord",
        "coord/metadata",
        "coord/groups",
        "common",
        "spark",
        "protocol",
        "cli",
    ):
        assert (PKG / pkg / "__init__.py").exists(), pkg
    for module in ("controller", "metadata", "metadata_records", "metadata_quorum", "quorum", "control"):
        assert (PKG / "coord" / "metadata" / f"{module}.py").exists(), module
    for module in ("group_coordinator", "share_coordinator", "transaction_coordinator", "state_topic"):
        assert (PKG / "coord" / "groups" / f"{module}.py").exists(), module
    # Directly in coord: only the peer wire that both halves use.
    assert sorted(p.stem for p in (PKG / "coord").glob("*.py")) == [
        "__init__",
        "broker_channel",
        "framing",
        "peer_sasl",
        "peer_security",
    ]
    for module in ("service", "embedded", "dispatch", "replica_manager", "partition"):
        assert (PKG / "broker" / f"{module}.py").exists(), module
    for module in ("config", "errors", "acl", "sasl", "sasl_scram"):
        assert (PKG / "common" / f"{module}.py").exists(), module
    # Nothing of the broker is left at the top level.
    for gone in ("server", "replica_manager", "partition", "config", "errors", "handlers"):
        assert not (PKG / f"{gone}.py").exists() and not (PKG / gone).is_dir(), gone
    # The command and its subcommands are in cli/, none at the top level.
    for module in (
        "main",
        "args",
        "topic",
        "group",
        "cluster",
        "voter",
        "produce_consume",
        "mirror",
        "archive",
        "bench",
        "user",
        "acl",
        "quota",
    ):
        assert (PKG / "cli" / f"{module}.py").exists(), module
    assert not (PKG / "cli.py").exists() and not (PKG / "cli_args.py").exists()
    assert sorted(p.name for p in PKG.glob("*_cli.py")) == []


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
