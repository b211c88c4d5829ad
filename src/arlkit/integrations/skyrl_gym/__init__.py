"""arlkit and skyrl-gym (SkyRL's environment library), both directions. The ``skyrl`` extra.

>>> import skyrl_gym, arlkit.integrations.skyrl_gym
>>> env = skyrl_gym.make("arlkit-frozenlake", env_config={}, extras={"extra_info": {"budget": 4}})
>>> prompt, _ = env.init([])                      # arlkit's system prompt and the first observation
>>> out = env.step("<think>go</think><action>Down</action>")
>>> out["done"], out["metadata"]["valid"]
(False, True)

- skyrl-gym environments in arlkit: ``--env skyrl-gym --env-arg data=ROWS --env-arg id=ENV``
  (:mod:`~arlkit.integrations.skyrl_gym.env`, registered by its entry point).
- arlkit environments in skyrl-gym: importing this package registers every arlkit environment as
  ``arlkit-<name>`` (:func:`register_envs`); :func:`skyrl_dataset` writes SkyRL dataset rows for
  them (:mod:`~arlkit.integrations.skyrl_gym.export`).

See docs/integrations.md.
"""

from arlkit.integrations.skyrl_gym.env import SkyRLGymConfig, SkyRLGymEnv, load_rows
from arlkit.integrations.skyrl_gym.export import SkyRLArlkitEnv, register_envs, skyrl_dataset, skyrl_id

__all__ = ["SkyRLArlkitEnv", "SkyRLGymConfig", "SkyRLGymEnv", "load_rows", "register_envs", "skyrl_dataset",
           "skyrl_id"]

register_envs()
