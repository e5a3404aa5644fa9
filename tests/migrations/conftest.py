from tests.migrations.support import bots_dsn, empty_dsn, template_dsn  # noqa: F401
