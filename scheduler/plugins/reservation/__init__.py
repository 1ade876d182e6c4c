"""Koordinator's Reservation in koord-scheduler (docs/rules/scheduler-reservation.md): the cached view of
a reservation (info), which reservations a pod may use on a node (transformer), the Filter rules
(filtering), Score and the nominator (scoring), the controller's sync (controller), the cache fed by
events (cache), the plugin (plugin) and ``koord simulate`` kind ``Reservation`` (scenario).
Imports: nothing (a package marker)."""
