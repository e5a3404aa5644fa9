"""How the store reaches PostgreSQL: the pools of each event loop, the engine, the read pool,
prepared statements and retries."""
