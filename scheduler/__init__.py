"""koord-scheduler, the load-aware scheduler. May import apis and proto; never agent or manager."""
