"""Step-level diagnostics of multi-turn agents (docs/metrics.md; RT §3.3-§5.1; ARLArena App. F). RT:
"What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"

- :mod:`~arlkit.analysis.states` — rebuilding a trajectory's intermediate states by replay;
- :mod:`~arlkit.analysis.steps` — action quality at matched states;
- :mod:`~arlkit.analysis.errors` — error states, continuation success, error correction;
- :mod:`~arlkit.analysis.depth` — RL − base quality by normalised depth;
- :mod:`~arlkit.analysis.likelihood` — ActionNLL, cumulative LLR, length-matched pairs;
- :mod:`~arlkit.analysis.process` — oracle-Q and LLM-judge process rewards, judge agreement;
- :mod:`~arlkit.analysis.flows` — action-transition flows (Sankey) and loop metrics;
- :mod:`~arlkit.envs.capabilities` — the optional environment capabilities they use.

Each returns data; :mod:`arlkit.report.analysis_files` writes the files and
:mod:`arlkit.recipes.analyze` runs one analysis end to end (what ``arlkit analyze`` does).
"""

from arlkit.envs.capabilities import (
    ErrorInjector,
    FailureDetector,
    InjectedError,
    MissingCapability,
    StepQuality,
    action_quality,
    inject_error,
)
from arlkit.analysis.depth import DepthBin, depth_profile
from arlkit.analysis.errors import ErrorsConfig, ErrorsResult, error_states_analysis
from arlkit.analysis.flows import LoopStats, action_flows, action_label, loop_stats, summarize_loops
from arlkit.analysis.likelihood import LikelihoodConfig, LikelihoodResult, likelihood_analysis
from arlkit.analysis.process import (
    JUDGE_SYSTEM_PROMPT,
    JudgeVerdict,
    LLMJudge,
    ProcessReward,
    StepContext,
    judge_agreement,
    oracle_process_reward,
    parse_judge_reply,
    spearman,
    step_context,
    trajectory_step_contexts,
)
from arlkit.analysis.runs import AnalysisInputError, RunData, load_run, paired_runs
from arlkit.analysis.states import ReplayError, StatePoint, replay_states, restore_point
from arlkit.analysis.steps import StepsConfig, StepsResult, matched_states

__all__ = [
    "JUDGE_SYSTEM_PROMPT",
    "AnalysisInputError",
    "DepthBin",
    "ErrorInjector",
    "ErrorsConfig",
    "ErrorsResult",
    "FailureDetector",
    "InjectedError",
    "JudgeVerdict",
    "LLMJudge",
    "LikelihoodConfig",
    "LikelihoodResult",
    "LoopStats",
    "MissingCapability",
    "ProcessReward",
    "ReplayError",
    "RunData",
    "StatePoint",
    "StepContext",
    "StepQuality",
    "StepsConfig",
    "StepsResult",
    "action_flows",
    "action_label",
    "action_quality",
    "depth_profile",
    "error_states_analysis",
    "inject_error",
    "judge_agreement",
    "likelihood_analysis",
    "load_run",
    "loop_stats",
    "matched_states",
    "oracle_process_reward",
    "paired_runs",
    "parse_judge_reply",
    "replay_states",
    "restore_point",
    "spearman",
    "step_context",
    "summarize_loops",
    "trajectory_step_contexts",
]
