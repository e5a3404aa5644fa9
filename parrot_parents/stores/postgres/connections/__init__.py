"""How the store reaches PostgreSQL: the engine, the read pool, prepared statements and retries."""
