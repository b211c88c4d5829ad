"""BFCL-v3-style multi-turn tool calling: stateful API classes, ``ast``-based call parsing,
per-turn state/response/irrelevance checks and the ``tools`` environment (docs/environments_sql_tools.md).

Importing this package registers the ``tools`` environment.
"""

from arlkit.envs.tools.api_base import ArgumentError, ToolSpec, public_state, tool, tool_specs
from arlkit.envs.tools.apis import API_CLASSES, FINISH, api_class, instantiate, render_apis
from arlkit.envs.tools.calculator import Calculator
from arlkit.envs.tools.calls import Call, CallSyntaxError, parse_calls
from arlkit.envs.tools.checks import BoundCall, TurnCheck, bind, check_turn, execute
from arlkit.envs.tools.entries import DatasetError, LoadedEntries, ToolEntry, load_bfcl, shipped_entries
from arlkit.envs.tools.env import ToolsConfig, ToolsEnv
from arlkit.envs.tools.filesystem import FileSystem
from arlkit.envs.tools.messenger import Messenger
from arlkit.envs.tools.trading import TradingAccount
from arlkit.envs.tools.travel import TravelAgency
from arlkit.envs.tools.vehicle import Vehicle

__all__ = [
    "API_CLASSES",
    "FINISH",
    "ArgumentError",
    "BoundCall",
    "Calculator",
    "Call",
    "CallSyntaxError",
    "DatasetError",
    "FileSystem",
    "LoadedEntries",
    "Messenger",
    "ToolEntry",
    "ToolSpec",
    "ToolsConfig",
    "ToolsEnv",
    "TradingAccount",
    "TravelAgency",
    "TurnCheck",
    "Vehicle",
    "api_class",
    "bind",
    "check_turn",
    "execute",
    "instantiate",
    "load_bfcl",
    "parse_calls",
    "public_state",
    "render_apis",
    "shipped_entries",
    "tool",
    "tool_specs",
]
