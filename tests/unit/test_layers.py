"""The layer rules, checked on the source: the seams stay where the architecture says they are.

* The packages have an order (``LAYERS`` in ``bench/structure.py``, the project's structure
  checker, which holds the import graph code this test shares): from the bottom the protocol;
  metrics, logging, ``waiting`` and the security primitives; config; ``purgatory``; log; sasl;
  network; client; zk; coordinator/transaction; controller; coordinator/group; admin; server;
  and at the top cli, tools, spark and testing.  A module imports only its own package and
  packages below it -- imports inside functions and under ``TYPE_CHECKING`` included -- and
  every package of ``twisted_kafka/`` has its place in the order.  A failure names the
  file:line of each import that runs back up.
* No import circle at module level anywhere (one would fail at import time), and counting
  every import only the circles listed in ``ACCEPTED_CIRCLES``, each with its reason; none
  in ``controller/``.
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
from bench import structure
from bench.structure import import_circles
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


def test_the_package_order_places_every_package():
    placed = [unit for row in structure.LAYERS for unit in row]
    assert len(placed) == len(set(placed)), "a package appears twice in the order"
    assert structure.units() == set(placed), "every package of twisted_kafka/ has one place in the order"
    assert {"server", "controller", "coordinator.group", "coordinator.transaction", "sasl", "zk"} <= set(placed)


def test_the_order_check_sees_imports_that_run_back_up():
    imports = structure.all_imports()
    downward = [imp for imp in imports if imp.source.startswith("twisted_kafka.server.")
                and imp.target.startswith("twisted_kafka.protocol")]
    assert downward and not structure.backward_imports(downward)
    path = PACKAGE / "zk" / "scram_store.py"
    upward = structure.Import("twisted_kafka.zk.scram_store", "twisted_kafka.server.broker_metadata", path, 7,
                              in_function=True, type_checking=False)
    peer = structure.Import("twisted_kafka.tools.topics", "twisted_kafka.spark.source", PACKAGE / "tools" / "topics.py",
                            9, in_function=False, type_checking=True)
    assert structure.backward_imports([upward, peer]) == [upward, peer]
    assert structure.unit_of("twisted_kafka.coordinator.group.writer") == "coordinator.group"
    assert structure.unit_of("twisted_kafka.server.handlers.produce") == "server"
    assert structure.unit_of("twisted_kafka.purgatory") == "purgatory"
    # Relative imports, imports inside functions and type-only ones are all seen.
    tools_scram = [imp for imp in imports if imp.source == "twisted_kafka.tools.scram"]
    assert any(imp.target == "twisted_kafka.sasl.credential_store" for imp in tools_scram)
    assert any(imp.target == "twisted_kafka.zk.scram_store" and imp.in_function for imp in tools_scram)
    delayed = [imp for imp in imports if imp.source == "twisted_kafka.coordinator.group.delayed"]
    assert any(imp.target == "twisted_kafka.purgatory" for imp in delayed)


def test_no_import_runs_back_up_the_package_order():
    wrong = structure.backward_imports(structure.all_imports())
    assert not wrong, "imports that run back up the package order (bench/structure.py LAYERS):\n" + "\n".join(
        f"  {imp.where}: {structure.unit_of(imp.source)} imports {imp.target} {imp.marks}" for imp in wrong)


#: The import circles left, all of them through imports that never run at import time (a type
#: annotation under TYPE_CHECKING, or an import inside a function), each with its reason.
ACCEPTED_CIRCLES = {
    frozenset({"twisted_kafka.network.acceptor", "twisted_kafka.network.connections",
               "twisted_kafka.network.processor"}):
        "the connection registry and the processor name each other's types in annotations only",
    frozenset({"twisted_kafka.server.replica_manager", "twisted_kafka.server.isr_manager",
               "twisted_kafka.server.replica_fetcher_manager"}):
        "the replica manager's children annotate their owner, which builds them (type only)",
    frozenset({"twisted_kafka.coordinator.group.coordinator", "twisted_kafka.coordinator.group.delayed"}):
        "the delayed operations annotate the coordinator that completes them (type only)",
    frozenset({"twisted_kafka.log.log", "twisted_kafka.log.recovery"}):
        "recovery works on a Log; Log calls it lazily at load (inside a function) and annotates it",
}


def test_no_import_circle_at_module_level():
    circles = import_circles(structure.graph_of(structure.all_imports(), module_level_only=True))
    assert circles == []


def test_the_import_circles_left_are_the_accepted_ones():
    imports = structure.all_imports()
    circles = [frozenset(c) for c in import_circles(structure.graph_of(imports))]
    unexplained = [sorted(c) for c in circles if c not in ACCEPTED_CIRCLES]
    assert not unexplained, f"import circles: {unexplained}"
    assert not [c for c in circles if any(m.startswith("twisted_kafka.controller") for m in c)]
    # Each accepted circle closes only through imports that do not run at import time.
    for circle in circles:
        inside = [imp for imp in imports if imp.source in circle and imp.target in circle]
        assert any(imp.in_function or imp.type_checking for imp in inside), sorted(circle)


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


REPO = PACKAGE.parent


def imports_of_tests(folder: str, root: Path = REPO) -> list[str]:
    """``file:line`` of every import of ``tests`` (or a module under it) in ``folder``'s Python files."""
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(name == "tests" or name.startswith("tests.") for name in names):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


