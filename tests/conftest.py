"""The suite's tests were written against verl 0.9.1 (the release shardcheck's rules were verified on): they
judge with it unless a test unsets ``SHARDCHECK_VERL_VERSION`` (tests/test_verl_versions.py does, to test the
choice of version itself)."""

import os

os.environ.setdefault("SHARDCHECK_VERL_VERSION", "0.9.1")
