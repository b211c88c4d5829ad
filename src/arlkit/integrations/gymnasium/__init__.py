"""arlkit and Gymnasium, both directions.

>>> import gymnasium, arlkit.integrations.gymnasium
>>> env = gymnasium.make("arlkit/frozenlake-v0")                    # every arlkit env, under arlkit/<name>-v0
>>> observation, info = env.reset(seed=0)                           # a task drawn from the test split
>>> observation, reward, terminated, truncated, info = env.step("Down")
>>> info["step_result"].valid
True

- arlkit environments as Gymnasium environments: :func:`to_gymnasium`, :class:`ArlkitGymEnv`
  (:mod:`~arlkit.integrations.gymnasium.export`); importing this package registers every arlkit
  environment with Gymnasium (:func:`register_envs`).
- Gymnasium environments as arlkit environments: :func:`from_gymnasium`, :class:`GymnasiumEnv`
  (:mod:`arlkit.envs.gymnasium`, an environment family like the others, so ``--env gymnasium`` is in
  the environment registry).

See docs/integrations.md.
"""

from arlkit.envs.gymnasium import GymnasiumConfig, GymnasiumEnv, from_gymnasium
from arlkit.integrations.gymnasium.export import AnyText, ArlkitGymEnv, register_envs, to_gymnasium

__all__ = ["AnyText", "ArlkitGymEnv", "GymnasiumConfig", "GymnasiumEnv", "from_gymnasium", "register_envs",
           "to_gymnasium"]

register_envs()
