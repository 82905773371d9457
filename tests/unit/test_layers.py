"""The layer rules, checked on the source: the seams stay where the architecture says they are.

* Connections belong to the network layer: no module outside
  ``twisted_kafka/network/`` imports ``network.processor`` or names a
  ``Processor``; handlers see a ``Request`` and its ``RequestContext`` only.
* The controller's state belongs to the controller: no module outside
  ``twisted_kafka/controller/`` imports ``controller.metadata_store`` or
  reads a controller's store or channels (brokers learn the cluster over
  the control plane and ask through a ``ControllerClient``).
* The controller's interface is two modules: outside ``twisted_kafka/controller/``
  only ``controller.interface`` (the types that cross the boundary) and
  ``controller.client`` (``ControllerClient``) are imported -- except by
  ``server/kafka_server.py``, which builds the controller's services and may
  also import ``controller.controller_service``, ``controller.zk_controller_service``
  and ``controller.cluster_client``.
* ``twisted_kafka/controller/`` has no import circle (no strongly connected
  component of its module imports holds more than one module).
* Storage has one seam: outside ``twisted_kafka/log/`` a partition's log
  is a ``PartitionLog`` and the logs are a ``LogStore`` (``log/partition_log.py``).
  Modules there import from ``twisted_kafka.log`` only the package itself,
  for the names it exports (``STORAGE_NAMES``: the interface, its types,
  ``LogConfig`` and ``LogManager``), and the modules in ``STORAGE_MODULES``:
  ``partition_log``, ``log_manager``, ``log_config``, plus the files the
  controller's store and the SASL store share (``checkpoints``, the
  crash-safe small-file writer; ``layout``, the file names; ``inventory``,
  what partition dirs say about themselves) and ``cleaner`` (its metrics).
  Never the internals (``log``, ``unified_log``, ``segment``, ``index``,
  ``file_handles``, ``epoch_cache``, ``producer_state``, the manager's parts,
  ...), and no attribute that reaches inside a log (``STORAGE_INTERNALS``:
  ``local_log``, ``epoch_cache``, ``hw_follows_leo``, segments, producer state).
* ``server/handlers/`` holds API handlers only: every class defined there is
  an ``ApiHandler``, and each module defines at least one.
* ``KafkaServer`` composes child services rather than starting things by hand (the replica manager
  among them, with its fetcher and ISR managers as its own children in a cluster).

(``protocol/`` importing no Twisted is checked in tests/unit/protocol/test_no_twisted.py.)
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import twisted_kafka
from twisted_kafka.server.api_handler import ApiHandler

PACKAGE = Path(twisted_kafka.__file__).parent


def modules_outside(*folders: str) -> list[Path]:
    excluded = [PACKAGE / folder for folder in folders]
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if not any(path.is_relative_to(folder) for folder in excluded)]


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    package = ".".join(("twisted_kafka", *path.relative_to(PACKAGE).parent.parts))
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def attribute_names(path: Path) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute)}


def test_rules_see_the_package():
    assert len(modules_outside("network")) > 50


@pytest.mark.parametrize("path", modules_outside("network"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_network_layer_touches_connections(path):
    imports = imported_modules(path)
    assert not any(name.startswith("twisted_kafka.network.processor") for name in imports), imports
    names = {n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Name)}
    assert not {n.id for n in names} & {"Processor", "DataPlaneProcessor", "ControlPlaneProcessor"}
    assert "processor" not in attribute_names(path)


@pytest.mark.parametrize("path", modules_outside("controller"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_controller_touches_its_state(path):
    imports = imported_modules(path)
    assert not any(name.startswith("twisted_kafka.controller.metadata_store") for name in imports), imports
    assert not {"_store", "_channels", "store", "channels"} & attribute_names(path)


CONTROLLER_PACKAGE = "twisted_kafka.controller"
#: What any module outside controller/ may import from it.
CONTROLLER_INTERFACE = {"interface", "client"}
#: What KafkaServer may import besides: the services it builds.
CONTROLLER_SERVICES = {"controller_service", "zk_controller_service", "cluster_client"}


def controller_modules_imported(path: Path) -> set[str]:
    """The modules of ``twisted_kafka/controller/`` that ``path`` imports, by name ("" for the package)."""
    modules = set()
    for name in imported_modules(path):
        if name == CONTROLLER_PACKAGE:
            modules.add("")
        elif name.startswith(CONTROLLER_PACKAGE + "."):
            modules.add(name[len(CONTROLLER_PACKAGE) + 1:].split(".")[0])
    return modules


@pytest.mark.parametrize("path", modules_outside("controller"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_controller_interface_crosses_the_boundary(path):
    allowed = CONTROLLER_INTERFACE | (CONTROLLER_SERVICES if path == PACKAGE / "server" / "kafka_server.py" else set())
    strays = controller_modules_imported(path) - allowed
    assert not strays, f"imports controller modules other than {sorted(allowed)}: {sorted(strays)}"


def test_the_boundary_rule_sees_controller_imports():
    kafka_server = PACKAGE / "server" / "kafka_server.py"
    assert controller_modules_imported(kafka_server) == CONTROLLER_INTERFACE | CONTROLLER_SERVICES
    assert controller_modules_imported(PACKAGE / "controller" / "kafka_controller.py") >= {
        "context", "partition_state_machine", "replica_state_machine", "topic_deletion", "reassignment"}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph`` (node -> the nodes it points at)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def import_circles(graph: dict[str, set[str]]) -> list[set[str]]:
    return [c for c in strongly_connected(graph) if len(c) > 1 or any(n in graph.get(n, ()) for n in c)]


def controller_import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, within ``twisted_kafka/controller/`` (the package itself left out)."""
    paths = {path.stem: path for path in sorted((PACKAGE / "controller").glob("*.py")) if path.stem != "__init__"}
    return {name: controller_modules_imported(path) & set(paths) for name, path in paths.items()}


