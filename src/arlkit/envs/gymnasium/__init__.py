"""Gymnasium environments as arlkit environments (``--env gymnasium --env-arg id=...``): the bridge
(``env.py``) and a small Gymnasium text game, its default id (``guess_number.py``). Importing this
package registers the ``gymnasium`` environment; Gymnasium itself is imported when one is built.
The other direction, arlkit environments served as Gymnasium ones, is :mod:`arlkit.integrations.gymnasium`."""

from arlkit.envs.gymnasium.env import (
    TRAIN_SEED_OFFSET,
    TRUNCATED_NOTE,
    DiscreteGymnasiumEnv,
    GymnasiumConfig,
    GymnasiumEnv,
    from_gymnasium,
)

__all__ = ["TRAIN_SEED_OFFSET", "TRUNCATED_NOTE", "DiscreteGymnasiumEnv", "GymnasiumConfig", "GymnasiumEnv",
           "from_gymnasium"]
