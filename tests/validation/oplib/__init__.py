"""Test operator libraries for op validation and bc-check (each module registers its ops on import)."""
