"""The internals the fault-injection tests wrap to make a step fail where it happens (a
counter-point insert, a route save, a source write). This is the one place tests reach past
``versions.services``: a fault has to be injected inside the engine, not at its door."""

import importlib

restore_engine = importlib.import_module("versions.services.engine")
capture_engine = importlib.import_module("versions.services.capture")
capture_sql = importlib.import_module("versions.services._sql")
