"""Agents for the chemical procurement pricing tasks: the scripted oracle and the naive shopper."""
