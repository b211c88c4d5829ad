"""arlkit and GEM (``gem-llm``), both directions (extra ``arlkit[gem]``).

>>> import gem, arlkit.integrations.gem
>>> env = gem.make("arlkit:frozenlake")                      # every arlkit env, under arlkit:<name>
>>> observation, info = env.reset(seed=0)                    # instruction and first observation
>>> observation, reward, terminated, truncated, info = env.step("<action>Down</action>")

- GEM environments as arlkit environments: ``--env gem --env-arg id=game:GuessTheNumber-v0-hard``,
  :func:`from_gem`, :class:`GemEnv` (:mod:`~arlkit.integrations.gem.env`).
- arlkit environments as GEM environments: :func:`to_gem`, :class:`ArlkitGemEnv`
  (:mod:`~arlkit.integrations.gem.export`); importing this package registers every arlkit
  environment in GEM's registry (:func:`register_envs`).

See docs/integrations.md.
"""

from arlkit.integrations.gem.env import DEFAULT_ID, GemConfig, GemEnv, from_gem, load_gem
from arlkit.integrations.gem.export import ArlkitGemEnv, register_envs, to_gem

__all__ = ["DEFAULT_ID", "ArlkitGemEnv", "GemConfig", "GemEnv", "from_gem", "load_gem", "register_envs", "to_gem"]

register_envs()
