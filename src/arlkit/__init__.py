"""arlkit: evaluate and train multi-turn LLM agents across sampling breadth K and interaction depth T."""

__version__ = "0.1.0"
__all__ = ["__version__"]
