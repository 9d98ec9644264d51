"""Configuration: Flink's string keys, typed values, errors that name key and value."""

import pytest

from flowray.common.options import (
    BUFFER_TIMEOUT,
    CHANNEL_BATCH_BYTES,
    CHANNEL_CREDITS,
    EXECUTION_TARGET,
    MAX_PARALLELISM,
    PARALLELISM,
    PIPELINE_NAME,
)
from flowray.common.configuration import (
    Configuration,
    ConfigurationError,
    all_options,
    parse_duration_ms,
    parse_memory_bytes,
)


# ---------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("typo,suggestion", [
    ("execution.bufer-timeout", "execution.buffer-timeout.interval"),
    ("parallelism.defualt", "parallelism.default"),
    ("pipeline.max-paralelism", "pipeline.max-parallelism"),
    ("flowray.channel.credit", "flowray.channel.credits"),
])
def test_unknown_key_names_key_and_suggests(typo, suggestion):
    with pytest.raises(ConfigurationError) as info:
        Configuration().set_string(typo, "1")
    text = str(info.value)
    assert f"unknown configuration key {typo!r}" in text
    assert f"did you mean {suggestion!r}" in text


def test_unknown_key_without_close_match_has_no_suggestion():
    with pytest.raises(ConfigurationError) as info:
        Configuration().set_string("totally.unrelated", "1")
    assert "'totally.unrelated'" in str(info.value)
    assert "did you mean" not in str(info.value)


def test_unknown_key_rejected_by_getters_and_constructor():
    with pytest.raises(ConfigurationError, match="'nope.key'"):
        Configuration().get_string("nope.key")
    with pytest.raises(ConfigurationError, match="'nope.key'"):
        Configuration({"nope.key": "1"})


def test_error_is_a_value_error():
    assert issubclass(ConfigurationError, ValueError)


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,value,why", [
    ("parallelism.default", "zero", "not an integer"),
    ("parallelism.default", "0", "must be positive"),
    ("parallelism.default", True, "not an integer"),
    ("pipeline.max-parallelism", "40000", "32768"),
    ("flowray.channel.credits", "-1", "must be positive"),
    ("flowray.channel.batch-size", "1.5", "not an integer"),
    ("flowray.channel.batch-size", "0", "must be positive"),
    ("flowray.channel.batch-bytes", "lots", "not a memory size"),
    ("execution.target", "cloud", "ray, local"),
    ("flowray.channel.transport", "carrier-pigeon", "socket, ray"),
    ("execution.buffer-timeout.interval", "soon", "not a duration"),
    ("execution.buffer-timeout.interval", -5, "negative"),
    ("pipeline.name", 42, "not a string"),
])
def test_bad_value_names_key_and_value(key, value, why):
    with pytest.raises(ConfigurationError) as info:
        Configuration().set_string(key, value)
    text = str(info.value)
    assert repr(key) in text and repr(value) in text and why in text


@pytest.mark.parametrize("key,value,allowed", [
    ("flowray.channel.credits", 10**9, "[1, 10000]"),
    ("flowray.channel.credits", "1000000000", "[1, 10000]"),
    ("flowray.channel.batch-size", 10**9, "[1, 1000000]"),
    ("flowray.channel.batch-bytes", "2 gb", "[1 kb, 1 gb]"),
    ("flowray.channel.batch-bytes", "100", "[1 kb, 1 gb]"),
    ("execution.buffer-timeout.interval", "1 h", "[-1 ms, 10 min]"),
    ("flowray.deploy-timeout", "2 h", "[1 ms, 1 h]"),
    ("heartbeat.interval", "1 h", "[1 ms, 10 min]"),
    ("heartbeat.timeout", "2 d", "[1 ms, 24 h]"),
    ("execution.checkpointing.interval", "2 d", "[1 ms, 24 h]"),
    ("execution.checkpointing.timeout", "2 d", "[1 ms, 24 h]"),
    ("execution.checkpointing.min-pause", "2 d", "[0 ms, 24 h]"),
    ("execution.checkpointing.max-concurrent-checkpoints", "101", "[1, 100]"),
    ("execution.checkpointing.tolerable-failed-checkpoints", "10001", "[0, 10000]"),
    ("execution.checkpointing.num-retained", "1001", "[1, 1000]"),
    ("flowray.jobmaster.max-restarts", "1001", "[0, 1000]"),
])
def test_out_of_range_value_names_key_and_allowed_range(key, value, allowed):
    with pytest.raises(ConfigurationError) as info:
        Configuration().set_string(key, value)
    text = str(info.value)
    assert repr(key) in text and repr(value) in text
    assert f"allowed range {allowed}" in text, text


