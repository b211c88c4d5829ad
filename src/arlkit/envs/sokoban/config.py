"""The configuration of the Sokoban family: its rooms (:mod:`arlkit.envs.sokoban.generate`) and turn budget."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SokobanConfig"]


@dataclass(frozen=True)
class SokobanConfig:
    """Configuration of the Sokoban family.

    Attributes:
        dim_room: rooms are ``dim_room`` x ``dim_room`` cells, outer walls included (AA: 6).
        num_boxes: boxes (and targets) per room (AA: 1).
        t_max: the family's full turn budget T_max (AA's 15 max steps).
        num_gen_steps: steps of the random walk that carves the floor; ``None`` means
            ``int(1.7 * 2 * dim_room)`` as in gym-sokoban.
        p_change_direction: probability that the carving walker turns at each step.
        min_solution_length: rooms whose shortest solution is shorter are not used.
        max_solution_length: the start is the farthest state from solved whose shortest solution
            is at most this long (``None``: no limit).
        max_states: cap on the states one exact search may visit (generation and oracle).
        seed: seed of the task stream (which rooms exist); the split of a room depends only on
            its content.
    """

    dim_room: int = 6
    num_boxes: int = 1
    t_max: int = 15
    num_gen_steps: int | None = None
    p_change_direction: float = 0.35
    min_solution_length: int = 1
    max_solution_length: int | None = None
    max_states: int = 200_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 4 <= self.dim_room <= 16:
            raise ValueError(f"dim_room must be between 4 and 16, got {self.dim_room}")
        if not 1 <= self.num_boxes <= (self.dim_room - 2) ** 2 - 2:
            raise ValueError(
                f"num_boxes must be between 1 and {(self.dim_room - 2) ** 2 - 2} for dim_room "
                f"{self.dim_room}, got {self.num_boxes}"
            )
        if self.t_max < 1:
            raise ValueError(f"t_max must be >= 1, got {self.t_max}")
        if self.num_gen_steps is not None and self.num_gen_steps < 1:
            raise ValueError(f"num_gen_steps must be >= 1 (or None), got {self.num_gen_steps}")
        if not 0.0 <= self.p_change_direction <= 1.0:
            raise ValueError(f"p_change_direction must be in [0, 1], got {self.p_change_direction}")
        if self.min_solution_length < 1:
            raise ValueError(f"min_solution_length must be >= 1, got {self.min_solution_length}")
        if self.max_solution_length is not None and self.max_solution_length < self.min_solution_length:
            raise ValueError(
                f"max_solution_length ({self.max_solution_length}) must be >= min_solution_length "
                f"({self.min_solution_length})"
            )
        if self.max_states < 1:
            raise ValueError(f"max_states must be >= 1, got {self.max_states}")
