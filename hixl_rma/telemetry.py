"""Telemetry: what this rank's engine counted, as a dict or for Prometheus.

The engine records it while option Telemetry is on (``HIXL_RMA_TELEMETRY``,
read at Init); ``snapshot()`` reads it. With ``HIXL_RMA_TELEMETRY=
prometheus:PORT`` Init also serves it on port PORT + this rank's world rank
(``serve``), so the ranks of one host do not collide, at the address the
engine listens on (loopback in a job on one host) unless the setting names
one; the server reads a
fresh snapshot at every scrape (never initializing the runtime: during and
after Finalize a scrape gets an empty page) and stops at Finalize. Metric names follow
NIXL's telemetry where it has one (agent_tx_bytes, agent_xfer_time_us, ...);
the rest are hixl_rma_*.

Two parts: reading the engine's counters (``snapshot``: the engine keeps
them, ``Engine.telemetry()`` reads them; this is the face over it), and
the exporter, a tool that serves them over HTTP, attached to Init and
Finalize through the runtime's hooks (``attach``, called by the package
at import; ``hixl_rma.runtime.hooks``). The library below the faces imports
neither. This module is imported with the package: what would import
``mpi4py.MPI`` (the runtime, the errors) is imported when first used.
"""
import socket

from .ground import config
from .runtime import hooks

_server = None  # the running exporter (one per process), or None


def snapshot(engine=None):
    """This rank's telemetry: ``enabled``, ``rank``, ``total`` (bytes, blocks
    (``*_ops``), posting calls (``*_requests``), notifies sent, failed calls),
    ``post_time`` and ``completion_time`` (log2 histograms of microseconds),
    connections made, accepted and failed, ``errors`` by status name,
    ``notifies_received``, and ``peers``: each connected peer's counters
    (with its own ``post_time``, ``completion_time`` and ``notifies_received``:
    what it sent this engine, None for a peer without an engine id), keyed by
    its world rank where it is one of this job's, else its address.
    ``engine``: another Engine than this rank's (its peers keyed by address)."""
    from . import runtime as _rt

    if engine is None:
        st = _rt.runtime()
        return _read(st.engine, st)
    return _read(engine, None, _rt.runtime().rank)


def _scrape():
    """The exporter's snapshot, of the runtime as it is: a scrape never
    initializes it (Init is collective: not for the exporter's thread to
    run), and where there is none -- before Init, during or after Finalize
    (the engine finalized under the scrape) -- it is None: an empty page,
    served without a word."""
    from . import runtime as _rt
    from .ground.errors import HixlError

    st = _rt.current()
    if st is None:
        return None
    try:
        return _read(st.engine, st)
    except HixlError:
        return None  # the engine was (being) finalized: Finalize is under way


def _read(engine, st, rank=None):
    """``snapshot()`` of ``engine``; ``st``, the runtime it is this rank's
    engine of (its peers keyed by world rank), or None (then ``rank``)."""
    from .ground.errors import STATUS_NAMES

    out = engine.telemetry()
    out["rank"] = st.rank if st is not None else rank
    out["notifies_received"] = engine.stats()["notifies_received"]
    out["errors"] = {STATUS_NAMES.get(code, str(code)): n for code, n in out["errors"].items()}
    rank_of = {} if st is None else {addr: r for r, addr in enumerate(st.addresses) if r in st.connected}
    out["peers"] = {rank_of.get(addr, addr): counters for addr, counters in out["peers"].items()}
    return out


def address():
    """("host", port) the exporter of this process listens on, or None."""
    return None if _server is None else _server.server_address[:2]


