"""Adapters to training frameworks (verl, TRL): the top floor, above agents.

Shared by both: :mod:`.environments` (which env an adapter plays, built once per process) and
:mod:`.episode` (an env played against an external token generator, with exact token masks).
"""
