"""Unit tests of the shared kube helpers."""
