"""The one plugin registry: type names a bot row may use, mapped to classes.

A row's ``{"type": ...}`` is looked up **by name** in a :class:`Registry`, never as an
import path, so whoever can write the table cannot make the server import code. A name is
found among classes registered with :meth:`Registry.register`, then the built-ins, then
the entry points ``parrot_parents.parent_searchers`` / ``parrot_parents.rerankers``. The
keys a type accepts come from its ``config_model``, else its ``__init__`` keywords. This
module knows no kind of plugin: docs/architecture.md ("Plugins"), docs/service.md ("The row").
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, create_model

from parrot_parents.errors import ConfigurationError

__all__ = ["PARENT_SEARCHERS_GROUP", "RERANKERS_GROUP", "Registry"]

PARENT_SEARCHERS_GROUP = "parrot_parents.parent_searchers"
RERANKERS_GROUP = "parrot_parents.rerankers"

#: Names a row may use: lower-case letters, digits and ``_`` (never dots or colons).
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: Constructor parameters filled by the loader, never by the row.
INJECTED = frozenset({"store"})

T = TypeVar("T")


@dataclass(frozen=True)
class _Entry:
    target: type | str  # a class, or "module:attr" of a trusted (built-in) class
    config_model: type[BaseModel] | None = None


class Registry(Generic[T]):
    """Type name -> class for one kind of plugin (parent searchers or rerankers).

    Args:
        kind: human name used in errors, e.g. ``"parent searcher"``.
        group: entry-point group scanned for installed types.
        base: every resolved class must subclass it.
        builtins: ``{name: (target, config_model)}``; ``target`` is a class or a trusted
            ``"module:Class"`` string, ``config_model`` a pydantic model or None.
    """

    def __init__(
        self,
        kind: str,
        group: str,
        base: type[Any],  # not type[T]: mypy refuses an abstract class there
        builtins: Mapping[str, tuple[type | str, type[BaseModel] | None]],
    ) -> None:
        self.kind = kind
        self.group = group
        self.base: type[T] = base
        self._builtins = {name: _Entry(t, m) for name, (t, m) in builtins.items()}
        self._registered: dict[str, _Entry] = {}
        self._entry_points: dict[str, EntryPoint] | None = None

    def register(
        self,
        name: str,
        cls: type[T],
        *,
        config_model: type[BaseModel] | None = None,
        replace: bool = False,
    ) -> None:
        """Make ``cls`` available under ``name`` (for applications and tests).

        Raises:
            ConfigurationError: a bad name, a class that does not subclass ``base``, or a
                name already registered (unless ``replace``).
        """
        _check_name(name, self.kind)
        self._check_class(name, cls)
        if name in self._registered and not replace:
            raise ConfigurationError(f"{self.kind} type {name!r} is already registered")
        self._registered[name] = _Entry(cls, config_model)

    def _eps(self) -> dict[str, EntryPoint]:
        if self._entry_points is None:
            self._entry_points = {ep.name: ep for ep in entry_points(group=self.group)}
        return self._entry_points

    def names(self) -> list[str]:
        """Every known type name, sorted."""
        return sorted({*self._registered, *self._builtins, *self._eps()})

    def get(self, name: str) -> type[T]:
        """The class registered under ``name``.

        Raises:
            ConfigurationError: unknown name (the message lists the known ones), or the
                entry point does not load or does not give a subclass of ``base``.
        """
        return self._resolve(name)[0]

    def config_model(self, name: str) -> type[BaseModel]:
        """The pydantic model of the keys (other than ``type``) that ``name`` accepts."""
        return self._resolve(name)[1]

    def _resolve(self, name: str) -> tuple[type[T], type[BaseModel]]:
        if not isinstance(name, str) or not _TYPE_NAME.match(name):
            raise ConfigurationError(
                f"unknown {self.kind} type {name!r}; known types: {self.names()}"
            )
        entry = self._registered.get(name) or self._builtins.get(name)
        if entry is None:
            ep = self._eps().get(name)
            if ep is None:
                raise ConfigurationError(
                    f"unknown {self.kind} type {name!r}; known types: {self.names()}",
                    hint=f"install a package that declares it in the {self.group!r} "
                    "entry-point group",
                )
            try:
                entry = _Entry(ep.load())
            except Exception as exc:
                raise ConfigurationError(
                    f"{self.kind} type {name!r} ({ep.value}) failed to load: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        target = entry.target
        if isinstance(target, str):  # a trusted built-in's "module:attr", never a row's
            module, _, attr = target.partition(":")
            target = getattr(importlib.import_module(module), attr)
        cls = self._check_class(name, target)
        model = entry.config_model or getattr(cls, "config_model", None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            model = _model_from_signature(cls)
        return cls, model

    def _check_class(self, name: str, cls: object) -> type[T]:
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise ConfigurationError(
                f"{self.kind} type {name!r} must be a subclass of {self.base.__name__}, got {cls!r}"
            )
        return cls

    def validate(self, config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Check ``{"type": name, **params}``; return ``(name, params)``.

        Raises:
            ConfigurationError: no or unknown ``type``.
            pydantic.ValidationError: unknown keys or wrong types in ``params``.
        """
        params = dict(config)
        name = params.pop("type", None)
        if name is None:
            raise ConfigurationError(f"missing 'type'; known types: {self.names()}")
        model = self.config_model(name)
        checked = model.model_validate(params)
        return name, checked.model_dump(exclude_unset=True)

    def build(self, config: Mapping[str, Any], **resources: Any) -> T:
        """Validate ``config`` and create the instance.

        ``resources`` (e.g. ``store=``) are passed to a ``from_config(params, **resources)``
        classmethod when the class has one, else to ``__init__`` for the parameters it
        declares.

        Raises:
            ConfigurationError, pydantic.ValidationError: as :meth:`validate`, or the
                constructor rejected the values.
        """
        name, params = self.validate(config)
        cls = self.get(name)
        factory = getattr(cls, "from_config", None)
        if callable(factory):
            built: T = factory(params, **resources)
            return built
        accepted = inspect.signature(cls).parameters
        injected = {k: v for k, v in resources.items() if k in accepted}
        try:
            return cls(**params, **injected)
        except TypeError as exc:
            raise ConfigurationError(
                f"{self.kind} type {name!r} rejected {params!r}: {exc}"
            ) from exc


def _check_name(name: object, kind: str) -> None:
    if not isinstance(name, str) or not _TYPE_NAME.match(name):
        raise ConfigurationError(
            f"invalid {kind} type name {name!r}",
            hint="use lower-case letters, digits and '_', starting with a letter",
        )


def _model_from_signature(cls: type[Any]) -> type[BaseModel]:
    """A strict pydantic model of ``cls.__init__``'s keyword parameters (minus injected ones)."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    for p in inspect.signature(cls).parameters.values():
        if p.name in INJECTED or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        annotation = hints.get(p.name, Any)
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    return create_model(
        f"{cls.__name__}Config",
        __config__=ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True),
        **fields,
    )
