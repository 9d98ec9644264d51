"""Configuration with Flink's string keys, typed options and clear errors.

>>> from flowray.common.options import BUFFER_TIMEOUT
>>> c = Configuration()
>>> _ = c.set_string("execution.buffer-timeout.interval", "50 ms")
>>> c.get(BUFFER_TIMEOUT)
50
>>> Configuration().set_string("execution.bufer-timeout", "1")
Traceback (most recent call last):
...
flowray.common.configuration.ConfigurationError: unknown configuration key 'execution.bufer-timeout' (did you mean 'execution.buffer-timeout.interval'?)

A Flink 1.x name still works as a deprecated key of its option, as Flink's
``ConfigOption.withDeprecatedKeys``: its value is kept under the option's key (which wins
when both are set), and the first use logs one warning naming the new key.

>>> from flowray.common.options import CHECKPOINTS_DIR
>>> c = Configuration({"state.checkpoints.dir": "/old"})
>>> c.get(CHECKPOINTS_DIR), c.to_dict()
('/old', {'execution.checkpointing.dir': '/old'})
>>> c.set_string("execution.checkpointing.dir", "/new").get_string("state.checkpoints.dir")
'/new'
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Set, Tuple

__all__ = [
    "ConfigurationError",
    "parse_duration_ms",
    "duration_setting",
    "parse_memory_bytes",
    "ConfigOption",
    "all_options",
    "deprecated_keys",
    "load_plugins",
    "PLUGIN_MODULES",
    "parse_count_or_infinite",
    "Configuration",
]


class ConfigurationError(ValueError):
    """An unknown key, or a value that does not parse for its key."""


_DURATION_UNITS = {
    "ns": 1e-6,
    "nano": 1e-6,
    "nanos": 1e-6,
    "nanosecond": 1e-6,
    "nanoseconds": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "micro": 1e-3,
    "micros": 1e-3,
    "microsecond": 1e-3,
    "microseconds": 1e-3,
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Zµ]*)\s*$")


def parse_duration_ms(value: Any) -> int:
    """Milliseconds in a Flink duration: ``"10 s"``, ``"1 min"``, ``"10000 ms"``, ``500``.

    A bare number means milliseconds, as in Flink.

    >>> parse_duration_ms("2 min"), parse_duration_ms("10000 ms"), parse_duration_ms(250)
    (120000, 10000, 250)
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"duration must be finite: {value!r}")
        if value < 0:
            raise ValueError(f"duration must not be negative: {value!r}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r}")
    m = _DURATION_RE.match(value)
    if not m:
        raise ValueError(f"not a duration: {value!r} (expected e.g. '10 s', '1 min', '500 ms')")
    number, unit = m.group(1), m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(f"unknown time unit {m.group(2)!r} in {value!r} (use ms, s, min, h or d)")
    return int(round(float(number) * _DURATION_UNITS[unit]))


_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
}


def duration_setting(value: Any, what: str) -> str:
    """``value`` (ms as a number, or a duration such as ``"10 s"``) as the canonical
    ``"<n> ms"`` string a setter stores; a bad value is a ``ValueError`` naming ``what``."""
    try:
        return f"{parse_duration_ms(value)} ms"
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def parse_memory_bytes(value: Any) -> int:
    """Bytes in a Flink memory size: ``"64 mb"``, ``"1g"``, ``4096``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = re.match(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$", str(value))
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"not a memory size: {value!r} (expected e.g. '64 mb', '1 gb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    raise ValueError(f"not an integer: {value!r}")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"not a boolean: {value!r} (use true or false)")


def parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"not a number: {value!r}") from None


def parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}")
    return value


@dataclass(frozen=True)
class ConfigOption:
    """A typed configuration key with a default, like Flink's ``ConfigOption``."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    description: str
    choices: Optional[Sequence[str]] = None
    check: Optional[Callable[[Any], Optional[str]]] = None
    aliases: Mapping[str, str] = None  # type: ignore[assignment]
    #: older names of the key (Flink 1.x's), read when the key itself is not set
    deprecated_keys: Tuple[str, ...] = ()

    def convert(self, raw: Any) -> Any:
        if self.choices is not None:
            text = str(raw).strip().lower()
            canonical = (self.aliases or {}).get(text, text)
            for choice in self.choices:
                if canonical == choice.lower():
                    return choice
            raise ConfigurationError(
                f"invalid value {raw!r} for configuration key {self.key!r}: "
                f"expected one of {', '.join(self.choices)}"
            )
        try:
            value = self.parse(raw)
        except ValueError as e:
            raise ConfigurationError(
                f"invalid value {raw!r} for configuration key {self.key!r}: {e}"
            ) from None
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ConfigurationError(
                    f"invalid value {raw!r} for configuration key {self.key!r}: {problem}"
                )
        return value


