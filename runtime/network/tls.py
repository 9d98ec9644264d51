"""TLS for TCP channels (``security.ssl.internal.*``, Flink's keys): mutual authentication
with certificates that chain to the configured trust store, TLS 1.2 or newer. Unix sockets
(one node, files private to the user) are not wrapped. The job's HMAC handshake still runs
inside TLS.

Certificates are checked against the trust store, not against host names: task addresses
are IPs chosen at run time, and the internal trust store should hold only your cluster's
own CA (as Flink advises for internal connectivity).
"""

from __future__ import annotations

import functools
import os
import ssl
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from flowray.common.configuration import Configuration
from flowray.common.options import (
    SSL_INTERNAL_ENABLED,
    SSL_INTERNAL_KEY_PASSWORD,
    SSL_INTERNAL_KEYSTORE,
    SSL_INTERNAL_TRUSTSTORE,
)

__all__ = ["TlsSettings", "TlsConfigError"]


class TlsConfigError(ValueError):
    """``security.ssl.internal.*`` is incomplete or names files that cannot be used."""


@dataclass(frozen=True)
class TlsSettings:
    """Where the certificate, key and trusted CAs are; picklable, shipped to every task
    (the files must be at the same paths on every node)."""

    keystore: str
    truststore: str
    key_password: Optional[str] = None

    @classmethod
    def from_config(cls, config: "Configuration | Mapping[str, Any]") -> Optional["TlsSettings"]:
        """The settings of ``config``; None when TLS is off. Missing keys raise
        :class:`TlsConfigError` naming them."""
        conf = config if isinstance(config, Configuration) else Configuration(dict(config))
        if not conf.get(SSL_INTERNAL_ENABLED):
            return None
        missing = [o.key for o in (SSL_INTERNAL_KEYSTORE, SSL_INTERNAL_TRUSTSTORE)
                   if not conf.get(o)]
        if missing:
            raise TlsConfigError(f"{SSL_INTERNAL_ENABLED.key} is true but "
                                 f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'}"
                                 " not set")
        return cls(os.path.abspath(conf.get(SSL_INTERNAL_KEYSTORE)),
                   os.path.abspath(conf.get(SSL_INTERNAL_TRUSTSTORE)),
                   conf.get(SSL_INTERNAL_KEY_PASSWORD))

    def check(self) -> None:
        """Load both contexts now: an unreadable file, a key that does not match its
        certificate or a wrong password is a :class:`TlsConfigError` naming the file."""
        server_context(self)
        client_context(self)


def _load(context: ssl.SSLContext, settings: TlsSettings) -> ssl.SSLContext:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION  # a credit write never has to read
    context.verify_mode = ssl.CERT_REQUIRED
    try:
        context.load_cert_chain(settings.keystore, password=settings.key_password)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"{SSL_INTERNAL_KEYSTORE.key} {settings.keystore!r}: cannot load "
                             f"a certificate and private key from it ({e})") from e
    try:
        context.load_verify_locations(cafile=settings.truststore)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"{SSL_INTERNAL_TRUSTSTORE.key} {settings.truststore!r}: cannot "
                             f"load CA certificates from it ({e})") from e
    return context


@functools.lru_cache(maxsize=8)
def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The listening side's context (one per settings and process)."""
    return _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings)


@functools.lru_cache(maxsize=8)
def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The connecting side's context: the peer's certificate must chain to the trust
    store; host names are not checked (see the module doc)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    return _load(context, settings)
