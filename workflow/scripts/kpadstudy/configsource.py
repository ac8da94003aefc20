"""Where a config value came from, for error messages: a --config option or the config file(s).

Snakemake merges ``--config KEY=VALUE`` over the config files and keeps the options, parsed, in
``workflow.config_settings.config`` (and as typed in ``.config_args``); a bad value that came from there must not
be blamed on config/config.yaml (the Snakefile's schema validation, common.smk's ``config_error``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence


def config_source(settings, configfiles: Sequence, path: Sequence = (), keys: Sequence = ()) -> str:
    """``--config '<the option>' (command line)`` when the value at ``path`` (nested keys) was given by a --config
    option, else the config files (``configfiles``, or config/config.yaml when none was named).

    Args:
        settings: ``workflow.config_settings`` (``.config``: the options parsed, ``.config_args``: as typed).
        configfiles: ``workflow.overwrite_configfiles``.
        path: where the bad value sits, e.g. ``("cache",)`` or ``("repeats",)``; empty = the top level.
        keys: unexpected keys under ``path`` (a schema's additionalProperties error): blamed on --config only when
            the option gave one of them.
    """
    given = dict(getattr(settings, "config", None) or {})
    node = given
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    named = node is not None and (not keys or (isinstance(node, Mapping) and bool(set(keys) & set(node))))
    if (path or keys) and named:
        top = str(path[0]) if path else sorted(set(keys) & set(given))[0]
        typed = [str(a) for a in getattr(settings, "config_args", None) or [] if str(a).split("=", 1)[0] == top]
        return f"--config {shlex.quote(typed[0]) if typed else f'{top}=...'} (command line)"
    return ", ".join(str(f) for f in configfiles) or "config/config.yaml"
