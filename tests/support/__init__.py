"""Shared fakes and helpers for flowray's own tests (not shipped; users get
:mod:`flowray.testing`)."""
