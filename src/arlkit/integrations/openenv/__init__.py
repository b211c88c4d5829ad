"""OpenEnv, both ways (docs/integrations.md, "OpenEnv, both ways"; extra ``arlkit[openenv]``).

- :mod:`arlkit.integrations.openenv.env`: an OpenEnv server's environment as the arlkit
  environment ``openenv`` (``--env openenv --env-arg url=http://HOST:PORT``), registered when
  the name is first used (the ``arlkit.envs`` entry point).
- :mod:`arlkit.integrations.openenv.server`: any arlkit environment served with OpenEnv's own
  server (``python -m arlkit.integrations.openenv.server --env frozenlake --port 8000``).

OpenEnv itself is imported when an environment is built or a server made.
"""