_REGISTRY: Dict[str, ConfigOption] = {}
_PASSTHROUGH: Dict[str, str] = {}  # key prefix -> who receives those keys
_DEPRECATED: Dict[str, str] = {}   # deprecated key -> its option's key
_WARNED: Set[str] = set()          # deprecated keys warned about in this process

log = logging.getLogger(__name__)


def register_option(
    key: str, parse: Callable[[Any], Any], default: Any, description: str, **kwargs: Any
) -> ConfigOption:
    opt = ConfigOption(key, parse, default, description, **kwargs)
    _REGISTRY[key] = opt
    for old in opt.deprecated_keys:
        _DEPRECATED[old] = key
    return opt


#: modules that register configuration keys when imported (plug-ins); a process that did
#: not import them (a task's, a job master's) loads them at the first unknown key
PLUGIN_MODULES = ("flowray.spark",)
_plugins_loaded = False


def load_plugins() -> bool:
    """Import the plug-ins once (the API does, on import); True if this call did (a key
    may be known now)."""
    global _plugins_loaded
    if _plugins_loaded:
        return False
    _plugins_loaded = True
    import importlib
    for module in PLUGIN_MODULES:
        importlib.import_module(module)
    return True


def register_passthrough_prefix(prefix: str, owner: str) -> None:
    """Accept every key under ``prefix`` as a string and hand it to ``owner`` as is (a
    plug-in's own namespace, e.g. ``spark.`` for Spark)."""
    _PASSTHROUGH[prefix] = owner


def passthrough_keys(config: "Configuration | Mapping[str, Any]", prefix: str) -> Dict[str, Any]:
    """The keys of ``config`` under a registered pass-through ``prefix``."""
    items = config.to_dict() if isinstance(config, Configuration) else dict(config)
    return {k: v for k, v in items.items() if k.startswith(prefix)}


def all_options() -> Dict[str, ConfigOption]:
    """Every supported key, for docs and validation."""
    return dict(_REGISTRY)


def deprecated_keys() -> Dict[str, str]:
    """Every deprecated key -> the key that replaces it."""
    return dict(_DEPRECATED)


def _current_key(key: str) -> str:
    """``key``, or the key a deprecated ``key`` stands for."""
    return _DEPRECATED.get(key, key) if isinstance(key, str) else key


# -- checkpointing (Flink's keys and defaults) ------------------------------------------
INFINITE = (1 << 31) - 1  # Flink's Integer.MAX_VALUE for "no limit"


