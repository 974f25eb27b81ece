"""Helpers only the tests use: reference computations, store builders, measuring tools."""
