"""NodeResource plugins, BatchResource (docs/rules/manager.md#batch-resource-formula) and MidResource
(docs/rules/manager.md#mid-resources): pure ``calculate`` functions over a Node, its pods and its
NodeMetric. Imports: the standard library, ``apis`` and ``manager.noderesource``.
"""
