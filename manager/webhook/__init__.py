"""koord-manager's admission webhooks."""
