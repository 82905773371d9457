"""Security: who a request comes from, and what that principal may do."""
