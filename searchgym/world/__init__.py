"""Worlds: a knowledge graph plus a text corpus, their storage, generators and real-data loaders."""

from .model import Document, Edge, Entity, Literal, Relation, Triple, WorldStats
from .storage import WorldFormatError, load_world, save_world
from .synthetic import SyntheticConfig, default_world, generate_world
from .world import World, WorldBuilder, WorldError, normalize_name

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
