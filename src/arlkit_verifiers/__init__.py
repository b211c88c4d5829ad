"""The verifiers plugin id ``arlkit-verifiers``: arlkit's environments as a verifiers taskset,
environment and harness (:mod:`arlkit.integrations.verifiers.export`).

verifiers' loader imports a plugin id as a top-level module (``arlkit-verifiers`` ->
``arlkit_verifiers``), so this module only re-exports the plugin's classes:
``vf-eval arlkit-verifiers --env.taskset.env-name frozenlake ...``.
"""

from arlkit.integrations.verifiers.export import ArlkitEnv, ArlkitTaskset, ChatHarness, env_config, load_environment

__all__ = ["ArlkitEnv", "ArlkitTaskset", "ChatHarness", "env_config", "load_environment"]
