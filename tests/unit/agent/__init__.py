"""Unit tests of the koordlet agent."""
