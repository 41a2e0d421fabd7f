"""The CLI's commands (``ccda <stage>`` and the rest), one module each: thin doors onto the library.
May import: the run contract, augment, cda, data, evaluate, models, pipeline, publish, tools, tracking, train.

Each module defines ``register(app: typer.Typer)``."""
