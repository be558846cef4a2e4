"""Training package: data preparation and loading, model, trainer and checkpoints."""
