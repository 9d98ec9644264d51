"""The data plane (Flink's NettyShuffleEnvironmentOptions and SecurityOptions): channels,
credits, buffer debloating, TLS.
"""

from __future__ import annotations

from flowray.common.configuration import (
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_memory_bytes,
    parse_str,
    register_option,
)
from flowray.common.options.validators import bounded, show_bytes, show_ms

__all__ = ["CHANNEL_TRANSPORT", "CHANNEL_BATCH_SIZE", "CHANNEL_CREDITS", "CHANNEL_BATCH_BYTES",
           "DEBLOAT_ENABLED", "DEBLOAT_TARGET", "DEBLOAT_PERIOD", "DEBLOAT_SAMPLES",
           "DEBLOAT_THRESHOLD", "CHANNEL_SAME_NODE", "SSL_INTERNAL_ENABLED",
           "SSL_INTERNAL_KEYSTORE", "SSL_INTERNAL_TRUSTSTORE", "SSL_INTERNAL_KEY_PASSWORD"]


CHANNEL_TRANSPORT = register_option(
    "flowray.channel.transport",
    parse_str,
    "socket",
    "Data plane between tasks: 'socket' (unix/TCP streams) or 'ray' "
    "(actor calls carrying serialized batches).",
    choices=("socket", "ray"),
)

CHANNEL_BATCH_SIZE = register_option(
    "flowray.channel.batch-size",
    parse_int,
    1000,
    "Records per channel batch before it is flushed (at most; see "
    "flowray.channel.batch-bytes).",
    check=bounded(1, 1_000_000),
)


CHANNEL_CREDITS = register_option(
    "flowray.channel.credits",
    parse_int,
    8,
    "Batches a writer may have unacknowledged per channel.",
    check=bounded(1, 10_000),
)

CHANNEL_BATCH_BYTES = register_option(
    "flowray.channel.batch-bytes",
    parse_memory_bytes,
    1 << 20,
    "Bytes per channel batch (about): a batch is flushed at batch-size records or at about "
    "this many serialized bytes, whichever comes first.",
    check=bounded(1 << 10, 1 << 30, show_bytes, "must be at least 1 kb"),
)

# Buffer debloating (Flink's taskmanager.network.memory.buffer-debloat.*, FLIP-183)
DEBLOAT_ENABLED = register_option(
    "flowray.channel.debloat.enabled",
    parse_bool,
    True,
    "Size in-flight data by time: each consumer asks its producers for batches it "
    "processes in about flowray.channel.debloat.target (all credits of all its input "
    "channels together), so a checkpoint barrier does not queue behind a long backlog.",
)

DEBLOAT_TARGET = register_option(
    "flowray.channel.debloat.target",
    parse_duration_ms,
    1000,
    "How long a consumer should take to process the data in flight to it (debloating).",
    check=bounded(1, 3_600_000, show_ms),
)

DEBLOAT_PERIOD = register_option(
    "flowray.channel.debloat.period",
    parse_duration_ms,
    200,
    "How often a consumer measures its throughput and may announce a new batch size.",
    check=bounded(1, 3_600_000, show_ms),
)

DEBLOAT_SAMPLES = register_option(
    "flowray.channel.debloat.samples",
    parse_int,
    20,
    "Throughput samples the moving average spans (its weight is 2 / (samples + 1)).",
    check=bounded(1, 1000),
)

DEBLOAT_THRESHOLD = register_option(
    "flowray.channel.debloat.threshold-percentages",
    parse_int,
    25,
    "A new batch size is announced only when it differs from the last by more than this "
    "many percent.",
    check=bounded(0, 1000, below="must not be negative"),
)

CHANNEL_SAME_NODE = register_option(
    "flowray.channel.same-node",
    parse_str,
    "unix",
    "How tasks on one node connect: 'unix' (unix sockets) or 'tcp' (as across nodes, "
    "e.g. to use TLS, or to try a multi-node network setup on one machine).",
    choices=("unix", "tcp"),
)

SSL_INTERNAL_ENABLED = register_option(
    "security.ssl.internal.enabled",
    parse_bool,
    False,
    "Encrypt and mutually authenticate TCP channels between tasks (and to the driver) "
    "with TLS; needs security.ssl.internal.keystore and .truststore on every node.",
)

SSL_INTERNAL_KEYSTORE = register_option(
    "security.ssl.internal.keystore",
    parse_str,
    None,
    "PEM file with this side's certificate chain and private key (Flink: a keystore; "
    "here PEM), at the same path on every node.",
)

SSL_INTERNAL_TRUSTSTORE = register_option(
    "security.ssl.internal.truststore",
    parse_str,
    None,
    "PEM file of the CA certificates a peer's certificate must chain to.",
)

SSL_INTERNAL_KEY_PASSWORD = register_option(
    "security.ssl.internal.key-password",
    parse_str,
    None,
    "Password of the private key in the keystore, if it is encrypted.",
)
