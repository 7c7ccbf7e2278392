"""Every ``HIXL_RMA_*`` setting, its default, and when it is read.

Read here and nowhere else: the Python layer's own settings, and the
engine's, which every ``Engine`` gets as ``Initialize`` options when it
starts (``engine_options``). The docs' settings page (docs/guide/settings.md) is
made from ``SETTINGS`` when the docs are built. ``SETTINGS`` also lists
the tools' settings (the race detector's ``HIXL_RMA_RACE_*``), for that one
table; each tool reads its own (``hixl_rma/races/settings.py``, through
``setting``), the library never does.
"""
import os


def ParamError(message):  # raised as the exception class it returns, hence the name
    """hixl_rma.ground.errors.ParamError(message), imported only when a setting is bad:
    errors imports mpi4py.MPI (its classes are MPI.Exception), and reading a
    setting (HIXL_RMA_CHECK at import of hixl_rma) must not initialize MPI
    before the program does."""
    from .errors import ParamError as cls

    return cls(message)

#: name -> (default, who reads it and when, what it does)
SETTINGS = {
    "HIXL_RMA_TIMEOUT_MS": ("30000", "Init", "timeout of every blocking call, in ms"),
    "HIXL_RMA_HOST": ("", "Init", "the one address this rank's engine listens on and advertises "
                                  "(default: chosen from the interfaces, see HIXL_RMA_IFNAME)"),
    "HIXL_RMA_IFNAME": ("", "Init", "interfaces whose addresses the engine advertises: names or prefixes, "
                                    "comma-separated, '^' first to exclude, '=' for whole names (default: "
                                    "loopback when every rank is on this host, else every interface that is "
                                    "up but lo, docker*, virbr*)"),
    "HIXL_RMA_SHARED_FENCE": ("1", "a window's first Fence", "0: Fence meets in an MPI barrier even when "
                                                               "every rank is on this node"),
    "HIXL_RMA_NOTIFY_BATCH": ("1", "window creation", "default of the info key notify_batch: notifications "
                                                       "held per target and sent as one message when this many "
                                                       "are held or at the next Flush/Unlock/Fence/Wait_notify "
                                                       "(1: each is sent at once)"),
    "HIXL_RMA_TARGET_OPS": ("auto", "window creation",
                            "who makes an 8-byte atomic, or a Put or Get of at most 4 KiB, on a same-node "
                            "Create window's memory: auto (the target's engine during a run of them while it "
                            "answers fast, else the origin: a system call, or two under the target's accumulate "
                            "lock for an atomic), target (always the target's engine) or origin (always the "
                            "origin)"),
    "HIXL_RMA_POLL_US": ("50", "engine start (option PollUs)",
                         "how long the progress thread polls after serving a peer"),
    "HIXL_RMA_CMA": ("1", "engine start (option Cma)", "0: UCX moves every same-node block (no engine cma)"),
    "HIXL_RMA_CMA_THREADS": ("", "engine start (option CmaThreads)",
                             "threads that share a same-node transfer of 4 MiB or more (default: one "
                             "helper where a core is idle)"),
    "HIXL_RMA_DIRECT": ("1", "engine start (option Direct)", "0: never map a peer's memory (no memcpy path)"),
    "HIXL_RMA_BULK_INFLIGHT": ("1048576", "engine start (option BulkInFlight)",
                               "bytes a peer's bulk lane (bulk-priority transfers where bytes go by UCX, as "
                               "across hosts) has posted and not yet completed at most, the rest queued and "
                               "posted as completions come, so that a high-priority message on the same path "
                               "waits behind this much only (at least 262144; 0: not paced)"),
    "HIXL_RMA_DOMAIN": ("", "Init (option Domain)", "the tenant domain of this job's engines (1 to 256 bytes; "
                                                    "default: none, the job alone): engines of different domains "
                                                    "never complete a handshake, even with the same job token"),
    "HIXL_RMA_TELEMETRY": ("", "Init (option Telemetry)",
                           "1 or on: the engine records telemetry (hixl_rma.telemetry.snapshot()); "
                           "prometheus:PORT or prometheus:HOST:PORT: that, and every rank serves it for "
                           "Prometheus on port PORT + its world rank, at HOST (default: where the engine "
                           "listens -- loopback when every rank is on this host, else the address the engine "
                           "advertises, see HIXL_RMA_HOST and HIXL_RMA_IFNAME; 0.0.0.0 for every interface) "
                           "(needs prometheus_client, the extra hixl_rma[telemetry]); 0, off or unset: none"),
    "HIXL_RMA_NIXL_TOKEN": ("", "hixl_rma.nixl.agent (backend parameter job_token)",
                            "job token of the HIXL_RMA NIXL backend: with one its engine listens beyond loopback "
                            "(every agent of the job must give the same)"),
    "HIXL_RMA_LOG_LEVEL": ("", "import of hixl_rma; engine start (option LogLevel)",
                           "off (default), error, warning, info or debug: hixl_rma's log on stderr -- Python's "
                           "logging under the logger 'hixl_rma', and the engine's own lines (connections made and "
                           "refused, peers declared dead, timeouts, failures; debug: every error status)"),
    "HIXL_RMA_CHECK": ("", "import of hixl_rma", "races: turn the race detector on (as python -m hixl_rma "
                                                  "--check-races does)"),
    "HIXL_RMA_RACE_KEEP": ("32", "the race detector's start", "records a call site keeps at each end of a "
                                                              "run (its first N and last N intervals)"),
    "HIXL_RMA_RACE_JSON": ("", "the race detector's end", "write the race report (JSON) to this file and "
                                                          "exit 0 even when races were found (keep going)"),
    "HIXL_RMA_RACE_PURE": ("0", "the race detector's start", "1: record in Python even where the C record "
                                                             "(races/_record) is built (same reports, slower)"),
}