def test_import_circles_are_found():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert import_circles({"a": {"a"}, "b": set()}) == [{"a"}]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_the_controller_has_no_import_circle():
    graph = controller_import_graph()
    assert {"kafka_controller", "client", "admin_rules", "interface"} <= set(graph)
    assert "kafka_controller" in graph["client"]         # the graph sees imports (TYPE_CHECKING ones too)
    assert import_circles(graph) == []
#: What ``twisted_kafka.log`` exports to the rest of the broker (see the module docstring).
STORAGE_NAMES = {"AbortedTransaction", "AppendOrigin", "FetchDataInfo", "FetchIsolation", "LogAppendInfo",
                 "LogConfig", "LogManager", "LogStore", "OffsetsListener", "PartitionLog", "ProducerStateEntry",
                 "TimestampAndOffset"}
#: The modules of ``twisted_kafka.log`` the rest of the broker may import.
STORAGE_MODULES = {"partition_log", "log_manager", "log_config", "checkpoints", "layout", "inventory", "cleaner"}
#: Attributes that reach inside a partition's log.
STORAGE_INTERNALS = {"local_log", "epoch_cache", "hw_follows_leo", "segments", "active_segment", "producer_state"}


def storage_imports(path: Path) -> set[str]:
    """What ``path`` imports from ``twisted_kafka.log`` that is not the storage's public face."""
    wrong = set()
    for name in imported_modules(path):
        if not name.startswith("twisted_kafka.log."):
            continue
        first = name.removeprefix("twisted_kafka.log.").split(".")[0]
        if first not in STORAGE_MODULES and first not in STORAGE_NAMES:
            wrong.add(name)
    return wrong


def test_the_storage_package_exports_its_public_face_only():
    import twisted_kafka.log as storage

    assert set(storage.__all__) == STORAGE_NAMES
    assert all(importlib.import_module(f"twisted_kafka.log.{m}") for m in STORAGE_MODULES)


@pytest.mark.parametrize("path", modules_outside("log"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_storage_touches_its_internals(path):
    assert not storage_imports(path)
    assert not STORAGE_INTERNALS & attribute_names(path)


def handler_modules() -> list[str]:
    import twisted_kafka.server.handlers as handlers
    return [f"{handlers.__name__}.{info.name}" for info in pkgutil.iter_modules(handlers.__path__)]


@pytest.mark.parametrize("name", handler_modules())
def test_handlers_folder_holds_handlers_only(name):
    module = importlib.import_module(name)
    own = [cls for _, cls in inspect.getmembers(module, inspect.isclass) if cls.__module__ == name]
    assert own, f"{name} defines no handler"
    strays = [cls.__name__ for cls in own if not issubclass(cls, ApiHandler)]
    assert not strays, f"{name} defines classes that are not API handlers: {strays}"
    assert any(not inspect.isabstract(cls) for cls in own)


def test_kafka_server_is_composed_of_child_services(tmp_path):
    from twisted.internet.testing import MemoryReactorClock

    from tests.unit.network.helpers import make_config
    from twisted_kafka.server.kafka_server import KafkaServer

    server = KafkaServer(make_config(log_dirs=str(tmp_path / "logs")), reactor=MemoryReactorClock())
    children = list(server)
    names = [type(child).__name__ for child in children]
    assert names == ["ThreadPoolService", "AdminRestService", "LogManager", "GroupCoordinatorService",
                     "TransactionCoordinatorService", "KafkaRequestHandlerPool", "KafkaRequestHandlerPool",
                     "SocketServer", "InterBrokerSender", "ControllerService", "ConnectionEventLog", "RequestDrain",
                     "ReplicaManager", "BrokerLifecycleManager"]
    assert all(child.parent is server for child in children)
    assert list(server.replica_manager) == [], "a single node replicates nothing: no fetchers, no ISR manager"
