"""Integrations of lam into agent frameworks (import the one you use)."""