@pytest.mark.parametrize("key,value", [
    ("flowray.channel.credits", "10000"),
    ("flowray.channel.batch-size", "1000000"),
    ("flowray.channel.batch-bytes", "1 kb"),
    ("flowray.channel.batch-bytes", "1 gb"),
    ("execution.buffer-timeout.interval", "0"),
    ("execution.buffer-timeout.interval", "-1"),
    ("execution.checkpointing.interval", "24 h"),
])
def test_range_bounds_are_included(key, value):
    Configuration().set_string(key, value)


def test_batch_bytes_parses_memory_sizes():
    c = Configuration()
    assert c.get(CHANNEL_BATCH_BYTES) == 1 << 20
    assert c.set_string("flowray.channel.batch-bytes", "64 kb").get(CHANNEL_BATCH_BYTES) == 65536
    assert c.set_string("flowray.channel.batch-bytes", 4096).get(CHANNEL_BATCH_BYTES) == 4096


def test_default_configuration_validates():
    c = Configuration()
    for key, opt in all_options().items():
        if opt.default is not None:
            c.set_string(key, opt.default)  # every default passes its own check
    Configuration(c)


def test_bad_value_leaves_configuration_unchanged():
    c = Configuration().set_string("parallelism.default", "4")
    with pytest.raises(ConfigurationError):
        c.set_string("parallelism.default", "four")
    assert c.get(PARALLELISM) == 4


def test_typed_values_and_defaults():
    c = Configuration()
    assert c.get(PARALLELISM) == 1 and c.get(MAX_PARALLELISM) == 128
    assert c.get(BUFFER_TIMEOUT) == 100 and c.get(PIPELINE_NAME) is None
    c.set_integer("parallelism.default", 3).set_string("flowray.channel.credits", " 5 ")
    c.set_string("execution.target", "LOCAL")
    assert c.get(PARALLELISM) == 3 and c.get(CHANNEL_CREDITS) == 5
    assert c.get(EXECUTION_TARGET) == "local"  # choices are case-insensitive, canonical out
    assert c.get_integer("parallelism.default") == 3
    assert c.get_integer("flowray.channel.batch-size", 77) == 77  # unset: the default given
    assert c.get_string("parallelism.default") == "3"
    assert c.contains_key("parallelism.default") and not c.contains_key("pipeline.name")
    assert c.key_set() == {"parallelism.default", "flowray.channel.credits", "execution.target"}
    assert c.remove_config("parallelism.default") and not c.remove_config("parallelism.default")
    assert c.get(PARALLELISM) == 1


def test_copy_and_add_all_are_independent():
    a = Configuration().set_string("parallelism.default", "2")
    b = a.copy().set_string("parallelism.default", "5")
    assert a.get(PARALLELISM) == 2 and b.get(PARALLELISM) == 5
    c = Configuration().add_all(b)
    assert c.get(PARALLELISM) == 5
    assert Configuration(b).to_dict() == b.to_dict()


def test_every_option_default_converts():
    for key, opt in all_options().items():
        assert opt.key == key
        if opt.default is not None:
            assert opt.convert(opt.default) == opt.default


# ---------------------------------------------------------------------------------------
# durations
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,ms", [
    ("10 s", 10_000),
    ("1 min", 60_000),
    ("10000 ms", 10_000),
    ("2 min", 120_000),
    (250, 250),
    ("250", 250),          # a bare number means milliseconds
    ("1.5 s", 1500),
    ("10s", 10_000),
    (" 3 h ", 10_800_000),
    ("1 d", 86_400_000),
    ("10 S", 10_000),
    ("500 us", 0),
    ("2 seconds", 2000),
    (0, 0),
    (12.7, 12),
])
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["10 s", "1 min", "10000 ms", "2 min", 250])
def test_durations_through_configuration(text):
    c = Configuration().set_string("execution.buffer-timeout.interval", text)
    assert c.get(BUFFER_TIMEOUT) == parse_duration_ms(text)


@pytest.mark.parametrize("text,unit", [("10 parsecs", "parsecs"), ("5 fortnights", "fortnights"),
                                       ("3 mss", "mss")])
