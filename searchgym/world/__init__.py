"""Worlds: a knowledge graph plus a text corpus, their storage, generators and real-data loaders."""

from .model import Document, Edge, Entity, Literal, Relation, Triple, WorldStats
from .storage import WorldFormatError
from .synthetic import SyntheticConfig, default_world, generate_world
from .world import World, WorldBuilder, WorldError, load_world, normalize_name, save_world

__all__ = [
    "Document",
    "Edge",
    "Entity",
    "Literal",
    "Relation",
    "Triple",
    "WorldStats",
    "World",
    "WorldBuilder",
    "WorldError",
    "WorldFormatError",
    "load_world",
    "save_world",
    "normalize_name",
    "SyntheticConfig",
    "default_world",
    "generate_world",
]
