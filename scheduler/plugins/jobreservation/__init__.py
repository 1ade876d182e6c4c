"""JobReservation: Volcano's elect/reserve against the starvation of big jobs
(docs/rules/scheduler-jobreservation.md)."""
