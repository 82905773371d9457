"""Under pytest-xdist (``pytest -n 4``) every worker starts its own broker in its own directory."""


def test_this_workers_broker_lives_in_this_workers_directory(kafka_broker, tmp_path_factory, worker_id):
    # Each xdist worker has its own base temporary directory (popen-gw0, popen-gw1, ...): a broker
    # found there was started by this worker, for this worker alone.
    assert kafka_broker.directory.is_relative_to(tmp_path_factory.getbasetemp()), (worker_id, kafka_broker)
    assert kafka_broker.running
