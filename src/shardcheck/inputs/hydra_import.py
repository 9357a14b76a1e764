"""Import Hydra's override grammar and config loader without running ``hydra/__init__.py`` first.

``import hydra`` executes the package's ``__init__``, which imports ``hydra.utils`` (instantiate,
logging.config), ``hydra.main`` and ``hydra.compose``: about a third of Hydra's import time, none
of which shardcheck uses. Here the package module is created from its spec and its ``__init__``
is deferred: submodules import normally, and the first use of a name ``__init__`` defines (e.g.
``from hydra import compose``) runs the real ``__init__`` in place, so every other user of Hydra in
the process sees the ordinary package. Any surprise (another Hydra layout) falls back to a plain
import. Measured in bench/bench_check.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys

# Names hydra/__init__.py (hydra-core 1.3) re-exports from its submodules without side effects.
_REEXPORTS = {"MissingConfigException": "hydra.errors", "TaskFunction": "hydra.types"}
# Names that are functions in the package but would resolve to same-named submodules.
_SHADOWED = frozenset({"compose", "initialize", "initialize_config_dir", "initialize_config_module", "main"})


def _install_deferred_package() -> bool:
    spec = importlib.util.find_spec("hydra")
    if spec is None or spec.loader is None or not spec.origin:
        return False
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            version = re.search(r'__version__ = "([^"]+)"', fh.read())
    except OSError:
        return False
    if version is None:
        return False
    module = importlib.util.module_from_spec(spec)
    module.__version__ = version.group(1)
    initialised = False

    def __getattr__(name: str):
        nonlocal initialised
        if name in _REEXPORTS and not initialised:
            return getattr(importlib.import_module(_REEXPORTS[name]), name)
        if not name.startswith("__") and name not in _SHADOWED and not initialised:
            if importlib.util.find_spec(f"hydra.{name}") is not None:
                return importlib.import_module(f"hydra.{name}")
        if not initialised:
            initialised = True
            try:
                spec.loader.exec_module(module)  # the real hydra/__init__.py, in this module
            except BaseException:  # cut short (the per-input time limit): run it whole on the next access
                initialised = False
                raise
            return getattr(module, name)
        raise AttributeError(f"module 'hydra' has no attribute {name!r}")

    module.__getattr__ = __getattr__
    sys.modules["hydra"] = module
    return True


def load_hydra():
    """(OverridesParser, ConfigLoaderImpl, ConfigCompositionException, HydraException)."""
    if "hydra" not in sys.modules:
        try:
            _install_deferred_package()
        except (ImportError, OSError, ValueError, AttributeError):  # never let the speed-up break the import
            sys.modules.pop("hydra", None)
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import ConfigCompositionException, HydraException
    except ImportError:
        for name in [m for m in sys.modules if m == "hydra" or m.startswith("hydra.")]:
            del sys.modules[name]
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import ConfigCompositionException, HydraException
    return OverridesParser, ConfigLoaderImpl, ConfigCompositionException, HydraException
