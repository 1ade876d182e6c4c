"""NodeResource plugins (SPEC §5.3 BatchResource, §5.4 MidResource): pure ``calculate`` functions over
a Node, its pods and its NodeMetric. Imports: the standard library, ``apis`` and ``manager.noderesource``.
"""
