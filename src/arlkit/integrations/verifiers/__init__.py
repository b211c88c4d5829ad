"""verifiers, both ways (extra ``arlkit[verifiers]``, docs/integrations.md).

- :mod:`arlkit.integrations.verifiers.env`: a verifiers environment as the arlkit environment
  ``verifiers`` (``--env verifiers --env-arg id=TASKSET_ID``), :func:`from_verifiers`.
- :mod:`arlkit.integrations.verifiers.export`: any arlkit environment as a verifiers taskset and
  environment, run by verifiers' own runner under the plugin id ``arlkit-verifiers`` (``vf-eval arlkit-verifiers ...``).

Importing this package imports neither verifiers nor the two modules.
"""

from __future__ import annotations

from typing import Any

__all__ = ["from_verifiers"]


def from_verifiers(id_or_env: Any, **config: Any) -> Any:
    """An arlkit environment for a verifiers taskset id, ``module:function`` or ``Env``."""
    from arlkit.integrations.verifiers.env import from_verifiers as build

    return build(id_or_env, **config)
