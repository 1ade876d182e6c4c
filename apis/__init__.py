"""Shared koord types. Imports only the standard library (numpy where vectors need it); convert.py
alone also knows the generated protobuf code."""
