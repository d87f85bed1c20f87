"""opwire's version (every layer may read it; nothing imports the face for it)."""

__version__ = "0.1.0"
