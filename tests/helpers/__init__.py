"""Helpers shared by every test layer (unit, integration, reliability): polling with a deadline, stopping
child processes. Standard library only, so any test may import them."""
