"""Koordinator's DeviceShare in koord-scheduler (docs/rules/scheduler-deviceshare.md): request
normalisation (normalize), per-GPU requirements (requirements), device scoring (scoring), the pure
allocator (allocator), the per-node device cache fed by events (cache), the plugin (plugin) and
``koord simulate`` kind ``DeviceShare`` (scenario).
Imports: nothing (a package marker)."""
