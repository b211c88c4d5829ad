"""Policies: the protocol, scripted policies and LLM backends, built from spec strings."""

from arlkit.policies.protocol import (
    CONTEXT_LENGTH_EXCEEDED, Message, Policy, PolicyError, Reply, Request, ScoringPolicy,
)
from arlkit.policies.registry import BackendOptions, SamplingConfig, list_policy_kinds, make_policy, register_policy

__all__ = [
    "CONTEXT_LENGTH_EXCEEDED",
    "BackendOptions",
    "Message",
    "Policy",
    "PolicyError",
    "Reply",
    "Request",
    "SamplingConfig",
    "ScoringPolicy",
    "list_policy_kinds",
    "make_policy",
    "register_policy",
]
