"""Running untrusted programs (model-written Python, shell) with limits and isolation.

>>> from arlkit.sandbox import Sandbox
>>> result = Sandbox().run_python("print(sum(range(10)))")
>>> result.outcome, result.stdout
('ok', '45\\n')

See ``docs/sandbox.md`` for the isolation levels and what each one contains.
"""

from arlkit.sandbox.config import ISOLATION_LEVELS, IsolationLevel, SandboxConfig
from arlkit.sandbox.isolation import NestedProgram, available_levels
from arlkit.sandbox.process import SandboxProcess
from arlkit.sandbox.result import Outcome, SandboxError, SandboxResult, SandboxUnavailable
from arlkit.sandbox.runner import Sandbox, minimal_env

__all__ = [
    "ISOLATION_LEVELS",
    "IsolationLevel",
    "NestedProgram",
    "Outcome",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxProcess",
    "SandboxResult",
    "SandboxUnavailable",
    "available_levels",
    "minimal_env",
]
