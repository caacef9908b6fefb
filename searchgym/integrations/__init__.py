"""Adapters to training frameworks (verl, TRL, SkyRL, GEM, verifiers): the top floor, above agents.

Shared by all: :mod:`.environments` (which env an adapter plays, built once per process) and
:mod:`.episode` (an env played against an external token generator, with exact token masks);
:mod:`.text_rollout` drives the same episode text in / text out for the frameworks that tokenize
themselves (SkyRL, GEM, verifiers; docs/frameworks.md).
"""
