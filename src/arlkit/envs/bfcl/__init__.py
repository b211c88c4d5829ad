"""BFCL v3 multi-turn function calling through ``bfcl-eval``'s own classes, data and checker
(docs/benchmarks.md). Importing this package registers the ``bfcl`` environment; bfcl-eval itself
is imported only when an entry is loaded (the ``bfcl`` extra, the light way in
:data:`~arlkit.envs.bfcl.backend.INSTALL_HINT`).
"""

from arlkit.envs.bfcl.calls import Call, CallSyntaxError, parse_calls
from arlkit.envs.bfcl.checks import TurnCheck, check_turn
from arlkit.envs.bfcl.data import CATEGORIES, BfclEntry, DatasetError, function_docs, load_entries
from arlkit.envs.bfcl.env import FINISH, BfclConfig, BfclEnv

__all__ = [
    "CATEGORIES",
    "FINISH",
    "BfclConfig",
    "BfclEntry",
    "BfclEnv",
    "Call",
    "CallSyntaxError",
    "DatasetError",
    "TurnCheck",
    "check_turn",
    "function_docs",
    "load_entries",
    "parse_calls",
]
