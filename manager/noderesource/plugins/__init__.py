"""NodeResource plugins, BatchResource (docs/rules/manager.md#batch-resource-formula), MidResource
(docs/rules/manager.md#mid-resources) and GPUDeviceResource (docs/rules/manager.md#gpu-device-resources):
pure ``calculate`` functions over a Node and its pods and NodeMetric, or its Device.
Imports: the standard library, ``apis`` and ``manager.noderesource``.
"""
