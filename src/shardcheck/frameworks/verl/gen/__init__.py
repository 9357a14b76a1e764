"""verl's generation entry points (``verl.trainer.main_generation``, ``verl.trainer.main_generation_server``): the
framework ``verl-gen``."""
