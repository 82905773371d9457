"""The broker's own log (not the partitions' logs, which are ``twisted_kafka.log``).

* ``levels`` -- per-logger levels with Kafka's logger names, at start
  (``log.levels``) and at runtime (KIP-412's BROKER_LOGGER resources);
* ``json_format`` -- ``log.format=json``: one JSON object per line.

Only ``twisted.logger`` underneath, so any layer may import it.
"""

from .json_format import json_file_observer, json_line
from .levels import (
                     KAFKA_LOGGERS,
                     LEVELS,
                     LOG_LEVELS,
                     REQUEST_LOGGER,
                     ROOT,
                     VALID_LEVELS,
                     InvalidLevel,
                     KafkaLogger,
                     LevelGate,
                     LogLevels,
                     UnknownLogger,
                     parse_level_list,
)

__all__ = ["KAFKA_LOGGERS", "LEVELS", "LOG_LEVELS", "REQUEST_LOGGER", "ROOT", "VALID_LEVELS", "InvalidLevel",
           "KafkaLogger", "LevelGate", "LogLevels", "UnknownLogger", "parse_level_list", "json_file_observer",
           "json_line"]
