"""Imports every built-in policy module so that their registrations run."""

from arlkit.policies import scripted  # noqa: F401