def _collect(source):
    """The Prometheus metric families of a fresh snapshot (none where
    ``source()`` has none: no runtime)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    snap = source()
    if snap is None:
        return
    rank = str(snap["rank"])
    tot = snap["total"]

    def counter(name, doc, value, **labels):
        fam = CounterMetricFamily(name, doc, labels=["rank", *labels])
        fam.add_metric([rank, *labels.values()], value)
        return fam

    yield GaugeMetricFamily("hixl_rma_telemetry_enabled", "1 while the engine records telemetry",
                            value=int(snap["enabled"]))
    yield counter("agent_tx_bytes", "bytes written to peers (Put, WRITE)", tot["write_bytes"])
    yield counter("agent_rx_bytes", "bytes read from peers (Get, READ)", tot["read_bytes"])
    yield counter("agent_tx_requests_num", "posting calls that write", tot["write_requests"])
    yield counter("agent_rx_requests_num", "posting calls that read", tot["read_requests"])
    yield counter("hixl_rma_tx_ops", "blocks written", tot["write_ops"])
    yield counter("hixl_rma_rx_ops", "blocks read", tot["read_ops"])
    yield counter("hixl_rma_notifies_sent", "notifications sent", tot["notifies_sent"])
    yield counter("hixl_rma_notifies_received", "notifications received", snap["notifies_received"])
    conns = CounterMetricFamily("hixl_rma_connections", "connections made, accepted and failed",
                                labels=["rank", "kind"])
    for kind, key in (("made", "connects"), ("accepted", "accepts"), ("failed", "connect_failures")):
        conns.add_metric([rank, kind], snap[key])
    yield conns
    errors = CounterMetricFamily("agent_errors", "failed calls by status", labels=["rank", "status"])
    for status, n in sorted(snap["errors"].items()):
        errors.add_metric([rank, status], n)
    yield errors
    peers = sorted(snap["peers"].items(), key=lambda kv: str(kv[0]))
    for name, key, doc in (("agent_xfer_time_us", "completion_time", "first post until its completion, us"),
                           ("agent_xfer_post_time_us", "post_time", "time of a posting call, us")):
        fam = HistogramMetricFamily(name, doc, labels=["rank"])
        fam.add_metric([rank], *_buckets(snap[key]))
        yield fam
        fam = HistogramMetricFamily(f"hixl_rma_peer_{key}_us", f"per peer: {doc}", labels=["rank", "peer"])
        for peer, counters in peers:
            fam.add_metric([rank, str(peer)], *_buckets(counters[key]))
        yield fam
    fields = (("tx_bytes", "write_bytes"), ("rx_bytes", "read_bytes"), ("tx_ops", "write_ops"),
              ("rx_ops", "read_ops"), ("tx_requests", "write_requests"), ("rx_requests", "read_requests"),
              ("notifies_sent", "notifies_sent"), ("notifies_received", "notifies_received"), ("errors", "errors"))
    for metric, key in fields:
        fam = CounterMetricFamily(f"hixl_rma_peer_{metric}", f"per peer: {key.replace('_', ' ')}",
                                  labels=["rank", "peer"])
        for peer, counters in peers:
            if counters[key] is not None:  # notifies_received of a peer without an engine id: not known
                fam.add_metric([rank, str(peer)], counters[key])
        yield fam


def _buckets(h):
    """A log2 histogram as prometheus_client takes it: (cumulative buckets, sum)."""
    buckets, running = [], 0
    for i, n in enumerate(h["buckets"][:-1]):
        running += n
        buckets.append((str(float(2 ** i)), running))
    buckets.append(("+Inf", h["count"]))
    return buckets, h["sum_us"]


class _Collector:
    def __init__(self, source):
        self.source = source

    def collect(self):
        return _collect(self.source)


def exporter(host, port, source=_scrape):
    """A Prometheus HTTP server of ``source()`` (None: nothing to serve; by
    default this rank's runtime, never initialized by a scrape) on (host,
    port), serving in a thread of its own (``.server_address``; ``.shutdown()``, ``.server_close()``
    stop it). ParamError naming HIXL_RMA_TELEMETRY when prometheus_client is
    missing or the port cannot be bound (then nothing is left running)."""
    from .ground.errors import ParamError

    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise ParamError("HIXL_RMA_TELEMETRY=prometheus:... needs prometheus_client "
                         "(pip install 'hixl_rma[telemetry]')") from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(source))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except (OSError, socket.gaierror) as exc:
        raise ParamError(f"HIXL_RMA_TELEMETRY: cannot serve metrics on {host}:{port}: {exc.strerror or exc}") \
            from None
    return server


def serve(host, port):
    """This process's exporter of this rank's snapshot (Init's), started now."""
    global _server
    if _server is None:
        _server = exporter(host, port)
    return address()


def stop():
    """Stop the exporter (Finalize does)."""
    global _server
    server, _server = _server, None
    if server is not None:
        server.shutdown()
        server.server_close()


def start_for_rank(rank, engine_host):
    """Init's part: the exporter HIXL_RMA_TELEMETRY asks for, on PORT + rank
    (none when it asks for none), at its HOST or else at ``engine_host``,
    where the engine listens: the metrics are exposed no wider than the
    engine (loopback in a job on one host)."""
    _on, host, port = config.telemetry()
    if port is None:
        return None
    if port and port + rank > 65535:
        raise config.ParamError(f"HIXL_RMA_TELEMETRY: port {port} + rank {rank} is beyond 65535")
    return serve(host or engine_host, port + rank if port else 0)


def _on_start(rank, listen):
    start_for_rank(rank, listen)


def _on_stop():
    stop()  # looked up when called: what replaces ``stop`` here is what runs


def attach():
    """Attach the exporter to Init and Finalize (``hixl_rma.runtime.hooks``): Init
    starts it, before the engine, where HIXL_RMA_TELEMETRY asks for one;
    Finalize stops it. Idempotent."""
    hooks.on_start(_on_start)
    hooks.on_stop(_on_stop)
