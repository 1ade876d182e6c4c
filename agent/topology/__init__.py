"""The koordlet's node topology: CPU topology, share pools and devices as the NodeResourceTopology and
Device objects report them, and the rules that apply the scheduler's cpusets and device allocations
(docs/rules/koordlet-topology.md, docs/rules/koordlet-cpuset.md, docs/rules/koordlet-gpu.md)."""
