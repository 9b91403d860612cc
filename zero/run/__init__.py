"""The run's groundwork: settings (dataclasses, TOML, --set), where the reference data lives, a run directory's
layout, its object-store variant, wandb. Imports nothing of the project."""
