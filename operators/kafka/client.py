"""What the Kafka source and sink share: turning Flink-style properties into librdkafka's,
reaching the broker with back-off, and the errors they raise.

>>> librdkafka_config({"bootstrap.servers": "b:9092", "key.deserializer": "x",
...                    "isolation.level": "read_committed"}, consumer=True)
({'bootstrap.servers': 'b:9092', 'isolation.level': 'read_committed'}, ['key.deserializer'])
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

from flowray.common.configuration import Configuration
from flowray.common.options import KAFKA_CONNECT_TIMEOUT

__all__ = ["KafkaConnectError", "KafkaTopicNotFoundError", "KafkaDeserializationError",
           "KafkaSinkError", "librdkafka_config", "connect_timeout_ms", "retry_until",
           "JAVA_ONLY_PROPERTIES"]

#: Java client properties with no librdkafka equivalent: the Python client's own
#: (de)serialization and Flink's wrappers replace them; they are dropped with a warning
JAVA_ONLY_PROPERTIES = frozenset({
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
    "partitioner.class", "interceptor.classes", "register.consumer.metrics",
    "register.producer.metrics", "max.poll.records", "default.api.timeout.ms",
    "request.timeout.ms.config", "retry.backoff.max.ms",
})


class KafkaConnectError(RuntimeError):
    """The broker could not be reached within ``flowray.kafka.connect-timeout``."""


class KafkaTopicNotFoundError(RuntimeError):
    """A topic the source subscribes to by name does not exist (a restart would fail the
    same way: create the topic, then run the job again)."""

    recoverable = False


class KafkaDeserializationError(RuntimeError):
    """A record could not be deserialized; the message names topic, partition and offset.
    Deterministic: the same record fails again after a restart, so the job fails once."""

    recoverable = False


class KafkaSinkError(RuntimeError):
    """The Kafka sink could not write or commit."""


def librdkafka_config(props: Mapping[str, Any], consumer: bool) -> Tuple[Dict[str, str],
                                                                         List[str]]:
    """``props`` as librdkafka takes them (values as strings) and the Java-only keys that
    were dropped."""
    config: Dict[str, str] = {}
    dropped: List[str] = []
    for key, value in props.items():
        if key in JAVA_ONLY_PROPERTIES:
            dropped.append(key)
            continue
        config[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return config, dropped


def connect_timeout_ms(job_config: Mapping[str, Any]) -> int:
    """``flowray.kafka.connect-timeout`` of a task's configuration (the default if unset)."""
    try:
        return int(Configuration(dict(job_config)).get(KAFKA_CONNECT_TIMEOUT))
    except Exception:  # noqa: BLE001 - an unreadable setting: the default
        return int(KAFKA_CONNECT_TIMEOUT.default)


T = TypeVar("T")


def retry_until(attempt: Callable[[], T], timeout_ms: int, what: str,
                bootstrap_servers: str, retriable: Callable[[BaseException], bool],
                sleep: Callable[[float], None] = time.sleep,
                monotonic: Callable[[], float] = time.monotonic) -> T:
    """``attempt()`` until it succeeds, with back-off from 100 ms doubling to 2 s, while
    its errors are ``retriable``; after ``timeout_ms`` a :class:`KafkaConnectError` naming
    ``what`` and the bootstrap servers, with the last error.

    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise OSError("down")
    ...     return "ok"
    >>> retry_until(flaky, 10_000, "list topics", "b:1", lambda e: True, sleep=lambda s: None)
    'ok'
    >>> clock = iter(range(0, 100, 5))
    >>> retry_until(lambda: 1 / 0, 10_000, "list topics", "b:1", lambda e: True,
    ...             sleep=lambda s: None, monotonic=lambda: next(clock))
    Traceback (most recent call last):
    ...
    flowray.operators.kafka.client.KafkaConnectError: could not list topics on Kafka at b:1 within 10 s (flowray.kafka.connect-timeout): ZeroDivisionError: division by zero
    """
    deadline = monotonic() + timeout_ms / 1000.0
    delay = 0.1
    while True:
        try:
            return attempt()
        except Exception as e:
            if not retriable(e):
                raise
            if monotonic() >= deadline:
                raise KafkaConnectError(
                    f"could not {what} on Kafka at {bootstrap_servers} within "
                    f"{timeout_ms / 1000:g} s (flowray.kafka.connect-timeout): "
                    f"{type(e).__name__}: {e}") from e
            sleep(delay)
            delay = min(2.0, delay * 2)


def describe_error(error: Optional[Any]) -> str:
    """A librdkafka ``KafkaError`` as text (its name and its message)."""
    if error is None:
        return "no error"
    try:
        return f"{error.name()}: {error.str()}"
    except Exception:  # noqa: BLE001 - not a KafkaError: its str()
        return str(error)
