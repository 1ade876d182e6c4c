"""Coscheduling (gang scheduling): the gang cache, the plugin and its PodGroup status controller's pure
parts (docs/rules/scheduler-coscheduling.md). Imports: nothing here; see the modules."""
