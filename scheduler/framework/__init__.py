"""The scheduling framework: extension-point interfaces, Status, CycleState, the snapshot, the plugin
registry and the runtime that runs a profile. Imports: numpy, apis."""
