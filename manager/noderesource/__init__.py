"""NodeResource calculation (docs/rules/manager.md) as pure code: the BatchResource and MidResource
plugins (``plugins``), writing their results into a Node's status (``prepare``), and the
``koord simulate`` adapter for kind ``BatchResource`` (``simulate``). No API calls, no I/O: the
controller that reads the objects and writes the Node lives elsewhere. Imports: the standard library
and ``apis`` only.
"""
