"""Tests of the Reservation plugin (scheduler/plugins/reservation/)."""
