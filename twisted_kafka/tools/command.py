"""What every tool shares on its command line: Kafka's flag style, one-line errors, Kafka's exit codes.

Kafka's tools exit 0 on success and 1 on any failure, a usage error included
(``CommandLineUtils.printUsageAndExit``).  Here a usage error or a failure is
one line on standard error naming the cause -- Kafka's tools print the whole
option list or a stack trace after it -- and the exit status is the same.
``--help`` prints the options and exits 0; a tool run with no argument at
all prints them to standard error and exits 1, as Kafka's do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

__all__ = ["ToolError", "UsageError", "KafkaArgumentParser", "run_tool", "EXIT_OK", "EXIT_FAILED"]

EXIT_OK = 0
#: Kafka's tools exit 1 for every failure: a bad command line, a broker's refusal, an unreachable cluster.
EXIT_FAILED = 1


class ToolError(Exception):
    """A failure the tool reports as one line (its prefix, if any, comes from the tool)."""


class UsageError(ToolError):
    """A command line the tool cannot run (Kafka's ``printUsageAndExit``)."""


class KafkaArgumentParser(argparse.ArgumentParser):
    """argparse with Kafka's conventions: ``--name value`` or ``--name=value``, errors as one line, exit 1.

    A flag given twice keeps its last value unless it is declared ``append`` (Kafka's repeatable
    options: ``--group``, ``--topic``, ``--config``, ...).
    """

    def __init__(self, prog: str, description: str, **kwargs) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=True, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def parse(self, argv: Sequence[str] | None) -> argparse.Namespace:
        args = list(sys.argv[1:] if argv is None else argv)
        if not args:
            self.print_help(sys.stderr)
            raise SystemExit(EXIT_FAILED)
        return self.parse_args(args)


def run_tool(prog: str, main: Callable[[], int | None], *, error_prefix: str = "") -> int:
    """Run ``main`` and turn its outcome into Kafka's exit status, with failures on one line.

    ``error_prefix`` is the tool's own lead-in from Kafka (``"Error while executing topic command : "``);
    a usage error is printed as ``<prog>: <message>``.
    """
    from .errors import describe_exception

    try:
        status = main()
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ToolError as exc:
        print(f"{error_prefix}{exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader of our output went away (``| head``): nothing more to say to anyone.
        sys.stderr.close()
        return EXIT_FAILED
    except Exception as exc:  # anything a client raises: still one line naming the cause
        print(f"{error_prefix}{describe_exception(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if status is None else status


def exactly_one(args: argparse.Namespace, names: Sequence[str], message: str) -> str:
    """The one action among ``names`` that is set; UsageError(message) unless exactly one is."""
    chosen = [name for name in names if getattr(args, name.replace("-", "_"))]
    if len(chosen) != 1:
        raise UsageError(message)
    return chosen[0]


def refuse_with(args: argparse.Namespace, used: str, invalid: Sequence[str]) -> None:
    """Kafka's ``checkInvalidArgs``: ``--used`` may not be combined with any of ``invalid``."""
    if not _given(args, used):
        return
    for name in invalid:
        if _given(args, name):
            raise UsageError(f'Option "[{used}]" can\'t be used with option "[{name}]"')


def require(args: argparse.Namespace, *names: str) -> None:
    """Kafka's ``checkRequiredArgs``."""
    for name in names:
        if not _given(args, name):
            raise UsageError(f'Missing required argument "[{name}]"')


def _given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name.replace("-", "_"))
    return value not in (None, False, [])
