"""The NodeNUMAResource scheduler plugin: exclusive cpusets for LSE/LSR pods
(docs/rules/scheduler-nodenumaresource.md)."""
