"""Starting Ray quietly: Ray's notice that token authentication is on (its default) is
dropped; its warning that authentication is off is kept."""

import logging

from flowray.runtime.execution import cluster


def _passes(message):
    record = logging.LogRecord(cluster._TOKEN_AUTH_LOGGER, logging.WARNING, __file__, 1,
                               message, None, None)
    return logging.getLogger(cluster._TOKEN_AUTH_LOGGER).filter(record)


def test_the_token_auth_notice_is_dropped_and_the_disabled_warning_kept():
    kwargs = cluster._quiet()
    cluster._quiet()   # idempotent: one filter
    auth = logging.getLogger(cluster._TOKEN_AUTH_LOGGER)
    assert sum(isinstance(f, cluster._NotTheTokenAuthNotice) for f in auth.filters) == 1
    assert not _passes("Token authentication is enabled for this Ray cluster. Set "
                       "RAY_AUTH_MODE=disabled to opt out.")
    assert _passes("Token authentication is disabled for this Ray cluster. Anyone with "
                   "network access to the cluster can run arbitrary code")
    assert kwargs["log_to_driver"] is False and kwargs["namespace"] == cluster.NAMESPACE
