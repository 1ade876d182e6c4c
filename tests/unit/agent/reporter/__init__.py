"""Unit tests of the koordlet NodeMetric reporter."""
