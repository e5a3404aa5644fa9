"""``parrot-parents serve``: the HTTP service over the bots of the database."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from parrot_parents.cli.common import add_dsn_option, add_model_option

__all__ = ["migrate", "register"]

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from parrot_parents.server.limits import (
        DEFAULT_BODY_TIMEOUT_S,
        DEFAULT_HEADER_TIMEOUT_S,
        DEFAULT_MAX_BODY_BYTES,
        INSECURE_FLAG,
        TOKEN_ENV,
    )

    p = subparsers.add_parser(
        "serve",
        help="serve the bots over HTTP",
        description="Applies the pending schema migrations (bots table; --no-migrate to "
        "skip), loads every enabled bot row and serves /api/v1 (see /openapi.json). "
        "A bad row is reported and skipped. /ask needs PARROT_PARENTS_LLM_BASE_URL and "
        "PARROT_PARENTS_LLM_MODEL (and optionally PARROT_PARENTS_LLM_API_KEY).",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (127.0.0.1); any other than a loopback address needs --token",
    )
    p.add_argument("--port", type=_port, default=8080, help="port (8080; 0 picks a free one)")
    p.add_argument(
        "--token",
        default=None,
        help=f"bearer token required on every route but /health (default: ${TOKEN_ENV}; "
        "none: no auth, and bot writes over HTTP are refused)",
    )
    p.add_argument(
        INSECURE_FLAG,
        dest="insecure_public",
        action="store_true",
        help="serve a non-loopback --host without a token: every document's text and "
        "/api/v1/reload open to the network (refused without this flag)",
    )
    add_dsn_option(p)
    add_model_option(p)
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"request body limit in bytes ({DEFAULT_MAX_BODY_BYTES})",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="SECONDS",
        help=f"close a connection whose request head is not in, or that sits idle, after "
        f"this long ({DEFAULT_HEADER_TIMEOUT_S:g}); behind a reverse proxy set its own too",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="SECONDS",
        help=f"answer 408 and close when a body takes longer ({DEFAULT_BODY_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--migrate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="apply the pending schema migrations at start, as `parrot-parents migrate` "
        "does, and log them (default: on; safe when several servers start at once). "
        "--no-migrate: for a database user that may not change the schema",
    )
    p.add_argument(
        "--auto-reload",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reload changed bot rows before each request (default: on)",
    )
    p.set_defaults(func=run)


def _port(value: str) -> int:
    """A TCP port for argparse: 0 (a free one) to 65535."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"must be a port number from 0 to 65535 (0 picks a free one), got {value!r}"
        )
    return port


async def migrate(dsn: str | None) -> list[str]:
    """Apply the pending migrations of the database ``dsn`` (None: ``$PARROT_PARENTS_DSN``,
    else the embedded server) and log what was applied; the revisions applied.

    Raises:
        StoreError: a migration failed (the message names it; nothing of a failed
            revision is kept); the hint names ``--no-migrate``.
    """
    from sqlalchemy.exc import SQLAlchemyError

    from parrot_parents import migrations
    from parrot_parents.errors import StoreError

    try:
        applied = await asyncio.to_thread(migrations.apply_pending, dsn)
    except SQLAlchemyError as exc:
        raise StoreError(
            f"applying the schema migrations failed: {exc.__class__.__name__}: {exc}",
            hint="run `parrot-parents migrate` as a user that may change the schema, then "
            "start with --no-migrate",
        ) from exc
    head = ", ".join(migrations.heads())
    if applied:
        docs = {r["revision"]: r["doc"] for r in migrations.history()}
        logger.info(
            "applied %d migration(s): %s; the schema is at %s",
            len(applied),
            "; ".join(f"{rev} ({docs.get(rev, '')})" for rev in applied),
            head,
        )
    else:
        logger.info("schema up to date (revision %s), no migration applied", head)
    return applied


async def run(args: argparse.Namespace) -> int:
    from aiohttp import web

    from parrot_parents.bots.manager import BotManager
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.llm.client import ChatCompletionsClient
    from parrot_parents.server.app import TOKEN_ENV, create_app
    from parrot_parents.server.limits import check_exposure, check_settings
    from parrot_parents.server.protocol import make_runner

    if not args.header_timeout > 0:
        raise ConfigurationError(f"--header-timeout must be > 0, got {args.header_timeout!r}")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    # Every setting is checked before the database is reached and the model loads.
    check_settings(
        token=token,
        max_body_bytes=args.max_body_bytes,
        body_timeout_s=args.body_timeout,
        names={
            "token": f"--token (or ${TOKEN_ENV})",
            "max_body_bytes": "--max-body-bytes",
            "body_timeout_s": "--body-timeout",
        },
    )
    exposed = check_exposure(host=args.host, token=token, insecure=args.insecure_public)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    if not getattr(args, "debug", False):
        # alembic logs each step of a migration at INFO; ``migrate`` logs one line instead.
        logging.getLogger("alembic").setLevel(logging.WARNING)
    if exposed is not None:
        logger.warning("%s", exposed)
    if args.migrate:
        # Before the model loads: a database that cannot be reached or migrated fails fast.
        await migrate(args.dsn)
    llm = ChatCompletionsClient.from_env()
    embedding = SentenceTransformerEmbeddings(args.model)
    await asyncio.to_thread(embedding.warm_up)
    manager = BotManager(args.dsn, embedding=embedding)
    try:
        report = await manager.load()
        app = create_app(
            manager,
            token=token,
            llm=llm,
            max_body_bytes=args.max_body_bytes,
            auto_reload=args.auto_reload,
            close_on_cleanup=True,
            body_timeout_s=args.body_timeout,
        )
    except BaseException:
        await manager.close()
        if llm is not None:
            await llm.close()
        raise
    if report.failed:
        print(f"{len(report.failed)} bot(s) not loaded (see the warnings above)", file=sys.stderr)
    runner = make_runner(
        app, header_timeout_s=args.header_timeout, access_log_format='%a "%r" %s %Tfs'
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        try:
            await site.start()
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                hint="choose another --port (0 picks a free one) or --host",
            ) from exc
        addresses = ", ".join(f"http://{h}:{p}" for h, p, *_ in runner.addresses)
        print(
            f"serving {len(manager.bots)} bot(s) on {addresses} "
            f"(auth: {'bearer token' if token else 'none'}; "
            f"ask: {'LLM ' + llm.settings.model if llm else 'off, no LLM configured'})",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("stopping", file=sys.stderr)
    finally:
        await runner.cleanup()
    return 0
