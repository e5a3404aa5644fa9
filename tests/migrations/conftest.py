from tests.migrations.support import (  # noqa: F401
    bots_dsn_fixture,
    empty_dsn_fixture,
    template_dsn_fixture,
)