def _get(name):
    return os.environ.get(name, "") or SETTINGS[name][0]


def timeout_ms():
    """``HIXL_RMA_TIMEOUT_MS`` as a positive int (ParamError otherwise)."""
    value = _get("HIXL_RMA_TIMEOUT_MS")
    try:
        ms = int(value)
    except ValueError:
        raise ParamError(f"HIXL_RMA_TIMEOUT_MS must be an integer number of milliseconds, got {value!r}") \
            from None
    if ms <= 0:
        raise ParamError(f"HIXL_RMA_TIMEOUT_MS must be positive, got {ms}")
    return ms


def host():
    """``HIXL_RMA_HOST``, or None to choose the address automatically."""
    return _get("HIXL_RMA_HOST") or None


def nixl_token():
    """``HIXL_RMA_NIXL_TOKEN`` ("" when unset)."""
    return _get("HIXL_RMA_NIXL_TOKEN")


def ifname():
    """``HIXL_RMA_IFNAME``, or None for the default choice."""
    return _get("HIXL_RMA_IFNAME") or None


MAX_DOMAIN_BYTES = 256  # the engine's limit (option Domain)


def domain(given=None):
    """The tenant domain: ``given`` (Init's argument), else ``HIXL_RMA_DOMAIN``,
    else None (the job alone). ParamError for an empty or too long one."""
    what = "Init(domain=...)" if given is not None else "HIXL_RMA_DOMAIN"
    value = given if given is not None else (_get("HIXL_RMA_DOMAIN") or None)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParamError(f"{what} must be a str, got {type(value).__name__}")
    n = len(value.encode())
    if n == 0 or n > MAX_DOMAIN_BYTES:
        raise ParamError(f"{what} must be 1 to {MAX_DOMAIN_BYTES} bytes, got {n}")
    return value


def shared_fence():
    """False when ``HIXL_RMA_SHARED_FENCE=0``."""
    return _get("HIXL_RMA_SHARED_FENCE") != "0"


def target_ops():
    """``HIXL_RMA_TARGET_OPS``: 'auto', 'target' or 'origin' (ParamError otherwise)."""
    value = _get("HIXL_RMA_TARGET_OPS").strip().lower()
    if value not in ("auto", "target", "origin"):
        raise ParamError(f"HIXL_RMA_TARGET_OPS must be auto, target or origin, got {value!r}")
    return value


def _positive_int(name):
    """Setting ``name`` as a positive int (ParamError naming it otherwise)."""
    value = _get(name)
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise ParamError(f"{name} must be a positive integer, got {value!r}")
    return n


def notify_batch():
    """``HIXL_RMA_NOTIFY_BATCH`` as a positive int (ParamError otherwise)."""
    return _positive_int("HIXL_RMA_NOTIFY_BATCH")


def check_tools():
    """The tools ``HIXL_RMA_CHECK`` names (comma-separated; hixl_rma.runtime.hooks.TOOLS
    says which exist)."""
    return [v.strip() for v in _get("HIXL_RMA_CHECK").split(",") if v.strip()]


def setting(name):
    """Setting ``name`` as set, else its default (for the tools, whose
    settings are listed here for the docs and read by the tool)."""
    return _get(name)


def telemetry():
    """``HIXL_RMA_TELEMETRY`` as (on, host, port): port None when nothing is
    to be served, host None when not given (the engine's listening address
    then). ParamError naming the setting for a malformed value."""
    value = _get("HIXL_RMA_TELEMETRY").strip()
    if value.lower() in ("", "0", "off"):
        return False, None, None
    if value.lower() in ("1", "on"):
        return True, None, None
    scheme, sep, rest = value.partition(":")
    if scheme != "prometheus" or not sep:
        raise ParamError(f"HIXL_RMA_TELEMETRY must be 1, on, 0, off or prometheus:PORT "
                         f"(prometheus:HOST:PORT), got {value!r}")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]") or None
    if not port.isdigit() or int(port) > 65535:
        raise ParamError(f"HIXL_RMA_TELEMETRY: the port of {value!r} must be a number from 0 to 65535 "
                         "(0: any free port)")
    return True, host, int(port)


#: engine option -> the setting it comes from (hixl_ext.h names the options)
_ENGINE_OPTIONS = {"PollUs": "HIXL_RMA_POLL_US", "Cma": "HIXL_RMA_CMA", "Direct": "HIXL_RMA_DIRECT",
                   "CmaThreads": "HIXL_RMA_CMA_THREADS", "BulkInFlight": "HIXL_RMA_BULK_INFLIGHT"}


def engine_options():
    """The built-in engine's settings as ``Initialize`` options (the engine
    checks them and names a bad one)."""
    options = {option: _get(name) for option, name in _ENGINE_OPTIONS.items()}
    options["Telemetry"] = "1" if telemetry()[0] else "0"
    level = log_level()
    if level:
        options["LogLevel"] = level
    return options


LOG_LEVELS = ("off", "error", "warning", "info", "debug")


def log_level():
    """HIXL_RMA_LOG_LEVEL, lower case ("" when unset or off)."""
    value = _get("HIXL_RMA_LOG_LEVEL").strip().lower()
    if value not in LOG_LEVELS and value != "":
        raise ParamError(f"HIXL_RMA_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return "" if value == "off" else value
