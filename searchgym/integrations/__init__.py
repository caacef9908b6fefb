"""Adapters to training frameworks (verl, TRL): the top floor, above agents."""