@pytest.mark.parametrize("folder", ["bench", "support"])
def test_benches_and_the_shared_support_import_nothing_from_tests(folder):
    """Benchmarks and tests share ``support/``; neither bench/ nor support/ reaches into tests/."""
    assert len(list((REPO / folder).glob("*.py"))) > 10
    assert imports_of_tests(folder) == []


def test_benches_need_no_sys_path_changes():
    """The checkout is on sys.path in the project's virtualenv (its editable install), so no bench edits it."""
    hacks = [f"{path.relative_to(REPO)}:{number}" for path in sorted((REPO / "bench").glob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "sys.path.insert" in line or "sys.path.append" in line or "noqa: E402" in line]
    assert hacks == []


def test_the_tests_import_check_sees_an_import_of_tests(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "x.py").write_text("import os\n\ndef f():\n    from tests.unit import helpers\n")
    (tmp_path / "bench" / "y.py").write_text("import tests.support.wait\nfrom .tests import z\nimport testsuite\n")
    assert imports_of_tests("bench", tmp_path) == ["bench/x.py:4", "bench/y.py:1"]


ARCHITECTURE = REPO / "docs" / "architecture.md"


def package_parts() -> list[str]:
    """Every package (a folder with ``__init__.py``) and top-level module of ``twisted_kafka/``, as docs name them."""
    folders = [f"twisted_kafka/{init.parent.relative_to(PACKAGE).as_posix()}/"
               for init in sorted(PACKAGE.rglob("__init__.py")) if init.parent != PACKAGE]
    modules = [f"twisted_kafka/{path.name}" for path in sorted(PACKAGE.glob("*.py")) if path.name != "__init__.py"]
    return folders + modules


def test_the_architecture_names_every_package():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    parts = package_parts()
    assert {"twisted_kafka/coordinator/transaction/", "twisted_kafka/server/handlers/",
            "twisted_kafka/cli.py"} <= set(parts)
    # By its path from the repository root, or a subpackage by its path in the package (`log/cleaner/`).
    missing = [part for part in parts if f"`{part}`" not in text
               and not (part.count("/") > 2 and f"`{part.removeprefix('twisted_kafka/')}`" in text)]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def layer_table() -> list[tuple[int, str]]:
    """The rows of the architecture's layer table: (the row's number, the unit of the order it describes)."""
    rows = []
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit() and cells[1].startswith("`twisted_kafka/"):
            path = cells[1].strip("`").removeprefix("twisted_kafka/").removesuffix("/").removesuffix(".py")
            rows.append((int(cells[0]), structure.unit_of("twisted_kafka." + path.replace("/", ".") + ".x")))
    return rows


def test_the_architecture_layer_table_is_the_package_order():
    rows = layer_table()
    assert {unit for _, unit in rows} == structure.units(), "the layer table lists every package once or more"
    for number, unit in rows:
        assert unit in structure.LAYERS[number - 1], f"row {number} of the layer table is {unit!r}: " \
            f"the order has it in row {structure.rank(unit) + 1}"
    assert [number for number, _ in rows] == sorted(number for number, _ in rows), "the table runs from the bottom"
