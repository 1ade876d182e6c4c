"""Oracles: the readable per-node forms of the scheduler's vectorised plugins, stating each rule node by
node as docs/rules/scheduler.md does. Property tests, scenarios and bench/scheduler_throughput.py compare
the production plugins with them; since the production Framework runs per-node plugins, a Framework of
oracles is an oracle scheduler (tests/oracles/framework.py)."""
