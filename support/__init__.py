"""What the tests and the benchmarks share: brokers as processes, raw clients, load generators, waits.

``tests/`` and ``bench/`` both import from here (``support.broker_process``,
``support.raw_client``, ``support.wait``, ...); nothing here imports from
``tests/``, and a benchmark never does either (``tests/unit/test_layers.py``).
The checkout is on ``sys.path`` in the project's virtualenv (its editable
install) and under pytest (the rootdir), so no script edits ``sys.path``.
"""
