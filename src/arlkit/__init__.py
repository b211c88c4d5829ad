"""arlkit: evaluate and train multi-turn LLM agents across sampling breadth K and interaction depth T.

Comments and docstrings cite two papers by abbreviation (docs/glossary.md): **RT**,
"What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?", and **AA** (ARLArena),
"ARLArena: A Unified Framework for Stable Agentic Reinforcement Learning"; "RT §5.2" or "AA Table 3" name their
sections."""

__version__ = "0.1.0"
__all__ = ["__version__"]
