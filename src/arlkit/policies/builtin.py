"""Imports the built-in policy modules that are cheap to import; the LLM backends (``hf``,
``openai``) register themselves when first asked for (see ``registry._LAZY``)."""

from arlkit.policies import debate, scripted  # noqa: F401
