"""Development and test tooling: local PostgreSQL/Redis servers, the local stack, seeding."""
