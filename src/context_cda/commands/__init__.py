"""CLI commands, one module per stage. Each module defines ``register(app: typer.Typer)``."""
