"""The model registry: ``{name: model class}``. A model is one module defining a ``TreeModel``
subclass and calling ``register`` on it; ``models/__init__.py`` imports that module, the CLI's
``--model`` choices and the ``bps.<name>`` aliases are read from here.

Import rule: imports ``_validation`` only.
"""

from __future__ import annotations

from .._validation import check_choice

MODELS: dict[str, type] = {}


def register(cls: type) -> type:
    """Add a model class under its ``model_type`` (usable as a class decorator)."""
    name = cls.model_type
    if not name or name in MODELS:
        raise ValueError(f"model type {name!r} is empty or already registered")
    MODELS[name] = cls
    return cls


def get_model(name: str) -> type:
    """The model class registered as ``name``; an unknown name raises listing the valid ones."""
    check_choice("model", name, list(MODELS))
    return MODELS[name]