def test_bad_duration_unit(text, unit):
    with pytest.raises(ValueError) as info:
        parse_duration_ms(text)
    assert f"unknown time unit {unit!r}" in str(info.value) and repr(text) in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        Configuration().set_string("execution.buffer-timeout", text)
    text_ = str(info.value)
    assert "'execution.buffer-timeout'" in text_ and repr(text) in text_ and unit in text_


@pytest.mark.parametrize("value", ["", "s", "-1 s", "1.2.3 s", "ten s", None, True, [10]])
def test_not_a_duration(value):
    with pytest.raises(ValueError):
        parse_duration_ms(value)


def test_infinite_duration_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="execution.buffer-timeout.interval"):
        Configuration().set("execution.buffer-timeout.interval", float("inf"))


def test_memory_sizes():
    assert parse_memory_bytes("64 mb") == 64 << 20
    assert parse_memory_bytes("1g") == 1 << 30
    assert parse_memory_bytes(4096) == 4096
    with pytest.raises(ValueError, match="memory"):
        parse_memory_bytes("12 parsecs")


# -- Flink 2's keys, with Flink 1.x's names as deprecated fallbacks ------------------------

FLINK_1_NAMES = {
    "state.checkpoints.dir": "execution.checkpointing.dir",
    "state.savepoints.dir": "execution.checkpointing.savepoint-dir",
    "state.checkpoints.num-retained": "execution.checkpointing.num-retained",
    "state.backend.incremental": "execution.checkpointing.incremental",
    "state.backend.local-recovery": "execution.checkpointing.local-backup.enabled",
    "execution.checkpointing.unaligned": "execution.checkpointing.unaligned.enabled",
    "execution.buffer-timeout": "execution.buffer-timeout.interval",
}
VALUES = {"execution.checkpointing.dir": "/chk", "execution.checkpointing.savepoint-dir": "/sp",
          "execution.checkpointing.num-retained": "3",
          "execution.checkpointing.incremental": "true",
          "execution.checkpointing.local-backup.enabled": "true",
          "execution.checkpointing.unaligned.enabled": "true",
          "execution.buffer-timeout.interval": "5 ms"}


def test_flink_2_keys_are_the_options_keys_and_the_old_names_are_their_deprecated_keys():
    from flowray.common.configuration import deprecated_keys
    assert {old: new for old, new in deprecated_keys().items()} == FLINK_1_NAMES
    options = all_options()
    for new in FLINK_1_NAMES.values():
        assert new in options
        assert Configuration({new: VALUES[new]}).to_dict() == {new: VALUES[new]}


@pytest.mark.parametrize("old, new", sorted(FLINK_1_NAMES.items()))
def test_an_old_name_sets_the_new_key_and_warns_once_naming_it(monkeypatch, caplog, old, new):
    import flowray.common.configuration as configuration
    monkeypatch.setattr(configuration, "_WARNED", set())
    option = all_options()[new]
    caplog.set_level("WARNING", logger="flowray.common.configuration")
    c = Configuration({old: VALUES[new]})
    Configuration({old: VALUES[new]})   # a second use: no second warning
    assert c.to_dict() == {new: VALUES[new]}
    assert c.get(option) == Configuration({new: VALUES[new]}).get(option)
    assert c.contains_key(old) and c.get_string(old) == VALUES[new]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"flowray: configuration key {old!r} is deprecated; use {new!r}"]


def test_the_new_key_wins_over_the_old_name_whatever_the_order():
    new_first = Configuration().set_string("execution.checkpointing.dir", "/new") \
        .set_string("state.checkpoints.dir", "/old")
    old_first = Configuration().set_string("state.checkpoints.dir", "/old") \
        .set_string("execution.checkpointing.dir", "/new")
    assert new_first.to_dict() == old_first.to_dict() == {"execution.checkpointing.dir": "/new"}
    # and an old name set twice keeps its last value
    twice = Configuration().set_string("state.checkpoints.dir", "/a") \
        .set_string("state.checkpoints.dir", "/b")
    assert twice.get_string("execution.checkpointing.dir") == "/b"
    assert new_first.copy().set_string("state.checkpoints.dir", "/x").to_dict() == \
        {"execution.checkpointing.dir": "/new"}


def test_a_bad_value_under_an_old_name_names_both_keys():
    with pytest.raises(ConfigurationError,
                       match=r"'execution.checkpointing.num-retained': must be at least 1; .*"
                             r"\(set under its deprecated name 'state.checkpoints.num-retained'\)"):
        Configuration({"state.checkpoints.num-retained": "0"})