def parse_count_or_infinite(value: Any) -> int:
    """A non-negative count, or ``"infinite"`` / ``"inf"`` (Flink's Integer.MAX_VALUE)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinite", "infinity"):
        return INFINITE
    n = parse_int(value)
    if n < 0:
        raise ValueError("must not be negative")
    return n


class Configuration:
    """Flink-style configuration: string keys, validated on ``set``.

    Accepts the PyFlink setters (``set_string``, ``set_integer``, ``set_boolean``,
    ``set_float``) and ``set``; unknown keys and unparsable values raise
    :class:`ConfigurationError` naming key and value.
    """

    def __init__(self, other: Optional["Configuration | Mapping[str, Any]"] = None) -> None:
        self._values: Dict[str, Any] = {}
        #: keys whose value was set under a deprecated name (the key itself overrides it)
        self._from_deprecated: Set[str] = set()
        if other is not None:
            items = other.to_dict() if isinstance(other, Configuration) else dict(other)
            for k, v in items.items():
                self.set_string(k, v)

    @staticmethod
    def _lookup(key: str) -> ConfigOption:
        opt = _REGISTRY.get(_current_key(key))
        if opt is None and isinstance(key, str):
            for prefix, owner in _PASSTHROUGH.items():
                if key.startswith(prefix) and len(key) > len(prefix):
                    return ConfigOption(key, parse_str, None, f"passed to {owner} as is")
        if opt is None and load_plugins():   # a plug-in's key, its plug-in not loaded yet
            return Configuration._lookup(key)
        if opt is None:
            # a deprecated key counts as its option's key (the one to suggest)
            close = difflib.get_close_matches(key, [*_REGISTRY, *_DEPRECATED], n=1,
                                              cutoff=0.75)
            hint = f" (did you mean {_current_key(close[0])!r}?)" if close else ""
            raise ConfigurationError(f"unknown configuration key {key!r}{hint}")
        return opt

    def set_string(self, key: str, value: Any) -> "Configuration":
        opt = self._lookup(key)
        current = _current_key(key)
        try:
            opt.convert(value)  # validate now, so the error points at the line that set it
        except ConfigurationError as e:
            if current == key:
                raise
            raise ConfigurationError(f"{e} (set under its deprecated name {key!r})") from None
        if current != key:
            if key not in _WARNED:
                _WARNED.add(key)
                log.warning("flowray: configuration key %r is deprecated; use %r", key,
                            current)
            if current in self._values and current not in self._from_deprecated:
                return self   # the key itself is set: it wins, as in Flink
            self._from_deprecated.add(current)
        else:
            self._from_deprecated.discard(current)
        self._values[current] = value
        return self

    set = set_string
    set_integer = set_string
    set_boolean = set_string
    set_float = set_string

    def get(self, option: ConfigOption) -> Any:
        if option.key in self._values:
            return option.convert(self._values[option.key])
        return option.default

    def get_string(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        self._lookup(key)
        v = self._values.get(_current_key(key))
        return default_value if v is None else str(v)

    def get_integer(self, key: str, default_value: int = 0) -> int:
        opt = self._lookup(key)
        key = _current_key(key)
        return int(opt.convert(self._values[key])) if key in self._values else default_value

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        self._lookup(key)
        key = _current_key(key)
        return parse_bool(self._values[key]) if key in self._values else default_value

    def contains_key(self, key: str) -> bool:
        return _current_key(key) in self._values

    def remove_config(self, key: str) -> bool:
        key = _current_key(key)
        self._from_deprecated.discard(key)
        return self._values.pop(key, None) is not None

    def key_set(self) -> Iterable[str]:
        return set(self._values)

    def add_all(self, other: "Configuration", prefix: Optional[str] = None) -> "Configuration":
        """Every entry of ``other``, its key prefixed with ``prefix`` when given."""
        for k, v in other.to_dict().items():
            self.set_string(f"{prefix}{k}" if prefix else k, v)
        return self

    def add_all_to_dict(self, target_dict: Dict[str, Any]) -> None:
        """Copy every entry into ``target_dict``."""
        target_dict.update(self._values)

    @classmethod
    def from_dict(cls, map: Mapping[str, Any]) -> "Configuration":  # PyFlink's name
        return cls(map)

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        opt = self._lookup(key)
        key = _current_key(key)
        return float(opt.convert(self._values[key])) if key in self._values else default_value

    @staticmethod
    def parse_list_value(value: str) -> list:
        """A ``;``-separated list (``"a;b"``) or a ``[a, b]`` list, as Flink writes them.

        >>> Configuration.parse_list_value("a;b"), Configuration.parse_list_value("[x, y]")
        (['a', 'b'], ['x', 'y'])
        """
        if not value:
            return []
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            return [v.strip().strip("'\"") for v in text[1:-1].split(",") if v.strip()]
        return value.split(";")

    def get_bytearray(self, key: str, default_value: Any = None) -> Any:
        raise NotImplementedError(
            "Configuration.get_bytearray is not implemented in flowray; instead: flowray's "
            "configuration values are strings: store text (e.g. base64) with set_string")

    def set_bytearray(self, key: str, value: Any) -> "Configuration":
        raise NotImplementedError(
            "Configuration.set_bytearray is not implemented in flowray; instead: flowray's "
            "configuration values are strings: store text (e.g. base64) with set_string")

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._values)

    def copy(self) -> "Configuration":
        c = Configuration()
        c._values = dict(self._values)
        c._from_deprecated = set(self._from_deprecated)
        return c

    def __repr__(self) -> str:
        return f"Configuration({self._values!r})"
