"""Bridges to other training stacks (verl). Each module imports its host lazily: the core install needs none."""
