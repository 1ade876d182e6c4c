"""ElasticQuota: hierarchical elastic quotas (docs/rules/scheduler-elasticquota.md)."""
