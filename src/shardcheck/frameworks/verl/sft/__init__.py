"""verl's SFT trainers (``verl.trainer.fsdp_sft_trainer``, ``verl.trainer.sft_trainer``): the framework ``verl-sft``."""
