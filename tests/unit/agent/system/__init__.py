"""Unit tests of agent.system (host readers) on a fake host tree."""
