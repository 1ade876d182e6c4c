"""koord-manager (a Deployment). May import apis and proto; never agent, and the scheduler only
through its public entry point from the composition root (embedding)."""
