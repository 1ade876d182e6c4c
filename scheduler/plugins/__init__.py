"""Scheduler plugins, one module (or package) each. Imports: scheduler.framework, apis, numpy."""
